package quiver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

// policyRegistry holds github_issue, github_pr, slack_post, run_code and a disabled admin_reset.
func policyRegistry(t testing.TB) *quiver.Registry {
	t.Helper()
	disabled, err := quiver.NewTool(quiver.Spec{Name: "admin_reset", Description: "Resets everything.", Disabled: true},
		returning("reset", nil))
	if err != nil {
		t.Fatal(err)
	}
	return newRegistry(t, textTool("github_issue", "issue"), textTool("github_pr", "pr"), textTool("slack_post", "posted"),
		textTool("run_code", "ran"), disabled)
}

func TestPolicyEffective(t *testing.T) {
	tests := []struct {
		name   string
		policy quiver.Policy
		want   string // permitted tools, comma-separated, sorted
	}{
		{"zero policy permits every enabled tool", quiver.Policy{}, "github_issue,github_pr,run_code,slack_post"},
		{"empty bound binds nothing", quiver.Policy{Bound: []string{}}, ""},
		{"bound names", quiver.Policy{Bound: []string{"slack_post", "run_code"}}, "run_code,slack_post"},
		{"bound glob", quiver.Policy{Bound: []string{"github_*"}}, "github_issue,github_pr"},
		{"bound disabled stays hidden", quiver.Policy{Bound: []string{"admin_reset", "run_code"}}, "run_code"},
		{"allow list", quiver.Policy{Allow: []string{"slack_post"}}, "slack_post"},
		{"allow glob", quiver.Policy{Allow: []string{"github_?ssue", "run_*"}}, "github_issue,run_code"},
		{"allow cannot enable disabled", quiver.Policy{Allow: []string{"admin_*"}}, ""},
		{"deny name", quiver.Policy{Deny: []string{"run_code"}}, "github_issue,github_pr,slack_post"},
		{"deny glob", quiver.Policy{Deny: []string{"github_*"}}, "run_code,slack_post"},
		{"deny wins over allow", quiver.Policy{Allow: []string{"github_*"}, Deny: []string{"github_pr"}}, "github_issue"},
		{"deny wins over bound and allow", quiver.Policy{Bound: []string{"run_code"}, Allow: []string{"run_code"}, Deny: []string{"*"}}, ""},
		{"allow outside bound", quiver.Policy{Bound: []string{"slack_post"}, Allow: []string{"run_code"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := policyRegistry(t)
			got := strings.Join(names(tt.policy.Effective(r)), ",")
			if got != tt.want {
				t.Errorf("Effective = %q, want %q", got, tt.want)
			}
			d := &quiver.Dispatcher{Registry: r, Policy: tt.policy}
			if got := strings.Join(names(d.Tools()), ","); got != tt.want {
				t.Errorf("Dispatcher.Tools = %q, want %q", got, tt.want)
			}
			// P4: the same decision is enforced at dispatch.
			permitted := map[string]bool{}
			for _, n := range strings.Split(tt.want, ",") {
				permitted[n] = true
			}
			for _, tool := range r.Tools() {
				ok, why := tt.policy.Permits(tool)
				if ok != permitted[tool.Name()] {
					t.Errorf("Permits(%s) = %v (%s)", tool.Name(), ok, why)
				}
				if !ok && why == "" {
					t.Errorf("Permits(%s) gives no reason", tool.Name())
				}
				res := dispatch(t, d, tool.Name(), "{}")
				if permitted[tool.Name()] {
					wantSuccess(t, res)
					continue
				}
				wantError(t, res, quiver.CodePolicyDenied, quoteTool(tool.Name()), why)
				if tt.want == "" {
					wantError(t, res, quiver.CodePolicyDenied, "No tools are available.")
				} else {
					wantError(t, res, quiver.CodePolicyDenied, "Available tools: "+strings.ReplaceAll(tt.want, ",", ", ")+".")
				}
			}
		})
	}
}

func quoteTool(name string) string { return `"` + name + `"` }

func TestPolicyWithin(t *testing.T) {
	tests := []struct {
		name          string
		child, parent quiver.Policy
		grand         *quiver.Policy // parent's own parent, if any
		want          string
	}{
		{"zero within zero", quiver.Policy{}, quiver.Policy{}, nil, "github_issue,github_pr,run_code,slack_post"},
		{"child cannot widen parent allow", quiver.Policy{Allow: []string{"*"}}, quiver.Policy{Allow: []string{"slack_post"}}, nil, "slack_post"},
		{"child cannot widen parent bound", quiver.Policy{Bound: []string{"run_code", "slack_post"}}, quiver.Policy{Bound: []string{"slack_post"}}, nil, "slack_post"},
		{"parent deny applies to child", quiver.Policy{Bound: []string{"run_code", "github_*"}}, quiver.Policy{Deny: []string{"run_code"}}, nil,
			"github_issue,github_pr"},
		{"child narrows", quiver.Policy{Deny: []string{"github_*"}}, quiver.Policy{Allow: []string{"github_issue", "slack_post"}}, nil, "slack_post"},
		{"intersection", quiver.Policy{Allow: []string{"github_*", "run_code"}}, quiver.Policy{Allow: []string{"github_pr", "run_code", "slack_post"}}, nil,
			"github_pr,run_code"},
		{"grandparent still applies", quiver.Policy{}, quiver.Policy{Allow: []string{"github_*", "run_code"}},
			&quiver.Policy{Deny: []string{"run_code"}}, "github_issue,github_pr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := policyRegistry(t)
			parent := tt.parent
			if tt.grand != nil {
				parent = parent.Within(*tt.grand)
			}
			p := tt.child.Within(parent)
			if got := strings.Join(names(p.Effective(r)), ","); got != tt.want {
				t.Errorf("Effective = %q, want %q", got, tt.want)
			}
			// The child never sees more than its parent, nor more than on its own.
			for _, tool := range p.Effective(r) {
				if ok, _ := parent.Permits(tool); !ok {
					t.Errorf("child permits %s, which its parent does not", tool.Name())
				}
				if ok, _ := tt.child.Permits(tool); !ok {
					t.Errorf("child permits %s, which its own policy does not", tool.Name())
				}
			}
			d := &quiver.Dispatcher{Registry: r, Policy: p}
			for _, tool := range r.Tools() {
				ok, why := p.Permits(tool)
				res := dispatch(t, d, tool.Name(), "{}")
				if ok {
					wantSuccess(t, res)
					continue
				}
				wantError(t, res, quiver.CodePolicyDenied, why)
			}
		})
	}
	// The reason names the parent when the parent refuses.
	r := policyRegistry(t)
	p := quiver.Policy{}.Within(quiver.Policy{Deny: []string{"run_code"}})
	ok, why := p.Permits(mustLookup(t, r, "run_code"))
	if ok || !strings.Contains(why, "parent") || !strings.Contains(why, "deny list") {
		t.Errorf("Permits = %v, %q", ok, why)
	}
}

