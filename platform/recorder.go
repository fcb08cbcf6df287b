package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/genai"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/journal"
	"github.com/quiverhq/quiver/thread"
)

// Recorder records calls in threads of a store: for a call whose scope names a thread, an
// assistant message with the call and a tool message with its result, appended in one
// transaction. The store accepts one result per call id, so a call is never recorded twice.
// New attachments are stored in the thread's file system first (when the store has one) and
// the result refers to them. Calls without a thread in their scope are not recorded. Every
// workspace's dispatcher records with one (see [Workspace.Dispatcher]), whichever door the
// call came through.
type Recorder struct {
	Store thread.Store // the thread's messages and, for attachments, its files
	// Journal, when set, takes the messages instead of Store: RecordResult returns once they
	// are in the journal, and the journal's writer stores them in Store (see store/journal).
	// Attachments still go to Store's file system first.
	Journal *journal.Journal
}

// journalWait bounds how long recording a call waits for room in a full journal.
const journalWait = 10 * time.Second

// RecordResult implements quiver.Recorder.
func (r *Recorder) RecordResult(ctx context.Context, c *quiver.Call, res *quiver.Result) error {
	scope := quiver.ScopeFrom(ctx)
	if scope.ThreadID == "" {
		return nil
	}
	// A cancelled call's result is recorded too: the caller's cancellation must not lose it.
	ctx = context.WithoutCancel(ctx)
	_, msgs, err := r.messages(ctx, scope, c, res)
	if err != nil {
		return err
	}
	if r.Journal != nil {
		// A journal full of records the store does not take (it is down) makes Append wait:
		// bound the wait, so that the call ends with an error instead of hanging.
		jctx, cancel := context.WithTimeout(ctx, journalWait)
		defer cancel()
		err := r.Journal.Append(jctx, scope.WorkspaceID, scope.ThreadID, msgs...)
		if !errors.Is(err, journal.ErrClosed) {
			return err
		}
		// A call that outlived the server's shutdown: record it directly.
	}
	return appendRetrying(ctx, r.Store, scope.WorkspaceID, scope.ThreadID, msgs)
}

// recordRetryFor bounds how long a call's record is tried again while the store fails (a
// database restarting, a failover): long enough for those, and the caller waits that long at
// most for its answer.
const recordRetryFor = 20 * time.Second

