package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

// Seed 003 §8.3 (SPEC T6), which overrides issue 11's request to refuse path-like names: a
// name that does not follow the convention is added with a warning and can be called by its
// name; only hostile input (control characters, blank, over quiver.MaxNameBytes) is refused,
// saying why and naming --name.
func TestToolsAddNames(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"ok.js": weatherJS, "ok.json": weatherSchema,
		"my tool.js":  weatherJS,
		"nodots.yaml": "name: ../up\ndescription: Goes up.\ninput_schema: {type: object, properties: {city: {type: string}}}\ncode: \"export default () => ({temp: 1})\"\n",
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
		why  string // "": added; else what the refusal says
	}{
		{"dot dot slash", withName("../../evil"), "../../evil", ""},
		{"dot dot", withName(".."), "..", ""},
		{"absolute path", withName("/tmp/evil"), "/tmp/evil", ""},
		{"hidden", withName(".evil"), ".evil", ""},
		{"backslashes", withName(`..\..\evil`), `..\..\evil`, ""},
		{"empty part", withName("a//b"), "a//b", ""},
		{"space and punctuation", withName("look up: weather?"), "look up: weather?", ""},
		{"unicode", withName("天気 予報"), "天気 予報", ""},
		{"long", withName(strings.Repeat("w", 300)), strings.Repeat("w", 300), ""},
		{"in the YAML definition", []string{p("nodots.yaml")}, "../up", ""},
		{"in the schema's _tool", []string{"--js", p("ok.js"), "--schema", p("tool.json")}, "/etc/passwd", ""},
		{"from the file name", []string{"--js", p("my tool.js"), "--schema", p("notool.json")}, "my tool", ""},
		{"camelCase", withName("localWeather"), "localWeather", ""},
		{"namespaced", withName("acme.weather"), "acme.weather", ""},
		{"newline", withName("bad\nname"), "bad\nname", "U+000A"},
		{"escape", withName("bad\x1b[2Jname"), "bad\x1b[2Jname", "U+001B"},
		{"blank", withName("   "), "   ", "only whitespace"},
		{"too long", withName(strings.Repeat("w", quiver.MaxNameBytes+1)), strings.Repeat("w", quiver.MaxNameBytes+1), "over the bound of 512 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append([]string{"tools", "add", "--db", db}, tt.args...)...)
			if tt.why == "" {
				if code != exitOK {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				if !strings.Contains(stderr, "warning") || !strings.Contains(stderr, "naming convention") {
					t.Errorf("no warning for a name that does not follow the convention: %q", stderr)
				}
				if code, r := callJSON(t, db, tt.tool, `{"city":"Oslo"}`); code != exitOK || r.Status != "success" {
					t.Errorf("call %s: exit %d %+v", tt.tool, code, r)
				}
				return
			}
			if code != exitUsage || !strings.Contains(stderr, tt.why) || !strings.Contains(stderr, quiver.NameRule) || !strings.Contains(stderr, "--name") {
				t.Errorf("exit %d (want %d), stdout %q, stderr %q: want %q, the rule and --name", code, exitUsage, stdout, stderr, tt.why)
			}
			if _, list, _ := runCLI(t, "", "tools", "list", "--db", db); strings.Contains(list, "bad") || strings.Contains(list, "www"+strings.Repeat("w", quiver.MaxNameBytes-3)) {
				t.Errorf("the tool was stored anyway:\n%s", list)
			}
		})
	}
}
