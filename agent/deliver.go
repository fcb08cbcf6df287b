package agent

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// runInBackground starts a run of th by a: on the runner's Background when set (durable),
// else on a goroutine of this process (see Runner.Wait).
func (r *Runner) runInBackground(ctx context.Context, th *thread.Thread, a *Agent) error {
	if r.Background != nil {
		return r.Background.Run(ctx, th.WorkspaceID(), th.ID(), a.Name)
	}
	r.goRun(ctx, th, a, false)
	return nil
}

// goRun runs th by a on a goroutine Wait waits for, after the run going on it in this process,
// if any (ErrBusy: it tries again every 10 ms); onlyQueued runs it only while it has queued
// messages (a wake).
func (r *Runner) goRun(ctx context.Context, th *thread.Thread, a *Agent, onlyQueued bool) {
	r.goBackground(ctx, func(ctx context.Context) { r.runWhenFree(ctx, th, a, onlyQueued) })
}

// runWhenFree is goRun's goroutine.
func (r *Runner) runWhenFree(ctx context.Context, th *thread.Thread, a *Agent, onlyQueued bool) {
	for {
		if onlyQueued && !hasQueued(ctx, th) {
			return
		}
		_, _, err := r.runThread(ctx, th, a, "", true)
		if !errors.Is(err, ErrBusy) {
			if err != nil {
				r.logger().Warn("agent: a run in the background failed", "thread", th.ID(), "agent", a.Name, "err", err)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func hasQueued(ctx context.Context, th *thread.Thread) bool {
	q, err := th.Queued(ctx)
	return err == nil && len(q) > 0
}

// goBackground runs fn on a goroutine that Wait waits for, with ctx's values but not its end.
func (r *Runner) goBackground(ctx context.Context, fn func(context.Context)) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		fn(context.WithoutCancel(ctx))
	}()
}

// Wait waits for the work this runner started on its own goroutines (non-blocking children and
// the runs of parents taking their results, when the runner has no Background) to end.
func (r *Runner) Wait() { r.bg.Wait() }

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// deliver queues a child's result, or its failure, to its parent (implicit communication), once:
// the message's id is derived from the child's last message, so a run tried again after a crash
// finds it taken. Then the parent is woken to take it.
func (r *Runner) deliver(ctx context.Context, rs *run, out *Outcome, runErr error) {
	sp := rs.spawn
	if sp == nil || sp.Communication == Explicit || (out != nil && out.Status == RunPaused) {
		return
	}
	child := rs.th
	parent, err := child.Parent(ctx)
	if err != nil {
		r.logger().Warn("agent: a child's result has no parent to go to", "thread", child.ID(), "err", err)
		return
	}
	id := rs.deliveryID(runErr != nil)
	text := rs.deliveryText(ctx, parent, out, runErr)
	err = parent.Queue(ctx, &store.Message{ID: id, Role: store.RoleSystem, Content: text})
	if errors.Is(err, store.ErrIDTaken) {
		// Delivered by an earlier try, which may have died before it woke the parent: wake it
		// again (a wake that finds nothing queued ends at once), or the result stays queued
		// on a parent that has finished.
		r.wake(ctx, parent)
		return
	}
	if err != nil {
		r.logger().Warn("agent: queueing a child's result to its parent", "thread", child.ID(), "parent", parent.ID(), "err", err)
		return
	}
	status := "finished"
	if runErr != nil {
		status = "failed"
	}
	r.events.emit(Event{Type: EventChildFinished, ThreadID: parent.ID(), Child: &ChildEvent{Ref: child.ID(), Name: child.Name(),
		Agent: sp.Agent, Parent: parent.ID(), Status: status, Text: text}})
	r.wake(ctx, parent)
}

// deliveryID is the id of the message that delivers a child's end: derived from its last
// message.
func (rs *run) deliveryID(failed bool) string {
	var seq int64
	if len(rs.hist) > 0 {
		seq = rs.hist[len(rs.hist)-1].Seq
	}
	id := fmt.Sprintf("msg_dlv_%s_%d", strings.TrimPrefix(rs.th.ID(), "thr_"), seq)
	if failed {
		id += "_failed"
	}
	return id
}

// deliveryText is what the parent reads of a child's end: its answer and attachments, or that
// it failed. A failure's cause may name what no model should read (a database's address): its
// kind only; the log has the rest.
func (rs *run) deliveryText(ctx context.Context, parent *thread.Thread, out *Outcome, runErr error) string {
	label := fmt.Sprintf("sub-agent %s%s (ref %s)", rs.spawn.Agent, nameSuffix(rs.th.Name()), rs.th.ID())
	if runErr != nil {
		rs.r.logger().Warn("agent: a child's run failed for good; its parent is told", "thread", rs.th.ID(), "parent", parent.ID(), "err", runErr)
		return fmt.Sprintf("[%s failed] its run stopped with an error (%s) and will not answer; the server's log has the details",
			label, errorType(runErr))
	}
	answer := out.Text
	if len(out.Output) > 0 {
		answer = string(out.Output)
	}
	return fmt.Sprintf("[%s finished]\n%s", label, answer) + rs.attachmentsNote(ctx, parent)
}

// attachmentsNote lists the files a child hands over to its parent, or says they could not be
// copied.
func (rs *run) attachmentsNote(ctx context.Context, parent *thread.Thread) string {
	atts, err := rs.attachmentsAfter(ctx, parent, rs.startSeq)
	if err != nil {
		return fmt.Sprintf("\n\n(its attachments could not be copied: %v)", err)
	}
	if len(atts) == 0 {
		return ""
	}
	note := "\n\nAttachments:"
	for _, a := range atts {
		note += fmt.Sprintf("\n- %s (%s, %s, %d bytes)", a.Path, a.Name, a.MimeType, a.Size)
	}
	return note
}

// wake has a thread take its queued messages: on Background, or on a goroutine that waits for
// the run going on it, if any, to end.
func (r *Runner) wake(ctx context.Context, th *thread.Thread) {
	info, err := th.Refresh(ctx)
	if err != nil {
		r.logger().Warn("agent: waking a thread", "thread", th.ID(), "err", err)
		return
	}
	name := CurrentAgent(&info)
	if r.Background != nil {
		if err := r.Background.Wake(ctx, th.WorkspaceID(), th.ID(), name); err != nil {
			r.logger().Warn("agent: waking a thread", "thread", th.ID(), "err", err)
		}
		return
	}
	a, ok := r.catalog().Lookup(name)
	if !ok {
		r.logger().Warn("agent: a thread has queued messages but its agent is unknown to the runner's catalog", "thread", th.ID(), "agent", name)
		return
	}
	r.goRun(ctx, th, a, true)
}

// NotifyParent queues text to the parent of the thread a tool runs on, and wakes it: how a
// child whose parent communication is explicit reports back. It is the runtime function
// tools call; outside a child thread it fails.
func NotifyParent(ctx context.Context, text string) error {
	rs, th := runFrom(ctx), threadFrom(ctx)
	if rs == nil || th == nil || th.ParentID() == "" {
		return errors.New("agent: NotifyParent: the call does not run on a child thread")
	}
	if strings.TrimSpace(text) == "" || len(text) > maxMessageChars {
		return fmt.Errorf("agent: NotifyParent: the text must be 1 to %d bytes, got %d", maxMessageChars, len(text))
	}
	parent, err := th.Parent(ctx)
	if err != nil {
		return err
	}
	label := fmt.Sprintf("sub-agent %s%s (ref %s)", CurrentAgent(ptr(th.Info())), nameSuffix(th.Name()), th.ID())
	msg := &store.Message{ID: noticeID(ctx, th, text), Role: store.RoleSystem, Content: fmt.Sprintf("[%s says]\n%s", label, text)}
	if err := parent.Queue(ctx, msg); err != nil && !errors.Is(err, store.ErrIDTaken) {
		return err
	}
	rs.r.wake(ctx, parent)
	return nil
}

// noticeID is the id of a notice: once per call and text, so that a call dispatched again
// after a crash (its result not recorded) says it again, and finds it said. Outside a call
// it has none.
func noticeID(ctx context.Context, th *thread.Thread, text string) string {
	call := quiver.CallFrom(ctx)
	if call == nil || call.ID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(text))
	return fmt.Sprintf("msg_ntf_%s_%s_%x", strings.TrimPrefix(th.ID(), "thr_"), call.ID, sum[:8])
}
