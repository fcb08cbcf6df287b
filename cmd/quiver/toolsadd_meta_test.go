package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A stored JavaScript tool enables meta-fields from its schema file (a property _outputPath,
// _instance or _delegate) or its YAML definition (meta_fields): its stored schema offers them.
func TestToolsAddMetaFields(t *testing.T) {
	dir := writeFiles(t, map[string]string{"weather.js": weatherJS,
		"weather.json": strings.Replace(weatherSchema, `"city": {"type": "string"},`, `"city": {"type": "string"}, "_outputPath": {"type": "string"},`, 1),
		"weather.yaml": "name: weather\ndescription: Returns the temperature in a city.\nfile: weather.js\n" +
			"input_schema: {type: object, properties: {city: {type: string}}, required: [city]}\nmeta_fields: [_instance]\n",
		"bad.yaml": "name: weather\ndescription: Returns the temperature in a city.\nfile: weather.js\nmeta_fields: [_output_path]\n"})
	cases := []struct {
		name      string
		args      []string
		has, hasn string
	}{
		{"a schema file", []string{"--js", filepath.Join(dir, "weather.js"), "--schema", filepath.Join(dir, "weather.json")}, `"_outputPath"`, `"_instance"`},
		{"a definition", []string{filepath.Join(dir, "weather.yaml")}, `"_instance"`, `"_outputPath"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "q.db")
			if code, _, stderr := runCLI(t, "", append(append([]string{"tools", "add"}, c.args...), "--db", db)...); code != exitOK {
				t.Fatalf("tools add: %d %s", code, stderr)
			}
			code, stdout, stderr := runCLI(t, "", "tools", "schema", "weather", "--db", db)
			if code != exitOK || !strings.Contains(stdout, c.has) || strings.Contains(stdout, c.hasn) {
				t.Fatalf("tools schema: %d, want %s and not %s in\n%s%s", code, c.has, c.hasn, stdout, stderr)
			}
		})
	}
	db := filepath.Join(t.TempDir(), "q.db")
	if code, _, stderr := runCLI(t, "", "tools", "add", filepath.Join(dir, "bad.yaml"), "--db", db); code == exitOK || !strings.Contains(stderr, `unknown meta-field "_output_path"`) {
		t.Fatalf("an unknown meta-field: %d %s", code, stderr)
	}
}
