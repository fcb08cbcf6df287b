package journal

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/quiverhq/quiver/store"
)

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
	batch := slices.Clone(j.queue[:min(len(j.queue), j.opts.MaxBatch)])
	j.mu.Unlock()
	if len(batch) == 0 {
		return false
	}
	ops := make([]store.AppendOp, len(batch))
	for i, e := range batch {
		ops[i] = e.op
	}
	// The store's calls get a context without cancellation: with one, modernc's SQLite watches
	// it around every statement, which costs a tenth of an append. A store that hangs is left
	// behind by Close instead (see abandoned).
	refused, err := j.storeOps(context.Background(), ops, closing)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.abandoned {
		for _, seg := range j.segs {
			seg.f.Close()
		}
		return false
	}
	if err != nil {
		return false // closing and the store fails: the rest stays in the files
	}
	j.stored(batch, refused)
	return true
}

// stored takes a stored batch off the queue and lets go of the files all of whose appends are
// stored. j.mu is held.
func (j *Journal) stored(batch []*entry, refused int) {
	j.queue = j.queue[len(batch):]
	if len(j.queue) == 0 {
		j.queue = nil // let the backing array go
	}
	j.done += uint64(len(batch))
	j.pendingN.Store(int64(len(j.queue)))
	j.refusedN.Add(uint64(refused))
	for _, e := range batch {
		e.seg.pending--
		if e.seg.pending == 0 && e.seg != j.cur {
			j.release(e.seg)
		}
	}
	j.emptyCurrent()
	close(j.progress)
	j.progress = make(chan struct{})
}

// emptyCurrent empties the current file once everything in it is stored, so that a replay has
// nothing to read again. j.mu is held.
func (j *Journal) emptyCurrent() {
	if j.cur.pending != 0 || j.cur.size <= int64(len(magic)) || j.cur.broken {
		return
	}
	if err := j.cur.f.Truncate(int64(len(magic))); err == nil {
		j.cur.size = int64(len(magic))
	}
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
		if be, i, ok := settledOp(err, stored, len(ops)); ok {
			r, err := j.storeSettled(ctx, ops, i, be.Err, closing)
			refused += r
			if err != nil {
				return refused, err
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
		closing = j.waitToRetry(err, len(ops), delay)
		delay = min(2*delay, 5*time.Second)
	}
	return refused, nil
}

// settledOp reads the failure of a batch whose stored leading ops were stored: ok when the
// store's answer to one of the left ops after them, the i-th, is final.
func settledOp(err error, stored, left int) (be *store.BatchError, i int, ok bool) {
	if !errors.As(err, &be) {
		return nil, 0, false
	}
	i = be.Index - stored
	return be, i, i >= 0 && i < left && settled(be.Err)
}

// storeSettled stores ops[:i] and notes ops[i], whose answer (err) is final: stored already
// or refused for good. The ops before it were not stored (a batch is all or nothing) and are
// fine.
func (j *Journal) storeSettled(ctx context.Context, ops []store.AppendOp, i int, err error, closing bool) (int, error) {
	refused := 0
	if i > 0 {
		r, err := j.storeOps(ctx, ops[:i], closing)
		refused += r
		if err != nil {
			return refused, err
		}
	}
	if j.note(ops[i], err) {
		refused++
	}
	return refused, nil
}

// waitToRetry waits delay before the store is tried again, and reports whether Close was
// called meanwhile.
func (j *Journal) waitToRetry(err error, pending int, delay time.Duration) (closing bool) {
	j.log.Warn("journal: the store failed; retrying", "in", delay, "pending", pending, "err", err)
	select {
	case <-time.After(delay):
		return false
	case <-j.quit:
		return true
	}
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
