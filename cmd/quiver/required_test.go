package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SPEC V3 in quiver run: every variable the agent requires is checked before its thread
// exists, its prompt's, its tools' (a JavaScript tool of the workspace here) and its immediate
// sub-agents', and the refusal names each with what requires it; --var refuses a name any of
// them declares secret. Once the values are set, the run goes.
func TestRunChecksEveryRequiredVariable(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	script := filepath.Join(dir, "script.yaml")
	db := filepath.Join(dir, "q.db")
	files := map[string]string{
		filepath.Join(dir, "vault.js"):   vaultJS,
		filepath.Join(dir, "vault.json"): vaultSchema,
		script:                           "turns:\n  - text: Scouted.\n  - text: Kept.\n",
		filepath.Join(agents, "keeper.yaml"): `name: keeper
system: You keep the vault.
tools: [vault_probe]
variables: [{name: TEAM, required: true, description: who keeps it}]
subagents: [{name: scout, immediate: true}]
`,
		filepath.Join(agents, "scout.yaml"): `name: scout
type: dual_ai
description: Scouts.
system: You scout.
variables: [{name: SCOUT_MODE, required: true}]
`,
	}
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, stderr := runCLI(t, "", "tools", "add", "--js", filepath.Join(dir, "vault.js"), "--schema", filepath.Join(dir, "vault.json"), "--db", db); code != exitOK {
		t.Fatalf("tools add: %s", stderr)
	}
	threads := func() int {
		t.Helper()
		code, stdout, stderr := runCLI(t, "", "threads", "list", "--json", "--db", db)
		var page struct {
			Threads []json.RawMessage `json:"threads"`
		}
		if code != exitOK || json.Unmarshal([]byte(stdout), &page) != nil {
			t.Fatalf("threads list: %d %s %s", code, stdout, stderr)
		}
		return len(page.Threads)
	}
	run := func(extra ...string) (int, string, string) {
		t.Helper()
		args := append([]string{"run", "--agent", "keeper", "--agents", agents, "--model", "scripted:" + script, "--db", db}, extra...)
		return runCLI(t, "", append(args, "keep it")...)
	}

	code, _, stderr := run()
	for _, want := range []string{"TEAM (who keeps it; required by prompt keeper)", "VAULT_TOKEN (the vault's token; required by tool vault_probe)",
		"SCOUT_MODE (required by sub-agent scout)", "--var NAME=VALUE"} {
		if code != exitError || !strings.Contains(stderr, want) {
			t.Errorf("run without the variables: exit %d, want %q in\n%s", code, want, stderr)
		}
	}
	if n := threads(); n != 0 {
		t.Fatalf("a refused run left %d thread(s)", n)
	}
	if code, _, stderr := run("--var", "VAULT_TOKEN=on-the-command-line"); code != exitUsage || !strings.Contains(stderr, "VAULT_TOKEN is a secret") {
		t.Fatalf("--var for a tool's secret: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "vault-token-value\n", "vars", "set", "VAULT_TOKEN", "--secret", "--db", db); code != exitOK {
		t.Fatalf("vars set --secret: %s", stderr)
	}
	if code, _, stderr := runCLI(t, "", "vars", "set", "SCOUT_MODE", "quick", "--agent", "scout", "--db", db); code != exitOK {
		t.Fatalf("vars set --agent scout: %s", stderr)
	}
	code, stdout, stderr := run("--var", "TEAM=ops")
	if code != exitOK || strings.TrimSpace(stdout) != "Kept." {
		t.Fatalf("run with every variable: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if n := threads(); n != 2 { // the keeper's and its scout's
		t.Errorf("%d threads after the run, want the keeper's and the scout's", n)
	}
}
