package entitle

import (
	"fmt"
	"strings"

	"github.com/quiverhq/quiver"
)

// Warnings are what in the document names nothing among tools, the workspace's tools now: a
// toolset a rule or binding names that the document does not define, a tool named exactly
// that is not there, a toolset that holds no tool. They are kept (tools come and go, a toolset
// may be defined later), and a writer is told.
func (s *Set) Warnings(tools []*quiver.Tool) []string {
	if s == nil {
		return nil
	}
	names := make(map[string]bool, len(tools))
	held := map[string]bool{}
	for _, t := range tools {
		names[t.Name()] = true
		for _, ts := range s.entry(t).toolsets {
			held[ts] = true
		}
	}
	var out []string
	for i := range s.doc.Rules {
		r := &s.doc.Rules[i]
		for _, ts := range []string{r.Toolset, r.Who.Toolset} {
			if ts != "" && !s.HasToolset(ts) {
				out = append(out, fmt.Sprintf("rules[%d] names the toolset %q, which is not defined", i, ts))
			}
		}
		out = append(out, unknownTools(fmt.Sprintf("rules[%d]", i), r.Tools, names)...)
	}
	for i := range s.doc.Toolsets {
		ts := &s.doc.Toolsets[i]
		for j := range ts.Include {
			out = append(out, unknownTools(fmt.Sprintf("toolsets[%d].include[%d]", i, j), ts.Include[j].Tools, names)...)
		}
		if !held[ts.Name] {
			out = append(out, fmt.Sprintf("toolsets[%d] (%s) holds no tool the workspace has now", i, ts.Name))
		}
	}
	return out
}

func unknownTools(field string, patterns []string, names map[string]bool) []string {
	var out []string
	for k, p := range patterns {
		if !strings.ContainsAny(p, `*?[\`) && !names[p] {
			out = append(out, fmt.Sprintf("%s.tools[%d] names the tool %q, which the workspace does not have now", field, k, p))
		}
	}
	return out
}
