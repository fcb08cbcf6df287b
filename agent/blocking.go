package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// runBlocking runs the child to its end (or pause) and makes the call's result of it.
func (r *Runner) runBlocking(ctx context.Context, parent, child *thread.Thread, t target) (*quiver.Result, error) {
	before, err := lastSeq(ctx, child)
	if err != nil {
		return nil, err
	}
	var out *Outcome
	var crs *run
	info, err := child.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	if info.Status == store.StatusTerminated {
		// The child finished before a crash kept its result from being recorded: its
		// answer is in its history, not to be asked for again.
		out, crs, before = ReadState(&info).Outcome, &run{r: r, th: child}, 0
		if out == nil {
			return quiver.Errorf(quiver.CodeToolError, "sub-agent %s (%s) ended without an answer", t.agent.Name, child.ID()), nil
		}
		if crs.hist, err = child.History(ctx); err != nil {
			return nil, err
		}
	} else {
		out, crs, err = r.runChild(ctx, child, t.agent)
	}
	if errors.Is(err, ErrBusy) {
		return quiver.Errorf(quiver.CodeRejected, "sub-agent %s (%s) is busy with another run in this process; try the call again later", t.agent.Name, child.ID()), nil
	}
	if err != nil {
		return nil, err
	}
	if out.Budget != nil {
		return &quiver.Result{Status: quiver.StatusSuccess, Text: fmt.Sprintf("%s (%s) stopped before its next model request (budget_exhausted): %s. It goes "+
			"on by itself then, and its result will arrive as a message once it has finished.", t.agent.Name, child.ID(), out.Budget.Message)}, nil
	}
	if out.Status == RunPaused {
		return &quiver.Result{Status: quiver.StatusSuccess, Text: fmt.Sprintf("%s (%s) is waiting for %s on its call %s to %s. Its result "+
			"will arrive as a message once it has finished.", t.agent.Name, child.ID(), pauseWhat(out.Pending), out.Pending.Call.ID,
			out.Pending.Call.Name)}, nil
	}
	r.events.emit(Event{Type: EventChildFinished, ThreadID: parent.ID(), Child: &ChildEvent{Ref: child.ID(), Name: child.Name(),
		Agent: t.agent.Name, Parent: parent.ID(), Status: string(out.Status), Text: out.Text}})
	atts, err := crs.attachmentsAfter(ctx, parent, before)
	if err != nil {
		return nil, err
	}
	res := shapeResult(t, out, crs.hist, before)
	res.Attachments = atts
	return res, nil
}

// busyWait bounds how long a blocking call waits for a child another run has (a wake taking a
// grandchild's result, on another node).
const busyWait = 30 * time.Second

// runChild runs a blocking call's child, waiting while another run has it.
func (r *Runner) runChild(ctx context.Context, child *thread.Thread, a *Agent) (*Outcome, *run, error) {
	deadline := time.Now().Add(busyWait)
	for {
		out, crs, err := r.runThread(ctx, child, a, "", false)
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			return out, crs, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func pauseWhat(p *Pending) string {
	if p != nil && p.Reason == ReasonClientTool {
		return "a client's result"
	}
	if p != nil && p.Authorization != nil {
		return "its person to connect " + p.Authorization.Provider + " (waiting_for_authorization)"
	}
	return "a person's decision"
}

func lastSeq(ctx context.Context, th *thread.Thread) (int64, error) {
	page, err := th.Messages(ctx, store.Page{Limit: 1})
	if err != nil || len(page) == 0 {
		return 0, err
	}
	return page[0].Seq, nil
}

// shapeResult is a finished child's result: for a sub-agent its answer, for a prompt tool
// its answer joined with a summary of the calls the flow made, as configured.
func shapeResult(t target, out *Outcome, hist []*store.Message, after int64) *quiver.Result {
	answer := out.Text
	if len(out.Output) > 0 {
		answer = string(out.Output)
	}
	if !t.prompt {
		res := &quiver.Result{Status: quiver.StatusSuccess, Text: answer}
		if len(out.Output) > 0 {
			res.Value = out.Output
		}
		return res
	}
	summary, failures := summarizeCalls(hist, after)
	var parts []string
	if on(t.shaping.IncludeTextResponse) && answer != "" {
		parts = append(parts, answer)
	}
	if on(t.shaping.IncludeToolCalls) && len(summary) > 0 {
		parts = append(parts, "Tool calls:\n"+strings.Join(summary, "\n"))
	}
	text := strings.Join(parts, "\n\n")
	if on(t.shaping.IncludeErrors) && len(failures) > 0 {
		return &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeToolError,
			Error: fmt.Sprintf("prompt %s: %d nested call(s) failed:\n%s\n\n%s", t.agent.Name, len(failures), strings.Join(failures, "\n"), text)}
	}
	return &quiver.Result{Status: quiver.StatusSuccess, Text: text}
}

// summarizeCalls is a line for each result in hist after seq, and a line for each of them that
// failed.
func summarizeCalls(hist []*store.Message, after int64) (summary, failures []string) {
	for _, m := range hist {
		if m.Seq <= after || m.Role != store.RoleTool || m.Result == nil {
			continue
		}
		if quiver.Status(m.Result.Status) == quiver.StatusError {
			failures = append(failures, fmt.Sprintf("- %s failed: %s", m.ToolName, oneLine(m.Result.Error, 300)))
			summary = append(summary, fmt.Sprintf("- %s (error): %s", m.ToolName, oneLine(m.Result.Error, 200)))
			continue
		}
		summary = append(summary, fmt.Sprintf("- %s: %s", m.ToolName, oneLine(m.Content, 200)))
	}
	return summary, failures
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// attachmentsAfter copies the files the run's results attached after seq into dst and
// returns them as references there: every path a thread receives is its own.
func (rs *run) attachmentsAfter(ctx context.Context, dst *thread.Thread, after int64) ([]quiver.Attachment, error) {
	var refs []quiver.Attachment
	for _, m := range rs.hist {
		if m.Seq > after && m.Role == store.RoleTool && m.Result != nil {
			refs = append(refs, attachedRefs(m.Result.Attachments)...)
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	return dst.Files().CopyAttachments(ctx, rs.th, refs)
}

// attachedRefs are the references among a result's attachments (raw, as stored).
func attachedRefs(raw json.RawMessage) []quiver.Attachment {
	var atts []quiver.Attachment
	if len(raw) == 0 || json.Unmarshal(raw, &atts) != nil {
		return nil
	}
	var refs []quiver.Attachment
	for _, a := range atts {
		if a.IsRef() && a.Path != "" {
			refs = append(refs, quiver.Attachment{Path: a.Path, Description: a.Description})
		}
	}
	return refs
}
