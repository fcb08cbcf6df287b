package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

// Issue 11: "tools add --name ../../evil" was accepted with a warning and served as
// ".._.._evil". Path-like names, and characters no provider accepts, are refused with the rule;
// names that are valid but not snake_case are still added.
func TestToolsAddRefusesInvalidNames(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"ok.js": weatherJS, "ok.json": weatherSchema,
		"my tool.js":  weatherJS,
		"nodots.yaml": "name: ../up\ndescription: Goes up.\ncode: export default () => 1\n",
		"tool.json":   strings.Replace(weatherSchema, `"const": "weather"`, `"const": "/etc/passwd"`, 1),
		"notool.json": strings.Replace(weatherSchema, `"_tool": {"const": "weather"}, `, "", 1),
	})
	db := filepath.Join(dir, "quiver.db")
	p := func(name string) string { return filepath.Join(dir, name) }
	withName := func(n string) []string { return []string{"--js", p("ok.js"), "--schema", p("ok.json"), "--name", n} }
	tests := []struct {
		name string
		args []string
		tool string // the name it is added or refused under
		ok   bool
	}{
		{"dot dot slash", withName("../../evil"), "../../evil", false},
		{"dot dot", withName(".."), "..", false},
		{"absolute path", withName("/tmp/evil"), "/tmp/evil", false},
		{"hidden", withName(".evil"), ".evil", false},
		{"backslashes", withName(`..\..\evil`), `..\..\evil`, false},
		{"empty part", withName("a//b"), "a//b", false},
		{"space", withName("bad name"), "bad name", false},
		{"newline", withName("bad\nname"), "bad\nname", false},
		{"in the YAML definition", []string{p("nodots.yaml")}, "../up", false},
		{"in the schema's _tool", []string{"--js", p("ok.js"), "--schema", p("tool.json")}, "/etc/passwd", false},
		{"from the file name", []string{"--js", p("my tool.js"), "--schema", p("notool.json")}, "my tool", false},
		{"snake_case", withName("local_weather"), "local_weather", true},
		{"camelCase: added with a warning (T6)", withName("localWeather"), "localWeather", true},
		{"namespaced", withName("acme.weather"), "acme.weather", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append([]string{"tools", "add", "--db", db}, tt.args...)...)
			if tt.ok {
				if code != exitOK {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				if code, r := callJSON(t, db, tt.tool, `{"city":"Oslo"}`); code != exitOK || r.Status != "success" {
					t.Errorf("call %s: exit %d %+v", tt.tool, code, r)
				}
				return
			}
			if code != exitUsage || !strings.Contains(stderr, quiver.NameRule) || !strings.Contains(stderr, "--name") {
				t.Errorf("exit %d (want %d), stdout %q, stderr %q: want the rule and --name", code, exitUsage, stdout, stderr)
			}
			if _, list, _ := runCLI(t, "", "tools", "list", "--db", db); strings.Contains(list, "evil") || strings.Contains(list, "_up") || strings.Contains(list, "passwd") {
				t.Errorf("the tool was stored anyway:\n%s", list)
			}
		})
	}
}
