package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
)

// runCLI runs the command in-process and returns its exit code and output.
func runCLI(t testing.TB, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// cliResult is the JSON a call prints.
type cliResult struct {
	Status string `json:"status"`
	Value  struct {
		Time     string `json:"time"`
		Timezone string `json:"timezone"`
		Unix     int64  `json:"unix"`
	} `json:"value"`
	Error    string `json:"error"`
	Code     string `json:"code"`
	Problems []struct {
		Pointer string `json:"pointer"`
		Message string `json:"message"`
	} `json:"problems"`
}

func decodeResult(t testing.TB, out string) cliResult {
	t.Helper()
	var r cliResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not a JSON result: %v\n%s", err, out)
	}
	return r
}

func TestUsageAndExitCodes(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		code      int
		stdoutHas string
		stderrHas []string
	}{
		{name: "no command", args: nil, code: exitUsage, stderrHas: []string{"no command given", "Usage:"}},
		{name: "help", args: []string{"help"}, code: exitOK, stdoutHas: "Usage:"},
		{name: "--help", args: []string{"--help"}, code: exitOK, stdoutHas: "quiver call NAME"},
		{name: "serve -h lists every flag", args: []string{"serve", "-h"}, code: exitOK, stdoutHas: "-max-request-bytes int"},
		{name: "call --help", args: []string{"call", "--help"}, code: exitOK, stdoutHas: "quiver call NAME [--args"},
		{name: "a group's help", args: []string{"tools", "-h"}, code: exitOK, stdoutHas: "quiver tools schema NAME"},
		{name: "a usage error shows the command's usage", args: []string{"call"}, code: exitUsage,
			stderrHas: []string{"call needs exactly one tool name", "quiver call NAME [--args", "Run 'quiver call -h' for its flags"}},
		// A test binary has no version control data: it says why.
		{name: "version", args: []string{"version"}, code: exitOK, stdoutHas: "quiver " + quiver.Version + " (commit not recorded: go run and -buildvcs=false leave it out"},
		{name: "--version", args: []string{"--version"}, code: exitOK, stdoutHas: runtime.GOOS + "/" + runtime.GOARCH + ")"},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, stderrHas: []string{`unknown command "frobnicate"`, "Usage:"}},
		{name: "tools without subcommand", args: []string{"tools"}, code: exitUsage, stderrHas: []string{"list, schema, add or import-openapi"}},
		{name: "unknown tools subcommand", args: []string{"tools", "delete"}, code: exitUsage, stderrHas: []string{`"delete"`}},
		{name: "tools list with argument", args: []string{"tools", "list", "extra"}, code: exitUsage, stderrHas: []string{`"extra"`}},
		{name: "tools list bad flag", args: []string{"tools", "list", "--xml"}, code: exitUsage, stderrHas: []string{"xml"}},
		{name: "schema without name", args: []string{"tools", "schema"}, code: exitUsage, stderrHas: []string{"exactly one tool name"}},
		{name: "schema with two names", args: []string{"tools", "schema", "a", "b"}, code: exitUsage, stderrHas: []string{"exactly one tool name"}},
		{name: "schema bad dialect", args: []string{"tools", "schema", "get_current_time", "--dialect", "cohere"}, code: exitUsage,
			stderrHas: []string{`unknown dialect "cohere"`, "openai-strict"}},
		{name: "schema unknown tool", args: []string{"tools", "schema", "no_such_tool"}, code: exitError,
			stderrHas: []string{`unknown tool "no_such_tool"`, "quiver tools list"}},
		{name: "call without name", args: []string{"call"}, code: exitUsage, stderrHas: []string{"call needs exactly one tool name"}},
		{name: "call with two names", args: []string{"call", "a", "b"}, code: exitUsage, stderrHas: []string{"exactly one tool name"}},
		{name: "call bad flag", args: []string{"call", "get_current_time", "--bogus"}, code: exitUsage, stderrHas: []string{"bogus"}},
		{name: "call args file missing", args: []string{"call", "get_current_time", "--args", "@/nonexistent/args.json"}, code: exitUsage,
			stderrHas: []string{"reading arguments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			if !strings.Contains(stdout, tt.stdoutHas) {
				t.Errorf("stdout %q lacks %q", stdout, tt.stdoutHas)
			}
			for _, s := range tt.stderrHas {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr %q lacks %q", stderr, s)
				}
			}
			if code == exitOK && stderr != "" {
				t.Errorf("stderr on success: %s", stderr)
			}
		})
	}
}

