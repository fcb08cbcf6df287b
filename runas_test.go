package quiver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/quiverhq/quiver"
)

// byUser is a resolver with values per user: the user layer alone.
type byUser map[string]quiver.Vars

func (b byUser) ResolveVariable(ctx context.Context, scope quiver.Scope, v quiver.Variable) (string, bool, error) {
	return b[scope.UserID].ResolveVariable(ctx, scope, v)
}

// Spec.RunAs: a tool that runs as another user resolves its variables for that user, while
// the call stays the caller's (the scope its handler reads), and its result's meta names both
// beside the tool's own; without RunAs, the caller's values and no such meta.
func TestRunAs(t *testing.T) {
	type seen struct{ token, scopeUser string }
	var got seen
	tool := quiver.Func("whoami", "Says whose token it sees.", func(ctx context.Context, _ struct{}) (*quiver.Result, error) {
		tok, _ := quiver.Var(ctx, "TOKEN")
		got = seen{tok, quiver.ScopeFrom(ctx).UserID}
		return &quiver.Result{Status: quiver.StatusSuccess, Text: tok, Meta: json.RawMessage(`{"logs":["hi"]}`)}, nil
	}, quiver.WithVariables(quiver.Variable{Name: "TOKEN", Required: true}))
	reg := &quiver.Registry{}
	if err := reg.Register(tool.RunningAs("usr_r")); err != nil {
		t.Fatal(err)
	}
	plain, _ := tool.As("whoami_plain", "Says whose token it sees.")
	if err := reg.Register(plain); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg, Resolver: byUser{"usr_r": {"TOKEN": "r"}, "usr_c": {"TOKEN": "c"}}}
	ctx := quiver.WithScope(context.Background(), quiver.Scope{UserID: "usr_c", WorkspaceID: "wsp_1"})

	r := dispatchCall(t, ctx, d, quiver.Call{Name: "whoami"})
	wantSuccess(t, r)
	if r.Text != "r" || got != (seen{"r", "usr_c"}) {
		t.Errorf("as usr_r: result %q, the handler saw %+v; want r's token, the caller's scope", r.Text, got)
	}
	var meta map[string]any
	if err := json.Unmarshal(r.Meta, &meta); err != nil || meta["caller_user_id"] != "usr_c" || meta["runtime_user_id"] != "usr_r" || meta["logs"] == nil {
		t.Errorf("meta %s (%v), want the caller, the runtime user and the tool's own", r.Meta, err)
	}
	if s := reg.Tools(); len(s) != 2 || tool.Spec().RunAs != "" {
		t.Errorf("RunningAs changed the tool it copies: %+v", tool.Spec())
	}

	r = dispatchCall(t, ctx, d, quiver.Call{Name: "whoami_plain"})
	wantSuccess(t, r)
	if r.Text != "c" || string(r.Meta) != `{"logs":["hi"]}` {
		t.Errorf("as the caller: %q, meta %s", r.Text, r.Meta)
	}

	// A value the runtime user lacks is missing, whatever the caller has, and the error says
	// whose it must be.
	d = &quiver.Dispatcher{Registry: reg, Resolver: byUser{"usr_c": {"TOKEN": "c"}}}
	r = dispatchCall(t, ctx, d, quiver.Call{Name: "whoami"})
	wantError(t, r, quiver.CodeMissingVariable, "TOKEN", "runs as user usr_r")
	if err := json.Unmarshal(r.Meta, &meta); err != nil || meta["runtime_user_id"] != "usr_r" {
		t.Errorf("the missing variable's meta %s", r.Meta)
	}
}
