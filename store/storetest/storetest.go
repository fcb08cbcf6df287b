// Package storetest is the conformance suite every store backend must pass. A backend's test
// calls Run with a function that opens a fresh, empty store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
//	}
package storetest

import (
	"context"
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

// Open returns a fresh, empty store that the test owns (and closes through t.Cleanup).
type Open func(t *testing.T) store.Store

// Run runs every conformance test against stores returned by open.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Threads", testThreads},
		{"UpdateThread", testUpdateThread},
		{"Children", testChildren},
		{"ThreadList", testThreadList},
		{"ThreadListFilters", testThreadListFilters},
		{"ThreadListByTagFollowsUpdates", testThreadListFollowsUpdates},
		{"AppendAndRead", testAppendAndRead},
		{"Paging", testPaging},
		{"ResultsExactlyOnce", testResultsExactlyOnce},
		{"ResultMustAnswerACall", testResultMustAnswerACall},
		{"BatchIsAtomic", testBatchIsAtomic},
		{"MessageIDTaken", testMessageIDTaken},
		{"AppendBatch", testAppendBatch},
		{"PendingCalls", testPendingCalls},
		{"MessageShapeRules", testMessageShapeRules},
		{"RoundTripsEveryField", testRoundTrip},
		{"MessageUsage", testMessageUsage},
		{"WorkspaceIsolation", testIsolation},
		{"ConcurrentAppends", testConcurrentAppends},
		{"ConcurrentResultsForOneCall", testConcurrentResults},
		{"ThreadStatusAndState", testThreadStatus},
		{"UpdateMessage", testUpdateMessage},
		{"Queue", testQueue},
		{"QueueConcurrent", testQueueConcurrent},
		{"QueuePeek", testQueuePeek},
		{"FinalAppend", testFinalAppend},
		{"Decisions", testDecisions},
		{"Logs", testLogs},
		{"StateWriteAndRead", testStateWriteAndRead},
		{"StateWriteRules", testStateWriteRules},
		{"StateInstances", testStateInstances},
		{"StateIsolation", testStateIsolation},
		{"StateResultExists", testStateResultExists},
		{"StateConcurrentWrites", testStateConcurrentWrites},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

const ws = "wsp_test"

var ctx = context.Background()

func newThread(t *testing.T, s store.Store, workspace string) *store.Thread {
	t.Helper()
	th := &store.Thread{WorkspaceID: workspace, AgentID: "agent_1", UserID: "usr_1"}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatalf("CreateThread: %v", err)
	}
	return th
}

func assistant(calls ...string) *store.Message {
	m := &store.Message{Role: store.RoleAssistant, Content: "calling"}
	for _, id := range calls {
		m.ToolCalls = append(m.ToolCalls, store.ToolCall{ID: id, Name: "echo", Args: json.RawMessage(`{"text":"` + id + `"}`)})
	}
	return m
}

func result(callID, text string) *store.Message {
	return &store.Message{Role: store.RoleTool, ToolCallID: callID, ToolName: "echo",
		Result: &store.ToolResult{Status: "success", Text: text}}
}

