package agent_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
)

// A sub-agent is entitled as its parent's caller and for its whole chain: a rule on the parent
// agent limits the child too. The runner asks the platform's Entitlements with the caller the
// run's context carries and the chain of agents, the parent first; the child's model is
// offered only what that allows, and its call of anything else is refused as not_entitled.
func TestChildEntitledAsItsParentsCaller(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := moreTree(t, st)
		var mu sync.Mutex
		var asked []string
		f.r.Entitlements = func(_ context.Context, _ string, caller json.RawMessage, agents []string) func(context.Context) func(*quiver.Tool) bool {
			mu.Lock()
			asked = append(asked, string(caller)+" as "+jsonOf(agents))
			mu.Unlock()
			if !slices.Contains(agents, "lead") {
				return nil
			}
			// A rule on lead: no secret_tool for it, nor for anything it spawns.
			return func(context.Context) func(*quiver.Tool) bool {
				return func(t *quiver.Tool) bool { return t.Name() != "secret_tool" }
			}
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
