package entitle

import (
	"fmt"
	"testing"

	"github.com/quiverhq/quiver"
)

// benchSet is a workspace of 1,000 tools and 1,000 rules: rules naming keys, users, roles,
// claims, agents and toolsets, selecting tools by name, pattern, source and annotations, as a
// company's platform team would write them.
func benchSet(b testing.TB) (*Set, []*quiver.Tool) {
	b.Helper()
	tools := make([]*quiver.Tool, 1000)
	for i := range tools {
		a := ro
		if i%3 == 0 {
			a = dst
		}
		tools[i] = tool(b, fmt.Sprintf("team%02d.tool%03d", i%50, i), fmt.Sprintf("openapi:svc%d", i%20), a)
	}
	doc := &Document{}
	for i := range 50 {
		doc.Toolsets = append(doc.Toolsets, Toolset{Name: fmt.Sprintf("team%02d", i), Include: []Selector{{Tools: []string{fmt.Sprintf("team%02d.*", i)}}}})
	}
	for i := range 1000 {
		r := Rule{Access: quiver.AccessAllow}
		switch i % 5 {
		case 0:
			r.Who.Key = fmt.Sprintf("key_%d", i)
			r.Toolset = fmt.Sprintf("team%02d", i%50)
		case 1:
			r.Who.User = fmt.Sprintf("usr_%d", i)
			r.Tools = []string{fmt.Sprintf("team%02d.*", i%50)}
		case 2:
			r.Who = Who{Claim: "groups", Value: fmt.Sprintf("group%d", i)}
			r.Source = fmt.Sprintf("openapi:svc%d", i%20)
		case 3:
			r.Who.Agent = fmt.Sprintf("agent%d*", i)
			r.When = quiver.Hints{Destructive: yes}
			r.Access = quiver.AccessDeny
		case 4:
			r.Who.Role = "viewer"
			r.Tools = []string{fmt.Sprintf("team%02d.tool%03d", i%50, i)}
			r.Access = quiver.AccessDeny
		}
		doc.Rules = append(doc.Rules, r)
	}
	s, err := Compile(doc)
	if err != nil {
		b.Fatal(err)
	}
	return s, tools
}

// benchSubject is a member's token with a few groups, calling through an agent.
var benchSubject = Subject{Key: "key_5", User: "usr_6", Role: "member", Claims: map[string]any{"groups": []any{"group7", "group12", "staff"}},
	Agents: []string{"agent3_x"}}

// BenchmarkDecide is one call's decision (the tool's compiled entry already memoised, as it is
// from the second call on): the bound is 2 µs at p50.
func BenchmarkDecide(b *testing.B) {
	s, tools := benchSet(b)
	for _, t := range tools {
		s.Allows(&benchSubject, t)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Allows(&benchSubject, tools[i%len(tools)])
		i++
	}
}

// BenchmarkFilter is a 1,000-tool list filtered for one caller (tools/list): bound 1 ms.
func BenchmarkFilter(b *testing.B) {
	s, tools := benchSet(b)
	for _, t := range tools {
		s.Allows(&benchSubject, t)
	}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, t := range tools {
			if s.Allows(&benchSubject, t) {
				n++
			}
		}
	}
}

// BenchmarkCompile is a change of the rules: compiling the document and every tool's entry.
func BenchmarkCompile(b *testing.B) {
	s, tools := benchSet(b)
	doc := s.Document()
	b.ReportAllocs()
	for b.Loop() {
		c, err := Compile(&doc)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range tools {
			c.Allows(&benchSubject, t)
		}
	}
}

// The indexes that spare a tool's entry the rules that cannot select it decide as reading
// every rule does: the benchmarks' workspace, and a mix of exact names, toolsets and
// patterns, for callers of every kind.
func TestIndexesDecideAsAScanDoes(t *testing.T) {
	s, tools := benchSet(t)
	doc := s.Document()
	doc.Toolsets = append(doc.Toolsets, Toolset{Name: "exact", Include: []Selector{{Tools: []string{"team01.tool001", "team02.tool002"}}, {Tools: []string{"team03.tool003"}}}})
	doc.Rules = append(doc.Rules, Rule{Who: Who{Role: "member"}, Selector: Selector{Toolset: "exact", When: quiver.Hints{Destructive: yes}}, Access: quiver.AccessDeny},
		Rule{Who: Who{Key: "key_5"}, Selector: Selector{Tools: []string{"team01.tool001", "team04.tool004"}, Source: "openapi:svc1"}, Access: quiver.AccessDeny})
	indexed, err := Compile(&doc)
	if err != nil {
		t.Fatal(err)
	}
	scan, err := Compile(&doc)
	if err != nil {
		t.Fatal(err)
	}
	scan.byName, scan.bySet, scan.setsByName, scan.scanRules, scan.scanSets = nil, nil, nil, nil, nil
	for i := range scan.rules {
		scan.scanRules = append(scan.scanRules, int32(i))
	}
	for name := range scan.toolsets {
		scan.scanSets = append(scan.scanSets, name)
	}
	subjects := []Subject{benchSubject, {Key: "key_0", Role: "viewer"}, {User: "usr_1", Role: "member"}, {Key: "key_5", Role: "member", Toolsets: []string{"exact"}},
		{Role: "member", Toolset: "team01"}, {Role: "admin", Claims: map[string]any{"groups": []any{"group2"}}, Agents: []string{"agent3"}}}
	for _, sub := range subjects {
		for _, tl := range tools {
			if a, b := indexed.Explain(&sub, tl), scan.Explain(&sub, tl); a != b {
				t.Fatalf("%+v on %s: indexed %+v, every rule read %+v", sub, tl.Name(), a, b)
			}
		}
	}
}
