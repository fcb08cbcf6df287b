package agent_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
	"github.com/quiverhq/quiver/thread"
)

// SPEC V3, seed 003 §9.3: a thread for an agent is created only when every variable a run of
// it requires resolves: its prompt's, its tools' and its immediate sub-agents'.

const reqWorkspace = "wsp_req"

// reqFixture is a runner on a real store with a variables resolver, a registry whose tools
// declare variables, and a catalog with a sub-agent that declares its own.
type reqFixture struct {
	st  treeStore
	res *vars.Resolver
	r   *agent.Runner
	cat *agent.Catalog
}

func newReqFixture(t *testing.T, st treeStore) *reqFixture {
	t.Helper()
	key, _, err := secret.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	needs := func(vs ...quiver.Variable) quiver.Option { return quiver.WithVariables(vs...) }
	disabled := func(sp *quiver.Spec) { sp.Disabled = true }
	noop := func(context.Context, struct{}) (string, error) { return "done", nil }
	reg := &quiver.Registry{}
	if err := reg.Register(
		quiver.Func("search", "Searches.", noop, needs(quiver.Variable{Name: "SEARCH_KEY", Type: quiver.VarSecret, Required: true, Description: "the search key"},
			quiver.Variable{Name: "REGION"})),
		quiver.Func("mail", "Sends mail.", noop, needs(quiver.Variable{Name: "MAIL_HOST", Required: true})),
		quiver.Func("archive", "Archives; disabled.", noop, needs(quiver.Variable{Name: "ARCHIVE_KEY", Required: true}), disabled),
		quiver.Func("repo_read", "Reads a repository.", noop, needs(quiver.Variable{Name: "REPO_TOKEN", Required: true, Scoped: true})),
		quiver.Func("plain", "Needs nothing.", noop),
	); err != nil {
		t.Fatal(err)
	}
	res := vars.New(st, secret.NewKeyring(key))
	cat := &agent.Catalog{Prompts: map[string]*agent.Prompt{}, Agents: map[string]*agent.Agent{
		"worker": {Name: "worker", Type: agent.DualAI, Prompt: &agent.Prompt{Name: "worker", Tools: []string{"repo_read"},
			Variables: quiver.Variables{{Name: "WORKER_MODE", Required: true, Description: "how to work"}}}},
		// The deployer gets its token per instance: it declares it scoped.
		"deployer": {Name: "deployer", Type: agent.DualAI, ExposeAsTool: true, Description: "Deploys.", Prompt: &agent.Prompt{Name: "deployer",
			Tools: []string{"repo_read"}, Variables: quiver.Variables{{Name: "REPO_TOKEN", Required: true, Scoped: true}}}},
	}}
	m := scripted.Turns(scripted.Turn{Text: "lead answer"}, scripted.Turn{Text: "worker answer"}, scripted.Turn{Text: "more"})
	return &reqFixture{st: st, res: res, cat: cat,
		r: &agent.Runner{Store: st, Registry: reg, Catalog: cat, Resolver: res, Model: m}}
}

func (f *reqFixture) set(t *testing.T, layer quiver.Layer, owner string, vs ...vars.Value) {
	t.Helper()
	if err := f.res.Set(context.Background(), reqWorkspace, layer, owner, vs...); err != nil {
		t.Fatal(err)
	}
}

// missingOf returns the missing variables of err by name, with what requires each, or fails
// when err is not a *quiver.MissingVariablesError.
func missingOf(t *testing.T, err error) map[string][]string {
	t.Helper()
	var missing *quiver.MissingVariablesError
	if !errors.As(err, &missing) {
		t.Fatalf("err = %v, want a *quiver.MissingVariablesError", err)
	}
	got := map[string][]string{}
	for _, v := range missing.Missing {
		by := slices.Clone(missing.RequiredBy[v.Name])
		slices.Sort(by)
		got[v.Name] = by
	}
	return got
}

func lead(p agent.Prompt) *agent.Agent {
	p.Name = "lead"
	return &agent.Agent{Name: "lead", Prompt: &p}
}

func immediate(sa agent.Subagent) []agent.Subagent {
	sa.Name = "worker"
	return []agent.Subagent{sa}
}

