package agent

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/quiverhq/quiver/store"
)

// A two-sided dual-AI agent (Agent.SideB set) is two prompts taking turns on one thread:
// side_a (Agent.Prompt) and side_b, each with its own system text, model, tools and policy.
// A turn is one side's run of model steps and calls until it answers without calls; then the
// other side takes its turn, seeing the first side's answers as the other party's (user)
// messages and none of its calls. The conversation ends by its rules (Conversation): a turn
// cap, a side's stop tool or structured output, or an answer containing Conversation.Until.
//
// Who acts is read from the thread, so that a run resumed after a crash goes on with the
// right side whatever it was doing: the side of the last model turn, or, after a message
// from outside (a parent, a person), the side it is addressed to (a user message to side_a,
// an assistant message to side_b, as Resumable.ReceivesMessages sends them). The thread's
// CurrentSide follows it for readers; the history is the truth.

// Conversation is the rules of a two-sided dual-AI agent's turns.
type Conversation struct {
	// MaxTurns bounds the turns of both sides together after each message from outside; 0
	// means DefaultMaxTurns.
	MaxTurns int `json:"max_turns,omitempty"`
	// Until ends the conversation after a turn whose answer contains it (case-sensitive);
	// empty means no such condition.
	Until string `json:"until,omitempty"`
	// Answer is the side whose last answer is the conversation's answer (what a sub-agent
	// returns to its parent): side_a (the default) or side_b.
	Answer string `json:"answer,omitempty"`
}

// DefaultMaxTurns bounds a two-sided conversation whose agent sets no MaxTurns.
const DefaultMaxTurns = 10

// maxTurnsLimit bounds what a definition may ask for: every turn is at least one model
// request.
const maxTurnsLimit = 1000

// maxUntilBytes bounds Conversation.Until, a phrase.
const maxUntilBytes = 1000

func (t Conversation) maxTurns() int {
	if t.MaxTurns > 0 {
		return t.MaxTurns
	}
	return DefaultMaxTurns
}

func (t Conversation) answer() string {
	if t.Answer == "" {
		return SideA
	}
	return t.Answer
}

// Reasons a two-sided conversation ends, besides a stop tool and a structured output.
const (
	ReasonMaxTurns Reason = "max_turns" // Conversation.MaxTurns turns were taken
	ReasonUntil    Reason = "until"     // an answer contained Conversation.Until
)

// TwoSided reports whether the agent is two prompts taking turns (SideB set).
func (a *Agent) TwoSided() bool { return a.SideB != nil }

// checkSides reports what is wrong with the agent's sides and turns.
func (a *Agent) checkSides() error {
	if a.SideB == nil {
		if a.Conversation != (Conversation{}) {
			return fmt.Errorf("%w: agent %s: conversation applies to a two-sided dual_ai agent, and it has no side_b", ErrDefinition, a.Name)
		}
		return nil
	}
	if a.Type != DualAI {
		return fmt.Errorf("%w: agent %s: side_b makes a two-sided agent, which must be of type dual_ai (it is %q)", ErrDefinition, a.Name, a.typeOrDefault())
	}
	if err := a.SideB.Check(); err != nil {
		return fmt.Errorf("agent %s: side_b: %w", a.Name, err)
	}
	if err := a.Conversation.check(); err != nil {
		return fmt.Errorf("%w: agent %s: %v", ErrDefinition, a.Name, err)
	}
	return nil
}

// check reports what is wrong with a two-sided agent's turns.
func (t Conversation) check() error {
	switch {
	case t.MaxTurns < 0 || t.MaxTurns > maxTurnsLimit:
		return fmt.Errorf("conversation.max_turns %d: want 0 (the default, %d) to %d", t.MaxTurns, DefaultMaxTurns, maxTurnsLimit)
	case len(t.Until) > maxUntilBytes:
		return fmt.Errorf("conversation.until is %d bytes, over the limit of %d", len(t.Until), maxUntilBytes)
	case t.Answer != "" && t.Answer != SideA && t.Answer != SideB:
		return fmt.Errorf("conversation.answer %q: want side_a or side_b", t.Answer)
	}
	return nil
}

func (a *Agent) typeOrDefault() AgentType {
	if a.Type == "" {
		return HumanFacing
	}
	return a.Type
}

// promptFor is the prompt the side runs: side_b's for side_b, the agent's own otherwise.
func (a *Agent) promptFor(side string) *Prompt {
	if side == SideB && a.SideB != nil {
		return a.SideB
	}
	return a.Prompt
}

// Prompts are the agent's prompts: its own and, for a two-sided agent, side_b's.
func (a *Agent) Prompts() []*Prompt {
	if a.SideB != nil && a.SideB != a.Prompt {
		return []*Prompt{a.Prompt, a.SideB}
	}
	return []*Prompt{a.Prompt}
}

func otherSide(side string) string {
	if side == SideA {
		return SideB
	}
	return SideA
}

// executionSide is the side a call runs for, as the handler's execution state says: the
// acting side of a two-sided agent, side_a for a dual-AI agent of one prompt, "" otherwise.
func (rs *run) executionSide() string {
	if rs.side != "" {
		return rs.side
	}
	if rs.agent != nil && rs.agent.Type == DualAI {
		return SideA
	}
	return ""
}

