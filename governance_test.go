package quiver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// governed makes a tool of spec (a name, a source, annotations), with code that answers "ran".
func governed(t *testing.T, spec quiver.Spec) *quiver.Tool {
	t.Helper()
	spec.Description = "A tool " + spec.Name + "."
	tool, err := quiver.NewTool(spec, func(context.Context, json.RawMessage) (any, error) { return "ran", nil })
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestGovernanceSelectsAndSettles(t *testing.T) {
	yes, no := quiver.Hint(true), quiver.Hint(false)
	get := quiver.Spec{Name: "payments.listRefunds", Source: "openapi:payments",
		Annotations: quiver.Annotations{ReadOnlyHint: yes}}
	post := quiver.Spec{Name: "payments.createRefund", Source: "openapi:payments",
		Annotations: quiver.Annotations{ReadOnlyHint: no}}
	del := quiver.Spec{Name: "github.delete_repository", Source: "mcp:github",
		Annotations: quiver.Annotations{DestructiveHint: yes}}
	goTool := quiver.Spec{Name: "weather", Timeout: time.Minute}
	stored := quiver.Spec{Name: "summarise", Source: quiver.SourceStored, RequiresConfirmation: true}

	cases := []struct {
		name                string
		operator, workspace []quiver.Rule
		spec                quiver.Spec
		confirm             bool
		timeout             time.Duration
		denied              string // part of the refusal; "" when permitted
	}{
		{"no rule leaves the tool as made", nil, nil, post, false, 0, ""},
		{"every non read-only operation of a source requires confirmation",
			[]quiver.Rule{{Source: "openapi:payments", When: quiver.Hints{ReadOnly: no}, RequiresConfirmation: yes}}, nil,
			post, true, 0, ""},
		{"the read-only operation is not selected",
			[]quiver.Rule{{Source: "openapi:payments", When: quiver.Hints{ReadOnly: no}, RequiresConfirmation: yes}}, nil,
			get, false, 0, ""},
		{"every destructive tool, whatever its source",
			[]quiver.Rule{{When: quiver.Hints{Destructive: yes}, RequiresConfirmation: yes}}, nil,
			del, true, 0, ""},
		{"a read-only tool is not destructive though it leaves the hint out",
			[]quiver.Rule{{When: quiver.Hints{Destructive: yes}, RequiresConfirmation: yes}}, nil,
			get, false, 0, ""},
		{"a source pattern", []quiver.Rule{{Source: "mcp:*", Timeout: quiver.Duration(5 * time.Second)}}, nil,
			del, false, 5 * time.Second, ""},
		{"a Go function's source is go", []quiver.Rule{{Source: "go", Timeout: quiver.Duration(time.Second)}}, nil,
			goTool, false, time.Second, ""},
		{"the operator may lift a tool's own confirmation",
			[]quiver.Rule{{Tools: []string{"summarise"}, RequiresConfirmation: no}}, nil, stored, false, 0, ""},
		{"a later rule wins within a layer",
			[]quiver.Rule{{Tools: []string{"weather"}, Timeout: quiver.Duration(time.Second)}, {Source: "go", Timeout: quiver.Duration(3 * time.Second)}}, nil,
			goTool, false, 3 * time.Second, ""},
		{"deny wins over allow", []quiver.Rule{{Tools: []string{"github.*"}, Access: quiver.AccessAllow},
			{When: quiver.Hints{Destructive: yes}, Access: quiver.AccessDeny}}, nil,
			del, false, 0, "governance rule 2 denies it"},
		{"an allow list leaves out what it does not name",
			[]quiver.Rule{{Source: "openapi:*", Access: quiver.AccessAllow}}, nil, goTool, false, time.Minute, "no governance rule allows it"},
		{"a workspace rule adds a confirmation", nil,
			[]quiver.Rule{{Tools: []string{"payments.*"}, RequiresConfirmation: yes}}, get, true, 0, ""},
		{"a workspace rule only shortens a timeout", nil,
			[]quiver.Rule{{Tools: []string{"weather"}, Timeout: quiver.Duration(time.Hour)}}, goTool, false, time.Minute, ""},
		{"a workspace rule shortens it", nil,
			[]quiver.Rule{{Tools: []string{"weather"}, Timeout: quiver.Duration(time.Second)}}, goTool, false, time.Second, ""},
		{"a workspace denies what the operator allows", []quiver.Rule{{Tools: []string{"weather"}, Access: quiver.AccessAllow}},
			[]quiver.Rule{{Tools: []string{"weather"}, Access: quiver.AccessDeny}}, goTool, false, time.Minute, "the workspace's governance rule 1 denies it"},
		{"a workspace's allow list narrows", nil, []quiver.Rule{{Source: "openapi:*", Access: quiver.AccessAllow}},
			goTool, false, time.Minute, "the workspace's no governance rule allows it"},
		{"rules select by the annotations a tool was made with, not those a rule sets",
			[]quiver.Rule{{Tools: []string{"payments.*"}, Annotations: quiver.Annotations{ReadOnlyHint: yes}},
				{When: quiver.Hints{ReadOnly: no}, RequiresConfirmation: yes}}, nil, post, true, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := quiver.NewGovernance(c.operator, c.workspace)
			if err != nil {
				t.Fatal(err)
			}
			reg := &quiver.Registry{}
			if err := reg.Register(governed(t, c.spec)); err != nil {
				t.Fatal(err)
			}
			reg.SetGovernance(g)
			tool, ok := reg.Lookup(c.spec.Name)
			if !ok {
				t.Fatal("the governed tool is not found")
			}
			sp := tool.Spec()
			if sp.RequiresConfirmation != c.confirm || sp.Timeout != c.timeout {
				t.Errorf("confirm, timeout = %v, %v; want %v, %v", sp.RequiresConfirmation, sp.Timeout, c.confirm, c.timeout)
			}
			ok, why := (&quiver.Policy{}).Permits(tool)
			if c.denied == "" && !ok || c.denied != "" && (ok || !strings.Contains(why, c.denied)) {
				t.Errorf("permits = %v (%q); want denied %q", ok, why, c.denied)
			}
			if listed := (&quiver.Policy{}).Effective(reg); (len(listed) == 1) != (c.denied == "") {
				t.Errorf("offered %d tools; a denied tool must not be offered, a permitted one must", len(listed))
			}
		})
	}
}