func TestCreateThreadChecksEveryRequiredVariable(t *testing.T) {
	const searchKey = "sk-given-7Q2"
	req := func(names ...string) quiver.Variables {
		out := make(quiver.Variables, len(names))
		for i, n := range names {
			out[i] = quiver.Variable{Name: n, Required: true}
		}
		return out
	}
	cases := []struct {
		name  string
		agent *agent.Agent
		// setup sets values on the layers before the thread is created.
		setup func(t *testing.T, f *reqFixture)
		given []vars.Value
		// want is every missing variable with what requires it; nil: the thread is created.
		want map[string][]string
	}{
		{name: "nothing required", agent: lead(agent.Prompt{Tools: []string{"plain"}})},
		{name: "the prompt's, missing", agent: lead(agent.Prompt{Variables: req("TEAM")}),
			want: map[string][]string{"TEAM": {"prompt lead"}}},
		{name: "the prompt's, on the instance", agent: lead(agent.Prompt{Variables: req("TEAM")}),
			setup: func(t *testing.T, f *reqFixture) {
				f.set(t, quiver.LayerInstance, "", vars.Value{Name: "TEAM", Value: "blue"})
			}},
		{name: "every place at once, each named", agent: lead(agent.Prompt{Variables: req("TEAM"),
			Tools:     []string{"search", "mail", "archive", "repo_read"},
			Subagents: immediate(agent.Subagent{Immediate: &agent.Immediate{Enabled: true}})}),
			want: map[string][]string{"TEAM": {"prompt lead"}, "SEARCH_KEY": {"tool search"}, "MAIL_HOST": {"tool mail"},
				"REPO_TOKEN": {"sub-agent worker", "tool repo_read"}, "WORKER_MODE": {"sub-agent worker"}}},
		{name: "a pattern binds tools, deny narrows them, a disabled one counts for nothing",
			agent: lead(agent.Prompt{Tools: []string{"*"}, Deny: []string{"mail"}}),
			want:  map[string][]string{"SEARCH_KEY": {"tool search"}, "REPO_TOKEN": {"tool repo_read"}}},
		{name: "the allow list narrows them", agent: lead(agent.Prompt{Tools: []string{"*"}, Allow: []string{"mail", "plain"}}),
			want: map[string][]string{"MAIL_HOST": {"tool mail"}}},
		{name: "values from the prompt, agent and user layers", agent: lead(agent.Prompt{Variables: req("TEAM"), Tools: []string{"search", "mail"}}),
			setup: func(t *testing.T, f *reqFixture) {
				f.set(t, quiver.LayerPrompt, "lead", vars.Value{Name: "TEAM", Value: "blue"})
				f.set(t, quiver.LayerAgent, "lead", vars.Value{Name: "MAIL_HOST", Value: "smtp.example"})
				f.set(t, quiver.LayerUser, "usr_1", vars.Value{Name: "SEARCH_KEY", Value: "sk-user", Secret: true})
			}},
		{name: "another agent's values do not count", agent: lead(agent.Prompt{Tools: []string{"mail"}}),
			setup: func(t *testing.T, f *reqFixture) {
				f.set(t, quiver.LayerAgent, "worker", vars.Value{Name: "MAIL_HOST", Value: "smtp.example"})
			},
			want: map[string][]string{"MAIL_HOST": {"tool mail"}}},
		{name: "values given with the thread count", agent: lead(agent.Prompt{Tools: []string{"search", "mail"}}),
			given: []vars.Value{{Name: "SEARCH_KEY", Value: searchKey}, {Name: "MAIL_HOST", Value: "smtp.example"}}},
		{name: "a value given does not make up for another", agent: lead(agent.Prompt{Tools: []string{"search", "mail"}}),
			given: []vars.Value{{Name: "SEARCH_KEY", Value: searchKey}},
			want:  map[string][]string{"MAIL_HOST": {"tool mail"}}},
		{name: "an optional immediate sub-agent that is off requires nothing",
			agent: lead(agent.Prompt{Tools: []string{"repo_read"}, Subagents: immediate(agent.Subagent{Optional: "WORKER_ON",
				Immediate: &agent.Immediate{Enabled: true}})}),
			given: []vars.Value{{Name: "REPO_TOKEN", Value: "tok"}}},
		{name: "an optional immediate sub-agent that is on",
			agent: lead(agent.Prompt{Tools: []string{"repo_read"}, Subagents: immediate(agent.Subagent{Optional: "WORKER_ON",
				Immediate: &agent.Immediate{Enabled: true}})}),
			given: []vars.Value{{Name: "REPO_TOKEN", Value: "tok"}, {Name: "WORKER_ON", Value: "Yes"}},
			want:  map[string][]string{"WORKER_MODE": {"sub-agent worker"}}},
		{name: "a sub-agent's values are its agent's", agent: lead(agent.Prompt{Tools: []string{"repo_read"},
			Subagents: immediate(agent.Subagent{Immediate: &agent.Immediate{Enabled: true}})}),
			setup: func(t *testing.T, f *reqFixture) {
				f.set(t, quiver.LayerAgent, "worker", vars.Value{Name: "WORKER_MODE", Value: "careful"})
			},
			given: []vars.Value{{Name: "REPO_TOKEN", Value: "tok"}}},
		{name: "a resumable sub-agent does not start with the thread", agent: lead(agent.Prompt{
			Subagents: immediate(agent.Subagent{Resumable: &agent.Resumable{}})})},
		{name: "a tool bound for a deferred sub-agent's scoped variable is not the lead's to have", agent: lead(agent.Prompt{Tools: []string{"repo_read"},
			Subagents: []agent.Subagent{{Name: "deployer", Resumable: &agent.Resumable{}}}})},
		{name: "nor for a sub-agent called as a tool", agent: lead(agent.Prompt{Tools: []string{"repo_read", "deployer"}})},
		{name: "the lead's prompt may require it all the same", agent: lead(agent.Prompt{Tools: []string{"repo_read"}, Variables: req("REPO_TOKEN"),
			Subagents: []agent.Subagent{{Name: "deployer", Resumable: &agent.Resumable{}}}}),
			want: map[string][]string{"REPO_TOKEN": {"prompt lead"}}},
		{name: "an immediate one's child needs it", agent: lead(agent.Prompt{Tools: []string{"repo_read"},
			Subagents: []agent.Subagent{{Name: "deployer", Immediate: &agent.Immediate{Enabled: true}}}}),
			want: map[string][]string{"REPO_TOKEN": {"sub-agent deployer"}}},
		{name: "grouped: no instance named, none starts", agent: lead(agent.Prompt{Tools: []string{"repo_read"},
			Subagents: immediate(agent.Subagent{Immediate: &agent.Immediate{Enabled: true, NameEnv: "WORKERS", ScopedEnv: []string{"REPO_TOKEN"}}})}),
			setup: func(t *testing.T, f *reqFixture) {
				f.set(t, quiver.LayerInstance, "", vars.Value{Name: "REPO_TOKEN", Value: "tok"})
			}},
		{name: "grouped: scopedEnv hands each instance its value", agent: lead(agent.Prompt{Tools: []string{"repo_read"},
			Subagents: immediate(agent.Subagent{Immediate: &agent.Immediate{Enabled: true, NameEnv: "WORKERS", ScopedEnv: []string{"REPO_TOKEN"}}})}),
			setup: func(t *testing.T, f *reqFixture) {
				f.set(t, quiver.LayerAgent, "worker", vars.Value{Name: "WORKER_MODE", Value: "careful"})
				// The lead's agent layer: the children, whose agent is worker, get it only
				// through scopedEnv.
				f.set(t, quiver.LayerAgent, "lead", vars.Value{Name: "REPO_TOKEN", Value: `["tok-a","tok-b"]`})
			},
			given: []vars.Value{{Name: "WORKERS", Value: `["a","b"]`}}},
		{name: "grouped: an instance that scopedEnv leaves without a value", agent: lead(agent.Prompt{Tools: []string{"repo_read"},
			Subagents: immediate(agent.Subagent{Immediate: &agent.Immediate{Enabled: true, NameEnv: "WORKERS", ScopedEnv: []string{"REPO_TOKEN"}}})}),
			setup: func(t *testing.T, f *reqFixture) {
				f.set(t, quiver.LayerAgent, "worker", vars.Value{Name: "WORKER_MODE", Value: "careful"})
				// The lead's agent layer: the children, whose agent is worker, get it only
				// through scopedEnv.
				f.set(t, quiver.LayerAgent, "lead", vars.Value{Name: "REPO_TOKEN", Value: `["tok-a","tok-b"]`})
			},
			given: []vars.Value{{Name: "WORKERS", Value: `["a","b","c"]`}},
			want:  map[string][]string{"REPO_TOKEN": {"sub-agent worker"}}},
	}
	backends(t, func(t *testing.T, st treeStore) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				f := newReqFixture(t, st)
				f.cat.Agents["lead"] = c.agent
				before, _, err := st.Threads(ctx, reqWorkspace, store.ThreadFilter{})
				if err != nil {
					t.Fatal(err)
				}
				if c.setup != nil {
					c.setup(t, f)
				}
				th, err := f.r.CreateThread(ctx, thread.Options{WorkspaceID: reqWorkspace, UserID: "usr_1"}, c.agent, c.given...)
				// The values set for the case stay in the shared store: remove them, so that the
				// next case starts from none.
				t.Cleanup(func() { clearValues(t, st) })
				if c.want == nil {
					if err != nil {
						t.Fatalf("CreateThread: %v", err)
					}
					if th.AgentID() != "lead" {
						t.Errorf("the thread's agent is %q, want lead", th.AgentID())
					}
					checkGivenStored(t, f, th, c.given)
					return
				}
				if got := missingOf(t, err); !maps.EqualFunc(got, c.want, slices.Equal) {
					t.Errorf("missing %v, want %v", got, c.want)
				}
				if strings.Contains(err.Error(), searchKey) {
					t.Errorf("the error shows a value given: %v", err)
				}
				after, _, err := st.Threads(ctx, reqWorkspace, store.ThreadFilter{})
				if err != nil || len(after) != len(before) {
					t.Errorf("a refused thread was stored: %d threads, then %d (%v)", len(before), len(after), err)
				}
			})
		}
	})
}

