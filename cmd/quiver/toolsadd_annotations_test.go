package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/store/sqlite"
)

// A stored JavaScript tool declares its MCP annotations in its YAML definition (annotations:)
// or its schema file ("annotations"); the YAML's replace the schema file's. Annotations of
// the wrong type are refused, saying which.
func TestToolsAddAnnotations(t *testing.T) {
	schemaWith := strings.Replace(weatherSchema, `"required": ["city"]}`, `"required": ["city"], "annotations": {"openWorldHint": true}}`, 1)
	dir := writeFiles(t, map[string]string{"weather.js": weatherJS, "weather.json": schemaWith,
		"weather.yaml": "name: weather\ndescription: Returns the temperature in a city.\nfile: weather.js\n" +
			"input_schema: {type: object, properties: {city: {type: string}}, required: [city]}\n" +
			"annotations:\n  title: Weather\n  readOnlyHint: true\n  idempotentHint: false\n",
		"both.yaml":    "description: Returns the temperature in a city.\nfile: weather.js\nschema: weather.json\nannotations: {destructiveHint: false}\n",
		"yes.yaml":     "name: weather\ndescription: d\nfile: weather.js\nannotations:\n  readOnlyHint: yes\n",
		"typo.yaml":    "name: weather\ndescription: d\nfile: weather.js\nannotations:\n  readonly: true\n",
		"list.yaml":    "name: weather\ndescription: d\nfile: weather.js\nannotations: [readOnlyHint]\n",
		"badjson.json": strings.Replace(weatherSchema, `"required": ["city"]}`, `"required": ["city"], "annotations": {"destructiveHint": "false"}}`, 1),
	})
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a definition", []string{filepath.Join(dir, "weather.yaml")}, `{"title":"Weather","readOnlyHint":true,"idempotentHint":false}`},
		{"a schema file", []string{"--js", filepath.Join(dir, "weather.js"), "--schema", filepath.Join(dir, "weather.json")}, `{"openWorldHint":true}`},
		{"a definition over its schema file", []string{filepath.Join(dir, "both.yaml")}, `{"destructiveHint":false}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "q.db")
			if code, _, stderr := runCLI(t, "", append(append([]string{"tools", "add"}, c.args...), "--db", db)...); code != exitOK {
				t.Fatalf("tools add: %d %s", code, stderr)
			}
			st, err := sqlite.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			tools, err := jsfunc.LoadWorkspace(context.Background(), st, localWorkspaceID, jsfunc.DefaultLimits)
			if err != nil || len(tools) != 1 {
				t.Fatalf("loaded %d tools: %v", len(tools), err)
			}
			if b, _ := json.Marshal(tools[0].Spec().Annotations); string(b) != c.want {
				t.Errorf("stored annotations %s, want %s", b, c.want)
			}
		})
	}
	bad := []struct{ args, want string }{
		{"yes.yaml", `annotations: readOnlyHint must be true or false (leave it out to say nothing), got a string ("yes")`},
		{"typo.yaml", `annotations: unknown key "readonly"`},
		{"list.yaml", `annotations must be an object`},
	}
	for _, b := range bad {
		db := filepath.Join(t.TempDir(), "q.db")
		code, _, stderr := runCLI(t, "", "tools", "add", filepath.Join(dir, b.args), "--db", db)
		if code == exitOK || !strings.Contains(stderr, b.want) || !strings.Contains(stderr, b.args) {
			t.Errorf("%s: exit %d, want the file named and %q in\n%s", b.args, code, b.want, stderr)
		}
	}
	db := filepath.Join(t.TempDir(), "q.db")
	code, _, stderr := runCLI(t, "", "tools", "add", "--js", filepath.Join(dir, "weather.js"), "--schema", filepath.Join(dir, "badjson.json"), "--db", db)
	if code == exitOK || !strings.Contains(stderr, `destructiveHint must be true or false`) || !strings.Contains(stderr, "badjson.json") {
		t.Errorf("a schema file with a string hint: exit %d\n%s", code, stderr)
	}
}