func TestPolicyDeniedCallNeverRuns(t *testing.T) {
	ran := false
	tool := quiver.Func("rm_rf", "Deletes everything.", func(context.Context, struct{}) (string, error) { ran = true; return "gone", nil })
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool, textTool("echo", "e")), Policy: quiver.Policy{Deny: []string{"rm_*"}}}
	res := dispatch(t, d, "rm_rf", "{}")
	wantError(t, res, quiver.CodePolicyDenied, `tool "rm_rf" is not available: it is on the deny list`, "Available tools: echo.")
	if ran {
		t.Error("a denied tool ran")
	}
	// Code invoking the tool goes through the same gate.
	res, err := d.Call(context.Background(), "rm_rf", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, res, quiver.CodePolicyDenied)
	if ran {
		t.Error("a denied tool ran through Call")
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		p  quiver.Policy
		ok bool
	}{
		{quiver.Policy{}, true},
		{quiver.Policy{Bound: []string{"a", "b*"}, Allow: []string{"?x"}, Deny: []string{"[ab]c"}}, true},
		{quiver.Policy{Bound: []string{"[a"}}, false},
		{quiver.Policy{Allow: []string{"x\\"}}, false},
		{quiver.Policy{Deny: []string{"[]"}}, false},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tt.p, err, tt.ok)
		}
	}
}

// Names outside the convention (registered with a warning, T6), such as those of remote MCP
// tools, are matched as flat strings: a glob's * also spans a "/".
func TestPolicyGlobsMatchWholeNames(t *testing.T) {
	r := newRegistry(t, textTool("github/create_issue", "i"), textTool("github.search", "s"), textTool("local_tool", "l"))
	tests := []struct {
		name   string
		policy quiver.Policy
		want   string
	}{
		{"deny everything", quiver.Policy{Deny: []string{"*"}}, ""},
		{"deny prefix", quiver.Policy{Deny: []string{"github*"}}, "local_tool"},
		{"allow prefix with slash", quiver.Policy{Allow: []string{"github/*"}}, "github/create_issue"},
		{"bound with ?", quiver.Policy{Bound: []string{"github?create_issue", "github?search"}}, "github.search,github/create_issue"},
		{"exact name", quiver.Policy{Allow: []string{"github/create_issue"}}, "github/create_issue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(names(tt.policy.Effective(r)), ","); got != tt.want {
				t.Errorf("Effective = %q, want %q", got, tt.want)
			}
			d := &quiver.Dispatcher{Registry: r, Policy: tt.policy}
			for _, tool := range r.Tools() {
				res := dispatch(t, d, tool.Name(), "{}")
				if strings.Contains(","+tt.want+",", ","+tool.Name()+",") {
					wantSuccess(t, res)
				} else {
					wantError(t, res, quiver.CodePolicyDenied)
				}
			}
		})
	}
}

// A policy survives a JSON round trip (agents are stored): in particular an empty bound list
// (no tools) must not come back as a nil one (every tool).
func TestPolicyJSONRoundTrip(t *testing.T) {
	tests := []quiver.Policy{
		{},
		{Bound: []string{}},
		{Bound: []string{"a", "b*"}},
		{Allow: []string{"x"}, Deny: []string{"y*"}},
		{Bound: []string{}, Allow: []string{}, Deny: []string{}},
	}
	r := policyRegistry(t)
	for _, p := range tests {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back quiver.Policy
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		before, after := strings.Join(names(p.Effective(r)), ","), strings.Join(names(back.Effective(r)), ",")
		if before != after {
			t.Errorf("%+v -> %s -> %+v: permits %q, then %q", p, b, back, before, after)
		}
	}
}
