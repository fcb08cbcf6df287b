// Package journal takes appends to threads off the caller's path: Append writes the messages to a
// local append-only file with one write(2) and returns, and a background writer moves them into
// the store in batches, one transaction per batch. A server recording every call it serves (the
// MCP server of quiver serve) answers its clients without waiting for a database transaction.
//
// # Durability
//
// When Append returns, the append is in the journal file: it survives the process being killed
// at any moment, exactly as a SQLite transaction with synchronous=NORMAL does, and Open stores
// whatever a killed process left behind before it accepts new appends. With Options.Sync each
// append is also flushed to stable storage (fsync) before Append returns, so it survives a power
// loss too. Appends reach the store in the order they were made by one process; appends of
// several processes to one thread have no order between them (a dead process's appends are
// stored when a journal of the directory next opens).
//
// # What a caller gives up
//
//   - The store checks an append later, when the writer stores it. An append the store refuses
//     (its thread was deleted meanwhile, a second result for a call) is logged and dropped, not
//     returned: use a journal for records whose refusal the caller would not act on, such as a
//     server's record of the calls it served, not for appends whose errors drive the caller
//     (the agent loop's exactly-once results go to the store directly). Append checks what it
//     can alone: roles, tool calls and results in the right messages.
//   - Readers of the store see an append once the writer has stored it: within Options.MaxDelay
//     (5 ms by default) when the store keeps up. Flush waits until everything appended before it
//     is stored.
//
// # Files
//
// A Journal writes files named *.journal in its directory, starting a new one past
// Options.SegmentBytes and deleting each once everything in it is stored. Several processes
// may share a directory: each writes its own files and holds a lock on them (on Unix), and Open
// replays only files no live process holds. A file is a magic header, then one frame per
// append: the payload's length and CRC-32C (little-endian uint32 each), then the payload (JSON).
// A frame cut short or damaged (a disk that lost the end of a file in a power loss) ends the
// replay of its file, and what follows it is reported and discarded; a whole frame whose record
// does not decode is reported and skipped.
//
// Appends are recognised when replayed: Append gives every message an id, and the store refuses
// an id it already has (store.ErrIDTaken), which the replay takes for "already stored".
//
// Why a journal of Quiver's own: SQLite has a write-ahead log, but what an append costs is its
// transaction (every index the rows touch, a WAL frame per page, the commit), and that cost
// shrinks per append only when appends share a transaction. The journal lets callers that each
// make one append share them without waiting for each other; no library does that in front of
// a store.
package journal

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// Options tunes a Journal. The zero value gives the defaults.
type Options struct {
	// MaxDelay is how long the writer waits for more appends before storing what it has:
	// the longest an append stays out of the store while the store keeps up. Default 5 ms.
	MaxDelay time.Duration
	// MaxBatch is the most appends stored in one transaction. Default 256.
	MaxBatch int
	// MaxPending bounds the appends waiting for the store: Append blocks (until its context
	// ends) while this many wait, so a store that cannot keep up slows callers down rather than
	// filling the disk. Default 10,000.
	MaxPending int
	// SegmentBytes is the size past which the journal starts a new file. Default 1 MiB.
	SegmentBytes int64
	// Sync flushes each append to stable storage (fsync) before Append returns.
	Sync bool
	// RetryDelay is the first wait before storing again after the store failed (not refused);
	// it doubles up to 5 seconds. Default 100 ms.
	RetryDelay time.Duration
	// CloseTimeout bounds how long Close waits for the store to take what is pending; what it
	// has not taken by then stays for the next Open. Default 10 s.
	CloseTimeout time.Duration
	// Logger receives refused appends, retries and replays; nil uses slog.Default().
	Logger *slog.Logger
}

// ErrClosed is returned by Append and Flush once Close has been called.
var ErrClosed = errors.New("journal: closed")