// Every command the help lists answers -h with its own usage and every flag it takes, and a
// usage error prints that command's usage, not the whole help.
func TestEveryCommandHasHelp(t *testing.T) {
	seen := 0
	for line := range strings.Lines(helpText()) {
		rest, ok := strings.CutPrefix(line, "  quiver ")
		if !ok {
			continue
		}
		synopsis, _, _ := strings.Cut(rest, "  ") // the description follows two spaces
		var name []string
		for _, w := range strings.Fields(synopsis) {
			if strings.ContainsAny(w[:1], "[-\"") || strings.ToUpper(w) == w {
				break
			}
			name = append(name, w)
		}
		cmd := strings.Join(name, " ")
		t.Run(cmd, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append(name, "-h")...)
			if code != exitOK || stderr != "" {
				t.Fatalf("%s -h: exit %d, stderr %q", cmd, code, stderr)
			}
			if cmd != "version" && (!strings.Contains(stdout, "quiver "+cmd) || !strings.Contains(stdout, "Usage:")) {
				t.Errorf("%s -h printed %q, want its usage", cmd, stdout)
			}
			if strings.Contains(stdout, "quiver secrets rotate-key") && cmd != "secrets rotate-key" {
				t.Errorf("%s -h printed the whole help", cmd)
			}
		})
		seen++
	}
	if seen < 12 {
		t.Fatalf("found %d commands in the help, want every one", seen)
	}
}

// A release build sets the version and commit (-ldflags -X, as .goreleaser.yaml and the
// Dockerfile do); they win over what the toolchain recorded.
func TestVersionOfARelease(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v"+quiver.Version, "0123456789abcdef0123"
	want := "quiver " + quiver.Version + " (commit 0123456789ab, " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got := versionText(); got != want {
		t.Errorf("versionText() = %q, want %q", got, want)
	}
}

func TestToolsList(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "tools", "list")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	line := ""
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "get_current_time ") {
			line = l
		}
	}
	if line == "" || !strings.Contains(line, "Returns the current date and time") {
		t.Errorf("no get_current_time line in:\n%s", stdout)
	}

	code, stdout, stderr = runCLI(t, "", "tools", "list", "--json")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	var entry map[string]json.RawMessage
	for _, e := range list {
		for _, field := range []string{"name", "description", "input_schema"} {
			if _, ok := e[field]; !ok {
				t.Errorf("entry %s lacks %s", e["name"], field)
			}
		}
		// A tool without an output schema has no output_schema, rather than a null one.
		if v, ok := e["output_schema"]; ok && string(v) == "null" {
			t.Errorf("entry %s has output_schema null", e["name"])
		}
		if string(e["name"]) == `"get_current_time"` {
			entry = e
		}
	}
	if entry == nil {
		t.Fatalf("get_current_time not listed: %s", stdout)
	}
	var in, out struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(entry["input_schema"], &in); err != nil || in.Type != "object" || in.Properties["timezone"] == nil {
		t.Errorf("input_schema %s (%v)", entry["input_schema"], err)
	}
	if err := json.Unmarshal(entry["output_schema"], &out); err != nil || out.Properties["time"] == nil || out.Properties["unix"] == nil {
		t.Errorf("output_schema %s (%v)", entry["output_schema"], err)
	}
}