// checkGivenStored checks the values given with a thread are on it, a secret's sealed.
func checkGivenStored(t *testing.T, f *reqFixture, th *thread.Thread, given []vars.Value) {
	t.Helper()
	stored, err := f.st.Variables(context.Background(), reqWorkspace, store.LayerThread, th.ID())
	if err != nil || len(stored) != len(given) {
		t.Fatalf("the thread's values: %+v %v, want %d", stored, err, len(given))
	}
	for _, v := range stored {
		if v.Name == "SEARCH_KEY" && (!v.Secret || strings.Contains(v.Value, "sk-given")) {
			t.Errorf("a value for a variable a tool declares secret is stored as %+v", v)
		}
	}
}

// clearValues removes every value of the workspace's layers the tests set.
func clearValues(t *testing.T, st treeStore) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []struct {
		layer store.VariableLayer
		owner string
	}{{store.LayerInstance, ""}, {store.LayerAgent, "lead"}, {store.LayerAgent, "worker"}, {store.LayerPrompt, "lead"}, {store.LayerUser, "usr_1"}} {
		vs, err := st.Variables(ctx, reqWorkspace, o.layer, o.owner)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if err := st.DeleteVariable(ctx, reqWorkspace, o.layer, o.owner, v.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A thread made without the check (thread.Create) is checked by its first run, which writes
// nothing when refused; a scoped variable is checked on the child an immediate sub-agent would
// run on, which does not inherit its parent's ordinary value. Once the thread has run, a run
// is not refused for variables (a tool without its value answers missing_variable).
func TestFirstRunChecksVariables(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		ctx := context.Background()
		f := newReqFixture(t, st)
		a := lead(agent.Prompt{Variables: quiver.Variables{{Name: "TEAM", Required: true}}, Tools: []string{"repo_read"},
			Subagents: immediate(agent.Subagent{Immediate: &agent.Immediate{Enabled: true}})})
		f.cat.Agents["lead"] = a
		th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: reqWorkspace, UserID: "usr_1", AgentID: "lead"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.r.Run(ctx, th, a, "go")
		want := map[string][]string{"TEAM": {"prompt lead"}, "REPO_TOKEN": {"sub-agent worker", "tool repo_read"}, "WORKER_MODE": {"sub-agent worker"}}
		if got := missingOf(t, err); !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("missing %v, want %v", got, want)
		}
		if h := history(t, th); len(h) != 0 {
			t.Fatalf("a refused run wrote %d messages", len(h))
		}
		if info, err := th.Refresh(ctx); err != nil || info.Status != store.StatusIdle {
			t.Fatalf("a refused run left the thread %q (%v)", info.Status, err)
		}
		// An ordinary value on the thread serves its own tool, not the child's scoped declaration.
		f.set(t, quiver.LayerThread, th.ID(), vars.Value{Name: "REPO_TOKEN", Value: "tok"}, vars.Value{Name: "TEAM", Value: "blue"})
		f.set(t, quiver.LayerAgent, "worker", vars.Value{Name: "WORKER_MODE", Value: "careful"})
		want = map[string][]string{"REPO_TOKEN": {"sub-agent worker"}}
		if got := missingOf(t, f.r.CheckVariables(ctx, th, a)); !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("missing %v, want %v", got, want)
		}
		// Provided as scoped, it flows down to the child.
		f.set(t, quiver.LayerThread, th.ID(), vars.Value{Name: "REPO_TOKEN", Value: "tok", Scoped: true})
		out, err := f.r.Run(ctx, th, a, "go")
		if err != nil || out.Status != agent.RunFinished {
			t.Fatalf("run with every variable: %+v %v", out, err)
		}
		f.r.Wait()
		if err := f.res.Delete(ctx, reqWorkspace, quiver.LayerThread, th.ID(), "TEAM"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.r.Run(ctx, th, a, "again"); err != nil {
			t.Fatalf("a later run: %v", err)
		}
		f.r.Wait()
	})
}

