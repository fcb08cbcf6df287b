package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/quiverhq/quiver/internal/endtx"
	"github.com/quiverhq/quiver/store"
)

// The work a context carries for a run's end (internal/endtx) runs in the transaction of the
// AppendFinal that ends that thread's run, and only that one: what it writes commits with the
// end, and when it fails nothing of the end is stored.
func TestAppendFinalRunsTheEndsWork(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `CREATE TABLE end_work (thread_id text)`); err != nil {
		t.Fatal(err)
	}
	newThread := func() string {
		th := &store.Thread{WorkspaceID: "wsp_end"}
		if err := s.CreateThread(ctx, th); err != nil {
			t.Fatal(err)
		}
		return th.ID
	}
	mark := func(threadID string, fail error) endtx.Work {
		return func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO end_work VALUES ($1)`, threadID); err != nil {
				return err
			}
			return fail
		}
	}
	marked := func(threadID string) bool {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM end_work WHERE thread_id = $1`, threadID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	stepped := func(x *store.Thread) error { x.StepCount = 1; return nil }
	answer := func() *store.Message { return &store.Message{Role: store.RoleAssistant, Content: "done"} }

	ended, other, queued, failing := newThread(), newThread(), newThread(), newThread()
	if _, _, err := s.AppendFinal(endtx.With(ctx, ended, mark(ended, nil)), "wsp_end", ended, stepped, answer()); err != nil || !marked(ended) {
		t.Errorf("the thread's own end: %v, its work done: %v", err, marked(ended))
	}
	if _, _, err := s.AppendFinal(endtx.With(ctx, ended, mark(ended+"-child", nil)), "wsp_end", other, stepped, answer()); err != nil || marked(ended+"-child") {
		t.Errorf("another thread's end (a child's, inside the run): %v, the run's work done: %v", err, marked(ended+"-child"))
	}
	if err := s.Enqueue(ctx, "wsp_end", queued, &store.Message{Role: store.RoleUser, Content: "meanwhile"}); err != nil {
		t.Fatal(err)
	}
	if _, q, err := s.AppendFinal(endtx.With(ctx, queued, mark(queued, nil)), "wsp_end", queued, stepped, answer()); err != nil || !q || marked(queued) {
		t.Errorf("an end put off by a queued message: queued %v, %v, its work done: %v", q, err, marked(queued))
	}
	boom := errors.New("River is down")
	if _, _, err := s.AppendFinal(endtx.With(ctx, failing, mark(failing, boom)), "wsp_end", failing, stepped, answer()); !errors.Is(err, boom) {
		t.Fatalf("a failing work: %v, want its error", err)
	}
	th, err := s.Thread(ctx, "wsp_end", failing)
	if err != nil || th.StepCount != 0 || marked(failing) {
		t.Errorf("after a failing work: %+v, %v, its row kept: %v; want nothing stored", th, err, marked(failing))
	}
	if msgs, err := s.Messages(ctx, "wsp_end", failing, store.Page{}); err != nil || len(msgs) != 0 {
		t.Errorf("after a failing work the history holds %d messages, %v", len(msgs), err)
	}
}
