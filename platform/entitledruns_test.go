package platform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// offerRecorder is a model that notes the tools each run's first request offers, calls
// refund_payment, and then answers.
type offerRecorder struct {
	mu      sync.Mutex
	offered [][]string
}

func (m *offerRecorder) Name() string            { return "test:offers" }
func (m *offerRecorder) Dialect() schema.Dialect { return schema.OpenAI }

func (m *offerRecorder) Generate(_ context.Context, req *model.Request, _ func(model.Delta)) (*model.Response, error) {
	for _, msg := range req.Messages {
		if msg.Role == model.RoleTool {
			return &model.Response{Text: "Done."}, nil
		}
	}
	var names []string
	if req.Tools != nil {
		for _, t := range req.Tools.Tools {
			names = append(names, t.Name)
		}
	}
	m.mu.Lock()
	m.offered = append(m.offered, names)
	m.mu.Unlock()
	return &model.Response{ToolCalls: []model.ToolCall{{ID: "call_1", Name: "refund_payment", Args: []byte(`{}`)}}}, nil
}

// A run is entitled as the caller who started it: its model is offered only what the caller
// may call, and a call of anything else is refused as not_entitled, recorded like every call;
// another member's run of the same agent is offered and runs everything.
func TestRunsAreEntitledAsTheirCaller(t *testing.T) {
	ctx := context.Background()
	noop := func(context.Context, struct{}) (string, error) { return "refunded", nil }
	tools := []*quiver.Tool{
		quiver.Func("lookup_order", "Looks an order up.", noop, quiver.WithAnnotations(quiver.Annotations{ReadOnlyHint: quiver.Hint(true)})),
		quiver.Func("refund_payment", "Refunds a payment.", noop),
	}
	m := &offerRecorder{}
	agents := map[string]*agent.Agent{"helper": {Name: "helper", Prompt: &agent.Prompt{Name: "helper", Model: "test:offers", Tools: []string{"lookup_order", "refund_payment"}}}}
	p, st := runPlatform(t, filepath.Join(t.TempDir(), "q.db"), tools, agents, func(string) (model.Model, bool) { return m, true })
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_local", Name: "local"}))
	admin := platform.Actor{WorkspaceID: "wsp_local", Role: store.KeyRoleAdmin, KeyID: "key_a"}
	_, err := p.SetEntitlements(ctx, admin, entitle.Document{Rules: []entitle.Rule{
		{Who: entitle.Who{Key: "key_support"}, Selector: entitle.Selector{Tools: []string{"refund_*"}}, Access: quiver.AccessDeny},
	}}, 0)
	must(t, err)

	run := func(a platform.Actor) (offered []string, refund *store.ToolResult) {
		t.Helper()
		th, err := p.OpenThread(ctx, a, platform.NewThread{Agent: "helper"})
		must(t, err)
		_, err = p.StartRun(ctx, a, th.ID, "helper", "Refund order 7.")
		must(t, err)
		waitOutcome(t, st, th.ID, agent.RunFinished)
		msgs, err := st.Messages(ctx, "wsp_local", th.ID, store.Page{Limit: 100})
		must(t, err)
		for _, msg := range msgs {
			if msg.Role == store.RoleTool {
				refund = msg.Result
			}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.offered[len(m.offered)-1], refund
	}
	offered, res := run(platform.Actor{WorkspaceID: "wsp_local", Role: store.KeyRoleMember, KeyID: "key_support"})
	if !slices.Equal(offered, []string{"lookup_order"}) {
		t.Errorf("the support key's run was offered %v, want lookup_order alone", offered)
	}
	if res == nil || res.Code != string(quiver.CodeNotEntitled) {
		t.Errorf("the support key's run's refund: %+v, want not_entitled", res)
	}
	offered, res = run(platform.Actor{WorkspaceID: "wsp_local", Role: store.KeyRoleMember, KeyID: "key_other"})
	if !slices.Equal(offered, []string{"lookup_order", "refund_payment"}) {
		t.Errorf("another member's run was offered %v", offered)
	}
	if res == nil || res.Status != "success" {
		t.Errorf("another member's refund: %+v", res)
	}
}

// A request a door's caller delegates (_delegate) is entitled as that caller: a saved prompt's
// run is offered only what the caller may call and refused the rest, and an anonymous request
// naming a hidden tool is refused without the hidden tools being listed.
func TestDelegatedRequestsAreEntitledAsTheirCaller(t *testing.T) {
	ctx := context.Background()
	noop := func(context.Context, struct{}) (string, error) { return "done", nil }
	ask, err := quiver.NewTool(quiver.Spec{Name: "ask", Description: "Answers a question.", MetaFields: []string{schema.DelegateField},
		InputSchema: &schema.Schema{Type: "object"}}, nil)
	must(t, err)
	tools := []*quiver.Tool{quiver.Func("lookup_order", "Looks an order up.", noop), quiver.Func("refund_payment", "Refunds a payment.", noop), ask}
	m := &offerRecorder{}
	path := filepath.Join(t.TempDir(), "q.db")
	st, err := sqlite.Open(path)
	must(t, err)
	t.Cleanup(func() { st.Close() })
	shared := &quiver.Registry{}
	must(t, shared.Register(tools...))
	helper := &agent.Prompt{Name: "helper", Model: "test:offers", Tools: []string{"lookup_order", "refund_payment"}}
	p, err := platform.New(platform.Config{Store: st, Registry: shared, Logger: slog.New(slog.DiscardHandler),
		Catalog:   &agent.Catalog{Prompts: map[string]*agent.Prompt{"helper": helper}},
		OpenModel: func(string) (model.Model, error) { return m, nil }})
	must(t, err)
	must(t, p.StartJobs(ctx, func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) { return jobs.StartSQLite(ctx, path, c) }))
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	must(t, st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_local", Name: "local"}))
	_, err = p.SetEntitlements(ctx, platform.Operator("wsp_local", ""), entitle.Document{Rules: []entitle.Rule{
		{Who: entitle.Who{Key: "key_support"}, Selector: entitle.Selector{Tools: []string{"refund_*"}}, Access: quiver.AccessDeny},
	}}, 0)
	must(t, err)
	support := platform.Actor{WorkspaceID: "wsp_local", Role: store.KeyRoleMember, KeyID: "key_support", UserID: "usr_s"}
	scope, err := p.CallThread(ctx, support, "", "api")
	must(t, err)
	d := p.Workspace(ctx, "wsp_local").Dispatcher()
	call := func(args string) *quiver.Result {
		t.Helper()
		r, err := d.Dispatch(platform.WithActor(quiver.WithScope(ctx, scope), support), quiver.Call{ID: "call_" + fmt.Sprint(len(args)), Name: "ask", Args: json.RawMessage(args)})
		must(t, err)
		return r
	}
	if r := call(`{"_delegate": "helper"}`); r.IsError() {
		t.Fatalf("the delegated saved prompt: %+v", r)
	}
	m.mu.Lock()
	offered := m.offered[len(m.offered)-1]
	m.mu.Unlock()
	if !slices.Equal(offered, []string{"lookup_order"}) {
		t.Errorf("the delegated request was offered %v, want lookup_order alone", offered)
	}
	r := call(`{"_delegate": {"system": "Refund it.", "tools": ["refund_payment"]}}`)
	if r.Code != quiver.CodeInvalidArguments || strings.Count(r.Error, "refund_payment") != 1 {
		t.Errorf("an anonymous request naming a hidden tool: %s %q", r.Code, r.Error)
	}
}
