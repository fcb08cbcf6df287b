package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeFiles writes name -> content into a new directory and returns it.
func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// jsResult is the JSON a call of a JavaScript tool prints.
type jsResult struct {
	Status string          `json:"status"`
	Result string          `json:"result"` // a text answer, as POST /v1/tools/{name}/call gives it
	Value  json.RawMessage `json:"value"`
	Error  string          `json:"error"`
	Code   string          `json:"code"`
}

func callJSON(t testing.TB, db string, name, args string, extra ...string) (int, jsResult) {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", append([]string{"call", name, "--args", args, "--db", db}, extra...)...)
	var r jsResult
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("call %s: stdout is not a result (%v)\nstdout: %s\nstderr: %s", name, err, stdout, stderr)
	}
	if len(r.Value) > 0 {
		var compact bytes.Buffer
		if err := json.Compact(&compact, r.Value); err != nil {
			t.Fatal(err)
		}
		r.Value = compact.Bytes()
	}
	return code, r
}

const weatherJS = `export default ({ city, unit }) => ({ city, unit, temp: unit === "F" ? 70 : 21 })`

const weatherSchema = `{"type": "object", "description": "Returns the temperature in a city.",
	"properties": {"_tool": {"const": "weather"}, "city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"], "default": "C"},
		"_output": {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}},
	"required": ["city"]}`

func TestToolsAddAndCall(t *testing.T) {
	dir := writeFiles(t, map[string]string{"weather.js": weatherJS, "weather.json": weatherSchema,
		"v2.js": `export default ({ city }) => ({ city, temp: 30 })`})
	db := filepath.Join(dir, "quiver.db")

	code, stdout, stderr := runCLI(t, "", "tools", "add", "--js", filepath.Join(dir, "weather.js"), "--schema", filepath.Join(dir, "weather.json"), "--db", db)
	if code != exitOK || !strings.Contains(stdout, "added tool weather (tol_") || !strings.Contains(stdout, "version 1") {
		t.Fatalf("tools add: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	code, stdout, _ = runCLI(t, "", "tools", "list", "--db", db)
	if code != exitOK || !strings.Contains(stdout, "weather") || !strings.Contains(stdout, "Returns the temperature in a city.") ||
		!strings.Contains(stdout, "run_code") || !strings.Contains(stdout, "get_current_time") {
		t.Errorf("tools list: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "", "tools", "schema", "weather", "--db", db)
	if code != exitOK || !strings.Contains(stdout, `"city"`) || strings.Contains(stdout, "_output") {
		t.Errorf("tools schema: exit %d\n%s", code, stdout)
	}

	code, r := callJSON(t, db, "weather", `{"city":"Oslo"}`)
	if code != exitOK || string(r.Value) != `{"city":"Oslo","unit":"C","temp":21}` {
		t.Errorf("call: exit %d, %+v", code, r)
	}
	code, r = callJSON(t, db, "weather", `{"town":"Oslo"}`)
	if code != exitError || r.Code != "invalid_arguments" {
		t.Errorf("call with bad arguments: exit %d, %+v", code, r)
	}

	// Adding again makes a new version, which calls then run.
	code, stdout, stderr = runCLI(t, "", "tools", "add", "--js", filepath.Join(dir, "v2.js"), "--schema", filepath.Join(dir, "weather.json"), "--db", db)
	if code != exitOK || !strings.Contains(stdout, "version 2") {
		t.Fatalf("second add: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, r = callJSON(t, db, "weather", `{"city":"Rome"}`); string(r.Value) != `{"city":"Rome","temp":30}` {
		t.Errorf("call after the second add: %+v", r)
	}
}

func TestToolsAddDefinition(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"slug.ts": `export default ({ text }: { text: string }): string => text.toLowerCase().replace(/[^a-z0-9]+/g, "-")`,
		"slug.yaml": `name: slugify
description: Turns a title into a URL slug.
file: slug.ts
language: ts
input_schema:
  type: object
  properties:
    text: {type: string}
  required: [text]
examples:
  - args: {text: Hello World}
    result: hello-world
`,
		"inline.yaml": `name: double
description: Doubles a number.
code: |
  export default ({ n }, state) => n * 2
input_schema:
  type: object
  properties:
    n: {type: number}
`,
	})
	db := filepath.Join(dir, "quiver.db")
	for _, def := range []string{"slug.yaml", "inline.yaml"} {
		if code, stdout, stderr := runCLI(t, "", "tools", "add", filepath.Join(dir, def), "--db", db); code != exitOK {
			t.Fatalf("tools add %s: exit %d\n%s%s", def, code, stdout, stderr)
		}
	}
	if _, r := callJSON(t, db, "slugify", `{"text":"Hello, Big World"}`); r.Result != "hello-big-world" || r.Value != nil {
		t.Errorf("slugify: %+v", r)
	}
	if _, r := callJSON(t, db, "double", `{"n":21}`); string(r.Value) != "42" {
		t.Errorf("double: %+v", r)
	}
}

func TestToolsAddErrors(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"ok.js": weatherJS, "ok.json": weatherSchema,
		"syntax.js":    "export default ({ city }) => {\n  return city +\n}",
		"bad.json":     `{"type": "object", "properties": `,
		"nodesc.json":  `{"type": "object", "properties": {"city": {"type": "string"}}}`,
		"unknown.yaml": "name: x\ndescription: y\ncode: export default 1\nmemory: 5\n",
		"nocode.yaml":  "name: x\ndescription: y\n",
	})
	db := filepath.Join(dir, "quiver.db")
	p := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name string
		args []string
		code int
		has  string
	}{
		{"nothing given", []string{}, exitUsage, "needs --js FILE and --schema FILE, or a YAML definition"},
		{"only --js", []string{"--js", p("ok.js")}, exitUsage, "needs --js FILE and --schema FILE"},
		{"both forms", []string{p("unknown.yaml"), "--js", p("ok.js")}, exitUsage, "not both"},
		{"missing code file", []string{"--js", p("nope.js"), "--schema", p("ok.json")}, exitError, "reading the code"},
		{"schema that is not JSON", []string{"--js", p("ok.js"), "--schema", p("bad.json")}, exitError, "bad.json: the schema is not a JSON Schema object"},
		{"syntax error says where", []string{"--js", p("syntax.js"), "--schema", p("ok.json")}, exitError, "syntax.js:3:"},
		{"no description", []string{"--js", p("ok.js"), "--schema", p("nodesc.json")}, exitUsage, "a tool needs a description (or its input schema one)"},
		{"built-in name", []string{"--js", p("ok.js"), "--schema", p("ok.json"), "--name", "run_code"}, exitError, `the server serves a tool named "run_code" already: choose another name`},
		{"unknown YAML field", []string{p("unknown.yaml")}, exitError, "field memory not found"},
		{"YAML without code", []string{p("nocode.yaml")}, exitError, "no code: set code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "", append([]string{"tools", "add", "--db", db}, tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.has) {
				t.Errorf("exit %d (want %d), stderr %q lacks %q", code, tt.code, stderr, tt.has)
			}
		})
	}
}

