package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
)

// A sub-agent is entitled as its parent's caller and for its whole chain: a rule on the parent
// agent limits the child too. The runner asks the platform's Rules with the caller the
// run's context carries and the chain of agents, the parent first; the child's model is
// offered only what that allows, and its call of anything else is refused as not_entitled.
func TestChildEntitledAsItsParentsCaller(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := moreTree(t, st)
		var mu sync.Mutex
		var asked []string
		f.r.Rules = func(_ context.Context, _ string, caller json.RawMessage, agents []string) agent.CallerRules {
			mu.Lock()
			asked = append(asked, string(caller)+" as "+jsonOf(agents))
			mu.Unlock()
			if !slices.Contains(agents, "lead") {
				return agent.CallerRules{}
			}
			// A rule on lead: no secret_tool for it, nor for anything it spawns.
			return agent.CallerRules{Entitled: func(context.Context) func(*quiver.Tool) bool {
				return func(t *quiver.Tool) bool { return t.Name() != "secret_tool" }
			}}
		}
		f.agent(&agent.Agent{Name: "snoop", Type: agent.DualAI, ExposeAsTool: true, Prompt: &agent.Prompt{Name: "snoop", Tools: []string{"echo", "secret_tool"}}})
		sm := f.ms.add("snoop", model.Response{ToolCalls: calls(call("s1", "secret_tool", `{}`))}, model.Response{Text: "tried"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"echo", "secret_tool", "snoop"}}})
		lm := f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "snoop", `{"message":"look"}`))}, model.Response{Text: "lead done"})
		th := f.root(t, lead)
		ctx := agent.WithCaller(context.Background(), json.RawMessage(`{"key":"key_support"}`))
		if out, err := f.r.Run(ctx, th, lead, "go"); err != nil || out.Text != "lead done" {
			t.Fatalf("outcome %+v, %v", out, err)
		}
		if got := offered(lm.requests()[0]); slices.Contains(got, "secret_tool") {
			t.Errorf("lead was offered %v", got)
		}
		if got := offered(sm.requests()[0]); !reflect.DeepEqual(got, []string{"echo"}) {
			t.Errorf("the child was offered %v, want [echo]", got)
		}
		wantCode(t, resultOf(t, onlyKid(t, th), "s1"), quiver.CodeNotEntitled)
		if slices.Contains(f.ran.list(), "secret_tool") {
			t.Error("secret_tool ran in the child")
		}
		mu.Lock()
		defer mu.Unlock()
		for _, want := range []string{`{"key":"key_support"} as ["lead"]`, `{"key":"key_support"} as ["lead","snoop"]`} {
			if !slices.Contains(asked, want) {
				t.Errorf("the runner asked %q, not %q", asked, want)
			}
		}
	})
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The rules' Observe is told of every call of the run, with its result, and Request of every
// model request, with the model's name and usage: what a platform meters usage by.
func TestRulesObserveCallsAndRequests(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		var mu sync.Mutex
		var seen []string
		f.r.Rules = func(_ context.Context, _ string, _ json.RawMessage, agents []string) agent.CallerRules {
			return agent.CallerRules{
				Observe: func(_ context.Context, c *quiver.Call, r *quiver.Result, took time.Duration) {
					mu.Lock()
					defer mu.Unlock()
					seen = append(seen, fmt.Sprintf("call %s %s %s by %v", c.Name, r.Status, r.Code, agents))
					if took <= 0 {
						t.Errorf("call %s took %v", c.Name, took)
					}
				},
				Request: func(_ context.Context, name string, u *model.Usage, _ time.Duration, err error) {
					mu.Lock()
					defer mu.Unlock()
					seen = append(seen, fmt.Sprintf("request %s %d/%d %v", name, u.InputTokens, u.OutputTokens, err))
				},
			}
		}
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"echo"}}})
		f.ms.add("lead", model.Response{ToolCalls: calls(call("c1", "echo", `{"text":"hi"}`), call("c2", "nothing", `{}`)), Usage: model.Usage{InputTokens: 100, OutputTokens: 7}},
			model.Response{Text: "done", Usage: model.Usage{InputTokens: 130, OutputTokens: 2}})
		th := f.root(t, lead)
		if out, err := f.r.Run(context.Background(), th, lead, "go"); err != nil || out.Text != "done" {
			t.Fatalf("outcome %+v, %v", out, err)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []string{"request t:lead 100/7 <nil>", "call echo success  by [lead]", "call nothing error unknown_tool by [lead]", "request t:lead 130/2 <nil>"}
		slices.Sort(want)
		slices.Sort(seen)
		if !reflect.DeepEqual(seen, want) {
			t.Errorf("observed\n%q\nwant\n%q", seen, want)
		}
	})
}