// Journal is an append-only file in front of a store. It is safe for concurrent use. Create it
// with Open and Close it when done: Close stores what is pending.
type Journal struct {
	dir     string
	st      store.Store
	opts    Options
	log     *slog.Logger
	process string // this journal's file name prefix

	mu       sync.Mutex
	cur      *segment   // the file appends go to
	segs     []*segment // files with appends not yet stored, oldest first; cur is last
	queue    []*entry   // appended and not yet stored, in order
	appended uint64     // appends made
	done     uint64     // appends stored or refused; the first done of appended
	closed   bool
	// abandoned: Close gave up waiting for the writer, stuck in a store call; when that call
	// returns, the writer leaves the files as they are and closes them.
	abandoned bool
	progress  chan struct{} // closed and replaced whenever done advances or the writer stops
	nextSeg   int

	// pendingN, refusedN and failing mirror what j.mu guards, for readers that must not wait
	// behind a write (a health check while the disk stalls).
	pendingN atomic.Int64
	refusedN atomic.Uint64
	failing  atomic.Pointer[error] // the store's last failure, nil once it stores again

	wake    chan struct{} // something was appended
	urgent  chan struct{} // store now, without waiting MaxDelay
	quit    chan struct{} // Close was called
	stopped chan struct{} // the writer returned
}

type entry struct {
	op  store.AppendOp // the messages are copies of the caller's
	seg *segment
}

// Open opens the journal in dir (created with mode 0700 when missing), first storing in st
// whatever journal files of dir no live process holds (what a process that crashed left
// behind), and starts the writer. Open fails if st refuses to store them for a reason other
// than a refusal of a single append (the database is down): nothing is lost, the files stay
// for the next Open.
func Open(ctx context.Context, dir string, st store.Store, opts *Options) (*Journal, error) {
	j := &Journal{dir: dir, st: st, progress: make(chan struct{}),
		wake: make(chan struct{}, 1), urgent: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{})}
	if opts != nil {
		j.opts = *opts
	}
	j.opts.setDefaults()
	j.log = cmp.Or(j.opts.Logger, slog.Default())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := j.replay(ctx); err != nil {
		return nil, err
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	j.process = time.Now().UTC().Format("20060102T150405.000000000") + "-" + hex.EncodeToString(id[:])
	if err := j.rotate(); err != nil {
		return nil, err
	}
	go j.run()
	return j, nil
}

// setDefaults sets the options left zero (or negative) to their defaults.
func (o *Options) setDefaults() {
	o.MaxDelay = positiveOr(o.MaxDelay, 5*time.Millisecond)
	o.MaxBatch = positiveOr(o.MaxBatch, 256)
	o.MaxPending = positiveOr(o.MaxPending, 10_000)
	o.SegmentBytes = positiveOr(o.SegmentBytes, 1<<20)
	o.RetryDelay = positiveOr(o.RetryDelay, 100*time.Millisecond)
	o.CloseTimeout = positiveOr(o.CloseTimeout, 10*time.Second)
}

func positiveOr[T ~int | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Append writes msgs, for the end of the thread, to the journal and returns once they are in
// the file (see the package documentation for what that guarantees). It gives each message an
// id when it has none and sets ThreadID and CreatedAt; Seq is set by the store later and is not
// filled in. The writer stores copies of the messages, but what they point to (tool calls,
// arguments, results) is shared: do not change it after Append. Append blocks while
// Options.MaxPending appends wait for the store, until ctx ends. Messages that break a rule of
// their role fail with store.ErrInvalid and are not written.
func (j *Journal) Append(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	rec := record{WorkspaceID: workspaceID, ThreadID: threadID, At: stamp.Now(ctx).Round(0), Messages: msgs}
	if err := check(ctx, &rec); err != nil {
		return fmt.Errorf("journal: append to %s: %w", threadID, err)
	}
	frame, err := encode(&rec)
	if err != nil {
		return fmt.Errorf("journal: append to %s: %w", threadID, err)
	}
	n, err := j.enqueue(ctx, threadID, frame, store.AppendOp{WorkspaceID: workspaceID, ThreadID: threadID, Messages: copies(msgs), At: rec.At})
	if err != nil {
		return err
	}
	signal(j.wake)
	if n >= j.opts.MaxBatch {
		signal(j.urgent)
	}
	for _, m := range msgs {
		m.ThreadID, m.CreatedAt = threadID, rec.At
	}
	return nil
}

// enqueue writes frame to the file and queues op once the queue has room, and returns how
// many appends wait for the store.
func (j *Journal) enqueue(ctx context.Context, threadID string, frame []byte, op store.AppendOp) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.waitForRoom(ctx, threadID); err != nil {
		return 0, err
	}
	if j.closed {
		return 0, ErrClosed
	}
	if err := j.write(frame, op); err != nil {
		return 0, fmt.Errorf("journal: append to %s: %w", threadID, err)
	}
	return len(j.queue), nil
}

