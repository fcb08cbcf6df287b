package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/thread"
)

// budget is a caller's budget of model requests as a platform keeps it (CallerRules.Spend):
// left requests may go; each is charged its tokens.
type budget struct {
	mu      sync.Mutex
	left    int
	charged int64
	asked   []string
}

func (b *budget) rules(context.Context, string, json.RawMessage, []string) agent.CallerRules {
	return agent.CallerRules{Spend: func(_ context.Context, name string) (func(context.Context, *model.Usage), *agent.Budget) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.asked = append(b.asked, name)
		if b.left == 0 {
			return nil, &agent.Budget{Limit: "team-tokens", Message: "the limit \"team-tokens\" is reached", RetryAt: time.Now().Add(time.Hour)}
		}
		b.left--
		return func(_ context.Context, u *model.Usage) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if u != nil {
				b.charged += u.InputTokens + u.OutputTokens
			}
		}, nil
	}}
}

func (b *budget) set(left int) {
	b.mu.Lock()
	b.left = left
	b.mu.Unlock()
}

// A run whose budget is reached stops before its next model request, paused with
// budget_exhausted on the thread (and its tags); resumed once there is room, it goes on from
// there without running a call again. A blocking sub-agent stopped by the same budget answers
// its parent's call saying so.
func TestBudgetPausesTheRun(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := newTree(t, st)
		b := &budget{left: 2}
		f.r.Rules = b.rules
		f.agent(&agent.Agent{Name: "helper", Type: agent.DualAI, ExposeAsTool: true, Description: "Helps.", Prompt: &agent.Prompt{Name: "helper"}})
		f.ms.add("helper", model.Response{Text: "helped"})
		lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"echo", "helper"}}})
		f.ms.add("lead",
			model.Response{ToolCalls: calls(call("c1", "echo", `{"text":"once"}`)), Usage: model.Usage{InputTokens: 10, OutputTokens: 1}},
			model.Response{ToolCalls: calls(call("c2", "helper", `{"message":"help"}`)), Usage: model.Usage{InputTokens: 20, OutputTokens: 2}},
			model.Response{Text: "done", Usage: model.Usage{InputTokens: 30, OutputTokens: 3}})
		th := f.root(t, lead)

		out, err := f.r.Run(ctx, th, lead, "go")
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != agent.RunPaused || out.Reason != agent.ReasonBudgetExhausted || out.Budget == nil || out.Budget.Limit != "team-tokens" ||
			out.Pending != nil || out.Steps != 2 {
			t.Fatalf("outcome %+v", out)
		}
		// The helper's run was stopped by the budget before its first request: the lead's
		// call says so, and the lead then stopped too.
		if r := resultOf(t, th, "c2"); r.IsError() || !strings.Contains(r.Text, "budget_exhausted") || !strings.Contains(r.Text, "team-tokens") {
			t.Fatalf("the helper's call: %+v", r)
		}
		info, err := th.Refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(info.Tags, agent.BudgetTag) || !slices.Contains(info.Tags, agent.WaitingTag) {
			t.Fatalf("tags %v", info.Tags)
		}
		if st := agent.ReadState(&info); st.Outcome == nil || st.Outcome.Budget == nil || st.Outcome.Budget.RetryAt.IsZero() {
			t.Fatalf("the thread's outcome %+v", st.Outcome)
		}
		if b.charged != 33 {
			t.Fatalf("charged %d tokens, want the two requests' 33", b.charged)
		}

		// Still no room: it stops again, having asked no model.
		if out, err = f.r.Resume(ctx, th, lead); err != nil || out.Reason != agent.ReasonBudgetExhausted {
			t.Fatalf("resumed without room: %+v %v", out, err)
		}
		b.set(10)
		if out, err = f.r.Resume(ctx, th, lead); err != nil || out.Status != agent.RunFinished || out.Text != "done" {
			t.Fatalf("resumed with room: %+v %v", out, err)
		}
		if got := f.ran.list(); !slices.Equal(got, []string{th.ID() + ":echo:once"}) {
			t.Fatalf("echo ran %v, want once", got)
		}
		info, _ = th.Refresh(ctx)
		if slices.Contains(info.Tags, agent.BudgetTag) || slices.Contains(info.Tags, agent.WaitingTag) {
			t.Fatalf("tags after the run finished: %v", info.Tags)
		}
		// The helper's thread is paused for the budget too, and goes on by itself when resumed.
		kids, err := th.Children(ctx)
		if err != nil || len(kids) != 1 {
			t.Fatalf("children %v %v", kids, err)
		}
		child, err := thread.Open(ctx, st, "wsp_tree", kids[0].Ref)
		if err != nil {
			t.Fatal(err)
		}
		if info := child.Info(); agent.ReadState(&info).Outcome == nil || agent.ReadState(&info).Outcome.Reason != agent.ReasonBudgetExhausted {
			t.Fatalf("the helper's outcome %+v", agent.ReadState(&info).Outcome)
		}
		if out, err := f.r.Resume(ctx, child, f.cat.Agents["helper"]); err != nil || out.Text != "helped" {
			t.Fatalf("the helper resumed: %+v %v", out, err)
		}
	})
}
