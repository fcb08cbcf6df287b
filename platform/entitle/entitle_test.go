package entitle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

func tool(t testing.TB, name, source string, a quiver.Annotations) *quiver.Tool {
	t.Helper()
	tl := quiver.Func(name, "Does "+name+".", func(context.Context, struct{}) (string, error) { return "", nil }, quiver.WithAnnotations(a))
	if source != "" {
		s := tl.Spec()
		s.Source = source
		var err error
		if tl, err = quiver.NewTool(s, nil); err != nil {
			t.Fatal(err)
		}
	}
	return tl
}

var (
	ro  = quiver.Annotations{ReadOnlyHint: quiver.Hint(true)}
	dst = quiver.Annotations{DestructiveHint: quiver.Hint(true)}
	yes = quiver.Hint(true)
)

// The rules of the package comment, one by one: deny wins, toolsets bound, allow lists, the
// default, agents' chains, claims, annotation predicates and sources.
func TestDecisions(t *testing.T) {
	lookup := tool(t, "lookup_order", "", ro)
	refund := tool(t, "refund_payment", "openapi:payments", dst)
	deleteRepo := tool(t, "delete_repository", "mcp:github", dst)
	search := tool(t, "search_docs", "stored", ro)
	all := []*quiver.Tool{lookup, refund, deleteRepo, search}

	doc := &Document{
		Toolsets: []Toolset{
			{Name: "support", Include: []Selector{{Tools: []string{"lookup_order", "refund_*"}}}},
			{Name: "docs", Include: []Selector{{Source: "stored"}}},
		},
		Rules: []Rule{
			{Who: Who{Role: "viewer"}, Selector: Selector{When: quiver.Hints{ReadOnly: yes}}, Access: quiver.AccessAllow},
			{Who: Who{Claim: "groups", Value: "contractors"}, Selector: Selector{When: quiver.Hints{Destructive: yes}}, Access: quiver.AccessDeny},
			{Who: Who{Key: "key_support"}, Selector: Selector{Toolset: "support"}, Access: quiver.AccessAllow},
			{Who: Who{Key: "key_support"}, Selector: Selector{Tools: []string{"refund_payment"}}, Access: quiver.AccessDeny, Description: "refunds need a person"},
			{Who: Who{Agent: "triage*"}, Selector: Selector{Source: "mcp:*"}, Access: quiver.AccessDeny},
			{Who: Who{Toolset: "docs"}, Selector: Selector{Tools: []string{"search_docs"}}, Access: quiver.AccessAllow},
		},
	}
	s, err := Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sub  Subject
		want []string // the tools allowed, of all
	}{
		{"a member no rule names", Subject{Key: "key_m", Role: "member"}, []string{"lookup_order", "refund_payment", "delete_repository", "search_docs"}},
		{"a viewer: an allow list of the read-only tools", Subject{Key: "key_v", Role: "viewer"}, []string{"lookup_order", "search_docs"}},
		{"a contractor's token: destructive tools denied", Subject{User: "usr_c", Role: "member", Claims: map[string]any{"groups": []any{"staff", "contractors"}}},
			[]string{"lookup_order", "search_docs"}},
		{"a claim that does not hold", Subject{User: "usr_s", Role: "member", Claims: map[string]any{"groups": []any{"staff"}}},
			[]string{"lookup_order", "refund_payment", "delete_repository", "search_docs"}},
		{"the support key: its toolset, less what a deny takes", Subject{Key: "key_support", Role: "member"}, []string{"lookup_order"}},
		{"a key bound to the support toolset", Subject{Key: "key_b", Role: "admin", Toolsets: []string{"support"}}, []string{"lookup_order", "refund_payment"}},
		{"bound to two toolsets", Subject{Key: "key_b", Role: "admin", Toolsets: []string{"support", "docs"}}, []string{"lookup_order", "refund_payment", "search_docs"}},
		{"bound to a toolset that does not exist", Subject{Key: "key_b", Role: "admin", Toolsets: []string{"gone"}}, nil},
		{"through the docs address", Subject{Key: "key_m", Role: "member", Toolset: "docs"}, []string{"search_docs"}},
		{"through an address, a viewer keeps its allow list", Subject{Key: "key_v", Role: "viewer", Toolset: "support"}, []string{"lookup_order"}},
		{"an agent the rules deny remote tools", Subject{Key: "key_m", Role: "member", Agents: []string{"triage_bot"}}, []string{"lookup_order", "refund_payment", "search_docs"}},
		{"a sub-agent of that agent: its parent's limits too", Subject{Key: "key_m", Role: "member", Agents: []string{"triage_bot", "helper"}},
			[]string{"lookup_order", "refund_payment", "search_docs"}},
		{"a viewer's agent", Subject{Key: "key_v", Role: "viewer", Agents: []string{"helper"}}, []string{"lookup_order", "search_docs"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, tl := range all {
				ok := s.Allows(&c.sub, tl)
				if ok {
					got = append(got, tl.Name())
				}
				if ex := s.Explain(&c.sub, tl); ex.Allowed != ok || ex.Reason == "" {
					t.Errorf("%s: Explain %+v disagrees with Allows %v", tl.Name(), ex, ok)
				}
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("allowed %v, want %v", got, c.want)
			}
		})
	}

	// Explain names the rule that decided, its description and the agent.
	for _, c := range []struct {
		sub  Subject
		tool *quiver.Tool
		rule int
		has  string
	}{
		{Subject{Key: "key_support"}, refund, 3, "refunds need a person"},
		{Subject{Key: "key_support"}, lookup, 2, "rules[2] allows it"},
		{Subject{Key: "key_v", Role: "viewer"}, refund, -1, "no rule allows it this one"},
		{Subject{Key: "key_m", Role: "member", Agents: []string{"triage_bot", "helper"}}, deleteRepo, 4, "for agent triage_bot"},
		{Subject{Key: "key_m", Role: "member"}, refund, -1, "allows by default"},
		{Subject{Toolset: "docs"}, refund, -1, "not in the toolset docs"},
	} {
		if d := s.Explain(&c.sub, c.tool); d.Rule != c.rule || !strings.Contains(d.Reason, c.has) {
			t.Errorf("explain %+v on %s: %+v, want rule %d saying %q", c.sub, c.tool.Name(), d, c.rule, c.has)
		}
	}

	// Default deny: only what a rule allows.
	strict, err := Compile(&Document{Default: quiver.AccessDeny, Rules: []Rule{{Who: Who{Role: "member"}, Selector: Selector{Tools: []string{"lookup_*"}}, Access: quiver.AccessAllow}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strict.Allows(&Subject{Role: "member"}, lookup) || strict.Allows(&Subject{Role: "member"}, search) || strict.Allows(&Subject{Role: "admin"}, lookup) {
		t.Error("default deny: a member may call lookup_order alone, an admin nothing")
	}
	var none *Set
	if none.Restricts() || !none.Allows(&Subject{}, refund) || s.Restricts() == false {
		t.Error("a nil set restricts nothing; a set with rules does")
	}
}

// A document that does not check is refused naming the part, whatever it is.
func TestDocumentsRefused(t *testing.T) {
	long := strings.Repeat("a", MaxText+1)
	many := make([]Rule, MaxRules+1)
	for i := range many {
		many[i] = Rule{Access: quiver.AccessDeny, Selector: Selector{Tools: []string{"x"}}}
	}
	for _, c := range []struct {
		name, json string
		doc        *Document
		field      string
	}{
		{name: "a misspelt predicate", json: `{"rules":[{"access":"deny","when":{"readOnly":true}}]}`, field: "document"},
		{name: "an unknown field", json: `{"rules":[{"access":"deny","whom":{}}]}`, field: "document"},
		{name: "two values", json: `{} {}`, field: "document"},
		{name: "a malformed pattern", json: `{"rules":[{"access":"deny","tools":["ok","[a-"]}]}`, field: "rules[0].tools[1]"},
		{name: "a malformed source", json: `{"rules":[{"access":"deny","source":"openapi:["}]}`, field: "rules[0].source"},
		{name: "no access", json: `{"rules":[{"tools":["x"]}]}`, field: "rules[0].access"},
		{name: "a bad default", json: `{"default":"maybe"}`, field: "default"},
		{name: "a bad role", json: `{"rules":[{"access":"deny","who":{"role":"owner"}}]}`, field: "rules[0].who.role"},
		{name: "a claim without its value", json: `{"rules":[{"access":"deny","who":{"claim":"groups"}}]}`, field: "rules[0].who"},
		{name: "a malformed agent pattern", json: `{"rules":[{"access":"deny","who":{"agent":"[x"}}]}`, field: "rules[0].who.agent"},
		{name: "a toolset name with a slash", json: `{"toolsets":[{"name":"a/b","include":[{"tools":["x"]}]}]}`, field: "toolsets[0].name"},
		{name: "a toolset defined twice", json: `{"toolsets":[{"name":"a","include":[{"tools":["x"]}]},{"name":"a","include":[{"tools":["y"]}]}]}`, field: "toolsets[1].name"},
		{name: "a toolset of nothing", json: `{"toolsets":[{"name":"a","include":[]}]}`, field: "toolsets[0].include"},
		{name: "a toolset selecting everything by accident", json: `{"toolsets":[{"name":"a","include":[{}]}]}`, field: "toolsets[0].include[0]"},
		{name: "a toolset of toolsets", json: `{"toolsets":[{"name":"a","include":[{"toolset":"b"}]}]}`, field: "toolsets[0].include[0].toolset"},
		{name: "an empty pattern", json: `{"rules":[{"access":"deny","tools":[""]}]}`, field: "rules[0].tools[0]"},
		{name: "a long key", doc: &Document{Rules: []Rule{{Access: quiver.AccessDeny, Who: Who{Key: long}}}}, field: "rules[0].who.key"},
		{name: "a long description", doc: &Document{Rules: []Rule{{Access: quiver.AccessDeny, Description: long}}}, field: "rules[0].description"},
		{name: "too many rules", doc: &Document{Rules: many}, field: "rules"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.doc != nil {
				_, err = Compile(c.doc)
			} else {
				_, err = Decode([]byte(c.json))
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v, want a refusal of %s", err, c.field)
			}
		})
	}
	if _, err := Decode([]byte(`{"default":"deny","rules":[{"who":{"role":"viewer"},"access":"allow","when":{"readOnlyHint":true}}],"toolsets":[{"name":"support","include":[{"tools":["a"]}]}]}`)); err != nil {
		t.Fatalf("a good document: %v", err)
	}
}

// Warnings name what names nothing now; the document is kept all the same.
func TestWarnings(t *testing.T) {
	s, err := Compile(&Document{
		Toolsets: []Toolset{{Name: "support", Include: []Selector{{Tools: []string{"lookup_order"}}}}, {Name: "empty", Include: []Selector{{Tools: []string{"gone_*"}}}}},
		Rules: []Rule{
			{Selector: Selector{Tools: []string{"refund_payment", "pay_*"}, Toolset: "missing"}, Access: quiver.AccessDeny},
			{Who: Who{Toolset: "nowhere"}, Access: quiver.AccessDeny},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(s.Warnings([]*quiver.Tool{tool(t, "lookup_order", "", ro)}), "\n")
	for _, want := range []string{`rules[0] names the toolset "missing"`, `rules[0].tools[0] names the tool "refund_payment"`,
		`rules[1] names the toolset "nowhere"`, "toolsets[1] (empty) holds no tool"} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "pay_*") || strings.Contains(got, "(support)") {
		t.Errorf("warnings %q name a pattern or a toolset that holds a tool", got)
	}
}

func TestClaimHolds(t *testing.T) {
	claims := map[string]any{"groups": []any{"a", "b"}, "scope": "read write", "realm_access": map[string]any{"roles": []any{"admin"}},
		"https://example.com/team": "blue", "org": map[string]any{"x": true}}
	for _, c := range []struct {
		path, value string
		want        bool
	}{
		{"groups", "b", true}, {"groups", "c", false}, {"scope", "write", true}, {"scope", "rea", false},
		{"realm_access.roles", "admin", true}, {"https://example.com/team", "blue", true}, {"org", "x", true},
		{"missing.path", "x", false}, {"groups.deeper", "a", false},
	} {
		if got := ClaimHolds(claims, c.path, c.value); got != c.want {
			t.Errorf("%s=%s: %v, want %v", c.path, c.value, got, c.want)
		}
	}
}

// A run keeps of its caller's claims those the rules read, and no more.
func TestClaimsKept(t *testing.T) {
	s, err := Compile(&Document{Rules: []Rule{
		{Who: Who{Claim: "groups", Value: "a"}, Access: quiver.AccessDeny},
		{Who: Who{Claim: "realm_access.roles", Value: "b"}, Access: quiver.AccessDeny},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Claims(map[string]any{"groups": []any{"a"}, "email": "x@example.com", "realm_access": map[string]any{"roles": []any{"b"}}, "name": "X"})
	if len(got) != 2 || got["groups"] == nil || got["realm_access"] == nil {
		t.Errorf("kept %v, want groups and realm_access alone", got)
	}
	var none *Set
	if none.Claims(map[string]any{"groups": "a"}) != nil {
		t.Error("no rules keep no claims")
	}
}
