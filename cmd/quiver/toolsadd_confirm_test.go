package main

import (
	"path/filepath"
	"testing"
)

// tools add --requires-confirmation marks the tool: quiver call, with no one to ask, refuses it
// with confirmation_required. Given, the flag wins over a definition's requires_confirmation,
// either way.
func TestToolsAddRequiresConfirmation(t *testing.T) {
	dir := writeFiles(t, map[string]string{"weather.js": weatherJS, "weather.json": weatherSchema,
		"weather.yaml": "name: weather\ndescription: Returns the temperature in a city.\nfile: weather.js\n" +
			"input_schema: {type: object, properties: {city: {type: string}}, required: [city]}\nrequires_confirmation: true\n"})
	add := func(db string, args ...string) {
		t.Helper()
		if code, _, stderr := runCLI(t, "", append(append([]string{"tools", "add"}, args...), "--db", db)...); code != exitOK {
			t.Fatalf("tools add %v: %d %s", args, code, stderr)
		}
	}
	cases := []struct {
		name    string
		args    []string
		confirm bool
	}{
		{"--js and --schema", []string{"--js", filepath.Join(dir, "weather.js"), "--schema", filepath.Join(dir, "weather.json")}, false},
		{"--js and --schema with the flag", []string{"--js", filepath.Join(dir, "weather.js"), "--schema", filepath.Join(dir, "weather.json"), "--requires-confirmation"}, true},
		{"a definition that requires it", []string{filepath.Join(dir, "weather.yaml")}, true},
		{"a definition that requires it, the flag false", []string{filepath.Join(dir, "weather.yaml"), "--requires-confirmation=false"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "q.db")
			add(db, c.args...)
			code, r := callJSON(t, db, "weather", `{"city":"Oslo"}`)
			switch {
			case c.confirm && (code != exitError || r.Code != "confirmation_required"):
				t.Errorf("exit %d, %+v; want the call refused with confirmation_required", code, r)
			case !c.confirm && (code != exitOK || r.Status != "success"):
				t.Errorf("exit %d, %+v; want the call to run", code, r)
			}
		})
	}
}