func TestGovernanceRefusesBadRules(t *testing.T) {
	no := quiver.Hint(false)
	cases := []struct {
		name                string
		operator, workspace []quiver.Rule
		want                string
	}{
		{"a rule that sets nothing", []quiver.Rule{{Tools: []string{"x"}}}, nil, "governance rule 1: it sets nothing"},
		{"a malformed pattern", []quiver.Rule{{Tools: []string{"[x"}, Access: quiver.AccessDeny}}, nil, `the pattern "[x" is malformed`},
		{"an unknown access", []quiver.Rule{{Access: "maybe"}}, nil, `access "maybe" is neither allow nor deny`},
		{"a negative timeout", []quiver.Rule{{Timeout: quiver.Duration(-time.Second)}}, nil, "timeout -1s is negative"},
		{"a workspace lifting a confirmation", nil, []quiver.Rule{{RequiresConfirmation: no}}, "workspace governance rule 1: a workspace's rule may require confirmation, not lift it"},
		{"a workspace setting annotations", nil, []quiver.Rule{{Annotations: quiver.Annotations{ReadOnlyHint: quiver.Hint(true)}}}, "may not set annotations"},
		{"a provider name for a pattern", []quiver.Rule{{Access: quiver.AccessAllow}, {Tools: []string{"payments.*"}, ProviderName: "refund"}}, nil,
			`governance rule 2: provider_name "refund" needs one tool named exactly, not the pattern "payments.*"`},
		{"a provider name for any tool", []quiver.Rule{{ProviderName: "refund"}}, nil,
			`governance rule 1: provider_name "refund" needs one tool named exactly: give tools: [NAME]`},
		{"a provider name for two tools", []quiver.Rule{{Tools: []string{"a", "b"}, ProviderName: "refund"}}, nil,
			`provider_name "refund" needs one tool named exactly, not 2 (a, b)`},
		{"a provider name for a source's tools", []quiver.Rule{{Source: "openapi:payments", ProviderName: "refund"}}, nil,
			`provider_name "refund" needs one tool named exactly`},
		{"a provider name with a dot", []quiver.Rule{{Tools: []string{"payments.createRefund"}, ProviderName: "payments.refund"}}, nil,
			`governance rule 1: provider_name "payments.refund" is not a name every model provider accepts: give 1 to 64 characters of letters (a-z, A-Z), digits, _ and -, starting with a letter or _`},
		{"a provider name starting with a digit", []quiver.Rule{{Tools: []string{"x"}, ProviderName: "9lives"}}, nil,
			`provider_name "9lives" is not a name every model provider accepts`},
		{"a provider name too long", []quiver.Rule{{Tools: []string{"x"}, ProviderName: strings.Repeat("a", 65)}}, nil,
			"is not a name every model provider accepts: give 1 to 64 characters"},
		{"one provider name for two tools", []quiver.Rule{{Tools: []string{"a"}, ProviderName: "refund"}, {Tools: []string{"b"}, ProviderName: "refund"}}, nil,
			`governance rule 2: provider_name "refund" is given to "a" by rule 1 already`},
		{"a workspace renaming a tool", nil, []quiver.Rule{{Tools: []string{"x"}, ProviderName: "refund"}},
			`workspace governance rule 1: a workspace's rule may not set provider_name ("refund"): a rename is not a tightening`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := quiver.NewGovernance(c.operator, c.workspace)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want it to say %q", err, c.want)
			}
		})
	}
}

