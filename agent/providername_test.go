package agent_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
)

// Issue 46: a governance rule's provider_name is the name each model provider is offered the
// tool under. Through each provider's real wire format (the SDK against a fake server): the
// request offers the tool under that name and never its own, the model's call of that name
// runs the real tool, the thread records the call under the tool's own name, and the history
// sent back names it as the provider knows it. A rename that takes another tool's name stops
// the run before any request, saying which tools collide.
func TestGovernanceProviderNameOnTheWire(t *testing.T) {
	cases := []struct {
		name    string
		rule    quiver.Rule
		wantErr string // "" : the run finishes
	}{
		{"renamed", quiver.Rule{Tools: []string{"shop.readPage"}, ProviderName: "fetch_page"}, ""},
		{"a rename to another tool's name", quiver.Rule{Tools: []string{"shop.readPage"}, ProviderName: "parse_page"},
			`the provider name "parse_page" given to tool "shop.readPage" collides with tool "parse_page"`},
	}
	for _, c := range cases {
		for _, pv := range providers {
			t.Run(c.name+"/"+pv.name, func(t *testing.T) {
				f, bodies, o, err := runRenamed(t, pv, c.rule)
				if c.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), c.wantErr) {
						t.Fatalf("Run = %+v, %v; want an error saying %q", o, err, c.wantErr)
					}
					if len(bodies) != 0 || len(f.ran.list()) != 0 {
						t.Errorf("%d requests sent and %v ran; want none", len(bodies), f.ran.list())
					}
					return
				}
				if err != nil || o.Status != agent.RunFinished || o.Text != "done" {
					t.Fatalf("Run = %+v, %v", o, err)
				}
				if got := f.ran.list(); !slices.Equal(got, []string{"shop.readPage", "parse_page"}) {
					t.Fatalf("ran %v; want the real tool shop.readPage, then parse_page", got)
				}
				checkOfferedAs(t, bodies, "fetch_page", "readPage")
				checkRecordedAs(t, f, "shop.readPage", "parse_page")
			})
		}
	}
}

// runRenamed runs an agent whose tools are shop.readPage and parse_page, governed by rule,
// against pv's fake server, whose model calls fetch_page and parse_page (the canned turn's
// names), then answers "done". It returns the fixture, the bodies of the requests sent and
// the run's outcome.
func runRenamed(t *testing.T, pv provider, rule quiver.Rule) (*fixture, [][]byte, *agent.Outcome, error) {
	t.Helper()
	fs := &fakeServer{replies: []string{pv.calls, pv.final}}
	srv := httptest.NewServer(fs)
	t.Cleanup(srv.Close)
	p := &agent.Prompt{Name: "p", System: "You read pages.", Tools: []string{"shop.readPage", "parse_page"}}
	f := newFixture(t, pv.open(t, srv.URL), p)
	if err := f.reg.Register(
		quiver.Func("shop.readPage", "Reads a page of the shop.", func(context.Context, struct{}) (string, error) {
			f.ran.add("shop.readPage")
			return "the page", nil
		}, quiver.WithExamples(quiver.Example{})),
		quiver.Func("parse_page", "Parses a page.", func(context.Context, struct{}) (string, error) {
			f.ran.add("parse_page")
			return "parsed", nil
		}),
	); err != nil {
		t.Fatal(err)
	}
	g, err := quiver.NewGovernance([]quiver.Rule{rule}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.reg.SetGovernance(g)
	o, err := f.r.Run(ctx, f.th, f.agent, "What does the page say?")
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return f, fs.bodies, o, err
}

// checkOfferedAs checks the two requests of a run name the tool as offered and never by
// hidden (its own name, or a part of it any mapped form keeps): the first offers it (and its
// example in the system prompt), the second carries the call and its result.
func checkOfferedAs(t *testing.T, bodies [][]byte, offered, hidden string) {
	t.Helper()
	if len(bodies) != 2 {
		t.Fatalf("%d requests, want 2", len(bodies))
	}
	for i, body := range bodies {
		if !strings.Contains(string(body), `"`+offered+`"`) || strings.Contains(string(body), hidden) {
			t.Errorf("request %d does not name the tool %s alone:\n%s", i+1, offered, body)
		}
	}
	if !strings.Contains(string(bodies[0]), "- "+offered+" {}") {
		t.Errorf("the example in the system prompt does not name the tool %s:\n%s", offered, bodies[0])
	}
}

// checkRecordedAs checks the thread holds the calls, and their results, under names.
func checkRecordedAs(t *testing.T, f *fixture, names ...string) {
	t.Helper()
	hist, err := f.th.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var called, answered []string
	for _, m := range hist {
		for _, c := range m.ToolCalls {
			called = append(called, c.Name)
		}
		if m.Role == store.RoleTool {
			answered = append(answered, m.ToolName)
		}
	}
	if !slices.Equal(called, names) || !slices.Equal(answered, names) {
		t.Errorf("recorded calls %v and results %v; want both %v", called, answered, names)
	}
	for id, r := range f.results(t) {
		if r.Status != quiver.StatusSuccess {
			t.Errorf("call %s: %+v", id, r)
		}
	}
}
