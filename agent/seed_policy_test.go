package agent_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
)

// Issue 49: seed 001's agent policy, tools: {allow: [...], deny: [...]}, loads and means what
// allow: and deny: mean, over every tool of the workspace; tools: as a list keeps its meaning.
// Each definition runs on a real store: the model is offered exactly the tools the policy
// permits, and its call of secret_tool runs only when the policy permits it (deny wins).
func TestSeedToolPolicy(t *testing.T) {
	all := []string{"boom", "delete_file", "echo", "finish", "get_location", "secret_tool", "slow"}
	cases := []struct {
		name  string
		def   string // the agent's tool fields, in seed 001's spelling or Quiver's
		offer []string
	}{
		{"seed allow and deny, deny wins", "tools:\n  allow: [echo, finish, secret_tool]\n  deny: [secret_tool]\n", []string{"echo", "finish"}},
		{"the same in allow: and deny:", "tools: [echo, finish, secret_tool]\ndeny: [secret_tool]\n", []string{"echo", "finish"}},
		{"seed deny alone: every other tool", "tools: {deny: [secret_tool, \"s*\"]}\n", []string{"boom", "delete_file", "echo", "finish", "get_location"}},
		{"seed allow with a pattern", "tools: {allow: [\"e*\", finish]}\n", []string{"echo", "finish"}},
		{"seed allow of the denied tool alone", "tools: {allow: [secret_tool]}\n", []string{"secret_tool"}},
		{"seed empty policy: every tool", "tools: {}\n", all},
		{"seed in JSON", `{"tools": {"allow": ["echo"], "deny": []}}`, []string{"echo"}},
		{"a list keeps its meaning", "tools: [echo, secret_tool]\n", []string{"echo", "secret_tool"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file, def := "lead.yaml", "name: lead\n"+c.def
			if strings.HasPrefix(c.def, "{") {
				file, def = "lead.json", `{"name": "lead", `+strings.TrimPrefix(c.def, "{")
			}
			cat, err := agent.LoadDir(writeFiles(t, map[string]string{file: def}))
			if err != nil {
				t.Fatal(err)
			}
			lead, _ := cat.Agent("lead")
			// The fleet's configuration keeps definitions in canonical form: it reads the same.
			cd, err := agent.CanonicalDefinition([]byte(def))
			if err != nil {
				t.Fatal(err)
			}
			fleet, err := agent.LoadDefinitions([]agent.Definition{cd}, "fleet")
			if err != nil {
				t.Fatal(err)
			}
			if fp := fleet.Agents["lead"].Prompt; !slices.Equal(fp.Tools, lead.Prompt.Tools) || !slices.Equal(fp.Deny, lead.Prompt.Deny) {
				t.Errorf("the fleet's copy binds %v denies %v; the file's %v, %v", fp.Tools, fp.Deny, lead.Prompt.Tools, lead.Prompt.Deny)
			}
			m := &turnModel{turns: []model.Response{
				{ToolCalls: calls(call("c1", "secret_tool", `{}`))},
				{Text: "done"},
			}}
			f := newFixture(t, m, lead.Prompt)
			if _, err := f.r.Run(ctx, f.th, f.agent, "go"); err != nil {
				t.Fatal(err)
			}
			var offered []string
			if req := m.reqs[0]; req.Tools != nil {
				for _, rt := range req.Tools.Tools {
					offered = append(offered, rt.Canonical)
				}
			}
			slices.Sort(offered)
			if !slices.Equal(offered, c.offer) {
				t.Errorf("offered %v, want %v", offered, c.offer)
			}
			permitted := slices.Contains(c.offer, "secret_tool")
			if ran := slices.Contains(f.ran.list(), "secret_tool"); ran != permitted {
				t.Errorf("secret_tool ran: %v, permitted: %v", ran, permitted)
			}
			if res := f.results(t)["c1"]; res == nil || res.IsError() == permitted {
				t.Errorf("secret_tool's result %+v (permitted: %v)", res, permitted)
			}
		})
	}
}

// Issue 49: a tools field that is neither spelling, or seed 001's policy given beside allow:
// or deny:, is refused saying what is wrong and what is allowed.
func TestSeedToolPolicyRefusals(t *testing.T) {
	cases := []struct {
		name string
		def  string
		want []string
	}{
		{"policy twice: tools object and deny:", "tools: {allow: [echo]}\ndeny: [boom]\n",
			[]string{"lead.yaml", "tools: {allow, deny} and allow:/deny: both", "use one"}},
		{"policy twice: tools object and allow:", "tools: {deny: [boom]}\nallow: [echo]\n", []string{"use one"}},
		{"unknown key in the policy", "tools: {allow: [echo], denny: [boom]}\n",
			[]string{"lead.yaml", `unknown field "denny"`, "allow and deny"}},
		{"a name, not a list", "tools: echo\n", []string{"lead.yaml", `"echo" is neither`, "{allow: [names], deny: [names]}"}},
		{"allow not a list", "tools: {allow: echo}\n", []string{"lead.yaml", "tools:", "allow and deny"}},
		{"bad pattern in deny", "tools: {deny: [\"[\"]}\n", []string{"lead.yaml", "bad pattern"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := agent.LoadDir(writeFiles(t, map[string]string{"lead.yaml": "name: lead\n" + c.def}))
			if !errors.Is(err, agent.ErrDefinition) {
				t.Fatalf("loaded, or not a definition error: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