// A rule's provider_name renames the tool as model providers are offered it (in every model
// dialect, as given, not in MCP's), and a call of that name maps back to the tool; a rename
// that takes another tool's name is refused when the tools are rendered, not made silently.
func TestGovernanceProviderName(t *testing.T) {
	rename := func(tool, name string) quiver.Rule {
		return quiver.Rule{Tools: []string{tool}, ProviderName: name}
	}
	cases := []struct {
		name    string
		rules   []quiver.Rule
		dialect schema.Dialect
		offered map[string]string // registered name -> offered name
		wantErr string
	}{
		{"no rule: the name as the provider accepts it", nil, schema.OpenAI,
			map[string]string{"payments.createRefund": "payments_createRefund", "weather": "weather"}, ""},
		{"OpenAI", []quiver.Rule{rename("payments.createRefund", "issue_refund")}, schema.OpenAI,
			map[string]string{"payments.createRefund": "issue_refund", "weather": "weather"}, ""},
		{"OpenAI strict", []quiver.Rule{rename("payments.createRefund", "issue_refund")}, schema.OpenAIStrict,
			map[string]string{"payments.createRefund": "issue_refund", "weather": "weather"}, ""},
		{"Anthropic", []quiver.Rule{rename("payments.createRefund", "issue_refund")}, schema.Anthropic,
			map[string]string{"payments.createRefund": "issue_refund", "weather": "weather"}, ""},
		{"Gemini", []quiver.Rule{rename("payments.createRefund", "issue_refund")}, schema.Gemini,
			map[string]string{"payments.createRefund": "issue_refund", "weather": "weather"}, ""},
		{"MCP clients see the tool's own name", []quiver.Rule{rename("payments.createRefund", "issue_refund")}, schema.MCP,
			map[string]string{"payments.createRefund": "payments.createRefund", "weather": "weather"}, ""},
		{"a later rule wins", []quiver.Rule{rename("weather", "forecast"), rename("weather", "sky")}, schema.Anthropic,
			map[string]string{"payments.createRefund": "payments_createRefund", "weather": "sky"}, ""},
		{"two tools swap names", []quiver.Rule{rename("weather", "payments_createRefund"), rename("payments.createRefund", "weather")}, schema.OpenAI,
			map[string]string{"payments.createRefund": "weather", "weather": "payments_createRefund"}, ""},
		{"a rule for a tool not registered offers nothing", []quiver.Rule{rename("absent", "weather2")}, schema.OpenAI,
			map[string]string{"payments.createRefund": "payments_createRefund", "weather": "weather"}, ""},
		{"a rename to another tool's name", []quiver.Rule{rename("payments.createRefund", "weather")}, schema.OpenAI, nil,
			`schema: the provider name "weather" given to tool "payments.createRefund" collides with tool "weather", offered as "weather"`},
		{"another tool's mapped name, where Gemini needs no mapping", []quiver.Rule{rename("weather", "payments_createRefund")}, schema.Gemini,
			map[string]string{"payments.createRefund": "payments.createRefund", "weather": "payments_createRefund"}, ""},
		{"a rename to another tool's mapped name, where it is mapped", []quiver.Rule{rename("weather", "payments_createRefund")}, schema.Anthropic, nil,
			`collides with tool "payments.createRefund", offered as "payments_createRefund"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := quiver.NewGovernance(c.rules, nil)
			if err != nil {
				t.Fatal(err)
			}
			reg := &quiver.Registry{}
			if err := reg.Register(governed(t, quiver.Spec{Name: "payments.createRefund", Source: "openapi:payments"}),
				governed(t, quiver.Spec{Name: "weather"})); err != nil {
				t.Fatal(err)
			}
			reg.SetGovernance(g)
			d := &quiver.Dispatcher{Registry: reg}
			set, err := d.Render(c.dialect)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v; want it to say %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for canonical, want := range c.offered {
				if got := set.Outbound(canonical); got != want {
					t.Errorf("%s offered as %q, want %q", canonical, got, want)
				}
				if got, _, ok := set.Inbound(want, []byte(`{}`)); !ok || got != canonical {
					t.Errorf("a call of %q maps to %q (%v), want %s", want, got, ok, canonical)
				}
			}
			if tool, _ := reg.Lookup("payments.createRefund"); tool.Name() != "payments.createRefund" {
				t.Errorf("the tool's own name changed: %q", tool.Name())
			}
		})
	}
}

// TestGovernanceAtTheDispatcher: the dispatcher enforces what the rules set, whatever door
// dispatches: a confirmation the source did not ask for pauses the call, a denied tool is
// refused without running, and a changed rule takes effect at the next call.
func TestGovernanceAtTheDispatcher(t *testing.T) {
	ctx := context.Background()
	reg := &quiver.Registry{}
	refund := governed(t, quiver.Spec{Name: "payments.createRefund", Source: "openapi:payments"})
	if err := reg.Register(refund); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	call := quiver.Call{ID: "c1", Name: "payments.createRefund", Args: json.RawMessage(`{}`)}
	if r, _ := d.Dispatch(ctx, call); r.IsError() {
		t.Fatalf("ungoverned call: %+v", r)
	}
	confirm, _ := quiver.NewGovernance([]quiver.Rule{{Source: "openapi:payments", RequiresConfirmation: quiver.Hint(true)}}, nil)
	reg.SetGovernance(confirm)
	if r, _ := d.Dispatch(ctx, call); !r.IsError() || r.Code != quiver.CodeConfirmationRequired {
		t.Fatalf("governed call = %+v; want %s", r, quiver.CodeConfirmationRequired)
	}
	deny, _ := quiver.NewGovernance(nil, []quiver.Rule{{Tools: []string{"payments.*"}, Access: quiver.AccessDeny}})
	reg.SetGovernance(deny)
	r, _ := d.Dispatch(ctx, call)
	if !r.IsError() || r.Code != quiver.CodePolicyDenied || !strings.Contains(r.Error, "the workspace's governance rule 1 denies it") {
		t.Fatalf("denied call = %+v", r)
	}
	if d.Tools() != nil && len(d.Tools()) != 0 {
		t.Errorf("a denied tool is offered: %v", d.Tools())
	}
	reg.SetGovernance(nil)
	if r, _ := d.Dispatch(ctx, call); r.IsError() {
		t.Fatalf("after the rules are gone: %+v", r)
	}
}

// BenchmarkGovernedLookup: what governance adds to a call's lookup, once each tool is
// governed (the first lookup of each tool applies the rules; later ones read the memo).
func BenchmarkGovernedLookup(b *testing.B) {
	rules := []quiver.Rule{
		{Source: "openapi:*", When: quiver.Hints{ReadOnly: quiver.Hint(false)}, RequiresConfirmation: quiver.Hint(true)},
		{Tools: []string{"tool_9*"}, Access: quiver.AccessDeny},
		{Timeout: quiver.Duration(time.Minute)},
	}
	for _, bc := range []struct {
		name  string
		rules []quiver.Rule
	}{{"ungoverned", nil}, {"three-rules", rules}} {
		b.Run(bc.name, func(b *testing.B) {
			reg := &quiver.Registry{}
			for i := range 100 {
				spec := quiver.Spec{Name: fmt.Sprintf("tool_%d", i), Description: "A tool.", Source: "openapi:x"}
				t, err := quiver.NewTool(spec, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
				if err != nil {
					b.Fatal(err)
				}
				if err := reg.Register(t); err != nil {
					b.Fatal(err)
				}
			}
			if bc.rules != nil {
				g, err := quiver.NewGovernance(bc.rules, nil)
				if err != nil {
					b.Fatal(err)
				}
				reg.SetGovernance(g)
			}
			names := make([]string, 100)
			for i := range names {
				names[i] = fmt.Sprintf("tool_%d", i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := reg.Lookup(names[i%100]); !ok {
					b.Fatal("not found")
				}
				i++
			}
		})
	}
}
