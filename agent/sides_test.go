package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store"
)

// sidesFixture is a tree fixture with a tool that records the side each call ran for.
func sidesFixture(t *testing.T, st treeStore) *treeFixture {
	f := newTree(t, st)
	if err := f.reg.Register(quiver.Func("whoami", "Says which side calls.", func(ctx context.Context, _ struct{}) (string, error) {
		e, _ := quiver.ExecutionFrom(ctx)
		f.ran.add("whoami:" + e.Side)
		return "you are " + e.Side, nil
	}), quiver.Func("finish", "Ends the conversation.", func(ctx context.Context, _ struct{}) (string, error) {
		f.ran.add("finish")
		return "finished", nil
	})); err != nil {
		t.Fatal(err)
	}
	return f
}

// debate is a two-sided agent: a writer (side_a) and a critic (side_b) with tools of their
// own.
func debate(f *treeFixture, conv agent.Conversation, criticStop ...string) *agent.Agent {
	critic := &agent.Prompt{Name: "critic", System: "You critique slogans.", Model: "t:critic", Tools: []string{"whoami", "finish"},
		Stop: agent.StopRules{Tools: criticStop}}
	return f.agent(&agent.Agent{Name: "debate", Type: agent.DualAI, ExposeAsTool: true, Conversation: conv,
		Prompt: &agent.Prompt{Name: "writer", System: "You write slogans.", Model: "t:writer", Tools: []string{"whoami"}},
		SideB:  critic})
}

func sidesOf(hist []*store.Message) []string {
	var out []string
	for _, m := range hist {
		if m.Role == store.RoleAssistant {
			out = append(out, m.Side)
		}
	}
	return out
}

func lastUser(req *model.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser {
			return req.Messages[i].Text
		}
	}
	return ""
}

// TestTwoSidedAgentTakesTurns: the two sides of a dual-AI agent take turns on one thread,
// each with its own system text, model and tools, each seeing the other's answers as the
// other party's and none of its calls; handlers know the side; the conversation ends on its
// until phrase with side_a's last answer.
func TestTwoSidedAgentTakesTurns(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := sidesFixture(t, st)
		a := debate(f, agent.Conversation{Until: "APPROVED"})
		writer := f.ms.add("writer",
			model.Response{ToolCalls: calls(call("w1", "whoami", `{}`))},
			model.Response{Text: "Slogan v1"},
			model.Response{Text: "Slogan v2"})
		critic := f.ms.add("critic",
			model.Response{ToolCalls: calls(call("c1", "whoami", `{}`))},
			model.Response{Text: "Too long"},
			model.Response{Text: "APPROVED"})
		th := f.root(t, a)
		out, err := f.r.Run(ctx, th, a, "A slogan for Go")
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != agent.RunFinished || out.Reason != agent.ReasonUntil || out.Text != "Slogan v2" || out.Side != agent.SideA {
			t.Fatalf("outcome %+v", out)
		}
		hist := history(t, th)
		if got, want := sidesOf(hist), []string{"side_a", "side_a", "side_b", "side_b", "side_a", "side_b"}; !slices.Equal(got, want) {
			t.Fatalf("turns by %v, want %v; history %s", got, want, dump(hist))
		}
		if got := f.ran.list(); !slices.Equal(got, []string{"whoami:side_a", "whoami:side_b"}) {
			t.Fatalf("handlers saw %v", got)
		}
		// What each side was sent.
		if len(critic.reqs) != 3 || len(writer.reqs) != 3 {
			t.Fatalf("writer asked %d times, critic %d", len(writer.reqs), len(critic.reqs))
		}
		first := critic.reqs[0]
		if !strings.Contains(first.System, "You critique slogans.") || lastUser(first) != "Slogan v1" {
			t.Fatalf("the critic's first request: system %q, last user %q", first.System, lastUser(first))
		}
		for _, m := range first.Messages {
			if m.Role == model.RoleTool || len(m.ToolCalls) > 0 || m.Role == model.RoleAssistant {
				t.Fatalf("the critic saw the writer's calls or its own words: %+v", first.Messages)
			}
		}
		if first.Messages[0].Text != "A slogan for Go" {
			t.Fatalf("the critic was not given the brief: %+v", first.Messages)
		}
		third := writer.reqs[2]
		if !strings.Contains(third.System, "You write slogans.") || lastUser(third) != "Too long" {
			t.Fatalf("the writer's third request: system %q, last user %q", third.System, lastUser(third))
		}
		for _, m := range third.Messages {
			if m.ToolCallID == "c1" || slices.ContainsFunc(m.ToolCalls, func(c model.ToolCall) bool { return c.ID == "c1" }) {
				t.Fatalf("the writer saw the critic's call: %+v", third.Messages)
			}
		}
		if !slices.ContainsFunc(offered(critic.reqs[0]), func(s string) bool { return s == "finish" }) ||
			slices.ContainsFunc(offered(writer.reqs[0]), func(s string) bool { return s == "finish" }) {
			t.Fatalf("each side is offered its own tools: writer %v, critic %v", offered(writer.reqs[0]), offered(critic.reqs[0]))
		}
		info, _ := th.Refresh(ctx)
		if info.CurrentSide != agent.SideB {
			t.Fatalf("current side %q after the critic's turn", info.CurrentSide)
		}
	})
}

