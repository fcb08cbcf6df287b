package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/journal"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// flakyStore fails appends as a database that restarts does: fails times before anything
// reaches it, or (lostAnswer) stores the first one and loses its answer.
type flakyStore struct {
	*sqlite.Store
	fails      int
	lostAnswer bool
	tries      int
}

func (f *flakyStore) Append(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	f.tries++
	if f.lostAnswer && f.tries == 1 {
		if err := f.Store.Append(ctx, workspaceID, threadID, msgs...); err != nil {
			return err
		}
		return errors.New("conn closed: the answer to COMMIT was lost")
	}
	if f.tries <= f.fails {
		return errors.New("FATAL: the database system is shutting down (SQLSTATE 57P01)")
	}
	return f.Store.Append(ctx, workspaceID, threadID, msgs...)
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
			st := &flakyStore{Store: base, fails: c.fails, lostAnswer: c.lostAnswer}
			rec := &platform.Recorder{Store: st}
			ctx := quiver.WithScope(context.Background(), quiver.Scope{WorkspaceID: th.WorkspaceID, ThreadID: th.ID})
			call := &quiver.Call{ID: "call_1", Name: "echo", Args: []byte(`{}`)}
			if err := rec.RecordResult(ctx, call, &quiver.Result{Status: quiver.StatusSuccess, Text: "ok"}); err != nil {
				t.Fatalf("RecordResult: %v", err)
			}
			if st.tries != c.wantTries {
				t.Errorf("%d tries, want %d", st.tries, c.wantTries)
			}
			if msgs := recorded(t, base, th); len(msgs) != 2 {
				t.Fatalf("%d messages stored, want the call and its result once (2)", len(msgs))
			}
		})
	}
	t.Run("a refusal", func(t *testing.T) {
		base, th := storeWithThread(t)
		st := &flakyStore{Store: base}
		rec := &platform.Recorder{Store: st}
		ctx := quiver.WithScope(context.Background(), quiver.Scope{WorkspaceID: th.WorkspaceID, ThreadID: "thr_missing"})
		err := rec.RecordResult(ctx, &quiver.Call{ID: "call_1", Name: "echo", Args: []byte(`{}`)}, &quiver.Result{Status: quiver.StatusSuccess})
		if !errors.Is(err, store.ErrNotFound) || st.tries != 1 {
			t.Fatalf("recording on a missing thread: %v after %d tries, want ErrNotFound at once", err, st.tries)
		}
	})
}

func TestRecorderIsExactlyOncePerCall(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_x", Name: "x"}); err != nil {
		t.Fatal(err)
	}
	th := &store.Thread{WorkspaceID: "wsp_x"}
	if err := st.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	rec := &platform.Recorder{Store: st}
	scoped := quiver.WithScope(ctx, quiver.Scope{WorkspaceID: "wsp_x", ThreadID: th.ID})
	cancelled, cancel := context.WithCancel(scoped)
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		call quiver.Call
		want error
	}{
		{"first result", scoped, quiver.Call{ID: "c1", Name: "echo", Args: json.RawMessage(`{"text":"x"}`)}, nil},
		{"same call id again is refused, nothing stored", scoped, quiver.Call{ID: "c1", Name: "echo"}, store.ErrInvalid},
		{"a cancelled caller's result is still recorded", cancelled, quiver.Call{ID: "c2", Name: "echo", Args: json.RawMessage(`[1]`)}, nil},
		{"no thread in scope: not recorded", ctx, quiver.Call{ID: "c3", Name: "echo"}, nil},
	}
	for _, c := range cases {
		err := rec.RecordResult(c.ctx, &c.call, quiver.Text("ok"))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	msgs, err := st.Messages(ctx, "wsp_x", th.ID, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		if m.Role == store.RoleTool {
			ids = append(ids, m.ToolCallID)
		}
	}
	if !slices.Equal(ids, []string{"c1", "c2"}) {
		t.Errorf("results recorded for %v, want [c1 c2]", ids)
	}
	// Arguments that are not an object are kept as the text the caller sent (a JSON string),
	// and become {} when sent back to a provider.
	if args := msgs[2].ToolCalls[0].Args; string(thread.CallArgs(args)) != "[1]" || string(thread.HistoryArgs(args)) != "{}" {
		t.Errorf("non-object arguments stored as %s", args)
	}
}