// appendRetrying appends a call's record, trying again while the store fails otherwise than by
// refusing it. The messages get their ids first, so that a try whose commit succeeded but whose
// answer was lost is recognised by the next one (ErrIDTaken: stored already).
func appendRetrying(ctx context.Context, st store.MessageLog, workspaceID, threadID string, msgs []*store.Message) error {
	for _, m := range msgs {
		if m.ID == "" {
			m.ID = stamp.ID(ctx, store.PrefixMessage)
		}
	}
	deadline := time.Now().Add(recordRetryFor)
	wait := 50 * time.Millisecond
	for try := 0; ; try++ {
		err := st.Append(ctx, workspaceID, threadID, msgs...)
		switch {
		case err == nil:
			return nil
		case try > 0 && errors.Is(err, store.ErrIDTaken):
			return nil // an earlier try stored it
		case refused(err) || time.Now().Add(wait).After(deadline):
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// refused reports whether err is the store refusing a write, which trying again cannot change.
func refused(err error) bool {
	for _, e := range []error{store.ErrInvalid, store.ErrNotFound, store.ErrResultExists, store.ErrForbidden,
		store.ErrConflict, store.ErrTooLarge, store.ErrIDTaken} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// messages are what records a call made at a door: the assistant message asking for it and the
// tool message with its result, once the result's new attachments are stored in the thread's
// files. The call returned is c with an id (one is made when it has none).
func (r *Recorder) messages(ctx context.Context, scope quiver.Scope, c *quiver.Call, res *quiver.Result) (*quiver.Call, []*store.Message, error) {
	call := *c
	if call.ID == "" {
		call.ID = stamp.ID(ctx, "call")
	}
	if err := thread.StoreAttachments(ctx, r.Store, scope.WorkspaceID, scope.ThreadID, res); err != nil {
		return nil, nil, err
	}
	tr, err := thread.ToolResult(res)
	if err != nil {
		return nil, nil, err
	}
	return &call, []*store.Message{
		{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{thread.StoredCall(call)}},
		{Role: store.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Result: tr, Content: res.ModelText()},
	}, nil
}

// Instances implements quiver.StateRecorder: the instances of the thread the call's scope
// names. A call without one has no state: _outputPath and _instance are refused for it.
func (r *Recorder) Instances(ctx context.Context) ([]string, error) {
	scope := quiver.ScopeFrom(ctx)
	if scope.ThreadID == "" {
		return nil, errors.New("the call is recorded on no thread, so it has no state; call it on a thread")
	}
	return r.Store.Instances(ctx, scope.WorkspaceID, scope.ThreadID)
}

// RecordOutput implements quiver.StateRecorder: the call, its result and the write of its
// output into the thread's state, in one transaction. It goes to the store directly, not
// through the journal: whether the state takes the write decides the result, so it cannot
// wait for the journal's writer.
func (r *Recorder) RecordOutput(ctx context.Context, c *quiver.Call, res *quiver.Result, out json.RawMessage) (*quiver.Result, error) {
	scope := quiver.ScopeFrom(ctx)
	op := c.OutputPath()
	if scope.ThreadID == "" || op == nil {
		return res, r.RecordResult(ctx, c, res)
	}
	ctx = context.WithoutCancel(ctx)
	call, msgs, err := r.messages(ctx, scope, c, res)
	if err != nil {
		return nil, err
	}
	w := &store.StateWrite{Instance: c.Instance(), Paths: op.Paths, Any: op.Any, Value: out}
	err = r.Store.AppendState(ctx, scope.WorkspaceID, scope.ThreadID, w, msgs...)
	var se *store.StateError
	if !errors.As(err, &se) {
		return res, err
	}
	refused := thread.StateRefused(c, se, out)
	return refused, r.RecordResult(ctx, call, refused)
}

var _ quiver.StateRecorder = (*Recorder)(nil)

// OpenJournal puts a journal (store/journal) in dir in front of the store for the calls the
// doors record: each call's record is written there (one write to a local file, which
// survives a crash of the process) before its caller gets the answer, and the journal's writer
// stores the records in the store in batches, within milliseconds. What a process that crashed
// left in dir is stored first. Use it when dir is as durable as the store: beside a SQLite
// file, not on the disposable disk of a node sharing PostgreSQL. Once, before any workspace's
// dispatcher is made (each records through the journal from its first call); Close closes it.
func (p *Platform) OpenJournal(ctx context.Context, dir string) error {
	if p.dispatching.Load() {
		return errors.New("platform: the journal is opened before the first dispatcher is made")
	}
	j, err := journal.Open(ctx, dir, p.cfg.Store, &journal.Options{Logger: p.logger})
	if err != nil {
		return fmt.Errorf("platform: %w", err)
	}
	if !p.journal.CompareAndSwap(nil, j) {
		_ = j.Close()
		return errors.New("platform: the journal is already open")
	}
	p.journalMetrics = journalMetrics(j)
	return nil
}

// Journal is the journal the doors' calls are recorded through; nil without OpenJournal.
func (p *Platform) Journal() *journal.Journal { return p.journal.Load() }

// Flush waits until every call recorded so far is in the store (through the journal, records
// reach it a few milliseconds after the call), or ctx ends.
func (p *Platform) Flush(ctx context.Context) error {
	if j := p.journal.Load(); j != nil {
		return j.Flush(ctx)
	}
	return nil
}

// Close gives back the places among limits' concurrent calls this node holds on a fleet,
// writes the usage it metered since its last write, and stores what the journal holds and
// closes it; calls recorded after that go to the store directly. What the store would not take stays in the journal's directory, for the next
// OpenJournal there.
func (p *Platform) Close() error {
	p.meter.Close()
	if p.usage != nil {
		// What was metered since the last write; a store that is down loses it (logged).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = p.usage.Close(ctx)
		cancel()
	}
	j := p.journal.Load()
	if j == nil {
		return nil
	}
	if p.journalMetrics != nil {
		_ = p.journalMetrics.Unregister()
	}
	err := j.Close()
	if err != nil {
		p.logger.Error("platform: the journal was not stored in full", "err", err)
	}
	return err
}

// journalMetrics reports j's pending records (quiver.journal.pending) when the global meter
// provider's metrics are read; nil when there are no metrics, or the instrument cannot be
// made (a bug, which leaves the gauge out rather than the platform).
func journalMetrics(j *journal.Journal) metric.Registration {
	m := genai.Meter(nil)
	if m == nil {
		return nil
	}
	gauge, err := m.Int64ObservableGauge(genai.MetricJournalPending, metric.WithUnit("{record}"),
		metric.WithDescription("Records in the journal not yet in the store."))
	if err != nil {
		return nil
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(gauge, int64(j.Pending()))
		return nil
	}, gauge)
	if err != nil {
		return nil
	}
	return reg
}
