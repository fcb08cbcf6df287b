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
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

type segment struct {
	path    string
	f       *os.File
	size    int64
	pending int  // appends in this file not yet stored
	broken  bool // a write failed: its end may hold part of a frame, so append elsewhere
}

// record is an append as the journal stores it.
type record struct {
	WorkspaceID string           `json:"w"`
	ThreadID    string           `json:"t"`
	At          time.Time        `json:"at"`
	Messages    []*store.Message `json:"m"`
}

const (
	magic       = "quiverj1"
	frameHeader = 8
	maxPayload  = 256 << 20 // a length beyond this is damage, not an append
	fileSuffix  = ".journal"
	tmpSuffix   = ".new" // a file being started, not yet named *.journal
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

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
	o := &j.opts
	if o.MaxDelay <= 0 {
		o.MaxDelay = 5 * time.Millisecond
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 10_000
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 1 << 20
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = 100 * time.Millisecond
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 10 * time.Second
	}
	j.log = cmp.Or(o.Logger, slog.Default())
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

// Append writes msgs, for the end of the thread, to the journal and returns once they are in
// the file (see the package documentation for what that guarantees). It gives each message an
// id when it has none and sets ThreadID and CreatedAt; Seq is set by the store later and is not
// filled in. The writer stores copies of the messages, but what they point to (tool calls,
// arguments, results) is shared: do not change it after Append. Append blocks while
// Options.MaxPending appends wait for the store, until ctx ends. Messages that break a rule of
// their role fail with store.ErrInvalid and are not written.
func (j *Journal) Append(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	rec := record{WorkspaceID: workspaceID, ThreadID: threadID, At: time.Now().UTC().Round(0), Messages: msgs}
	if err := check(&rec); err != nil {
		return fmt.Errorf("journal: append to %s: %w", threadID, err)
	}
	frame, err := encode(&rec)
	if err != nil {
		return fmt.Errorf("journal: append to %s: %w", threadID, err)
	}
	j.mu.Lock()
	for len(j.queue) >= j.opts.MaxPending && !j.closed {
		wait := j.progress
		j.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("journal: append to %s: %d appends are waiting for the store: %w", threadID, j.opts.MaxPending, ctx.Err())
		}
		j.mu.Lock()
	}
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	err = j.write(frame, store.AppendOp{WorkspaceID: workspaceID, ThreadID: threadID, Messages: copies(msgs), At: rec.At})
	n := len(j.queue)
	j.mu.Unlock()
	if err != nil {
		return fmt.Errorf("journal: append to %s: %w", threadID, err)
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

// write puts one framed append at the end of the current file and queues it. j.mu is held.
func (j *Journal) write(frame []byte, op store.AppendOp) error {
	if j.cur.broken || j.cur.size > int64(len(magic)) && j.cur.size+int64(len(frame)) > j.opts.SegmentBytes {
		if err := j.rotate(); err != nil {
			return err
		}
	}
	seg := j.cur
	if _, err := seg.f.Write(frame); err != nil {
		// Take back a partial frame; should that fail too, a replay stops at it, so nothing
		// more goes into this file.
		seg.broken = seg.f.Truncate(seg.size) != nil
		return fmt.Errorf("writing %s: %w", seg.path, err)
	}
	if j.opts.Sync {
		if err := seg.f.Sync(); err != nil {
			// After a failed fsync the kernel may have dropped the file's dirty pages: what
			// was acknowledged before is still pending, but this file is not to be trusted.
			seg.broken = true
			_ = seg.f.Truncate(seg.size)
			return fmt.Errorf("syncing %s: %w", seg.path, err)
		}
	}
	seg.size += int64(len(frame))
	seg.pending++
	j.queue = append(j.queue, &entry{op: op, seg: seg})
	j.appended++
	j.pendingN.Store(int64(len(j.queue)))
	return nil
}

// rotate starts a new file for appends; the current one stays until everything in it is
// stored. j.mu is held (or the journal is not running yet).
func (j *Journal) rotate() error {
	j.nextSeg++
	path := filepath.Join(j.dir, fmt.Sprintf("%s-%06d%s", j.process, j.nextSeg, fileSuffix))
	// The file gets its name once it is locked and has its header: another process's Open
	// never sees it unlocked (it would take it for a dead process's and remove it).
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("journal: starting %s: %w", path, err)
	}
	if err := lock(f); err != nil {
		return fail(err)
	}
	if _, err := f.Write([]byte(magic)); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if j.opts.Sync {
		// A new file's name is durable once its directory is.
		if err := syncDir(j.dir); err != nil {
			f.Close()
			os.Remove(path)
			return fmt.Errorf("journal: starting %s: %w", path, err)
		}
	}
	old := j.cur
	j.cur = &segment{path: path, f: f, size: int64(len(magic))}
	j.segs = append(j.segs, j.cur)
	if old != nil && old.pending == 0 {
		j.release(old)
	}
	return nil
}

// syncDir flushes a directory's entries to stable storage.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// release deletes a file whose appends are all stored. j.mu is held.
func (j *Journal) release(seg *segment) {
	j.segs = slices.DeleteFunc(j.segs, func(s *segment) bool { return s == seg })
	// Remove before closing: the lock is held until the file is gone, so no other process
	// replays it meanwhile.
	if err := os.Remove(seg.path); err != nil {
		j.log.Warn("journal: removing a stored journal file", "file", seg.path, "err", err)
	}
	seg.f.Close()
}

// check applies the rules Append can check without the store (store.CheckMessage's), and gives
// messages ids.
func check(rec *record) error {
	if len(rec.Messages) == 0 {
		return fmt.Errorf("no messages to append: %w", store.ErrInvalid)
	}
	if rec.WorkspaceID == "" || rec.ThreadID == "" {
		return fmt.Errorf("a workspace and a thread are required: %w", store.ErrInvalid)
	}
	for i, m := range rec.Messages {
		if err := store.CheckMessage(rec.ThreadID, m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if m.ID == "" {
			m.ID = store.NewID(store.PrefixMessage)
		}
	}
	return nil
}

// encode frames rec: length, CRC-32C, JSON.
func encode(rec *record) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(make([]byte, frameHeader))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		return nil, fmt.Errorf("encoding the messages: %v: %w", err, store.ErrInvalid)
	}
	b := buf.Bytes()
	payload := b[frameHeader:]
	if len(payload) > maxPayload {
		return nil, fmt.Errorf("the messages take %d bytes encoded, more than the %d an append may: %w", len(payload), maxPayload, store.ErrInvalid)
	}
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(payload, crcTable))
	return b, nil
}