// TestTwoSidedStopRules: the conversation ends at its turn cap, or when a side calls one of its
// stop tools; its answer is the answering side's last.
func TestTwoSidedStopRules(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		t.Run("turn cap", func(t *testing.T) {
			f := sidesFixture(t, st)
			a := debate(f, agent.Conversation{MaxTurns: 3})
			f.ms.add("writer", model.Response{Text: "a1"}, model.Response{Text: "a2"}, model.Response{Text: "a3"}, model.Response{Text: "a4"})
			f.ms.add("critic", model.Response{Text: "b1"}, model.Response{Text: "b2"})
			th := f.root(t, a)
			out, err := f.r.Run(ctx, th, a, "go")
			if err != nil {
				t.Fatal(err)
			}
			if out.Reason != agent.ReasonMaxTurns || out.Text != "a2" || len(sidesOf(history(t, th))) != 3 {
				t.Fatalf("outcome %+v; history %s", out, dump(history(t, th)))
			}
			// A new message starts a new exchange, with side_a, under the same cap.
			out, err = f.r.Run(ctx, th, a, "again")
			if err != nil {
				t.Fatal(err)
			}
			if out.Reason != agent.ReasonMaxTurns || out.Text != "a4" {
				t.Fatalf("second outcome %+v; history %s", out, dump(history(t, th)))
			}
		})
		t.Run("stop tool, side_b answers", func(t *testing.T) {
			f := sidesFixture(t, st)
			a := debate(f, agent.Conversation{Answer: agent.SideB}, "finish")
			f.ms.add("writer", model.Response{Text: "draft"})
			f.ms.add("critic", model.Response{Text: "verdict: fine", ToolCalls: calls(call("f1", "finish", `{}`))})
			th := f.root(t, a)
			out, err := f.r.Run(ctx, th, a, "go")
			if err != nil {
				t.Fatal(err)
			}
			// The critic's only words came with its call: the answer is the last answer of a
			// side, the writer's.
			if out.Reason != agent.ReasonStopTool || out.Text != "draft" || !slices.Equal(f.ran.list(), []string{"finish"}) {
				t.Fatalf("outcome %+v, ran %v", out, f.ran.list())
			}
		})
	})
}

// TestTwoSidedSubagent: a two-sided agent as a blocking sub-agent returns its answer to the
// parent; as a resumable one whose messages go to side_b, the parent's message makes side_b
// act.
func TestTwoSidedSubagent(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		t.Run("blocking", func(t *testing.T) {
			f := sidesFixture(t, st)
			debate(f, agent.Conversation{Until: "OK"})
			f.ms.add("writer", model.Response{Text: "Go: simple."})
			f.ms.add("critic", model.Response{Text: "OK"})
			lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead", Tools: []string{"debate"}}})
			f.ms.add("lead", model.Response{ToolCalls: calls(call("d1", "debate", `{"message":"a slogan"}`))}, model.Response{Text: "done"})
			th := f.root(t, lead)
			if _, err := f.r.Run(ctx, th, lead, "go"); err != nil {
				t.Fatal(err)
			}
			if r := resultOf(t, th, "d1"); r.IsError() || r.Text != "Go: simple." {
				t.Fatalf("the sub-agent's result %+v", r)
			}
		})
		t.Run("resumable, messages to side_b", func(t *testing.T) {
			f := sidesFixture(t, st)
			debate(f, agent.Conversation{MaxTurns: 2, Answer: agent.SideB})
			// The parent's message, in side_a's voice, is one of the writer's turns as it sees them.
			f.ms.add("writer", model.Response{Text: "w1"}, model.Response{}, model.Response{Text: "w2"})
			critic := f.ms.add("critic", model.Response{Text: "c1"}, model.Response{Text: "c2"})
			lead := f.agent(&agent.Agent{Name: "lead", Prompt: &agent.Prompt{Name: "lead",
				Subagents: []agent.Subagent{{Name: "debate", Resumable: &agent.Resumable{ReceivesMessages: agent.SideB}}}}})
			f.ms.add("lead",
				model.Response{ToolCalls: calls(call("s1", agent.ToolSubagentCreate, `{"agent":"debate","name":"d","message":"start"}`))},
				model.Response{ToolCalls: calls(call("s2", agent.ToolSubagentMessage, `{"ref":"d","message":"critique this"}`))},
				model.Response{Text: "done"})
			th := f.root(t, lead)
			if out, err := f.r.Run(ctx, th, lead, "go"); err != nil || out.Text != "done" {
				t.Fatalf("run: %+v %v", out, err)
			}
			if r := resultOf(t, th, "s1"); r.IsError() || !strings.HasSuffix(r.Text, "\nc1") {
				t.Fatalf("the first exchange: %+v", r)
			}
			// The message went to side_b, which answered it first; then side_a took its turn.
			if r := resultOf(t, th, "s2"); r.IsError() || !strings.HasSuffix(r.Text, "\nc2") {
				t.Fatalf("the second exchange: %+v", r)
			}
			if len(critic.reqs) != 2 || lastUser(critic.reqs[1]) != "critique this" {
				t.Fatalf("the critic was not sent the parent's message: %d requests", len(critic.reqs))
			}
			kids, err := th.Children(ctx)
			if err != nil || len(kids) != 1 {
				t.Fatalf("children %v %v", kids, err)
			}
			child, err := th.Child(ctx, kids[0].Ref)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := sidesOf(history(t, child)), []string{"side_a", "side_b", "", "side_b", "side_a"}; !slices.Equal(got, want) {
				t.Fatalf("the child's assistant messages by %v, want %v", got, want)
			}
		})
	})
}

