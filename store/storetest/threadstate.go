package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

func testThreadStatus(t *testing.T, s store.Store) {
	parent := newThread(t, s, ws)
	if parent.Status != store.StatusIdle {
		t.Fatalf("a new thread's status is %q, want idle", parent.Status)
	}
	child := &store.Thread{WorkspaceID: ws, ParentID: parent.ID, Tags: []string{"name:researcher"},
		Status: store.StatusRunning, Blocking: true, Resumable: true, State: json.RawMessage(`{"agent":"r","pending":["c1"]}`)}
	if err := s.CreateThread(ctx, child); err != nil {
		t.Fatal(err)
	}
	got, err := s.Thread(ctx, ws, child.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusRunning || !got.Blocking || !got.Resumable || !jsonEqual(got.State, child.State) || got.Name() != "researcher" {
		t.Fatalf("child read back as %+v", got)
	}

	steps := []struct {
		name    string
		change  func(*store.Thread)
		wantErr error
	}{
		{"running to idle", func(x *store.Thread) { x.Status = store.StatusIdle }, nil},
		{"state replaced", func(x *store.Thread) { x.State = json.RawMessage(`{"paused":true}`) }, nil},
		{"state cleared", func(x *store.Thread) { x.State = nil }, nil},
		{"unknown status", func(x *store.Thread) { x.Status = "sleeping" }, store.ErrInvalid},
		{"state not JSON", func(x *store.Thread) { x.State = json.RawMessage(`{`) }, store.ErrInvalid},
		{"state too large", func(x *store.Thread) {
			x.State = json.RawMessage(`"` + strings.Repeat("x", store.MaxThreadStateBytes) + `"`)
		}, store.ErrTooLarge},
		{"blocking is fixed at creation", func(x *store.Thread) { x.Blocking = false }, store.ErrInvalid},
		{"resumable is fixed at creation", func(x *store.Thread) { x.Resumable = false }, store.ErrInvalid},
		{"empty tag", func(x *store.Thread) { x.Tags = append(x.Tags, "") }, store.ErrInvalid},
		{"terminate", func(x *store.Thread) { x.Status = store.StatusTerminated }, nil},
		{"terminated cannot run again", func(x *store.Thread) { x.Status = store.StatusRunning }, store.ErrInvalid},
		{"terminated cannot go idle", func(x *store.Thread) { x.Status = store.StatusIdle }, store.ErrInvalid},
	}
	for _, st := range steps {
		_, err := s.UpdateThread(ctx, ws, child.ID, func(x *store.Thread) error { st.change(x); return nil })
		if !errors.Is(err, st.wantErr) || (st.wantErr == nil && err != nil) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.wantErr)
		}
	}
	got, _ = s.Thread(ctx, ws, child.ID)
	if got.Status != store.StatusTerminated || got.State != nil {
		t.Fatalf("after the steps: status %q state %s", got.Status, got.State)
	}
	kids, err := s.Children(ctx, ws, parent.ID)
	if err != nil || len(kids) != 1 {
		t.Fatalf("Children = %v, %v", kids, err)
	}
	if k := kids[0]; k.Name() != "researcher" || k.Status != store.StatusTerminated || !k.Blocking || !k.Resumable {
		t.Fatalf("registry entry %+v", k)
	}
	if err := s.CreateThread(ctx, &store.Thread{WorkspaceID: ws, Status: "paused"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("creating with an unknown status: %v, want ErrInvalid", err)
	}
}

