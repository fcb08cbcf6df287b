package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

// SPEC V3: a thread for an agent is refused, nothing stored, while a variable its prompt, a
// shared tool or a stored JavaScript tool of the workspace requires has no value; the refusal
// names each as a field, with what requires it, and never a value given. A run that would be
// a thread's first is refused the same way before it is queued.
func TestOpenThreadChecksEveryRequiredVariable(t *testing.T) {
	ctx := context.Background()
	st, path := openSQLiteMember(t)
	key, _, err := secret.GenerateKey()
	must(t, err)
	resolver := vars.New(st, secret.NewKeyring(key))
	shared := &quiver.Registry{}
	must(t, shared.Register(quiver.Func("lookup", "Looks things up.", func(context.Context, struct{}) (string, error) { return "", nil },
		quiver.WithVariables(quiver.Variable{Name: "LOOKUP_HOST", Required: true}))))
	sales := &agent.Agent{Name: "sales", Prompt: &agent.Prompt{Name: "sales", Tools: []string{"lookup", "crm"},
		Variables: quiver.Variables{{Name: "REGION", Required: true, Description: "where to sell"}}}}
	p, err := platform.New(platform.Config{Store: st, Registry: shared, Resolver: resolver, Logger: slog.New(slog.DiscardHandler),
		Catalog: &agent.Catalog{Agents: map[string]*agent.Agent{"sales": sales}}, Model: scripted.Turns(scripted.Turn{Text: "sold"})})
	must(t, err)
	member := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", Role: store.KeyRoleMember, KeyID: "key_m"}

	// A stored JavaScript tool of the workspace declares a secret it requires.
	fn, err := p.CreateFunction(ctx, member, "crm")
	must(t, err)
	doc := json.RawMessage(`{"type":"object","description":"Reads the CRM.","properties":{"q":{"type":"string"}},` +
		`"variables":[{"name":"CRM_TOKEN","type":"secret","required":true,"description":"the CRM's key"}]}`)
	v, err := p.CreateFunctionVersion(ctx, member, fn.ID, platform.NewVersion{Code: "export default () => 1"})
	must(t, err)
	_, err = p.CreateTool(ctx, member, platform.NewTool{Name: "crm", Target: store.TargetServer, FunctionID: fn.ID, FunctionVersionID: v.ID,
		InputSchema: doc})
	must(t, err)

	const token = "crm-s3cret-91"
	every := map[string]string{"REGION": "nordics", "LOOKUP_HOST": "db.internal", "CRM_TOKEN": token}
	without := func(name string) map[string]string {
		m := map[string]string{}
		for k, v := range every {
			if k != name {
				m[k] = v
			}
		}
		return m
	}
	tooMany := func() map[string]string {
		m := maps.Clone(every)
		for i := len(m); i <= platform.MaxThreadValues; i++ {
			m[fmt.Sprintf("EXTRA_%d", i)] = "x"
		}
		return m
	}
	for _, c := range []struct {
		name   string
		in     platform.NewThread
		kind   platform.Kind // "": created
		fields []string
		has    []string
	}{
		{name: "none given", in: platform.NewThread{Agent: "sales"}, kind: platform.MissingVariables,
			fields: []string{"variables.CRM_TOKEN", "variables.LOOKUP_HOST", "variables.REGION"},
			has:    []string{"required by tool crm (the CRM's key)", "required by tool lookup", "required by prompt sales (where to sell)", "3 required variables are not set"}},
		{name: "all but the stored tool's secret", in: platform.NewThread{Agent: "sales", Variables: without("CRM_TOKEN")}, kind: platform.MissingVariables,
			fields: []string{"variables.CRM_TOKEN"}, has: []string{"a required variable is not set"}},
		{name: "all but the shared tool's", in: platform.NewThread{Agent: "sales", Variables: without("LOOKUP_HOST")}, kind: platform.MissingVariables,
			fields: []string{"variables.LOOKUP_HOST"}},
		{name: "values for a thread of no agent", in: platform.NewThread{Variables: every}, kind: platform.Invalid, fields: []string{"variables"}},
		{name: "a name no variable may have", in: platform.NewThread{Agent: "sales", Variables: map[string]string{"BAD\x01": "x"}},
			kind: platform.Invalid, fields: []string{"variables"}},
		{name: "more values than a thread is given", in: platform.NewThread{Agent: "sales", Variables: tooMany()},
			kind: platform.Invalid, fields: []string{"variables"}, has: []string{"101 variables are given, at most 100 are allowed"}},
		{name: "every one given", in: platform.NewThread{Agent: "sales", Variables: every}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, _, err := st.Threads(ctx, "wsp_a", store.ThreadFilter{})
			must(t, err)
			th, err := p.OpenThread(ctx, member, c.in)
			if c.kind == "" {
				must(t, err)
				stored, err := st.Variables(ctx, "wsp_a", store.LayerThread, th.ID)
				must(t, err)
				for _, v := range stored {
					if v.Name == "CRM_TOKEN" && (!v.Secret || strings.Contains(v.Value, token)) {
						t.Errorf("the stored tool's secret is kept as %+v", v)
					}
				}
				if len(stored) != len(every) {
					t.Errorf("the thread has %d values, want %d", len(stored), len(every))
				}
				return
			}
			var e *platform.Error
			if !errors.As(err, &e) || e.Kind != c.kind {
				t.Fatalf("got %v, want a %s refusal", err, c.kind)
			}
			var fields []string
			for _, f := range e.Fields {
				fields = append(fields, f.Field)
			}
			if e.Field != "" {
				fields = append(fields, e.Field)
			}
			slices.Sort(fields)
			if !slices.Equal(fields, c.fields) {
				t.Errorf("fields %v, want %v", fields, c.fields)
			}
			for _, s := range c.has {
				if !strings.Contains(e.Error(), s) {
					t.Errorf("%q lacks %q", e.Error(), s)
				}
			}
			if strings.Contains(e.Error(), token) {
				t.Errorf("the refusal shows a value given: %v", e)
			}
			after, _, err := st.Threads(ctx, "wsp_a", store.ThreadFilter{})
			must(t, err)
			if len(after) != len(before) {
				t.Errorf("a refused thread was stored")
			}
		})
	}

	// A thread of no agent, then a run of sales on it: refused before anything is queued.
	must(t, p.StartJobs(ctx, func(ctx context.Context, c jobs.Config) (*jobs.Jobs, error) { return jobs.StartSQLite(ctx, path, c) }))
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	bare, err := p.OpenThread(ctx, member, platform.NewThread{})
	must(t, err)
	_, err = p.StartRun(ctx, member, bare.ID, "sales", "sell")
	var e *platform.Error
	if !errors.As(err, &e) || e.Kind != platform.MissingVariables || !strings.Contains(e.Error(), "CRM_TOKEN (the CRM's key; required by tool crm)") {
		t.Fatalf("a first run without the variables: %v", err)
	}
	if msgs, err := st.Messages(ctx, "wsp_a", bare.ID, store.Page{Limit: 1}); err != nil || len(msgs) != 0 {
		t.Errorf("a refused run left %d messages (%v)", len(msgs), err)
	}
}