func mustAppend(t *testing.T, s store.Store, threadID string, msgs ...*store.Message) {
	t.Helper()
	if err := s.Append(ctx, ws, threadID, msgs...); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

func all(t *testing.T, s store.Store, workspace, threadID string) []*store.Message {
	t.Helper()
	var out []*store.Message
	before := int64(0)
	for {
		page, err := s.Messages(ctx, workspace, threadID, store.Page{Before: before, Limit: 1000})
		if err != nil {
			t.Fatalf("Messages: %v", err)
		}
		out = append(page, out...)
		if len(page) < 1000 {
			return out
		}
		before = page[0].Seq
	}
}

func testThreads(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	if !strings.HasPrefix(th.ID, store.PrefixThread+"_") || th.CreatedAt.IsZero() || th.UpdatedAt.IsZero() {
		t.Fatalf("CreateThread did not fill id and times: %+v", th)
	}
	got, err := s.Thread(ctx, ws, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != th.ID || got.AgentID != "agent_1" || got.UserID != "usr_1" || got.WorkspaceID != ws {
		t.Fatalf("Thread = %+v, want %+v", got, th)
	}
	if _, err := s.Thread(ctx, ws, "thr_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing thread: %v, want ErrNotFound", err)
	}
	if err := s.CreateThread(ctx, &store.Thread{}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("thread without workspace: %v, want ErrInvalid", err)
	}
	if err := s.CreateThread(ctx, &store.Thread{WorkspaceID: ws, ID: th.ID}); err == nil {
		t.Fatal("a second thread with the same id was created")
	}
}

func testUpdateThread(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	got, err := s.UpdateThread(ctx, ws, th.ID, func(x *store.Thread) error {
		x.StepCount, x.CurrentSide, x.Stopped = 3, "side_b", true
		x.Tags = []string{"name:researcher", "priority"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	reread, err := s.Thread(ctx, ws, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*store.Thread{got, reread} {
		if x.StepCount != 3 || x.CurrentSide != "side_b" || !x.Stopped || !slices.Equal(x.Tags, []string{"name:researcher", "priority"}) {
			t.Fatalf("after update: %+v", x)
		}
		if x.UpdatedAt.Before(th.UpdatedAt) {
			t.Fatalf("UpdatedAt went back: %v < %v", x.UpdatedAt, th.UpdatedAt)
		}
	}
	boom := errors.New("boom")
	if _, err := s.UpdateThread(ctx, ws, th.ID, func(x *store.Thread) error { x.StepCount = 99; return boom }); !errors.Is(err, boom) {
		t.Fatalf("UpdateThread error = %v, want the function's", err)
	}
	if x, _ := s.Thread(ctx, ws, th.ID); x.StepCount != 3 {
		t.Fatalf("a failed update was stored: step %d", x.StepCount)
	}
	if _, err := s.UpdateThread(ctx, ws, th.ID, func(x *store.Thread) error { x.AgentID = "other"; return nil }); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("changing the agent: %v, want ErrInvalid", err)
	}
	if _, err := s.UpdateThread(ctx, ws, "thr_missing", func(*store.Thread) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func testChildren(t *testing.T, s store.Store) {
	parent := newThread(t, s, ws)
	var want []string
	for i := range 3 {
		c := &store.Thread{WorkspaceID: ws, ParentID: parent.ID, Tags: []string{fmt.Sprintf("name:child%d", i)}}
		if err := s.CreateThread(ctx, c); err != nil {
			t.Fatal(err)
		}
		want = append(want, c.ID)
	}
	kids, err := s.Children(ctx, ws, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range kids {
		got = append(got, k.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Children = %v, want %v", got, want)
	}
	if err := s.CreateThread(ctx, &store.Thread{WorkspaceID: ws, ParentID: "thr_missing"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("child of a missing parent: %v, want ErrNotFound", err)
	}
	self := store.NewID(store.PrefixThread)
	if err := s.CreateThread(ctx, &store.Thread{ID: self, WorkspaceID: ws, ParentID: self}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a thread that is its own parent: %v, want ErrInvalid", err)
	}
	if err := s.CreateThread(ctx, nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a nil thread: %v, want ErrInvalid", err)
	}
}

// testThreadList pages through a workspace's threads, newest first: every thread once, in
// order (creation time, then id, both descending), none of another workspace.
func testThreadList(t *testing.T, s store.Store) {
	var want []*store.Thread
	for range 7 {
		th := newThread(t, s, ws)
		stored, err := s.Thread(ctx, ws, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, stored)
	}
	newThread(t, s, "wsp_other")
	slices.SortFunc(want, func(a, b *store.Thread) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	var got []string
	var sizes []int
	cursor := ""
	for range 10 {
		page, next, err := s.Threads(ctx, ws, store.ThreadFilter{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(page))
		for _, th := range page {
			got = append(got, th.ID)
			if th.WorkspaceID != ws {
				t.Errorf("thread %s of workspace %s listed in %s", th.ID, th.WorkspaceID, ws)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	var wantIDs []string
	for _, th := range want {
		wantIDs = append(wantIDs, th.ID)
	}
	if !slices.Equal(got, wantIDs) || !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Fatalf("pages of 3: %v in pages of %v, want %v in pages of [3 3 1]", got, sizes, wantIDs)
	}
	if all, next, err := s.Threads(ctx, ws, store.ThreadFilter{}); err != nil || len(all) != 7 || next != "" {
		t.Errorf("default page: %d threads, next %q, %v", len(all), next, err)
	}
	if none, next, err := s.Threads(ctx, "wsp_empty", store.ThreadFilter{Limit: 5}); err != nil || len(none) != 0 || next != "" {
		t.Errorf("empty workspace: %d threads, next %q, %v", len(none), next, err)
	}
	for _, bad := range []struct {
		limit  int
		cursor string
	}{{-1, ""}, {store.MaxThreadPage + 1, ""}, {3, "nonsense"}, {3, "12.msg_1"}, {3, "x.thr_1"}} {
		if _, _, err := s.Threads(ctx, ws, store.ThreadFilter{Limit: bad.limit, Cursor: bad.cursor}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Threads(limit %d, cursor %q): %v, want ErrInvalid", bad.limit, bad.cursor, err)
		}
	}
}

func testAppendAndRead(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	mustAppend(t, s, th.ID, &store.Message{Role: store.RoleUser, Content: "hello"}, assistant("c1", "c2"))
	mustAppend(t, s, th.ID, result("c1", "one"))
	mustAppend(t, s, th.ID, result("c2", "two"))
	msgs := all(t, s, ws, th.ID)
	if len(msgs) != 4 {
		t.Fatalf("got %d messages, want 4", len(msgs))
	}
	if msgs[3].Result == nil {
		t.Fatal("the last message lost its result")
	}
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Errorf("message %d has seq %d, want %d (no gaps, from 1)", i, m.Seq, i+1)
		}
		if !strings.HasPrefix(m.ID, store.PrefixMessage+"_") || m.ThreadID != th.ID || m.CreatedAt.IsZero() {
			t.Errorf("message %d: id %q thread %q created %v", i, m.ID, m.ThreadID, m.CreatedAt)
		}
	}
	if msgs[3].ToolCallID != "c2" || msgs[3].Result.Text != "two" {
		t.Fatalf("last message = %+v", msgs[3])
	}
	if err := s.Append(ctx, ws, "thr_missing", &store.Message{Role: store.RoleUser}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("append to a missing thread: %v", err)
	}
	if err := s.Append(ctx, ws, th.ID, &store.Message{Role: "robot"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unknown role: %v", err)
	}
}

func testPaging(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	var batch []*store.Message
	for i := range 250 {
		batch = append(batch, &store.Message{Role: store.RoleUser, Content: fmt.Sprint(i)})
	}
	mustAppend(t, s, th.ID, batch...)
	last, err := s.Messages(ctx, ws, th.ID, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 100 || last[0].Content != "150" || last[99].Content != "249" {
		t.Fatalf("last 100: got %d messages, want 150..249", len(last))
	}
	prev, err := s.Messages(ctx, ws, th.ID, store.Page{Before: last[0].Seq, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(prev) != 100 || prev[0].Content != "50" || prev[99].Content != "149" {
		t.Fatalf("previous page: got %d messages, want 50..149", len(prev))
	}
	def, err := s.Messages(ctx, ws, th.ID, store.Page{})
	if err != nil || len(def) != 100 {
		t.Fatalf("default page: %d, %v", len(def), err)
	}
	if _, err := s.Messages(ctx, ws, th.ID, store.Page{Limit: 5000}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("limit 5000: %v, want ErrInvalid", err)
	}
}

func testResultsExactlyOnce(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	mustAppend(t, s, th.ID, assistant("c1"))
	mustAppend(t, s, th.ID, result("c1", "first"))
	if err := s.Append(ctx, ws, th.ID, result("c1", "second")); !errors.Is(err, store.ErrResultExists) {
		t.Fatalf("second result: %v, want ErrResultExists", err)
	}
	msgs := all(t, s, ws, th.ID)
	if len(msgs) != 2 || msgs[1].Result.Text != "first" {
		t.Fatalf("history after a refused duplicate: %d messages", len(msgs))
	}
	// Two results for one call inside one batch are refused too.
	mustAppend(t, s, th.ID, assistant("c2"))
	if err := s.Append(ctx, ws, th.ID, result("c2", "a"), result("c2", "b")); !errors.Is(err, store.ErrResultExists) {
		t.Fatalf("duplicate inside a batch: %v", err)
	}
}

func testResultMustAnswerACall(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	if err := s.Append(ctx, ws, th.ID, result("nobody_asked", "x")); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("result for an unknown call: %v, want ErrInvalid", err)
	}
	other := newThread(t, s, ws)
	mustAppend(t, s, other.ID, assistant("elsewhere"))
	if err := s.Append(ctx, ws, th.ID, result("elsewhere", "x")); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("result for another thread's call: %v, want ErrInvalid", err)
	}
	if err := s.Append(ctx, ws, th.ID, &store.Message{Role: store.RoleTool, ToolCallID: ""}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("tool message without a call id: %v", err)
	}
	// A call and its result in one batch is fine: the call comes first.
	mustAppend(t, s, th.ID, assistant("c9"), result("c9", "done"))
}

func testBatchIsAtomic(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	mustAppend(t, s, th.ID, assistant("c1"))
	mustAppend(t, s, th.ID, result("c1", "ok"))
	err := s.Append(ctx, ws, th.ID, &store.Message{Role: store.RoleUser, Content: "lost"}, result("c1", "dup"))
	if !errors.Is(err, store.ErrResultExists) {
		t.Fatalf("got %v", err)
	}
	if msgs := all(t, s, ws, th.ID); len(msgs) != 2 {
		t.Fatalf("a failed batch left %d messages, want 2", len(msgs))
	}
	// Sequence numbers continue without a gap after the failed batch.
	mustAppend(t, s, th.ID, &store.Message{Role: store.RoleUser, Content: "next"})
	if msgs := all(t, s, ws, th.ID); len(msgs) != 3 || msgs[2].Seq != 3 {
		t.Fatalf("seq after a failed batch = %d, want 3", msgs[2].Seq)
	}
}

func testMessageIDTaken(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	first := &store.Message{ID: "msg_given_1", Role: store.RoleUser, Content: "hello"}
	mustAppend(t, s, th.ID, first)
	// The same id again, in this thread or another: refused, and recognisable as a taken id.
	other := newThread(t, s, ws)
	for _, threadID := range []string{th.ID, other.ID} {
		err := s.Append(ctx, ws, threadID, &store.Message{ID: "msg_given_1", Role: store.RoleUser, Content: "again"})
		if !errors.Is(err, store.ErrIDTaken) || !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("a taken message id in %s: %v, want ErrIDTaken and ErrInvalid", threadID, err)
		}
	}
	// Other refusals are not a taken id.
	mustAppend(t, s, th.ID, assistant("c1"), result("c1", "ok"))
	if err := s.Append(ctx, ws, th.ID, result("c1", "dup")); errors.Is(err, store.ErrIDTaken) {
		t.Fatalf("a second result reported as a taken id: %v", err)
	}
	if err := s.Append(ctx, ws, th.ID, assistant("c1")); errors.Is(err, store.ErrIDTaken) || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a repeated call id: %v, want ErrInvalid only", err)
	}
}

func testAppendBatch(t *testing.T, s store.Store) {
	b, ok := s.(store.BatchAppender)
	if !ok {
		t.Fatalf("%T does not implement store.BatchAppender", s)
	}
	a, c := newThread(t, s, ws), newThread(t, s, ws)
	at := time.Date(2026, 3, 4, 5, 6, 7, 8000, time.UTC)
	ops := []store.AppendOp{
		{WorkspaceID: ws, ThreadID: a.ID, Messages: []*store.Message{assistant("x1"), result("x1", "one")}, At: at},
		{WorkspaceID: ws, ThreadID: c.ID, Messages: []*store.Message{{Role: store.RoleUser, Content: "hi"}}},
		{WorkspaceID: ws, ThreadID: a.ID, Messages: []*store.Message{assistant("x2"), result("x2", "two")}},
	}
	before := time.Now().Add(-time.Second)
	if err := b.AppendBatch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	msgs := all(t, s, ws, a.ID)
	if len(msgs) != 4 || msgs[1].Result.Text != "one" || msgs[3].Result.Text != "two" || msgs[3].Seq != 4 {
		t.Fatalf("thread a after the batch: %d messages", len(msgs))
	}
	if !msgs[0].CreatedAt.Equal(at) || !msgs[1].CreatedAt.Equal(at) {
		t.Errorf("CreatedAt %v, want the op's At %v", msgs[0].CreatedAt, at)
	}
	if msgs[2].CreatedAt.Before(before) {
		t.Errorf("CreatedAt of an op without At is %v, want the batch's time", msgs[2].CreatedAt)
	}
	if ops[2].Messages[1].Seq != 4 || ops[2].Messages[1].ThreadID != a.ID || ops[0].Messages[0].ID == "" {
		t.Errorf("AppendBatch did not fill the messages: %+v", ops[2].Messages[1])
	}
	if got := all(t, s, ws, c.ID); len(got) != 1 || got[0].Content != "hi" {
		t.Fatalf("thread c after the batch: %+v", got)
	}

	// One op that fails stores nothing of the batch and says which it was.
	fail := []store.AppendOp{
		{WorkspaceID: ws, ThreadID: c.ID, Messages: []*store.Message{{Role: store.RoleUser, Content: "lost"}}},
		{WorkspaceID: ws, ThreadID: a.ID, Messages: []*store.Message{result("x1", "dup")}},
	}
	err := b.AppendBatch(ctx, fail)
	var be *store.BatchError
	if !errors.As(err, &be) || be.Index != 1 || !errors.Is(err, store.ErrResultExists) {
		t.Fatalf("a batch with a duplicate result: %v, want a BatchError for op 1 wrapping ErrResultExists", err)
	}
	if got := all(t, s, ws, c.ID); len(got) != 1 {
		t.Fatalf("a failed batch left %d messages in thread c, want 1", len(got))
	}
	for _, tc := range []struct {
		name string
		op   store.AppendOp
		want error
	}{
		{"a thread of another workspace", store.AppendOp{WorkspaceID: "wsp_other", ThreadID: a.ID, Messages: []*store.Message{{Role: store.RoleUser, Content: "x"}}}, store.ErrNotFound},
		{"an unknown role", store.AppendOp{WorkspaceID: ws, ThreadID: a.ID, Messages: []*store.Message{{Role: "robot"}}}, store.ErrInvalid},
	} {
		ok := store.AppendOp{WorkspaceID: ws, ThreadID: c.ID, Messages: []*store.Message{{Role: store.RoleUser, Content: "lost"}}}
		err := b.AppendBatch(ctx, []store.AppendOp{ok, tc.op})
		if !errors.As(err, &be) || be.Index != 1 || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want a BatchError for op 1 wrapping %v", tc.name, err, tc.want)
		}
	}
	if got := all(t, s, ws, c.ID); len(got) != 1 {
		t.Fatalf("failed batches left %d messages in thread c, want 1", len(got))
	}
}

func testPendingCalls(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	mustAppend(t, s, th.ID, assistant("a", "b", "c"))
	mustAppend(t, s, th.ID, result("a", "done"))
	pending, err := s.PendingCalls(ctx, ws, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range pending {
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, []string{"b", "c"}) {
		t.Fatalf("pending = %v, want [b c] in order", ids)
	}
	if string(pending[0].Args) != `{"text":"b"}` || pending[0].Name != "echo" {
		t.Fatalf("pending call lost its fields: %+v", pending[0])
	}
	mustAppend(t, s, th.ID, result("b", "done"), result("c", "done"))
	if pending, _ := s.PendingCalls(ctx, ws, th.ID); len(pending) != 0 {
		t.Fatalf("pending after all results = %v", pending)
	}
}

func testRoundTrip(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	call := store.ToolCall{ID: "call_1", Name: "get_forecast", Args: json.RawMessage(`{"city":"Paris","days":3}`), Reasoning: "the user asked"}
	res := &store.ToolResult{Status: "error", Text: "t", Value: json.RawMessage(`{"a":[1,2]}`), Error: "boom \u00e9 \"quoted\"",
		Code: "tool_error", Stack: "goroutine 1", Attachments: json.RawMessage(`[{"name":"a.png","mimeType":"image/png","data":"aGk="}]`),
		Meta: json.RawMessage(`{"duration_ms":1.5,"logs":[{"level":"log","text":"<b>hi</b>"}]}`)}
	mustAppend(t, s, th.ID, &store.Message{Role: store.RoleAssistant, Content: "multi\nline ✓", ToolCalls: []store.ToolCall{call}, Side: store.SideB},
		&store.Message{Role: store.RoleTool, ToolCallID: "call_1", ToolName: "get_forecast", Result: res})
	msgs := all(t, s, ws, th.ID)
	if len(msgs) != 2 {
		t.Fatalf("got %d messages, want 2", len(msgs))
	}
	a, r := msgs[0], msgs[1]
	if a.Content != "multi\nline ✓" || a.Side != store.SideB || len(a.ToolCalls) != 1 || a.ToolCalls[0].Reasoning != "the user asked" ||
		!jsonEqual(a.ToolCalls[0].Args, call.Args) {
		t.Fatalf("assistant message = %+v", a)
	}
	got := r.Result
	if got == nil || got.Status != res.Status || got.Text != res.Text || got.Error != res.Error || got.Code != res.Code ||
		got.Stack != res.Stack || !jsonEqual(got.Value, res.Value) || !jsonEqual(got.Attachments, res.Attachments) ||
		!jsonEqual(got.Meta, res.Meta) {
		t.Fatalf("result = %+v, want %+v", got, res)
	}
	if r.ToolName != "get_forecast" || r.Role != store.RoleTool {
		t.Fatalf("tool message = %+v", r)
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

func testIsolation(t *testing.T, s store.Store) {
	mine := newThread(t, s, ws)
	mustAppend(t, s, mine.ID, assistant("c1"))
	const other = "wsp_other"
	if _, err := s.Thread(ctx, other, mine.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Thread from another workspace: %v", err)
	}
	if _, err := s.Messages(ctx, other, mine.ID, store.Page{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Messages from another workspace: %v", err)
	}
	if _, err := s.PendingCalls(ctx, other, mine.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PendingCalls from another workspace: %v", err)
	}
	if err := s.Append(ctx, other, mine.ID, result("c1", "hijack")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Append from another workspace: %v", err)
	}
	if _, err := s.UpdateThread(ctx, other, mine.ID, func(x *store.Thread) error { x.Stopped = true; return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateThread from another workspace: %v", err)
	}
	if err := s.CreateThread(ctx, &store.Thread{WorkspaceID: other, ParentID: mine.ID}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a child in another workspace: %v", err)
	}
	if kids, err := s.Children(ctx, other, mine.ID); err != nil || len(kids) != 0 {
		t.Errorf("Children from another workspace: %v %v", kids, err)
	}
	if got := all(t, s, ws, mine.ID); len(got) != 1 {
		t.Errorf("the owner's history changed: %d messages", len(got))
	}
	if th, _ := s.Thread(ctx, ws, mine.ID); th.Stopped {
		t.Error("another workspace stopped the thread")
	}
}

// testConcurrentAppends appends from many goroutines to many threads at once: nothing is lost,
// and within a thread each writer's messages keep their order.
func testConcurrentAppends(t *testing.T, s store.Store) {
	const threads, writers, each = 4, 4, 25
	var ids []string
	for range threads {
		ids = append(ids, newThread(t, s, ws).ID)
	}
	var wg sync.WaitGroup
	errs := make(chan error, threads*writers)
	for _, id := range ids {
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					callID := fmt.Sprintf("w%d_%d", w, i)
					if err := s.Append(ctx, ws, id, assistant(callID), result(callID, fmt.Sprint(i))); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append: %v", err)
	}
	for _, id := range ids {
		msgs := all(t, s, ws, id)
		if len(msgs) != writers*each*2 {
			t.Fatalf("thread %s has %d messages, want %d", id, len(msgs), writers*each*2)
		}
		next := map[int]int{}
		for i, m := range msgs {
			if m.Seq != int64(i+1) {
				t.Fatalf("seq %d at position %d", m.Seq, i)
			}
			if m.Role != store.RoleTool {
				continue
			}
			// Each result directly follows its call, and each writer's results are in order.
			if prev := msgs[i-1]; prev.Role != store.RoleAssistant || prev.ToolCalls[0].ID != m.ToolCallID {
				t.Fatalf("result %s is not right after its call", m.ToolCallID)
			}
			var w, n int
			fmt.Sscanf(m.ToolCallID, "w%d_%d", &w, &n)
			if n != next[w] {
				t.Fatalf("writer %d: result %d came when %d was due", w, n, next[w])
			}
			next[w]++
		}
	}
}

// testConcurrentResults races many writers to answer the same call: exactly one wins.
func testConcurrentResults(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	mustAppend(t, s, th.ID, assistant("contested"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, dups := 0, 0
	for i := range 16 {
		wg.Go(func() {
			err := s.Append(ctx, ws, th.ID, result("contested", fmt.Sprint(i)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrResultExists):
				dups++
			default:
				t.Errorf("append: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || dups != 15 {
		t.Fatalf("%d writers won and %d were refused, want 1 and 15", wins, dups)
	}
	if msgs := all(t, s, ws, th.ID); len(msgs) != 2 {
		t.Fatalf("%d messages, want the call and one result", len(msgs))
	}
}

// testMessageShapeRules: a call id is unique in a thread, a result never comes before its
// call, only assistant messages carry calls and only tool messages carry results; a refused
// batch leaves the caller's messages as they were.
func testMessageShapeRules(t *testing.T, s store.Store) {
	th := newThread(t, s, ws)
	mustAppend(t, s, th.ID, assistant("c1"))
	tests := []struct {
		name string
		msgs []*store.Message
	}{
		{"call id reused", []*store.Message{assistant("c1")}},
		{"call id twice in one message", []*store.Message{assistant("c2", "c2")}},
		{"result before its call", []*store.Message{result("c3", "early"), assistant("c3")}},
		{"calls on a user message", []*store.Message{{Role: store.RoleUser, ToolCalls: []store.ToolCall{{ID: "c4", Name: "echo"}}}}},
		{"result on an assistant message", []*store.Message{{Role: store.RoleAssistant, ToolCallID: "c1", Result: &store.ToolResult{Status: "success"}}}},
		{"call without a name", []*store.Message{{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c5"}}}}},
		{"a side on a user message", []*store.Message{{Role: store.RoleUser, Content: "x", Side: store.SideA}}},
		{"an unknown side", []*store.Message{{Role: store.RoleAssistant, Content: "x", Side: "side_c"}}},
	}
	for _, tt := range tests {
		before := make([]store.Message, len(tt.msgs))
		for i, m := range tt.msgs {
			before[i] = *m
		}
		if err := s.Append(ctx, ws, th.ID, tt.msgs...); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tt.name, err)
		}
		for i, m := range tt.msgs {
			if m.ID != before[i].ID || m.Seq != before[i].Seq {
				t.Errorf("%s: a refused batch changed message %d: id %q seq %d", tt.name, i, m.ID, m.Seq)
			}
		}
	}
	if got := all(t, s, ws, th.ID); len(got) != 1 {
		t.Fatalf("refused batches left %d messages, want 1", len(got))
	}
}