func testUpdateMessage(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	user := &store.Message{Role: store.RoleUser, Content: "draft"}
	mustAppend(t, s, th.ID, user, assistant("c1"), result("c1", "done"))
	msgs := all(t, s, ws, th.ID)
	m, err := s.UpdateMessage(ctx, ws, th.ID, user.ID, func(m *store.Message) error { m.Content = "final"; return nil })
	if err != nil || m.Content != "final" {
		t.Fatalf("UpdateMessage = %+v, %v", m, err)
	}
	if got := all(t, s, ws, th.ID); got[0].Content != "final" || got[0].Seq != 1 || len(got) != 3 {
		t.Fatalf("after update: %+v", got[0])
	}
	refused := []struct {
		name   string
		id     string
		change func(*store.Message)
		want   error
	}{
		{"role", user.ID, func(m *store.Message) { m.Role = store.RoleAssistant }, store.ErrInvalid},
		{"seq", user.ID, func(m *store.Message) { m.Seq = 9 }, store.ErrInvalid},
		{"tool calls of an assistant message", msgs[1].ID, func(m *store.Message) { m.ToolCalls = nil }, store.ErrInvalid},
		{"a tool result", msgs[2].ID, func(m *store.Message) { m.Content = "x" }, store.ErrInvalid},
		{"unknown message", "msg_missing", func(m *store.Message) { m.Content = "x" }, store.ErrNotFound},
	}
	for _, r := range refused {
		if _, err := s.UpdateMessage(ctx, ws, th.ID, r.id, func(m *store.Message) error { r.change(m); return nil }); !errors.Is(err, r.want) {
			t.Errorf("changing %s: %v, want %v", r.name, err, r.want)
		}
	}
	if _, err := s.UpdateMessage(ctx, "wsp_other", th.ID, user.ID, func(m *store.Message) error { m.Content = "x"; return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("through another workspace: %v, want ErrNotFound", err)
	}
	other := newThread(t, s, ws)
	if _, err := s.UpdateMessage(ctx, ws, other.ID, user.ID, func(m *store.Message) error { m.Content = "x"; return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("through another thread: %v, want ErrNotFound", err)
	}
	if got := all(t, s, ws, th.ID); got[0].Content != "final" || got[2].Result.Text != "done" {
		t.Fatalf("a refused update changed something: %+v %+v", got[0], got[2].Result)
	}
}

func testQueue(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	mustAppend(t, s, th.ID, &store.Message{Role: store.RoleUser, Content: "start"})
	if err := s.Enqueue(ctx, ws, th.ID, &store.Message{Role: store.RoleUser, Content: "q1"},
		&store.Message{Role: store.RoleAssistant, Content: "q2"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, ws, th.ID, &store.Message{Role: store.RoleSystem, Content: "q3"}); err != nil {
		t.Fatal(err)
	}
	q, err := s.Queued(ctx, ws, th.ID)
	if err != nil || len(q) != 3 || q[0].Content != "q1" || q[2].Content != "q3" || !strings.HasPrefix(q[0].ID, "msg_") {
		t.Fatalf("Queued = %v, %v", q, err)
	}
	if len(all(t, s, ws, th.ID)) != 1 {
		t.Fatal("queued messages reached the history before the next step")
	}
	moved, err := s.AppendQueued(ctx, ws, th.ID)
	if err != nil || len(moved) != 3 {
		t.Fatalf("AppendQueued = %v, %v", moved, err)
	}
	hist := all(t, s, ws, th.ID)
	var contents []string
	for _, m := range hist {
		contents = append(contents, m.Content)
	}
	if !slices.Equal(contents, []string{"start", "q1", "q2", "q3"}) || hist[1].ID != q[0].ID || moved[2].Seq != 4 {
		t.Fatalf("history after AppendQueued: %v (moved %+v)", contents, moved[2])
	}
	if again, err := s.AppendQueued(ctx, ws, th.ID); err != nil || again == nil || len(again) != 0 {
		t.Fatalf("second AppendQueued = %v, %v; want an empty slice", again, err)
	}
	// A writer's own id is queued once: again while queued, or once in the history, it is taken.
	own := &store.Message{ID: store.NewID(store.PrefixMessage), Role: store.RoleSystem, Content: "delivered once"}
	if err := s.Enqueue(ctx, ws, th.ID, own); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, ws, th.ID, &store.Message{ID: own.ID, Role: store.RoleSystem, Content: "again"}); !errors.Is(err, store.ErrIDTaken) {
		t.Errorf("an own id queued twice: %v, want ErrIDTaken", err)
	}
	if moved, err := s.AppendQueued(ctx, ws, th.ID); err != nil || len(moved) != 1 || moved[0].ID != own.ID {
		t.Fatalf("AppendQueued of the own id = %v, %v", moved, err)
	}
	if err := s.Enqueue(ctx, ws, th.ID, &store.Message{ID: own.ID, Role: store.RoleSystem, Content: "again"}); !errors.Is(err, store.ErrIDTaken) || !errors.Is(err, store.ErrInvalid) {
		t.Errorf("an own id already in the history: %v, want ErrIDTaken (and ErrInvalid)", err)
	}
	if q, err := s.Queued(ctx, ws, th.ID); err != nil || len(q) != 0 {
		t.Fatalf("a refused enqueue left %v, %v", q, err)
	}
	bad := []*store.Message{
		{Role: store.RoleTool, ToolCallID: "c1"},
		{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c", Name: "n"}}},
		{Role: "robot"},
		nil,
	}
	for i, m := range bad {
		if err := s.Enqueue(ctx, ws, th.ID, m); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("bad message %d: %v, want ErrInvalid", i, err)
		}
	}
	for name, err := range map[string]error{
		"Enqueue":      s.Enqueue(ctx, "wsp_other", th.ID, &store.Message{Role: store.RoleUser}),
		"Queued":       second(s.Queued(ctx, "wsp_other", th.ID)),
		"AppendQueued": second(s.AppendQueued(ctx, "wsp_other", th.ID)),
	} {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s through another workspace: %v, want ErrNotFound", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// testQueuePeek checks AppendPeek (store.QueuePeeker): an append that says whether the
// thread's queue holds messages, with Append's rules.
func testQueuePeek(t *testing.T, s store.Store) {
	p, ok := s.(store.QueuePeeker)
	if !ok {
		t.Fatalf("%T is no store.QueuePeeker (a store.Backend must be)", s)
	}
	th := newThread(t, s, ws)
	peek := func(want bool, msgs ...*store.Message) {
		t.Helper()
		queued, err := p.AppendPeek(ctx, ws, th.ID, msgs...)
		if err != nil || queued != want {
			t.Fatalf("AppendPeek = %v, %v; want %v", queued, err, want)
		}
	}
	first := &store.Message{Role: store.RoleUser, Content: "start"}
	peek(false, first)
	if first.Seq != 1 || first.ThreadID != th.ID || first.ID == "" || first.CreatedAt.IsZero() {
		t.Fatalf("AppendPeek did not fill the message as Append does: %+v", first)
	}
	if err := s.Enqueue(ctx, ws, th.ID, &store.Message{Role: store.RoleUser, Content: "meanwhile"}); err != nil {
		t.Fatal(err)
	}
	peek(true, assistant("c1"))
	peek(true, result("c1", "done"))
	peek(true) // nothing to append: still an answer
	if _, err := s.AppendQueued(ctx, ws, th.ID); err != nil {
		t.Fatal(err)
	}
	peek(false, assistant("c2"))
	// Another thread's queue is not this one's.
	other := newThread(t, s, ws)
	if err := s.Enqueue(ctx, ws, other.ID, &store.Message{Role: store.RoleUser, Content: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	peek(false, result("c2", "done"))
	// Append's rules hold, and a refused append reports nothing queued.
	if queued, err := p.AppendPeek(ctx, ws, th.ID, result("c2", "again")); !errors.Is(err, store.ErrResultExists) || queued {
		t.Errorf("a second result: %v, %v; want ErrResultExists", queued, err)
	}
	for name, id := range map[string]string{"another workspace's thread": other.ID, "no thread": "thr_missing"} {
		workspace := ws
		if id == other.ID {
			workspace = "wsp_other"
		}
		if queued, err := p.AppendPeek(ctx, workspace, id, &store.Message{Role: store.RoleUser, Content: "x"}); !errors.Is(err, store.ErrNotFound) || queued {
			t.Errorf("%s: %v, %v; want ErrNotFound", name, queued, err)
		}
	}
	if got := all(t, s, ws, th.ID); len(got) != 6 {
		t.Fatalf("history holds %d messages, want 6 (start, c1, its result, the queued one, c2, its result)", len(got))
	}
}

// testQueueConcurrent enqueues from several goroutines while another drains the queue step by
// step: every message reaches the history exactly once, each writer's in its order.
func testQueueConcurrent(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.Enqueue(ctx, ws, th.ID, &store.Message{Role: store.RoleUser, Content: fmt.Sprintf("%d/%d", w, i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for drained := false; !drained; {
		select {
		case <-done:
			drained = true
		default:
		}
		if _, err := s.AppendQueued(ctx, ws, th.ID); err != nil {
			t.Fatal(err)
		}
	}
	next := make([]int, writers)
	hist := all(t, s, ws, th.ID)
	for _, m := range hist {
		var w, i int
		if _, err := fmt.Sscanf(m.Content, "%d/%d", &w, &i); err != nil || i != next[w] {
			t.Fatalf("history out of order or repeated at %q (want %d/%d)", m.Content, w, next[w])
		}
		next[w]++
	}
	if len(hist) != writers*each {
		t.Fatalf("%d messages in history, want %d", len(hist), writers*each)
	}
}

func testDecisions(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	mustAppend(t, s, th.ID, assistant("c1", "c2", "c3", "c4"), result("c4", "already ran"))
	ok := []*store.Decision{
		{CallID: "c2", Action: store.Edit, Args: json.RawMessage(`{"text":"edited"}`), UserID: "usr_1", KeyID: "key_1"},
		{CallID: "c1", Action: store.Approve, UserID: "usr_2", AccessToken: true},
		{CallID: "c3", Action: store.Deny, Message: "not on a Friday"},
	}
	for _, d := range ok {
		if err := s.Decide(ctx, ws, th.ID, d); err != nil {
			t.Fatalf("Decide %s: %v", d.CallID, err)
		}
		if d.DecidedAt.IsZero() {
			t.Fatalf("Decide did not set DecidedAt")
		}
	}
	refused := []struct {
		name string
		d    *store.Decision
		want error
	}{
		{"decided twice", &store.Decision{CallID: "c1", Action: store.Deny}, store.ErrDecided},
		{"a call with a result", &store.Decision{CallID: "c4", Action: store.Approve}, store.ErrInvalid},
		{"a call never asked for", &store.Decision{CallID: "c9", Action: store.Approve}, store.ErrInvalid},
		{"unknown action", &store.Decision{CallID: "c9", Action: "maybe"}, store.ErrInvalid},
		{"edit without arguments", &store.Decision{CallID: "c9", Action: store.Edit}, store.ErrInvalid},
		{"edit with an array", &store.Decision{CallID: "c9", Action: store.Edit, Args: json.RawMessage(`[1]`)}, store.ErrInvalid},
		{"approve with arguments", &store.Decision{CallID: "c9", Action: store.Approve, Args: json.RawMessage(`{}`)}, store.ErrInvalid},
		{"no call id", &store.Decision{Action: store.Approve}, store.ErrInvalid},
	}
	for _, r := range refused {
		if err := s.Decide(ctx, ws, th.ID, r.d); !errors.Is(err, r.want) {
			t.Errorf("%s: %v, want %v", r.name, err, r.want)
		}
	}
	if err := s.Decide(ctx, "wsp_other", th.ID, &store.Decision{CallID: "c1", Action: store.Approve}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("through another workspace: %v, want ErrNotFound", err)
	}
	got, err := s.Decisions(ctx, ws, th.ID)
	if err != nil || len(got) != 3 {
		t.Fatalf("Decisions = %v, %v", got, err)
	}
	for i, d := range got {
		w := ok[i]
		if d.CallID != w.CallID || d.Action != w.Action || !jsonEqual(d.Args, w.Args) || d.Message != w.Message ||
			d.UserID != w.UserID || d.KeyID != w.KeyID || d.AccessToken != w.AccessToken || !d.DecidedAt.Equal(w.DecidedAt) {
			t.Errorf("decision %d = %+v, want %+v", i, d, w)
		}
	}
	if _, err := s.Decisions(ctx, "wsp_other", th.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Decisions through another workspace: %v", err)
	}
	// A decided call is still pending until its result is appended.
	if p, _ := s.PendingCalls(ctx, ws, th.ID); len(p) != 3 {
		t.Errorf("pending after decisions: %d calls, want 3", len(p))
	}
}

func testLogs(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC) // whole microseconds: PostgreSQL keeps no finer
	for i := range 5 {
		e := &store.LogEntry{Level: store.LevelInfo, Message: fmt.Sprintf("line %d", i), Data: json.RawMessage(`{"i":` + fmt.Sprint(i) + `}`)}
		if i == 0 {
			e.Time = at
		}
		if err := s.Log(ctx, ws, th.ID, e); err != nil {
			t.Fatal(err)
		}
		if e.Seq != int64(i+1) || e.Time.IsZero() {
			t.Fatalf("entry %d: seq %d time %v", i, e.Seq, e.Time)
		}
	}
	last2, err := s.Logs(ctx, ws, th.ID, store.Page{Limit: 2})
	if err != nil || len(last2) != 2 || last2[0].Message != "line 3" || last2[1].Seq != 5 {
		t.Fatalf("last two = %v, %v", last2, err)
	}
	first, err := s.Logs(ctx, ws, th.ID, store.Page{Before: 2})
	if err != nil || len(first) != 1 || !first[0].Time.Equal(at) || !jsonEqual(first[0].Data, json.RawMessage(`{"i":0}`)) {
		t.Fatalf("first = %+v, %v", first, err)
	}
	bad := []struct {
		e    *store.LogEntry
		want error
	}{
		{&store.LogEntry{Level: "loud", Message: "x"}, store.ErrInvalid},
		{&store.LogEntry{Level: store.LevelWarn, Data: json.RawMessage(`{`)}, store.ErrInvalid},
		{&store.LogEntry{Level: store.LevelError, Message: strings.Repeat("x", store.MaxLogMessageBytes+1)}, store.ErrTooLarge},
		{nil, store.ErrInvalid},
	}
	for i, b := range bad {
		if err := s.Log(ctx, ws, th.ID, b.e); !errors.Is(err, b.want) {
			t.Errorf("bad entry %d: %v, want %v", i, err, b.want)
		}
	}
	if err := s.Log(ctx, "wsp_other", th.ID, &store.LogEntry{Level: store.LevelInfo}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Log through another workspace: %v", err)
	}
	if _, err := s.Logs(ctx, ws, th.ID, store.Page{Limit: 1001}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("oversized page: %v", err)
	}
	if n, _ := s.Logs(ctx, ws, th.ID, store.Page{}); len(n) != 5 {
		t.Errorf("refused entries were stored: %d entries", len(n))
	}
}
