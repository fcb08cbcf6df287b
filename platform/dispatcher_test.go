package platform_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// Every door calls a workspace's tools through the one dispatcher the platform keeps for it,
// with the platform's settings; what is a door's own (who calls, where the call is recorded,
// who confirms) comes with the call's context, not another dispatcher.
func TestOneDispatcherPerWorkspaceForEveryDoor(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	type textArgs struct {
		Text string `json:"text"`
	}
	reg := &quiver.Registry{}
	must(t, reg.Register(
		quiver.Func("echo", "Echoes its text.", func(_ context.Context, a textArgs) (string, error) { return a.Text, nil }),
		quiver.Func("guarded", "Echoes once a person allows it.", func(_ context.Context, a textArgs) (string, error) { return a.Text, nil },
			quiver.WithConfirmation()),
		quiver.Func("hidden", "Denied by the platform's policy.", func(context.Context, struct{}) (string, error) { return "ran", nil }),
	))
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Policy: quiver.Policy{Deny: []string{"hidden"}}, MaxResultBytes: 4096})
	must(t, err)
	d := p.Workspace(ctx, "wsp_a").Dispatcher()
	if p.Workspace(ctx, "wsp_a").Dispatcher() != d || p.Workspace(ctx, "wsp_b").Dispatcher() == d {
		t.Fatal("a workspace's dispatcher is made again, or shared with another workspace")
	}
	if d.MaxResultBytes != 4096 {
		t.Errorf("the dispatcher's MaxResultBytes is %d, want the platform's 4096", d.MaxResultBytes)
	}
	call := func(ctx context.Context, name string) *quiver.Result {
		t.Helper()
		r, err := d.Dispatch(ctx, quiver.Call{Name: name, Args: []byte(`{"text":"hi"}`)})
		must(t, err)
		return r
	}
	if r := call(ctx, "hidden"); r.Code != quiver.CodePolicyDenied {
		t.Errorf("a tool the platform's policy denies: %+v", r)
	}

	// A viewer's key may list the tools, not call them, at whichever door it comes.
	viewer := platform.Actor{WorkspaceID: "wsp_a", KeyID: "key_v", Role: store.KeyRoleViewer}
	if r := call(platform.WithActor(ctx, viewer), "echo"); r.Code != quiver.CodePolicyDenied || !strings.Contains(r.Error, "API key key_v is a viewer's") {
		t.Errorf("a viewer's call: %+v", r)
	}

	// A call that needs confirmation pauses, unless its door has someone to ask.
	if r := call(ctx, "guarded"); r.Code != quiver.CodeConfirmationRequired {
		t.Errorf("a call to confirm, no one to ask: %+v", r)
	}
	approve := func(context.Context, *quiver.Call) (quiver.Decision, error) {
		return quiver.Decision{Action: quiver.Approve}, nil
	}
	if r := call(platform.WithConfirm(ctx, approve), "guarded"); r.IsError() || r.Text != "hi" {
		t.Errorf("a call its door's Confirmer approved: %+v", r)
	}

	// A call on no thread gets one tagged with its door, and is recorded there once.
	scope, err := p.CallThread(ctx, platform.Operator("wsp_a", "usr_1"), "", "cli")
	must(t, err)
	if r := call(quiver.WithScope(ctx, scope), "echo"); r.IsError() {
		t.Fatalf("a recorded call: %+v", r)
	}
	th, err := st.Thread(ctx, "wsp_a", scope.ThreadID)
	must(t, err)
	msgs, err := st.Messages(ctx, "wsp_a", scope.ThreadID, store.Page{})
	must(t, err)
	if !slices.Equal(th.Tags, []string{"cli"}) || th.UserID != "usr_1" || len(msgs) != 2 || msgs[1].Result == nil || msgs[1].Result.Text != "hi" {
		t.Errorf("the call's thread %+v holds %d messages, want the call and its result", th, len(msgs))
	}
	if _, err := p.CallThread(ctx, platform.Operator("wsp_b", ""), scope.ThreadID); err == nil {
		t.Error("another workspace's thread was taken to record a call on")
	}
}
