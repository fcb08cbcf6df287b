package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// writeStdioAgents writes an agents directory with a prompt exposed to clients (critic, with an
// argument schema), one that is not (private) and an agent, and returns it.
func writeStdioAgents(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"critic.yaml": `kind: prompt
name: critic
description: Grades a draft.
system: You grade drafts.
expose_as_tool: true
args:
  type: object
  required: [draft]
  additionalProperties: false
  properties:
    draft: {type: string, description: The text to grade.}
`,
		"private.yaml": "kind: prompt\nname: private\nsystem: Only for agents of this server.\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// An MCP client that starts quiver mcp stdio lists and gets the prompts of its agents
// directory, found as quiver serve finds it (--agents, else $QUIVER_AGENTS), on a database
// without a fleet configuration (the files are served, not stored); without one there are no
// prompts.
func TestMCPStdioServesTheAgentsPrompts(t *testing.T) {
	bin := quiverBinary(t)
	agentsDir := writeStdioAgents(t)
	cases := []struct {
		name    string
		args    []string
		env     string // $QUIVER_AGENTS
		prompts []string
	}{
		{"--agents", []string{"--agents", agentsDir}, "", []string{"critic"}},
		{"$QUIVER_AGENTS", nil, agentsDir, []string{"critic"}},
		{"no agents", nil, "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cmd := exec.Command(bin, append([]string{"mcp", "stdio"}, c.args...)...)
			cmd.Dir = t.TempDir() // no ./agents there
			cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), configEnv+"=", "QUIVER_AGENTS="+c.env)
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "stdio-prompts", Version: "1"}, nil).
				Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connecting: %v\n%s", err, stderr.String())
			}
			defer cs.Close()
			if c.prompts == nil {
				if cs.InitializeResult().Capabilities.Prompts != nil {
					t.Errorf("prompts capability without agents")
				}
				return
			}
			res, err := cs.ListPrompts(ctx, nil)
			if err != nil {
				t.Fatalf("prompts/list: %v\n%s", err, stderr.String())
			}
			var names []string
			for _, p := range res.Prompts {
				names = append(names, p.Name)
			}
			if !slices.Equal(names, c.prompts) {
				t.Fatalf("prompts %v, want %v (private is not exposed)", names, c.prompts)
			}
			if a := res.Prompts[0].Arguments; len(a) != 1 || a[0].Name != "draft" || !a[0].Required || a[0].Description != "The text to grade." {
				t.Errorf("critic's arguments: %+v", a)
			}
			got, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "critic", Arguments: map[string]string{"draft": "Dear sir"}})
			if err != nil {
				t.Fatalf("prompts/get: %v", err)
			}
			var texts []string
			for _, m := range got.Messages {
				if tc, ok := m.Content.(*sdk.TextContent); ok {
					texts = append(texts, tc.Text)
				}
			}
			if got.Description != "Grades a draft." || len(texts) != 2 || texts[0] != "You grade drafts." || !strings.Contains(texts[1], "Dear sir") {
				t.Errorf("critic: %+v %q", got, texts)
			}
			if _, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "private"}); err == nil {
				t.Error("a prompt not exposed was got")
			}
		})
	}
}

// An agents directory quiver mcp stdio cannot read ends it at once, naming the directory.
func TestMCPStdioRefusesBadAgents(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv(configEnv, "")
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "broken.yaml"), []byte("kind: prompt\nname: [not, a, name]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "none")
	for _, dir := range []string{missing, bad} {
		code, stdout, stderr := runCLI(t, "", "mcp", "stdio", "--agents", dir)
		if code != exitError || !strings.Contains(stderr, "the agents of "+dir) || stdout != "" {
			t.Errorf("--agents %s: exit %d, stdout %q, stderr %q", dir, code, stdout, stderr)
		}
	}
}

// quiver mcp stdio --toolset serves the toolset's tools alone, as /mcp/NAME does over HTTP, and
// refuses a toolset the workspace's entitlements do not define.
func TestMCPStdioServesAToolset(t *testing.T) {
	bin := quiverBinary(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "quiver.yaml")
	if err := os.WriteFile(conf, []byte(`entitlements:
  toolsets:
    - name: time
      include: [{tools: [get_current_time]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	list := func(t *testing.T, args ...string) []string {
		ctx := context.Background()
		cmd := exec.Command(bin, append([]string{"mcp", "stdio"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, configEnv+"="+conf, "QUIVER_AGENTS=")
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "stdio-toolset", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connecting: %v\n%s", err, stderr.String())
		}
		defer cs.Close()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v\n%s", err, stderr.String())
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if len(args) > 0 {
			r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": "1"}})
			if err != nil || !r.IsError {
				t.Errorf("run_code through the time toolset: %+v, %v", r, err)
			}
		}
		return names
	}
	all := list(t)
	if len(all) < 2 || !slices.Contains(all, "get_current_time") {
		t.Fatalf("the whole workspace lists %v", all)
	}
	if got := list(t, "--toolset", "time"); !slices.Equal(got, []string{"get_current_time"}) {
		t.Errorf("--toolset time lists %v", got)
	}
	t.Setenv("XDG_DATA_HOME", dir)
	t.Setenv(configEnv, conf)
	code, _, stderr := runCLI(t, "", "mcp", "stdio", "--toolset", "nope")
	if code != exitUsage || !strings.Contains(stderr, `"nope"`) || !strings.Contains(stderr, "no such toolset") {
		t.Errorf("an undefined toolset: exit %d, %q", code, stderr)
	}
}