// Listing tools, and calling one unrecorded, never creates a database; run_code is built in.
// (A recorded call makes one: TestCLICallIsRecorded.)
func TestNoDatabaseNeeded(t *testing.T) {
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	t.Setenv("QUIVER_POSTGRES", "")
	code, stdout, stderr := runCLI(t, "", "call", "run_code", "--no-record", "--args", `{"code":"export default (a) => a.n + 1","args":{"n":1}}`)
	if code != exitOK || !strings.Contains(stdout, `"status": "success"`) {
		t.Errorf("call run_code: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, _ := runCLI(t, "", "tools", "list"); code != exitOK {
		t.Errorf("tools list: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(data, "quiver", defaultDBName)); !os.IsNotExist(err) {
		t.Errorf("a database was created: %v", err)
	}
}

// quiver call prints a call's result as POST /v1/tools/{name}/call answers it: one naming
// convention for the CLI's JSON and the API's, a text answer in "result" and a structured one
// in "value" (the CLI used to move a text answer into "value").
func TestCallPrintsWhatTheAPIAnswers(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"shout.yaml": "name: shout\ndescription: Shouts.\ncode: |\n  export default ({ text }) => text.toUpperCase()\ninput_schema: {type: object, properties: {text: {type: string}}}\n",
		"half.yaml":  "name: half\ndescription: Halves.\ncode: |\n  export default ({ n }) => ({ half: n / 2 })\ninput_schema: {type: object, properties: {n: {type: number}}}\n",
	})
	db := filepath.Join(dir, "quiver.db")
	for _, def := range []string{"shout.yaml", "half.yaml"} {
		if code, stdout, stderr := runCLI(t, "", "tools", "add", filepath.Join(dir, def), "--db", db); code != exitOK {
			t.Fatalf("tools add %s: exit %d\n%s%s", def, code, stdout, stderr)
		}
	}
	endpoint, _, _ := startServe(t, "--db", db)
	base := strings.TrimSuffix(endpoint, "/mcp")
	for _, c := range []struct{ tool, args, field string }{
		{"shout", `{"text":"hi"}`, "result"},
		{"half", `{"n":3}`, "value"},
	} {
		t.Run(c.tool, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", "call", c.tool, "--args", c.args, "--db", db)
			if code != exitOK {
				t.Fatalf("quiver call: exit %d\n%s%s", code, stdout, stderr)
			}
			var cli map[string]any
			if err := json.Unmarshal([]byte(stdout), &cli); err != nil {
				t.Fatal(err)
			}
			status, _, answer := apiDo(t, "POST", base+"/v1/tools/"+c.tool+"/call", "", `{"args":`+c.args+`}`)
			api, _ := answer["result"].(map[string]any)
			if status != http.StatusOK || api == nil {
				t.Fatalf("POST /v1/tools/%s/call: %d %v", c.tool, status, answer)
			}
			if cli[c.field] == nil || !reflect.DeepEqual(cli, api) {
				t.Errorf("quiver call printed %v\nthe API answered   %v\nwant the same, with the answer in %q", cli, api, c.field)
			}
		})
	}
}