// TestRecorderStoresAttachmentsInTheThread: a result's new attachment is written to the
// session thread's file system and the recorded result, like the caller's, refers to it.
func TestRecorderStoresAttachmentsInTheThread(t *testing.T) {
	st, th := storeWithThread(t)
	ctx := context.Background()
	scoped := quiver.WithScope(ctx, quiver.Scope{WorkspaceID: "wsp_x", ThreadID: th.ID})
	res := &quiver.Result{Status: quiver.StatusSuccess, Text: "chart",
		Attachments: []quiver.Attachment{{Name: "chart.png", MimeType: "image/png", Data: "iVBORw0KGgo="}}}
	if err := (&platform.Recorder{Store: st}).RecordResult(scoped, &quiver.Call{ID: "a1", Name: "plot"}, res); err != nil {
		t.Fatal(err)
	}
	a := res.Attachments[0]
	if !a.IsRef() || !strings.HasPrefix(a.Path, "/attachments/") {
		t.Fatalf("caller's attachment %+v", a)
	}
	data, _, err := st.ReadFile(ctx, "wsp_x", th.ID, a.Path)
	if err != nil || string(data) != "\x89PNG\r\n\x1a\n" {
		t.Fatalf("stored file %q, %v", data, err)
	}
	msgs, _ := st.Messages(ctx, "wsp_x", th.ID, store.Page{})
	stored, err := thread.Result(msgs[1].Result)
	if err != nil || len(stored.Attachments) != 1 || stored.Attachments[0].Path != a.Path || stored.Attachments[0].Data != "" {
		t.Fatalf("recorded result %+v, %v", stored, err)
	}
}

// TestRecorderWithAJournal: records go through the journal; once it is closed (a call that
// outlived the server's shutdown), straight to the store.
func TestRecorderWithAJournal(t *testing.T) {
	st, th := storeWithThread(t)
	ctx := context.Background()
	j, err := journal.Open(ctx, filepath.Join(t.TempDir(), "journal"), st, &journal.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &platform.Recorder{Store: st, Journal: j}
	scoped := quiver.WithScope(ctx, quiver.Scope{WorkspaceID: "wsp_x", ThreadID: th.ID})
	if err := rec.RecordResult(scoped, &quiver.Call{ID: "c1", Name: "echo"}, quiver.Text("one")); err != nil {
		t.Fatal(err)
	}
	if j.Pending() != 1 && len(recorded(t, st, th)) != 2 {
		t.Fatal("the record is neither in the journal nor in the store")
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rec.RecordResult(scoped, &quiver.Call{ID: "c2", Name: "echo"}, quiver.Text("two")); err != nil {
		t.Fatalf("recording after the journal closed: %v", err)
	}
	msgs := recorded(t, st, th)
	if len(msgs) != 4 || msgs[1].ToolCallID != "c1" || msgs[3].ToolCallID != "c2" {
		t.Fatalf("stored %d messages: %+v", len(msgs), msgs)
	}
}

// storeWithThread opens a SQLite store (closed when the test ends) holding one thread of
// workspace wsp_x.
func storeWithThread(t *testing.T) (*sqlite.Store, *store.Thread) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	must(t, err)
	t.Cleanup(func() { st.Close() })
	th := &store.Thread{WorkspaceID: "wsp_x"}
	must(t, st.CreateThread(context.Background(), th))
	return st, th
}

// recorded are the messages of thread th.
func recorded(t *testing.T, st store.Store, th *store.Thread) []*store.Message {
	t.Helper()
	msgs, err := st.Messages(context.Background(), th.WorkspaceID, th.ID, store.Page{})
	must(t, err)
	return msgs
}