func decode(payload []byte) (store.AppendOp, error) {
	var rec record
	if err := json.Unmarshal(payload, &rec); err != nil {
		return store.AppendOp{}, err
	}
	for _, m := range rec.Messages {
		if m == nil {
			return store.AppendOp{}, errors.New("a message is null")
		}
		// What the store sets is set again when it stores the message.
		m.Seq, m.CreatedAt = 0, time.Time{}
	}
	return store.AppendOp{WorkspaceID: rec.WorkspaceID, ThreadID: rec.ThreadID, Messages: rec.Messages, At: rec.At}, nil
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

// run is the writer: it stores queued appends in batches until Close, then what is left.
func (j *Journal) run() {
	defer close(j.stopped)
	for {
		select {
		case <-j.wake:
		case <-j.quit:
			j.drain()
			return
		}
		// Let appends gather for a batch, unless told to hurry.
		t := time.NewTimer(j.opts.MaxDelay)
		select {
		case <-t.C:
		case <-j.urgent:
		case <-j.quit:
		}
		t.Stop()
		for j.storeNext(false) {
		}
	}
}

// drain stores what is left at Close, giving up at the first failure of the store.
func (j *Journal) drain() {
	for j.storeNext(true) {
	}
}

// storeNext stores the next batch of queued appends and reports whether it stored one and more
// may be waiting. Failures of the store are retried (forever while running, once when
// closing); refusals are logged and dropped.
func (j *Journal) storeNext(closing bool) bool {
	j.mu.Lock()
	n := min(len(j.queue), j.opts.MaxBatch)
	batch := slices.Clone(j.queue[:n])
	j.mu.Unlock()
	if n == 0 {
		return false
	}
	ops := make([]store.AppendOp, n)
	for i, e := range batch {
		ops[i] = e.op
	}
	// The store's calls get a context without cancellation: with one, modernc's SQLite watches
	// it around every statement, which costs a tenth of an append. A store that hangs is left
	// behind by Close instead (see abandoned).
	refused, err := j.storeOps(context.Background(), ops, closing)
	j.mu.Lock()
	if j.abandoned {
		for _, seg := range j.segs {
			seg.f.Close()
		}
		j.mu.Unlock()
		return false
	}
	if err != nil {
		j.mu.Unlock()
		return false // closing and the store fails: the rest stays in the files
	}
	j.queue = j.queue[n:]
	if len(j.queue) == 0 {
		j.queue = nil // let the backing array go
	}
	j.done += uint64(n)
	j.pendingN.Store(int64(len(j.queue)))
	j.refusedN.Add(uint64(refused))
	for _, e := range batch {
		e.seg.pending--
		if e.seg.pending == 0 && e.seg != j.cur {
			j.release(e.seg)
		}
	}
	// Everything in the current file is stored: empty it, so that a replay has nothing to
	// read again.
	if j.cur.pending == 0 && j.cur.size > int64(len(magic)) && !j.cur.broken {
		if err := j.cur.f.Truncate(int64(len(magic))); err == nil {
			j.cur.size = int64(len(magic))
		}
	}
	close(j.progress)
	j.progress = make(chan struct{})
	j.mu.Unlock()
	return true
}

// storeOps stores ops in order and returns how many the store refused. It returns an error only
// when closing and the store fails; ops before the failure may then be stored already.
func (j *Journal) storeOps(ctx context.Context, ops []store.AppendOp, closing bool) (refused int, err error) {
	delay := j.opts.RetryDelay
	for len(ops) > 0 {
		stored, err := j.appendBatch(ctx, ops)
		ops = ops[stored:]
		if err == nil {
			j.failing.Store(nil)
			return refused, nil
		}
		var be *store.BatchError
		if errors.As(err, &be) && be.Index >= stored && be.Index-stored < len(ops) && settled(be.Err) {
			// The op is stored already or refused for good; the ops before it were not stored
			// (a batch is all or nothing) and are fine: store them, then go on after it.
			i := be.Index - stored
			if i > 0 {
				r, err := j.storeOps(ctx, ops[:i], closing)
				refused += r
				if err != nil {
					return refused, err
				}
			}
			if j.note(ops[i], be.Err) {
				refused++
			}
			ops = ops[i+1:]
			delay = j.opts.RetryDelay
			j.failing.Store(nil)
			continue
		}
		// The store failed (it is down, locked, full): wait and try again.
		j.failing.Store(&err)
		if closing {
			j.log.Error("journal: the store failed; appends stay in the journal for the next Open", "pending", len(ops), "err", err)
			return refused, err
		}
		j.log.Warn("journal: the store failed; retrying", "in", delay, "pending", len(ops), "err", err)
		select {
		case <-time.After(delay):
		case <-j.quit:
			closing = true
		}
		delay = min(2*delay, 5*time.Second)
	}
	return refused, nil
}

// appendBatch stores ops, in one transaction when the store can (all or nothing), else one by
// one, and returns how many leading ops it stored. A failure of op i is a *store.BatchError with
// Index i.
func (j *Journal) appendBatch(ctx context.Context, ops []store.AppendOp) (stored int, err error) {
	if b, ok := j.st.(store.BatchAppender); ok {
		if err := b.AppendBatch(ctx, ops); err != nil {
			return 0, err
		}
		return len(ops), nil
	}
	for i, op := range ops {
		if err := j.st.Append(ctx, op.WorkspaceID, op.ThreadID, op.Messages...); err != nil {
			return i, &store.BatchError{Index: i, Err: err}
		}
	}
	return len(ops), nil
}

// settled reports whether the store's answer to an op is final: stored already, or refused.
func settled(err error) bool {
	return errors.Is(err, store.ErrIDTaken) || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrResultExists)
}