// TestTwoSidedDefinitions: a two-sided agent loads from its files, in either spelling, and a
// definition that is not one is refused, saying what is wrong.
func TestTwoSidedDefinitions(t *testing.T) {
	prompts := map[string]string{
		"writer.yaml": "kind: prompt\nname: writer\nsystem: You write.\n",
		"critic.yaml": "kind: prompt\nname: critic\nsystem: You criticise.\ntools: [echo]\nvariables: [{name: TONE, type: text, required: true, description: How harsh.}]\n",
	}
	with := func(debate string) string {
		files := map[string]string{"debate.yaml": debate}
		for k, v := range prompts {
			files[k] = v
		}
		return writeFiles(t, files)
	}
	cat, err := agent.LoadDir(with("name: debate\ntype: dual_ai\nsideA: writer\nside_b: critic\nconversation: {maxTurns: 4, until: DONE, answer: side_b}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := cat.Agents["debate"]
	if a.Prompt != cat.Prompts["writer"] || a.SideB != cat.Prompts["critic"] || !a.TwoSided() ||
		a.Conversation != (agent.Conversation{MaxTurns: 4, Until: "DONE", Answer: agent.SideB}) {
		t.Fatalf("loaded %+v", a)
	}
	if got := len(a.Prompts()); got != 2 {
		t.Fatalf("%d prompts", got)
	}

	for _, tt := range []struct{ name, def, want string }{
		{"side_b without side_a", "name: debate\ntype: dual_ai\nside_b: critic\n", "names side_b \"critic\" but not side_a"},
		{"an unknown side_b", "name: debate\ntype: dual_ai\nside_a: writer\nside_b: nobody\n", "side_b \"nobody\", which is not a prompt"},
		{"not dual_ai", "name: debate\nside_a: writer\nside_b: critic\n", "must be of type dual_ai"},
		{"conversation without side_b", "name: debate\ntype: dual_ai\nside_a: writer\nconversation: {max_turns: 3}\n", "has no side_b"},
		{"too many turns", "name: debate\ntype: dual_ai\nside_a: writer\nside_b: critic\nconversation: {max_turns: 5000}\n", "max_turns 5000"},
		{"a long until", "name: debate\ntype: dual_ai\nside_a: writer\nside_b: critic\nconversation: {until: " + strings.Repeat("x", 1001) + "}\n", "until is 1001 bytes"},
		{"a third side", "name: debate\ntype: dual_ai\nside_a: writer\nside_b: critic\nconversation: {answer: side_c}\n", "answer \"side_c\""},
		{"prompt and side_a apart", "name: debate\ntype: dual_ai\nprompt: critic\nside_a: writer\nside_b: critic\n", "name it once"},
		{"inline fields besides", "name: debate\ntype: dual_ai\nside_a: writer\nside_b: critic\nsystem: hi\n", "do one or the other"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agent.LoadDir(with(tt.def))
			if !errors.Is(err, agent.ErrDefinition) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an ErrDefinition saying %q", err, tt.want)
			}
		})
	}
}

// TestTwoSidedRequiredVariables: a thread of a two-sided agent needs side_b's variables too.
func TestTwoSidedRequiredVariables(t *testing.T) {
	backends(t, func(t *testing.T, st treeStore) {
		f := sidesFixture(t, st)
		a := debate(f, agent.Conversation{})
		a.SideB.Variables = quiver.Variables{{Name: "TONE", Type: quiver.VarText, Required: true, Description: "How harsh."}}
		decls, err := f.r.Declarations(ctx, "wsp_tree", a)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(decls, func(d agent.Declaration) bool { return d.Name == "TONE" && d.By == "prompt critic" }) {
			t.Fatalf("side_b's variable is not declared: %+v", decls)
		}
		th := f.root(t, a)
		if _, err := f.r.Run(ctx, th, a, "go"); err == nil || !strings.Contains(err.Error(), "TONE") {
			t.Fatalf("a run without side_b's required variable: %v", err)
		}
	})
}
