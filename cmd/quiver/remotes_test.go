package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A remote MCP server of the configuration that is down is named, with why, by the commands
// that list and call tools: tools list (text and JSON) says so on standard error beside the
// tools it has, and a call to one of its tools is an error result saying it is not connected
// (not "unknown tool"), exit 1.
func TestCLIReportsDownRemote(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there: the remote is down
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quiver.yaml")
	if err := os.WriteFile(cfg, []byte("mcp:\n  servers:\n    - {name: down, url: \"http://"+addr+"/mcp\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "q.db")
	warning := []string{`the MCP server "down" is not connected, so its tools are not listed`, "connection refused", "(last tried "}
	for _, tt := range []struct {
		name       string
		args       []string
		code       int
		stdoutHas  []string
		stderrHas  []string
		resultCode string // the call's error result
	}{
		{name: "tools list", args: []string{"tools", "list"}, code: exitOK, stdoutHas: []string{"get_current_time"}, stderrHas: warning},
		{name: "tools list --json", args: []string{"tools", "list", "--json"}, code: exitOK, stdoutHas: []string{`"name": "get_current_time"`}, stderrHas: warning},
		{name: "call a tool of the remote", args: []string{"call", "down.echo", "--args", `{"text":"hi"}`}, code: exitError, resultCode: "tool_error",
			stdoutHas: []string{`\"down.echo\"`, `MCP server \"down\", which is not connected`, "connection refused", "(last tried "}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append(tt.args, "--config", cfg, "--db", db)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			for _, want := range tt.stdoutHas {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range tt.stderrHas {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if tt.args[0] == "tools" && tt.args[len(tt.args)-1] == "--json" {
				var list []map[string]any
				if err := json.Unmarshal([]byte(stdout), &list); err != nil {
					t.Errorf("tools list --json is not a JSON list: %v\n%s", err, stdout)
				}
			}
			if tt.resultCode != "" {
				if r := decodeResult(t, stdout); r.Code != tt.resultCode {
					t.Errorf("result code %q, want %q", r.Code, tt.resultCode)
				}
			}
		})
	}
}

// quiver call records its call like every other door: on a new thread tagged cli (made with
// the database when there is none), or on the thread --thread names, where quiver threads list
// and show find it; --no-record leaves no trace, and makes no database.
func TestCLICallIsRecorded(t *testing.T) {
	// The data directory's database, none yet: the first call makes it.
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	db := filepath.Join(data, "quiver", defaultDBName)
	cli := func(args ...string) (string, string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, "", args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
		}
		return stdout, stderr
	}
	threads := func() []map[string]any {
		t.Helper()
		out, _ := cli("threads", "list", "--json")
		var page struct{ Threads []map[string]any }
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatalf("threads list --json: %v\n%s", err, out)
		}
		return page.Threads
	}

	if code, _, stderr := runCLI(t, "", "call", "get_current_time", "--no-record"); code != exitOK {
		t.Fatalf("call --no-record: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("call --no-record made the database (%v)", err)
	}

	_, stderr := cli("call", "get_current_time", "--args", `{"timezone":"Asia/Tokyo"}`)
	if !strings.Contains(stderr, "created a new database") {
		t.Errorf("the first call's stderr does not say it made the database: %q", stderr)
	}
	list := threads()
	if len(list) != 1 || !slicesContains(list[0]["tags"], "cli") {
		t.Fatalf("after one call, threads list = %v, want one thread tagged cli", list)
	}
	id, _ := list[0]["id"].(string)
	out, _ := cli("threads", "show", id, "--json")
	if !strings.Contains(out, "get_current_time") || !strings.Contains(out, "Asia/Tokyo") {
		t.Errorf("threads show %s lacks the call and its result:\n%s", id, out)
	}

	// On a thread given: recorded there, no new thread. Not recorded: no trace at all.
	cli("call", "get_current_time", "--args", `{"timezone":"Europe/Oslo"}`, "--thread", id)
	cli("call", "get_current_time", "--args", `{"timezone":"America/Lima"}`, "--no-record")
	if list := threads(); len(list) != 1 {
		t.Errorf("after a call on --thread and one --no-record, threads list = %v, want the one thread", list)
	}
	out, _ = cli("threads", "show", id, "--json")
	if !strings.Contains(out, "Europe/Oslo") || strings.Contains(out, "America/Lima") {
		t.Errorf("thread %s should hold the --thread call and not the --no-record one:\n%s", id, out)
	}
	if code, _, stderr := runCLI(t, "", "call", "get_current_time", "--thread", "thr_missing"); code != exitError ||
		!strings.Contains(stderr, "no thread thr_missing") {
		t.Errorf("call --thread thr_missing: exit %d, stderr %q", code, stderr)
	}
}

// slicesContains says whether v, a decoded JSON list, holds s.
func slicesContains(v any, s string) bool {
	list, _ := v.([]any)
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
