package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// testFinalAppend checks AppendFinal (store.FinalAppender): a run's last message and its end
// on the thread, stored together or not at all, and the end left out when messages wait in
// the queue.
func testFinalAppend(t *testing.T, s store.Store) {
	f, ok := s.(store.FinalAppender)
	if !ok {
		t.Fatalf("%T is no store.FinalAppender (a store.Backend must be)", s)
	}
	th := newThread(t, s, ws)
	mustAppend(t, s, th.ID, &store.Message{Role: store.RoleUser, Content: "start"}, assistant("c1"))
	if _, err := s.UpdateThread(ctx, ws, th.ID, func(x *store.Thread) error { x.Status = store.StatusRunning; return nil }); err != nil {
		t.Fatal(err)
	}
	end := func(x *store.Thread) error {
		x.Status, x.StepCount, x.Tags = store.StatusIdle, 2, append(x.Tags, "ended")
		return nil
	}
	unchanged := func(t *testing.T, label string, history int) {
		t.Helper()
		if got := all(t, s, ws, th.ID); len(got) != history {
			t.Errorf("%s: history holds %d messages, want %d", label, len(got), history)
		}
		if got, err := s.Thread(ctx, ws, th.ID); err != nil || got.Status != store.StatusRunning || slices.Contains(got.Tags, "ended") {
			t.Errorf("%s: the thread changed: %+v, %v", label, got, err)
		}
	}

	// Refused: nothing of it is stored, the thread's update no more than the message.
	refusals := []struct {
		name string
		fn   func(*store.Thread) error
		msgs []*store.Message
		want error
	}{
		{"no messages", end, nil, store.ErrInvalid},
		{"a result for no call", end, []*store.Message{result("c9", "what")}, store.ErrInvalid},
		{"fn fails", func(*store.Thread) error { return errBoom }, []*store.Message{result("c1", "done")}, errBoom},
		{"an update the thread refuses", func(x *store.Thread) error { x.WorkspaceID = "wsp_other"; return nil },
			[]*store.Message{result("c1", "done")}, store.ErrInvalid},
	}
	for _, r := range refusals {
		called := false
		fn := func(x *store.Thread) error { called = true; return r.fn(x) }
		got, queued, err := f.AppendFinal(ctx, ws, th.ID, fn, r.msgs...)
		if !errors.Is(err, r.want) || got != nil || queued {
			t.Errorf("%s: AppendFinal = %v, %v, %v; want %v", r.name, got, queued, err, r.want)
		}
		if r.name == "a result for no call" && called {
			t.Errorf("%s: fn was called for an append that was refused", r.name)
		}
		unchanged(t, r.name, 2)
	}
	for name, id := range map[string]string{"another workspace's thread": newThread(t, s, "wsp_other").ID, "no thread": "thr_missing"} {
		if _, _, err := f.AppendFinal(ctx, ws, id, end, &store.Message{Role: store.RoleUser, Content: "x"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}

	// A message queued meanwhile: the answer is stored, the end is not.
	if err := s.Enqueue(ctx, ws, th.ID, &store.Message{Role: store.RoleUser, Content: "meanwhile"}); err != nil {
		t.Fatal(err)
	}
	res := result("c1", "done")
	got, queued, err := f.AppendFinal(ctx, ws, th.ID, func(*store.Thread) error { t.Error("fn called with a message queued"); return nil }, res)
	if err != nil || got != nil || !queued {
		t.Fatalf("with a message queued: AppendFinal = %v, %v, %v; want nil, true", got, queued, err)
	}
	if res.Seq != 3 || res.ID == "" || res.CreatedAt.IsZero() {
		t.Errorf("the message was not filled as Append fills it: %+v", res)
	}
	unchanged(t, "with a message queued", 3)

	// Nothing queued: both, in one.
	if _, err := s.AppendQueued(ctx, ws, th.ID); err != nil {
		t.Fatal(err)
	}
	answer := &store.Message{Role: store.RoleAssistant, Content: "all done"}
	got, queued, err = f.AppendFinal(ctx, ws, th.ID, end, answer)
	if err != nil || queued || got == nil {
		t.Fatalf("AppendFinal = %v, %v, %v", got, queued, err)
	}
	if got.Status != store.StatusIdle || got.StepCount != 2 || !slices.Contains(got.Tags, "ended") || answer.Seq != 5 {
		t.Errorf("AppendFinal returned %+v and seq %d; want idle, 2 steps, tagged, seq 5", got, answer.Seq)
	}
	stored, err := s.Thread(ctx, ws, th.ID)
	if err != nil || stored.Status != store.StatusIdle || stored.StepCount != 2 || !slices.Contains(stored.Tags, "ended") {
		t.Errorf("the thread as stored: %+v, %v", stored, err)
	}
	if h := all(t, s, ws, th.ID); len(h) != 5 || h[4].Content != "all done" {
		t.Errorf("history: %d messages, the last %+v", len(h), h[len(h)-1])
	}
	if ts, _, err := s.Threads(ctx, ws, store.ThreadFilter{Tag: "ended"}); err != nil || len(ts) != 1 {
		t.Errorf("the tag's index does not list the thread: %d, %v", len(ts), err)
	}
}

var errBoom = errors.New("boom")