// actingSide reads from hist who acts now in a two-sided conversation (see the comment at
// the top of this file); current is the thread's CurrentSide, for a history that says nothing.
func actingSide(hist []*store.Message, current string) string {
	for i := len(hist) - 1; i >= 0; i-- {
		switch m := hist[i]; {
		case m.Side != "":
			return m.Side
		case m.Role == store.RoleUser:
			return SideA
		case m.Role == store.RoleAssistant:
			return SideB // a message from outside in side_a's voice, addressed to side_b
		}
		// A tool result belongs to its call's turn and a system notice to nobody: look further.
	}
	if current == SideB {
		return SideB
	}
	return SideA
}

// turnsTaken counts the turns answered since the last message from outside.
func turnsTaken(hist []*store.Message) int {
	n := 0
	for i := len(hist) - 1; i >= 0; i-- {
		m := hist[i]
		if m.Side != "" {
			if len(m.ToolCalls) == 0 {
				n++
			}
			continue
		}
		if m.Role == store.RoleUser || m.Role == store.RoleAssistant {
			break
		}
	}
	return n
}

// setSide makes side the acting one: its prompt, tools and model from the next step, the
// thread's CurrentSide, and its prompt's immediate sub-agents started. It is a no-op when side
// acts already.
func (rs *run) setSide(ctx context.Context, side string) error {
	if side == rs.side {
		return nil
	}
	rs.side = side
	if err := rs.r.prepareInto(ctx, rs, rs.agent, true); err != nil {
		return err
	}
	if _, err := rs.th.Update(ctx, func(t *store.Thread) error {
		t.CurrentSide = side
		return nil
	}); err != nil {
		return err
	}
	return rs.startImmediate(ctx) // the side's prompt becomes active
}

// followSide sets the acting side from the history, for a two-sided agent.
func (rs *run) followSide(ctx context.Context) error {
	if rs.agent == nil || !rs.agent.TwoSided() {
		return nil
	}
	return rs.setSide(ctx, actingSide(rs.hist, rs.th.Info().CurrentSide))
}

// turnEnded decides, after the acting side answered without calls (last), whether the
// conversation ends (with the reason) or goes on with the other side, whose turn it then
// makes.
func (rs *run) turnEnded(ctx context.Context, last *store.Message) (end bool, reason Reason, err error) {
	a := rs.agent
	switch {
	case rs.outputOf(last) != nil && rs.prompt.Stop.onOutput():
		return true, ReasonOutput, nil
	case a.Conversation.Until != "" && strings.Contains(last.Content, a.Conversation.Until):
		return true, ReasonUntil, nil
	case turnsTaken(rs.hist) >= a.Conversation.maxTurns():
		return true, ReasonMaxTurns, nil
	}
	return false, "", rs.setSide(ctx, otherSide(rs.side))
}

// sideView is the history as side sees it: its own turns as they were (its calls and their
// results included), the other side's answers as user messages, and none of the other side's
// calls. Messages from outside reach both sides: a user message as it is, an assistant one
// (side_a's voice) as side_a's own and as a user message to side_b. A provider wants a
// conversation to open with a user message; one that would not gets a short one first.
func sideView(hist []*store.Message, side string) []*store.Message {
	callSide := map[string]string{}
	out := make([]*store.Message, 0, len(hist)+1)
	for _, m := range hist {
		if v := viewOf(m, side, callSide); v != nil {
			out = append(out, v)
		}
	}
	if len(out) > 0 && out[0].Role == store.RoleAssistant {
		out = append([]*store.Message{{Role: store.RoleUser, Content: conversationOpens}}, out...)
	}
	return out
}

// viewOf is m as side sees it, nil when it does not; callSide records which side made each
// call, as the history goes.
func viewOf(m *store.Message, side string, callSide map[string]string) *store.Message {
	switch m.Role {
	case store.RoleAssistant:
		voice := cmp.Or(m.Side, SideA)
		for _, c := range m.ToolCalls {
			callSide[c.ID] = voice
		}
		switch {
		case voice == side:
			return m
		case len(m.ToolCalls) == 0 && m.Content != "":
			return &store.Message{ID: m.ID, ThreadID: m.ThreadID, Seq: m.Seq, Role: store.RoleUser, Content: m.Content, CreatedAt: m.CreatedAt}
		}
		return nil
	case store.RoleTool:
		if callSide[m.ToolCallID] == side {
			return m
		}
		return nil
	}
	return m
}

const conversationOpens = "(The conversation begins.)"

// answerOf is the message whose text is a two-sided conversation's answer: the last answer
// of the answering side, else the last answer of either.
func (rs *run) answerOf() *store.Message {
	want := rs.agent.Conversation.answer()
	var any *store.Message
	for i := len(rs.hist) - 1; i >= 0; i-- {
		m := rs.hist[i]
		if m.Role != store.RoleAssistant || m.Side == "" || len(m.ToolCalls) > 0 {
			continue
		}
		if m.Side == want {
			return m
		}
		if any == nil {
			any = m
		}
	}
	return any
}