// A runner whose resolver is not store/vars' checks against what it resolves; one with none
// resolves nothing, so every required variable is missing.
func TestCreateThreadWithOtherResolvers(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		ctx := context.Background()
		a := lead(agent.Prompt{Variables: quiver.Variables{{Name: "TEAM", Required: true}}, Tools: []string{"mail"}})
		for _, c := range []struct {
			name     string
			resolver quiver.VariableResolver
			writer   agent.VariableWriter
			given    []vars.Value
			want     map[string][]string
		}{
			{name: "fixed values", resolver: quiver.Vars{"TEAM": "blue", "MAIL_HOST": "smtp"}},
			{name: "fixed values lacking one", resolver: quiver.Vars{"TEAM": "blue"}, want: map[string][]string{"MAIL_HOST": {"tool mail"}}},
			{name: "fixed values and a value given", resolver: quiver.Vars{"TEAM": "blue"}, writer: recordWriter{},
				given: []vars.Value{{Name: "MAIL_HOST", Value: "smtp"}}},
			{name: "no resolver", want: map[string][]string{"TEAM": {"prompt lead"}, "MAIL_HOST": {"tool mail"}}},
		} {
			t.Run(c.name, func(t *testing.T) {
				f := newReqFixture(t, st)
				f.r.Resolver, f.r.Variables = c.resolver, c.writer
				_, err := f.r.CreateThread(ctx, thread.Options{WorkspaceID: reqWorkspace}, a, c.given...)
				if c.want == nil {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				if got := missingOf(t, err); !maps.EqualFunc(got, c.want, slices.Equal) {
					t.Errorf("missing %v, want %v", got, c.want)
				}
			})
		}
	})
}

type recordWriter struct{}

func (recordWriter) Set(context.Context, string, quiver.Layer, string, ...quiver.VariableValue) error {
	return nil
}

// The error names each missing variable once, with its description and what requires it.
func TestMissingVariablesErrorSaysWhatRequiresThem(t *testing.T) {
	err := &quiver.MissingVariablesError{
		Missing:    []quiver.Variable{{Name: "SEARCH_KEY", Description: "the search key"}, {Name: "TEAM"}},
		RequiredBy: map[string][]string{"SEARCH_KEY": {"tool search", "sub-agent worker"}, "TEAM": {"prompt lead"}},
	}
	want := "required variables not set: SEARCH_KEY (the search key; required by tool search, sub-agent worker), " +
		"TEAM (required by prompt lead); set them on the thread, agent, prompt, user or instance"
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err.Error(), want)
	}
}
