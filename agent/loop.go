package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// pendingIn returns the calls of hist that have no result in hist, in order. They come from the
// same read as the history, so the two cannot disagree: read apart, a write landing between
// them would show a resumed run a turn's calls in its history but not among the pending ones.
func pendingIn(hist []*store.Message) []quiver.Call {
	answered := map[string]bool{}
	for _, m := range hist {
		if m.Role == store.RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	var out []quiver.Call
	for _, m := range hist {
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				out = append(out, quiver.Call{ID: c.ID, Name: c.Name, Args: thread.CallArgs(c.Args), Reasoning: c.Reasoning})
			}
		}
	}
	return out
}

func (rs *run) loop(ctx context.Context) (*Outcome, error) {
	steps := 0 // this run's, or this turn's for a two-sided agent
	if err := rs.followSide(ctx); err != nil {
		return nil, err
	}
	for {
		paused, stopTool, err := rs.runPending(ctx)
		switch {
		case err != nil:
			return nil, err
		case paused != nil:
			return rs.finish(RunPaused, paused.Reason, paused)
		case stopTool:
			return rs.finish(RunFinished, ReasonStopTool, nil)
		}
		if rs.heldAnswer {
			if out, err := rs.endWithAnswer(ctx); err != nil || out != nil {
				return out, err
			}
		}
		// Messages queued for this step (a child's result, a message sent meanwhile) join the
		// history first, and call for a step even after an answer without calls. Looking is
		// a read; taking them is a write only when there are some.
		took, err := rs.takeQueued(ctx)
		if err == nil && took {
			err = rs.followSide(ctx)
		}
		if err != nil {
			return nil, err
		}
		reason, turnOver, err := rs.answered(ctx, took)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			return rs.finish(RunFinished, reason, nil)
		}
		if turnOver {
			steps = 0 // the other side's turn
		}
		if steps >= rs.prompt.Stop.maxSteps() {
			return rs.finish(RunFinished, ReasonMaxSteps, nil)
		}
		if err := rs.nextStep(ctx); err != nil {
			if b, ok := errors.AsType[*budgetError](err); ok {
				out := rs.outcome(RunPaused, ReasonBudgetExhausted, nil)
				out.Budget = b.budget
				return rs.finished(out), nil
			}
			return nil, err
		}
		steps++
	}
}

// answered reads the model's last answer, when it made no calls and nothing was queued since:
// the reason it ends the run, if it does, or whether it ends a side's turn.
func (rs *run) answered(ctx context.Context, took bool) (Reason, bool, error) {
	last := rs.hist[len(rs.hist)-1]
	if took || len(last.ToolCalls) > 0 {
		return "", false, nil
	}
	if rs.side != "" {
		if last.Side != rs.side {
			return "", false, nil
		}
		end, reason, err := rs.turnEnded(ctx, last)
		return reason, !end && err == nil, err
	}
	if last.Role != store.RoleAssistant {
		return "", false, nil
	}
	return rs.endReason(last), false, nil
}

// endReason is the reason an answer without calls ends the run by the prompt's stop rules,
// or "" when it does not.
func (rs *run) endReason(answer *store.Message) Reason {
	switch {
	case rs.outputOf(answer) != nil && rs.prompt.Stop.onOutput():
		return ReasonOutput
	case rs.prompt.Stop.noCalls():
		return ReasonNoCalls
	}
	return ""
}

// endWithAnswer stores the answer the last step held back and, unless messages were queued
// meanwhile, the run's end with it, in one write: a one-step run waited for two commits
// there. It returns the run's outcome, or nil when the run goes on to take the queued
// messages. An answer that could not be stored is dropped from the run, as when the model
// fails: a try again asks the model again; one stored without the end stays, as it would
// before this write was one.
func (rs *run) endWithAnswer(ctx context.Context) (*Outcome, error) {
	rs.heldAnswer = false
	answer := rs.hist[len(rs.hist)-1]
	out := rs.outcome(RunFinished, rs.endReason(answer), nil)
	info := rs.th.Info()
	terminate := false
	var err error
	if rs.jobDone(&info, out, nil) {
		terminate, err = rs.noLiveChildren(ctx)
	}
	turn := Event{Type: EventModelTurn, ThreadID: rs.th.ID(), Step: rs.steps, Side: rs.side, Text: answer.Content}
	// Offered to the write's transaction, which only ends the run when nothing was queued:
	// a fleet's relay sends them with its commit (Announced).
	ann := &announcement{threadID: rs.th.ID(), events: []Event{turn, rs.endEvent(out)}}
	ended := false
	if err == nil {
		ended, err = rs.th.InjectFinal(withAnnouncement(ctx, ann), func(t *store.Thread) error { return rs.endThread(t, out, nil, terminate) }, answer)
	}
	if err != nil {
		if answer.Seq == 0 { // not stored (a store without AppendFinal stores it before its end)
			rs.hist, rs.steps = rs.hist[:len(rs.hist)-1], rs.steps-1
		}
		return nil, err
	}
	sent := ann.sent && ended
	turn.Relayed = sent
	rs.r.events.emit(turn)
	if !ended {
		return nil, nil
	}
	rs.endWritten = true
	end := ann.events[1]
	end.Relayed = sent
	rs.r.events.emit(end)
	return out, nil
}