func TestToolsSchemaDialects(t *testing.T) {
	tests := []struct {
		dialect string
		check   func(t *testing.T, doc any)
	}{
		{"openai", func(t *testing.T, doc any) {
			fn := first(t, doc)["function"].(map[string]any)
			if fn["name"] != "get_current_time" || fn["parameters"] == nil {
				t.Errorf("function %v", fn)
			}
			if _, ok := fn["strict"]; ok {
				t.Error("non-strict dialect sets strict")
			}
		}},
		{"openai-strict", func(t *testing.T, doc any) {
			fn := first(t, doc)["function"].(map[string]any)
			if fn["strict"] != true {
				t.Errorf("strict = %v", fn["strict"])
			}
			params := fn["parameters"].(map[string]any)
			if params["additionalProperties"] != false {
				t.Errorf("strict parameters %v", params)
			}
		}},
		{"anthropic", func(t *testing.T, doc any) {
			tool := first(t, doc)
			if tool["name"] != "get_current_time" || tool["input_schema"] == nil {
				t.Errorf("tool %v", tool)
			}
		}},
		{"gemini", func(t *testing.T, doc any) {
			decls := first(t, doc)["functionDeclarations"].([]any)
			if len(decls) != 1 || decls[0].(map[string]any)["name"] != "get_current_time" {
				t.Errorf("declarations %v", decls)
			}
		}},
		{"mcp", func(t *testing.T, doc any) {
			tool := first(t, doc)
			if tool["name"] != "get_current_time" || tool["inputSchema"] == nil || tool["outputSchema"] == nil {
				t.Errorf("tool %v", tool)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dialect, func(t *testing.T) {
			// The flag may come before or after the name.
			for _, args := range [][]string{
				{"tools", "schema", "get_current_time", "--dialect", tt.dialect},
				{"tools", "schema", "--dialect=" + tt.dialect, "get_current_time"},
			} {
				code, stdout, stderr := runCLI(t, "", args...)
				if code != exitOK || stderr != "" {
					t.Fatalf("%v: exit %d: %s", args, code, stderr)
				}
				var doc any
				if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
					t.Fatalf("not JSON: %v\n%s", err, stdout)
				}
				tt.check(t, doc)
			}
		})
	}
	// openai is the default.
	_, def, _ := runCLI(t, "", "tools", "schema", "get_current_time")
	_, openai, _ := runCLI(t, "", "tools", "schema", "get_current_time", "--dialect", "openai")
	if def != openai {
		t.Errorf("default dialect output differs from openai:\n%s\n%s", def, openai)
	}
}

func first(t testing.TB, doc any) map[string]any {
	t.Helper()
	list, ok := doc.([]any)
	if !ok || len(list) != 1 {
		t.Fatalf("want a list of one tool, got %v", doc)
	}
	return list[0].(map[string]any)
}

func TestCall(t *testing.T) {
	argsFile := filepath.Join(t.TempDir(), "args.json")
	if err := os.WriteFile(argsFile, []byte(`{"timezone":"Asia/Tokyo"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		stdin    string
		code     int
		zone     string   // success: the zone of the result
		errHas   []string // error result
		errCode  string
		problems string // pointer of a validation problem
	}{
		{name: "named zone", args: []string{"call", "get_current_time", "--args", `{"timezone":"Europe/Paris"}`}, code: exitOK, zone: "Europe/Paris"},
		{name: "flag before name", args: []string{"call", "--args", `{"timezone":"America/New_York"}`, "get_current_time"}, code: exitOK,
			zone: "America/New_York"},
		{name: "default args", args: []string{"call", "get_current_time"}, code: exitOK, zone: "UTC"},
		{name: "args from stdin", args: []string{"call", "get_current_time", "--args", "-"}, stdin: `{"timezone":"Australia/Sydney"}`,
			code: exitOK, zone: "Australia/Sydney"},
		{name: "empty stdin", args: []string{"call", "get_current_time", "--args", "-"}, stdin: "", code: exitOK, zone: "UTC"},
		{name: "args from file", args: []string{"call", "get_current_time", "--args", "@" + argsFile}, code: exitOK, zone: "Asia/Tokyo"},
		{name: "unknown zone", args: []string{"call", "get_current_time", "--args", `{"timezone":"Mars/Olympus_Mons"}`}, code: exitError,
			errCode: "invalid_arguments", errHas: []string{`timezone "Mars/Olympus_Mons" is not a known IANA time zone`, "Europe/Paris"}},
		{name: "wrong type", args: []string{"call", "get_current_time", "--args", `{"timezone":5}`}, code: exitError,
			errCode: "invalid_arguments", errHas: []string{"/timezone"}, problems: "/timezone"},
		{name: "malformed args", args: []string{"call", "get_current_time", "--args", `{"timezone":`}, code: exitError,
			errCode: "invalid_json", errHas: []string{"not valid JSON"}},
		{name: "unknown tool", args: []string{"call", "no_such_tool"}, code: exitError,
			errCode: "unknown_tool", errHas: []string{`"no_such_tool"`, "get_current_time"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			r := decodeResult(t, stdout)
			if tt.code == exitOK {
				if r.Status != "success" || r.Value.Timezone != tt.zone || r.Value.Unix == 0 {
					t.Errorf("result %+v", r)
				}
				ts, err := time.Parse(time.RFC3339, r.Value.Time)
				if err != nil {
					t.Fatalf("time %q: %v", r.Value.Time, err)
				}
				if ts.Unix() != r.Value.Unix {
					t.Errorf("time %s and unix %d disagree", r.Value.Time, r.Value.Unix)
				}
				return
			}
			if r.Status != "error" || r.Code != tt.errCode {
				t.Errorf("result %+v, want code %s", r, tt.errCode)
			}
			for _, s := range tt.errHas {
				if !strings.Contains(r.Error, s) {
					t.Errorf("error %q lacks %q", r.Error, s)
				}
			}
			if tt.problems != "" && (len(r.Problems) == 0 || r.Problems[0].Pointer != tt.problems) {
				t.Errorf("problems %+v", r.Problems)
			}
		})
	}
}

// TestBinary builds the command and runs it as a real process, for the exit codes end to end.
func TestBinary(t *testing.T) {
	bin := quiverBinary(t)
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"success", []string{"call", "get_current_time", "--args", `{"timezone":"Europe/Paris"}`}, exitOK, `"timezone": "Europe/Paris"`},
		{"error result", []string{"call", "get_current_time", "--args", `{"timezone":"Nowhere/Land"}`}, exitError, `"code": "invalid_arguments"`},
		{"usage error", []string{"call"}, exitUsage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tt.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			code := exitCode(t, cmd.Run())
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.out) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tt.out)
			}
			if tt.code == exitUsage && !strings.Contains(stderr.String(), "Usage:") {
				t.Errorf("usage error without usage text: %s", stderr.String())
			}
		})
	}
}
