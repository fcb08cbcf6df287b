package server_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
)

// flakyStore fails appends as a database that restarts does: fails times before anything
// reaches it, or (lostAnswer) stores the first one and loses its answer.
type flakyStore struct {
	*spyStore
	fails      int
	lostAnswer bool
	tries      int
}

func (f *flakyStore) Append(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	f.tries++
	if f.lostAnswer && f.tries == 1 {
		if err := f.spyStore.Append(ctx, workspaceID, threadID, msgs...); err != nil {
			return err
		}
		return errors.New("conn closed: the answer to COMMIT was lost")
	}
	if f.tries <= f.fails {
		return errors.New("FATAL: the database system is shutting down (SQLSTATE 57P01)")
	}
	return f.spyStore.Append(ctx, workspaceID, threadID, msgs...)
}

// A call's record is tried again while the store fails, and a try whose commit went through
// though its answer was lost counts as stored: the call is recorded exactly once. A refusal is
// not tried again.
func TestRecorderTriesAgainThroughAnOutage(t *testing.T) {
	for _, c := range []struct {
		name       string
		fails      int
		lostAnswer bool
		wantTries  int
	}{
		{"the database restarting", 3, false, 4},
		{"a commit whose answer was lost", 0, true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, th := storeWithThread(t)
			st := &flakyStore{spyStore: &spyStore{Store: base}, fails: c.fails, lostAnswer: c.lostAnswer}
			rec := &server.Recorder{Store: st}
			ctx := quiver.WithScope(context.Background(), quiver.Scope{WorkspaceID: th.WorkspaceID, ThreadID: th.ID})
			call := &quiver.Call{ID: "call_1", Name: "echo", Args: []byte(`{}`)}
			if err := rec.RecordResult(ctx, call, &quiver.Result{Status: quiver.StatusSuccess, Text: "ok"}); err != nil {
				t.Fatalf("RecordResult: %v", err)
			}
			if st.tries != c.wantTries {
				t.Errorf("%d tries, want %d", st.tries, c.wantTries)
			}
			if msgs := mustMessages(t, base, th.ID); len(msgs) != 2 {
				t.Fatalf("%d messages stored, want the call and its result once (2)", len(msgs))
			}
		})
	}
	t.Run("a refusal", func(t *testing.T) {
		base, th := storeWithThread(t)
		st := &flakyStore{spyStore: &spyStore{Store: base}}
		rec := &server.Recorder{Store: st}
		ctx := quiver.WithScope(context.Background(), quiver.Scope{WorkspaceID: th.WorkspaceID, ThreadID: "thr_missing"})
		err := rec.RecordResult(ctx, &quiver.Call{ID: "call_1", Name: "echo", Args: []byte(`{}`)}, &quiver.Result{Status: quiver.StatusSuccess})
		if !errors.Is(err, store.ErrNotFound) || st.tries != 1 {
			t.Fatalf("recording on a missing thread: %v after %d tries, want ErrNotFound at once", err, st.tries)
		}
	})
}
