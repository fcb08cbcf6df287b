package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/store"
)

// accessDocument is the document the CLI's tests set: a clock toolset of get_current_time,
// and viewers denied run_code.
const accessDocument = `# who may see and call which tools
rules:
  - who: {role: viewer}
    tools: [run_code]
    access: deny
    description: viewers do not run code
toolsets:
  - name: clock
    description: Telling the time.
    include:
      - tools: [get_current_time]
`

// quiver access get, set and explain work on the database's entitlements through the
// platform, as /v1/entitlements does; quiver keys create --toolset binds a key to a toolset;
// and quiver serve then offers that key, and any key at /mcp/clock, the toolset's tools alone.
func TestAccessCommands(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := t.TempDir()
	db := filepath.Join(dir, "q.db")
	write := func(name, text string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	code, out, errOut := runCLI(t, "", "access", "get", "--db", db)
	if code != exitOK || out != "{}\n" || !strings.Contains(errOut, "no entitlements set") {
		t.Fatalf("access get before any: exit %d\n%s\n%s", code, out, errOut)
	}
	doc := write("access.yaml", accessDocument)
	if code, _, errOut := runCLI(t, "", "access", "set", doc, "--db", db); code != exitOK || !strings.Contains(errOut, "entitlements version 1 set") {
		t.Fatalf("access set: exit %d\n%s", code, errOut)
	}

	for _, c := range []struct {
		name, text string
		args       []string
		code       int
		want       string
	}{
		{"bad.yaml", "rules:\n  - tools: [run_code]\n    access: maybe\n", nil, exitUsage, "rules[0].access"},
		{"typo.yaml", "rules:\n  - tools: [run_code]\n    access: deny\n    when: {readOnly: true}\n", nil, exitUsage, "field readonly not found"},
		{"empty.yaml", "", nil, exitUsage, "is empty"},
		{"stale.json", `{"default": "deny"}`, []string{"--after", "0"}, exitError, "conflict"},
	} {
		args := append([]string{"access", "set", write(c.name, c.text), "--db", db}, c.args...)
		code, _, errOut := runCLI(t, "", args...)
		if code != c.code || !strings.Contains(strings.ToLower(errOut), c.want) {
			t.Errorf("access set %s: exit %d, want %d and %q\n%s", c.name, code, c.code, c.want, errOut)
		}
	}
	code, out, errOut = runCLI(t, "", "access", "get", "--db", db)
	if code != exitOK || !strings.Contains(out, "- name: clock") || !strings.Contains(out, "description: viewers do not run code") ||
		!strings.Contains(errOut, "entitlements version 1") {
		t.Fatalf("access get: exit %d\n%s\n%s", code, out, errOut)
	}
	// What access get prints, access set takes back: the same document, one version later.
	if code, _, errOut := runCLI(t, "", "access", "set", write("again.yaml", out), "--db", db); code != exitOK || !strings.Contains(errOut, "version 2") {
		t.Fatalf("access set of what access get printed: exit %d\n%s", code, errOut)
	}
	code, out, _ = runCLI(t, "", "access", "get", "--json", "--db", db)
	var got struct {
		Toolsets []struct {
			Name string `json:"name"`
		} `json:"toolsets"`
		Rules []json.RawMessage `json:"rules"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Rules) != 1 || len(got.Toolsets) != 1 || got.Toolsets[0].Name != "clock" {
		t.Fatalf("access get --json: exit %d\n%s", code, out)
	}

	clockKey := accessKeys(t, db)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tool", "run_code", "--subject", "role:viewer"}, exitError, "role:viewer may not call run_code\nrule: rules[0]\n"},
		{[]string{"--tool", "run_code", "--subject", "role:member"}, exitOK, "role:member may call run_code\n"},
		{[]string{"--tool", "run_code", "--subject", "toolset:clock"}, exitError, "toolset:clock may not call run_code\n"},
		{[]string{"--tool", "get_current_time", "--subject", "toolset:clock,role:viewer"}, exitOK, "may call get_current_time"},
		{[]string{"--tool", "run_code"}, exitOK, "the caller may call run_code"},
		{[]string{"--tool", "run_code", "--subject", "colour:blue"}, exitUsage, ""},
		{[]string{"--subject", "role:viewer"}, exitUsage, ""},
		{[]string{"--tool", "no_such_tool", "--subject", "role:viewer"}, exitError, ""},
	} {
		code, out, errOut := runCLI(t, "", append([]string{"access", "explain", "--db", db}, c.args...)...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("access explain %v: exit %d, want %d and %q\n%s\n%s", c.args, code, c.code, c.want, out, errOut)
		}
	}
	code, out, _ = runCLI(t, "", "access", "explain", "--db", db, "--json", "--tool", "run_code", "--subject", "role:viewer")
	var x struct {
		Subject string `json:"subject"`
		Allowed bool   `json:"allowed"`
		Rule    int    `json:"rule"`
		Reason  string `json:"reason"`
	}
	if code != exitError || json.Unmarshal([]byte(out), &x) != nil || x.Subject != "role:viewer" || x.Allowed || x.Rule != 0 || x.Reason == "" {
		t.Errorf("access explain --json: exit %d\n%s", code, out)
	}

	accessServed(t, db, clockKey)
}

// accessKeys makes a key bound to clock (checking keys create's --toolset and keys list), and
// returns it.
func accessKeys(t *testing.T, db string) string {
	t.Helper()
	if code, _, errOut := runCLI(t, "", "keys", "create", "--db", db, "--name", "typo", "--toolset", "clock", "--toolset", "no such"); code != exitUsage ||
		!strings.Contains(errOut, `"no such"`) {
		t.Errorf("keys create --toolset with a malformed name: exit %d\n%s", code, errOut)
	}
	code, key, errOut := runCLI(t, "", "keys", "create", "--db", db, "--name", "wall clock", "--toolset", "clock")
	key = strings.TrimSpace(key)
	if code != exitOK || firstKeyRE.FindString(key) != key || !strings.Contains(errOut, "bound to the toolsets clock") {
		t.Fatalf("keys create --toolset clock: exit %d %q\n%s", code, key, errOut)
	}
	code, out, _ := runCLI(t, "", "keys", "list", "--json", "--db", db)
	var keys []store.APIKey
	if code != exitOK || json.Unmarshal([]byte(out), &keys) != nil || len(keys) != 1 || !slices.Equal(keys[0].Toolsets, []string{"clock"}) {
		t.Fatalf("keys list --json: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "", "keys", "list", "--db", db); code != exitOK || !strings.Contains(out, "TOOLSETS") || !strings.Contains(out, " clock ") {
		t.Errorf("keys list: exit %d\n%s", code, out)
	}
	return key
}

// accessServed serves the database and checks what the clock key, and an admin's key at
// /mcp/clock, are offered and allowed, and that an undefined toolset's address is 404.
func accessServed(t *testing.T, db, clockKey string) {
	t.Helper()
	code, admin, errOut := runCLI(t, "", "keys", "create", "--db", db, "--name", "admin", "--role", "admin")
	admin = strings.TrimSpace(admin)
	if code != exitOK {
		t.Fatalf("keys create --role admin: exit %d\n%s", code, errOut)
	}
	endpoint, _, _ := startServeWith(t, "--db", db)
	ctx := context.Background()
	for _, c := range []struct {
		key, endpoint string
		want          []string
	}{
		{clockKey, endpoint, []string{"get_current_time"}},
		{clockKey, endpoint + "/clock", []string{"get_current_time"}},
		{admin, endpoint + "/clock", []string{"get_current_time"}},
	} {
		cs, err := connectWithKey(t, c.endpoint, c.key)
		if err != nil {
			t.Fatalf("connecting to %s: %v", c.endpoint, err)
		}
		defer cs.Close()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("%s lists %v, want %v", c.endpoint, names, c.want)
		}
		call, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": "export default () => 1"}})
		if err != nil || !call.IsError || !strings.Contains(call.Content[0].(*sdk.TextContent).Text, `no tool "run_code" is available to this caller`) {
			t.Errorf("calling run_code at %s: %v %+v", c.endpoint, err, call)
		}
	}
	cs, err := connectWithKey(t, endpoint, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.ListTools(ctx, nil); err != nil || !slices.ContainsFunc(res.Tools, func(tl *sdk.Tool) bool { return tl.Name == "run_code" }) {
		t.Errorf("the admin at /mcp is not offered run_code: %v", err)
	}
	req, _ := http.NewRequest(http.MethodPost, endpoint+"/nope", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST %s/nope: %d, want 404", endpoint, resp.StatusCode)
	}
}