// nextStep takes the model's next step, with the tools offered as they now apply.
func (rs *run) nextStep(ctx context.Context) error {
	if err := rs.refreshLifecycle(ctx); err != nil {
		return err
	}
	return rs.step(ctx)
}

// takeQueued moves the thread's queued messages into its history and says whether there were
// any. The append that ended the step before (the results, or the model's answer) usually saw
// the queue in its own transaction already, which spares a read per step (a read transaction
// is half an append on SQLite); a message queued after that append is taken at the next step,
// or by the wake that follows every Queue once this run ends.
func (rs *run) takeQueued(ctx context.Context) (bool, error) {
	if queued, known := rs.th.QueueSeen(); known && !queued {
		return false, nil
	}
	queued, err := rs.th.Queued(ctx)
	if err != nil || len(queued) == 0 {
		return false, err
	}
	moved, err := rs.th.TakeQueued(ctx)
	if err != nil {
		return false, err
	}
	rs.hist = append(rs.hist, moved...)
	return len(moved) > 0, nil
}

// refreshLifecycle offers subagent_create and subagent_message again when whether they apply
// changed since the tools were rendered (a child was started, one reached its cap or ended).
func (rs *run) refreshLifecycle(ctx context.Context) error {
	if !hasResumable(rs.prompt) {
		return nil
	}
	ns, err := rs.r.nested(rs.prompt)
	if err != nil || ns.create == nil {
		return err
	}
	canCreate, canMessage, err := rs.lifecycleNow(ctx, ns.resumable)
	if err != nil || rs.lifecycle == (lifecycleTools{create: canCreate, message: canMessage}) {
		return err
	}
	return rs.r.prepareInto(ctx, rs, rs.agent, true)
}

func hasResumable(p *Prompt) bool {
	return slices.ContainsFunc(p.Subagents, func(s Subagent) bool { return s.Resumable != nil })
}

// switchAgent goes on with the agent a handoff gave the thread to: its prompt, tools, policy
// and model from the next step, with the history as it is.
func (rs *run) switchAgent(ctx context.Context, a *Agent) error {
	rs.handoffTo = nil
	if err := a.Check(); err != nil {
		return err
	}
	rs.side = ""
	if a.TwoSided() {
		rs.side = actingSide(rs.hist, SideA)
	}
	if err := rs.r.prepareInto(ctx, rs, a, true); err != nil {
		return err
	}
	return rs.startImmediate(ctx)
}

// runPending runs the calls that have no result, in order, each result persisted before the
// next call starts. It stops at the first call that must wait.
func (rs *run) runPending(ctx context.Context) (paused *Pending, stopTool bool, err error) {
	ctx = context.WithValue(ctx, runKey{}, rs)
	ctx = thread.WithParentNotifier(ctx, NotifyParent) // for tools that cannot import agent (JavaScript's state.notifyParent)
	if rs.userTokens != nil {
		ctx = quiver.WithUserTokens(ctx, rs.userTokens)
	}
	for len(rs.pending) > 0 {
		c := rs.pending[0]
		if rs.handedOver(c) {
			if err := rs.answerHandedOver(ctx, c); err != nil {
				return nil, false, err
			}
			continue
		}
		p, err := rs.mustWait(ctx, c)
		if err != nil || p != nil {
			return p, false, err
		}
		if err := rs.runCall(ctx, c); err != nil {
			return nil, false, err
		}
		if rs.handoffTo != nil {
			if err := rs.takeOver(ctx); err != nil {
				return nil, false, err
			}
			continue // the stop tools were the agent's that handed over
		}
		stopTool = stopTool || rs.isStopTool(c.Name)
		if err := ctx.Err(); err != nil {
			return nil, false, err // cancelled while the tool ran: stop here, resumable
		}
	}
	return nil, stopTool, nil
}

// runCall dispatches c, announcing it and its result, and takes it off the pending calls.
func (rs *run) runCall(ctx context.Context, c quiver.Call) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	th := rs.th
	call := c
	rs.r.events.emit(Event{Type: EventToolCall, ThreadID: th.ID(), Step: rs.steps, Side: rs.side, Call: &call})
	hctx := quiver.WithExecution(thread.NewContext(ctx, th), quiver.Execution{StepCount: rs.steps, Side: rs.executionSide(),
		CallID: c.ID, Attempt: rs.attempt(c.ID)}) // the call's idempotency key: see attempts.go
	res, err := rs.d.Dispatch(hctx, c)
	switch {
	case errors.Is(err, store.ErrResultExists):
		// Another process stored this call's result first: it is done; read the history
		// again to have that result.
		if rs.hist, err = th.History(ctx); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		rs.r.events.emit(Event{Type: EventToolResult, ThreadID: th.ID(), Step: rs.steps, Side: rs.side, Call: &call, Result: res})
	}
	rs.pending = rs.pending[1:]
	return nil
}