// waitForRoom waits while Options.MaxPending appends wait for the store, until the journal is
// closed or ctx ends. j.mu is held, and let go while it waits.
func (j *Journal) waitForRoom(ctx context.Context, threadID string) error {
	for len(j.queue) >= j.opts.MaxPending && !j.closed {
		wait := j.progress
		j.mu.Unlock()
		select {
		case <-wait:
			j.mu.Lock()
		case <-ctx.Done():
			j.mu.Lock()
			return fmt.Errorf("journal: append to %s: %d appends are waiting for the store: %w", threadID, j.opts.MaxPending, ctx.Err())
		}
	}
	return nil
}

// copies returns shallow copies of msgs, so that the writer stores what was appended even if the
// caller reuses its messages; what they point to (calls, results) is shared and must not change.
func copies(msgs []*store.Message) []*store.Message {
	out := make([]*store.Message, len(msgs))
	vals := make([]store.Message, len(msgs))
	for i, m := range msgs {
		vals[i] = *m
		vals[i].Seq, vals[i].CreatedAt = 0, time.Time{}
		out[i] = &vals[i]
	}
	return out
}

// Flush waits until every append made before it is stored (or refused by the store and
// logged), or ctx ends.
func (j *Journal) Flush(ctx context.Context) error {
	j.mu.Lock()
	target := j.appended
	j.mu.Unlock()
	signal(j.urgent)
	for {
		j.mu.Lock()
		done, wait := j.done, j.progress
		j.mu.Unlock()
		if done >= target {
			return nil
		}
		select {
		case <-wait:
		case <-j.stopped:
			j.mu.Lock()
			done = j.done
			j.mu.Unlock()
			if done >= target {
				return nil
			}
			return fmt.Errorf("journal: %d appends are not stored yet (they stay in %s for the next Open): %w", target-done, j.dir, ErrClosed)
		case <-ctx.Done():
			return fmt.Errorf("journal: flush: %w", ctx.Err())
		}
	}
}

// Pending is the number of appends not stored yet.
func (j *Journal) Pending() int { return int(j.pendingN.Load()) }

// Refused is the number of appends the store refused (each was logged), since Open.
func (j *Journal) Refused() uint64 { return j.refusedN.Load() }

// Failing returns the store's last failure while the writer retries it, or nil when the
// store takes appends.
func (j *Journal) Failing() error {
	if p := j.failing.Load(); p != nil {
		return *p
	}
	return nil
}

// Close stops taking appends, stores what is pending and closes the files. If the store fails
// meanwhile, or has not taken everything within Options.CloseTimeout, Close stops trying and
// returns an error: what was not stored stays in the journal and the next Open stores it.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	close(j.progress) // wake appenders waiting for room: they see closed
	j.progress = make(chan struct{})
	j.mu.Unlock()
	close(j.quit)
	select {
	case <-j.stopped:
	case <-time.After(j.opts.CloseTimeout):
		j.mu.Lock()
		j.abandoned = true
		left := len(j.queue)
		j.mu.Unlock()
		return fmt.Errorf("journal: the store did not answer within %v; %d appends stay in %s and are stored by the next Open",
			j.opts.CloseTimeout, left, j.dir)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	left := len(j.queue)
	for _, seg := range slices.Clone(j.segs) {
		if seg.pending == 0 {
			j.release(seg)
		} else {
			seg.f.Close()
		}
	}
	if left > 0 {
		return fmt.Errorf("journal: %d appends could not be stored; they stay in %s and are stored by the next Open", left, j.dir)
	}
	return nil
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
