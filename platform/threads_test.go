package platform_test

import (
	"context"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

// The rules of a thread's reads, its files and the calls made at a door hold without HTTP:
// each refusal says its kind and the input at fault, and another workspace's thread is not
// found.
func TestThreadRules(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	p, err := platform.New(platform.Config{Store: st})
	must(t, err)
	member := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", Role: store.KeyRoleMember, KeyID: "key_m"}
	viewer := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleViewer, KeyID: "key_v"}
	other := platform.Actor{WorkspaceID: "wsp_b", Role: store.KeyRoleAdmin, KeyID: "key_b"}

	th := &store.Thread{WorkspaceID: "wsp_a", Tags: []string{"name:notes"}}
	must(t, st.CreateThread(ctx, th))
	_, err = st.WriteFile(ctx, "wsp_a", th.ID, "/docs/a.txt", []byte("A"), store.FileMeta{})
	must(t, err)

	_, err = p.CallScope(ctx, viewer, "")
	refusal(t, "a viewer's call", err, platform.Forbidden, "")
	_, err = p.CallScope(ctx, other, th.ID)
	refusal(t, "a call on another workspace's thread", err, platform.NotFound, "")
	scope, err := p.CallScope(ctx, member, "")
	must(t, err)
	made, err := st.Thread(ctx, "wsp_a", scope.ThreadID)
	must(t, err)
	if made.UserID != "usr_m" || len(made.Tags) != 1 || made.Tags[0] != "api" {
		t.Errorf("the thread made for a call: %+v, want the member's, tagged api", made)
	}

	for _, c := range []struct {
		name   string
		actor  platform.Actor
		thread string
		path   string
		kind   platform.Kind
		field  string
	}{
		{"not a thread's id", member, "tol_1", "/", platform.Invalid, "id"},
		{"another workspace's thread", other, th.ID, "/", platform.NotFound, ""},
		{"a path with ..", member, th.ID, "/docs/../etc", platform.Invalid, "path"},
		{"no such file", member, th.ID, "/nope", platform.NotFound, "path"},
	} {
		_, err := p.ThreadFiles(ctx, c.actor, c.thread, c.path, 10)
		refusal(t, "listing "+c.name, err, c.kind, c.field)
	}
	l, err := p.ThreadFiles(ctx, viewer, th.ID, "/", 1)
	must(t, err)
	if len(l.Files) != 1 || l.Files[0].Path != "/docs" || !l.Truncated {
		t.Errorf("a listing cut at 1: %+v", l)
	}
	_, _, err = p.ThreadFile(ctx, member, th.ID, "/docs")
	refusal(t, "reading a directory", err, platform.Invalid, "path")
	_, _, err = p.ThreadFile(ctx, member, th.ID, "/docs/b.txt")
	refusal(t, "reading no file", err, platform.NotFound, "path")
	data, fi, err := p.ThreadFile(ctx, viewer, th.ID, "/docs/a.txt")
	if err != nil || string(data) != "A" || fi.Name != "a.txt" {
		t.Errorf("reading a file: %q %+v %v", data, fi, err)
	}

	_, err = p.Threads(ctx, member, store.ThreadFilter{Tag: "a\x00b"}, "")
	refusal(t, "a tag with NUL", err, platform.Invalid, "tag")
	_, err = p.Threads(ctx, member, store.ThreadFilter{Cursor: "not-a-cursor"}, "")
	refusal(t, "a cursor of no listing", err, platform.Invalid, "cursor")
	page, err := p.Threads(ctx, other, store.ThreadFilter{}, "")
	if err != nil || len(page.Threads) != 0 {
		t.Errorf("another workspace lists %+v (%v), want none", page, err)
	}
	_, err = p.ThreadView(ctx, other, th.ID)
	refusal(t, "another workspace's thread's view", err, platform.NotFound, "")
	_, err = p.Messages(ctx, other, th.ID, store.Page{})
	refusal(t, "another workspace's thread's messages", err, platform.NotFound, "")
	_, err = p.Children(ctx, other, th.ID)
	refusal(t, "another workspace's thread's children", err, platform.NotFound, "")

	// Without background runs there are no deferred sub-agents or waiting calls to act on.
	_, err = p.ProvideVariables(ctx, viewer, th.ID, "thr_x", map[string]string{"A": "1"})
	refusal(t, "a viewer providing variables", err, platform.Forbidden, "")
	_, err = p.VariablesRequest(ctx, member, th.ID, "thr_x")
	refusal(t, "a request without background runs", err, platform.Unavailable, "")
	_, _, err = p.WaitingCalls(ctx, member, 10, "")
	refusal(t, "waiting calls without background runs", err, platform.Unavailable, "")
	if err != nil && strings.Contains(err.Error(), "/v1/") {
		t.Errorf("a platform refusal names an HTTP route: %v", err)
	}
}

// A run on a thread is for the agent named, else the thread's: its own, or the one a handoff
// gave it to; a thread with neither refuses, naming the field to give.
func TestRunAgentDefaultsToTheThreads(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	p, err := platform.New(platform.Config{Store: st})
	must(t, err)
	member := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", Role: store.KeyRoleMember, KeyID: "key_m"}
	viewer := platform.Actor{WorkspaceID: "wsp_a", Role: store.KeyRoleViewer, KeyID: "key_v"}
	other := platform.Actor{WorkspaceID: "wsp_b", Role: store.KeyRoleAdmin, KeyID: "key_b"}
	own := &store.Thread{WorkspaceID: "wsp_a", AgentID: "payer"}
	handedOff := &store.Thread{WorkspaceID: "wsp_a", AgentID: "triage", State: []byte(`{"agent":"billing"}`)}
	none := &store.Thread{WorkspaceID: "wsp_a"}
	for _, th := range []*store.Thread{own, handedOff, none} {
		must(t, st.CreateThread(ctx, th))
	}
	for _, c := range []struct {
		name   string
		actor  platform.Actor
		thread string
		given  string
		want   string
		kind   platform.Kind // a refusal's
		field  string
	}{
		{"an agent given", member, none.ID, "writer", "writer", "", ""},
		{"the thread's own", member, own.ID, "", "payer", "", ""},
		{"the one it was handed to", member, handedOff.ID, "", "billing", "", ""},
		{"none at all", member, none.ID, "", "", platform.Invalid, "agent"},
		{"another workspace's thread", other, own.ID, "", "", platform.NotFound, ""},
		{"a viewer", viewer, own.ID, "", "", platform.Forbidden, ""},
	} {
		got, err := p.RunAgent(ctx, c.actor, c.thread, c.given)
		if c.kind != "" {
			refusal(t, c.name, err, c.kind, c.field)
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.name, got, err, c.want)
		}
	}
}