// answerHandedOver answers c, a handoff already recorded (a process died before its result
// was): its result says so, and the rest of the turn is the old agent's.
func (rs *run) answerHandedOver(ctx context.Context, c quiver.Call) error {
	if err := rs.recordOnly(ctx, c, quiver.Text(fmt.Sprintf("The conversation is handed over to %s, who continues from here.", rs.agentName))); err != nil {
		return err
	}
	return rs.cutTurn(ctx)
}

// takeOver goes on with the agent a call handed the thread to. The rest of the turn was asked
// for by the agent that handed over: run under the new agent's policy, it could call what the
// old one may not.
func (rs *run) takeOver(ctx context.Context) error {
	if err := rs.switchAgent(ctx, rs.handoffTo); err != nil {
		return err
	}
	return rs.cutTurn(ctx)
}

// isStopTool reports whether calling the tool name ends the run.
func (rs *run) isStopTool(name string) bool {
	return slices.ContainsFunc(rs.prompt.Stop.Tools, func(p string) bool { return globMatch(p, name) })
}

// handedOver says whether c is a handoff to the agent that has the thread already: the run
// was resumed after the handoff was recorded and before its call's result was.
func (rs *run) handedOver(c quiver.Call) bool {
	if c.Name != rs.agentName {
		return false
	}
	if _, ok := rs.d.Registry.Lookup(c.Name); ok {
		return false // a tool of the agent's own that has its name
	}
	info := rs.th.Info()
	return ReadState(&info).Agent == rs.agentName
}

// cutTurn answers the calls left of a turn whose agent handed the thread over: they are not
// run.
func (rs *run) cutTurn(ctx context.Context) error {
	for len(rs.pending) > 0 {
		c := rs.pending[0]
		res := quiver.Errorf(quiver.CodeRejected, "call %s was not run: the conversation was handed over to %s before it; "+
			"%s decides what to do now.", c.Name, rs.agentName, rs.agentName)
		if err := rs.recordOnly(ctx, c, res); err != nil {
			return err
		}
	}
	return nil
}

// recordOnly stores c's result without running it and takes c off the pending calls.
func (rs *run) recordOnly(ctx context.Context, c quiver.Call, res *quiver.Result) error {
	m, err := rs.th.Record(ctx, &c, res)
	switch {
	case errors.Is(err, store.ErrResultExists):
		if rs.hist, err = rs.th.History(ctx); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		rs.hist = append(rs.hist, m)
		call := c
		rs.r.events.emit(Event{Type: EventToolResult, ThreadID: rs.th.ID(), Step: rs.steps, Side: rs.side, Call: &call, Result: res})
	}
	rs.pending = rs.pending[1:]
	return nil
}

// finish builds the outcome from the thread as it now is.
func (rs *run) finish(status RunStatus, reason Reason, p *Pending) (*Outcome, error) {
	return rs.finished(rs.outcome(status, reason, p)), nil
}

// outcome is the run's outcome as it ends now: how, and its last answer.
func (rs *run) outcome(status RunStatus, reason Reason, p *Pending) *Outcome {
	out := &Outcome{ThreadID: rs.th.ID(), Status: status, Reason: reason, Pending: p, Steps: rs.steps}
	m, output := rs.lastAnswer()
	if m != nil {
		if rs.side != "" {
			out.Side = m.Side
		}
		out.Output = output
		if output == nil {
			out.Text = m.Content
		}
	}
	return out
}

// lastAnswer is the answer a run ends with, and the output it carries: the acting side's, or
// else the last assistant message.
func (rs *run) lastAnswer() (*store.Message, json.RawMessage) {
	if rs.side != "" {
		if m := rs.answerOf(); m != nil {
			return m, rs.outputFor(m)
		}
		return nil, nil
	}
	for i := len(rs.hist) - 1; i >= 0; i-- {
		if m := rs.hist[i]; m.Role == store.RoleAssistant {
			return m, rs.outputOf(m)
		}
	}
	return nil, nil
}

// finished announces the run's outcome.
func (rs *run) finished(out *Outcome) *Outcome {
	rs.r.events.emit(rs.endEvent(out))
	return out
}

// endEvent announces the run's end with out: finished, or paused.
func (rs *run) endEvent(out *Outcome) Event {
	ev := EventFinished
	if out.Status == RunPaused {
		ev = EventPaused
	}
	return Event{Type: ev, ThreadID: rs.th.ID(), Step: out.Steps, Side: out.Side, Outcome: out}
}

// outputOf returns the structured output an assistant message of the acting prompt carries,
// or nil: in composed mode the message's content is the output document.
func (rs *run) outputOf(m *store.Message) json.RawMessage { return outputIn(rs.prompt, m) }

// outputFor is outputOf for a message of either side of a two-sided agent.
func (rs *run) outputFor(m *store.Message) json.RawMessage {
	return outputIn(rs.agent.promptFor(m.Side), m)
}

func outputIn(p *Prompt, m *store.Message) json.RawMessage {
	if p.Output == nil || m.Content == "" {
		return nil
	}
	raw := json.RawMessage(m.Content)
	if !json.Valid(raw) || string(raw) == "null" {
		return nil
	}
	return raw
}