// note logs an op the store did not take and reports whether it was refused (rather than
// already stored).
func (j *Journal) note(op store.AppendOp, err error) bool {
	if errors.Is(err, store.ErrIDTaken) {
		j.log.Debug("journal: an append was stored already", "thread", op.ThreadID)
		return false
	}
	j.log.Warn("journal: the store refused an append; dropped", "workspace", op.WorkspaceID, "thread", op.ThreadID,
		"messages", len(op.Messages), "err", err)
	return true
}

// replay stores the appends of the files in the directory that no live process holds, oldest
// file first, and deletes each file once stored.
func (j *Journal) replay(ctx context.Context) error {
	names, err := filepath.Glob(filepath.Join(j.dir, "*"+fileSuffix))
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	slices.Sort(names)
	for _, path := range names {
		if err := j.replayFile(ctx, path); err != nil {
			return err
		}
	}
	// Files a process was starting when it died hold no appends (a file is named *.journal
	// before its first append): remove those no live process holds.
	starting, _ := filepath.Glob(filepath.Join(j.dir, "*"+fileSuffix+tmpSuffix))
	for _, path := range starting {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if lock(f) == nil {
			os.Remove(path)
		}
		f.Close()
	}
	return nil
}

func (j *Journal) replayFile(ctx context.Context, path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // its process removed it meanwhile
	}
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	if err := lock(f); errors.Is(err, errLocked) {
		return nil // a live process writes it
	} else if err != nil {
		return fmt.Errorf("journal: locking %s: %w", path, err)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil // removed between our open and our lock: it was stored
	}
	ops, undecodable, rest, err := readFile(f)
	if err != nil {
		return fmt.Errorf("journal: reading %s: %w", path, err)
	}
	if undecodable > 0 {
		j.log.Error("journal: records of a journal file do not decode; skipped", "file", path, "records", undecodable)
	}
	if rest > 0 {
		j.log.Warn("journal: the end of a journal file is damaged or cut short; discarded", "file", path, "bytes", rest)
	}
	if len(ops) > 0 {
		j.log.Info("journal: storing appends left by a stopped process", "file", path, "appends", len(ops))
	}
	for len(ops) > 0 {
		n := min(len(ops), j.opts.MaxBatch)
		if _, err := j.storeOps(ctx, ops[:n], true); err != nil {
			return fmt.Errorf("journal: storing the appends of %s: %w", path, err)
		}
		ops = ops[n:]
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("journal: storing the appends of %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// readFile reads the appends of a journal file, up to the first frame that is cut short or
// damaged, and returns how many whole frames did not decode and how many bytes follow the last
// whole frame.
func readFile(f *os.File) (ops []store.AppendOp, undecodable int, rest int64, err error) {
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, 0, 0, err
	}
	if len(b) < len(magic) {
		return nil, 0, int64(len(b)), nil
	}
	if string(b[:len(magic)]) != magic {
		return nil, 0, 0, fmt.Errorf("not a journal file (it starts with %q)", strings.ToValidUTF8(string(b[:len(magic)]), "?"))
	}
	b = b[len(magic):]
	for len(b) > 0 {
		if len(b) < frameHeader {
			break
		}
		n := binary.LittleEndian.Uint32(b[0:4])
		// An empty payload is never written (and its checksum is 0, like zeros on disk).
		if n == 0 || n > maxPayload || int64(n) > int64(len(b)-frameHeader) {
			break
		}
		payload := b[frameHeader : frameHeader+int(n)]
		if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[4:8]) {
			break
		}
		b = b[frameHeader+int(n):]
		op, err := decode(payload)
		if err != nil {
			// Framed and checksummed, so written whole: a record this version cannot read
			// (a bug), not damage. Skip it, keep the rest.
			undecodable++
			continue
		}
		ops = append(ops, op)
	}
	return ops, undecodable, int64(len(b)), nil
}
