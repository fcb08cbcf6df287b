package thread_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver/internal/backendtest"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

const ws = "wsp_test"

var ctx = context.Background()

func newThread(t *testing.T, st thread.Store) *thread.Thread {
	t.Helper()
	th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: ws, AgentID: "agt_1", UserID: "usr_1", Name: "main"})
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func TestIdentityAndExecutionState(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		th := newThread(t, st)
		if !strings.HasPrefix(th.ID(), "thr_") || th.WorkspaceID() != ws || th.AgentID() != "agt_1" || th.UserID() != "usr_1" ||
			th.Name() != "main" || th.ParentID() != "" {
			t.Fatalf("identity: %+v", th.Info())
		}
		if s := th.Scope(); s != (quiver.Scope{AgentID: "agt_1", UserID: "usr_1", WorkspaceID: ws, ThreadID: th.ID()}) {
			t.Fatalf("Scope = %+v", s)
		}
		if _, err := th.Advance(ctx, "side_b"); err != nil {
			t.Fatal(err)
		}
		if _, err := th.Advance(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := th.Stop(ctx, true); err != nil {
			t.Fatal(err)
		}
		again, err := thread.Open(ctx, st, ws, th.ID())
		if err != nil {
			t.Fatal(err)
		}
		info := again.Info()
		if e := again.Execution(); e.StepCount != 2 || e.Side != "side_b" || !info.Stopped {
			t.Fatalf("execution state after reopening: %+v stopped=%v", e, info.Stopped)
		}
		if _, err := thread.Open(ctx, st, "wsp_other", th.ID()); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("opening through another workspace: %v", err)
		}
		bad := []thread.Options{
			{WorkspaceID: ws, Name: " padded"},
			{WorkspaceID: ws, Name: "a", Tags: []string{"name:b"}},
			{WorkspaceID: ws, Name: strings.Repeat("n", store.MaxNameLen+1)},
		}
		for _, o := range bad {
			if _, err := thread.Create(ctx, st, o); !errors.Is(err, thread.ErrNameTag) {
				t.Errorf("Create(%+v) = %v, want ErrNameTag", o, err)
			}
		}
	})
}

// TestPersistThenAdvance is the loop a runtime writes: the model's calls are stored, each call
// runs through a dispatcher that records its result on the thread, and what is pending is
// exactly what has not run.
func TestPersistThenAdvance(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		th := newThread(t, st)
		reg := &quiver.Registry{}
		var ran []string
		var mu sync.Mutex
		echo := quiver.Func("echo", "Echoes text.", func(ctx context.Context, in struct {
			Text string `json:"text"`
		}) (string, error) {
			mu.Lock()
			ran = append(ran, in.Text)
			mu.Unlock()
			return in.Text, nil
		})
		boom := quiver.Func("boom", "Panics.", func(context.Context, struct{}) (string, error) { panic("kaboom") })
		if err := reg.Register(echo, boom); err != nil {
			t.Fatal(err)
		}
		d := &quiver.Dispatcher{Registry: reg, Recorder: th}

		if _, err := th.AppendUser(ctx, "go"); err != nil {
			t.Fatal(err)
		}
		calls := []quiver.Call{
			{ID: "c1", Name: "echo", Args: json.RawMessage(`{"text":"one"}`), Reasoning: "first"},
			{ID: "c2", Name: "nope", Args: json.RawMessage(`{}`)},
			{ID: "c3", Name: "boom"},
			{ID: "c4", Name: "echo", Args: json.RawMessage(`{"text":`)}, // malformed: stored as a JSON string
			{ID: "c5", Name: "echo", Args: json.RawMessage(`{"text":"five"}`)},
		}
		if _, err := th.AppendAssistant(ctx, "calling", calls); err != nil {
			t.Fatal(err)
		}
		pending, err := th.Pending(ctx)
		if err != nil || len(pending) != 5 || pending[0].Reasoning != "first" {
			t.Fatalf("Pending = %+v, %v", pending, err)
		}
		// Run the first two, as a process would before crashing.
		for _, c := range pending[:2] {
			if _, err := d.Dispatch(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		// A resumed run sees only the rest, in order.
		pending, _ = th.Pending(ctx)
		var ids []string
		for _, c := range pending {
			ids = append(ids, c.ID)
		}
		if !slices.Equal(ids, []string{"c3", "c4", "c5"}) {
			t.Fatalf("pending after two results: %v", ids)
		}
		for _, c := range pending {
			if _, err := d.Dispatch(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(ran, []string{"one", "five"}) {
			t.Errorf("handlers ran for %v, want [one five] (each once)", ran)
		}
		// A caller that runs a completed call again anyway cannot store a second result.
		if _, err := d.Dispatch(ctx, calls[0]); !errors.Is(err, store.ErrResultExists) {
			t.Fatalf("second result for c1: %v, want ErrResultExists", err)
		}
		hist, err := th.History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			callID, status string
			code           quiver.Code
		}{{"c1", "success", ""}, {"c2", "error", quiver.CodeUnknownTool}, {"c3", "error", quiver.CodePanic},
			{"c4", "error", quiver.CodeInvalidJSON}, {"c5", "success", ""}}
		tools := hist[2:]
		if len(tools) != len(want) {
			t.Fatalf("%d tool messages, want %d", len(tools), len(want))
		}
		for i, w := range want {
			m := tools[i]
			r, err := thread.Result(m.Result)
			if err != nil {
				t.Fatal(err)
			}
			if m.ToolCallID != w.callID || string(r.Status) != w.status || r.Code != w.code {
				t.Errorf("result %d: call %s status %s code %s, want %+v", i, m.ToolCallID, r.Status, r.Code, w)
			}
		}
		if got := thread.HistoryArgs(hist[1].ToolCalls[3].Args); string(got) != "{}" {
			t.Errorf("malformed arguments for a provider: %s, want {}", got)
		}
		if r, _ := thread.Result(tools[2].Result); r.Stack == "" || strings.Contains(tools[2].Content, "goroutine") {
			t.Errorf("panic result: stack kept %v, model text %q", r.Stack != "", tools[2].Content)
		}
		if p, _ := th.Pending(ctx); len(p) != 0 {
			t.Errorf("still pending: %v", p)
		}
		if _, err := thread.Result(nil); err == nil {
			t.Error("Result(nil) succeeded")
		}
	})
}

func TestAttachmentsAreStoredAndReferenced(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake image bytes")
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		th := newThread(t, st)
		existing, err := th.Files().Write(ctx, "/reports/q3.pdf", []byte("%PDF-1.7"), store.FileMeta{})
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name   string
			atts   []quiver.Attachment
			status quiver.Status
			check  func(t *testing.T, r *quiver.Result)
		}{
			{"new data is stored under /attachments and becomes a reference",
				[]quiver.Attachment{{Name: "chart.png", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(png), Width: 4, Height: 3}},
				quiver.StatusSuccess, func(t *testing.T, r *quiver.Result) {
					a := r.Attachments[0]
					if !a.IsRef() || !strings.HasPrefix(a.Path, "/attachments/") || !strings.HasSuffix(a.Path, ".png") ||
						a.Size != int64(len(png)) || a.Width != 4 || !strings.HasPrefix(a.ID, "fil_") {
						t.Fatalf("reference %+v", a)
					}
					data, _, err := th.Files().Read(ctx, a.Path)
					if err != nil || string(data) != string(png) {
						t.Fatalf("stored file: %q, %v", data, err)
					}
				}},
			{"a reference passes through", []quiver.Attachment{thread.AttachmentRef(existing)}, quiver.StatusSuccess,
				func(t *testing.T, r *quiver.Result) {
					if r.Attachments[0].Path != "/reports/q3.pdf" || r.Attachments[0].ID != existing.ID {
						t.Fatalf("reference changed: %+v", r.Attachments[0])
					}
				}},
			{"invalid base64 becomes an error result", []quiver.Attachment{{Name: "x.bin", MimeType: "application/octet-stream", Data: "!!not base64"}},
				quiver.StatusError, func(t *testing.T, r *quiver.Result) {
					if !strings.Contains(r.Error, "x.bin") || len(r.Attachments) != 0 {
						t.Fatalf("error result %+v", r)
					}
				}},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				id := fmt.Sprintf("a%d", i)
				if _, err := th.AppendAssistant(ctx, "", []quiver.Call{{ID: id, Name: "make"}}); err != nil {
					t.Fatal(err)
				}
				r := &quiver.Result{Status: quiver.StatusSuccess, Text: "here", Attachments: c.atts}
				if err := th.RecordResult(ctx, &quiver.Call{ID: id, Name: "make"}, r); err != nil {
					t.Fatal(err)
				}
				if r.Status != c.status {
					t.Fatalf("status %s, want %s (%s)", r.Status, c.status, r.Error)
				}
				c.check(t, r)
				hist, _ := th.History(ctx)
				stored, err := thread.Result(hist[len(hist)-1].Result)
				if err != nil {
					t.Fatal(err)
				}
				a, _ := json.Marshal(stored)
				b, _ := json.Marshal(r)
				if string(a) != string(b) {
					t.Fatalf("stored result differs from the caller's:\n%s\n%s", a, b)
				}
			})
		}
		if err := th.RecordResult(ctx, &quiver.Call{Name: "make"}, quiver.Text("x")); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("recording without a call id: %v", err)
		}
	})
}

func TestChildrenRegistryAndCrossThreadAttachments(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		parent := newThread(t, st)
		researcher, err := parent.Spawn(ctx, thread.ChildOptions{Name: "researcher", AgentID: "agt_r", Blocking: true, Resumable: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parent.Spawn(ctx, thread.ChildOptions{Name: "writer", AgentID: "agt_w"}); err != nil {
			t.Fatal(err)
		}
		if researcher.ParentID() != parent.ID() || researcher.UserID() != "usr_1" || researcher.Info().Status != store.StatusRunning {
			t.Fatalf("child %+v", researcher.Info())
		}
		if _, err := researcher.SetStatus(ctx, store.StatusIdle); err != nil {
			t.Fatal(err)
		}
		kids, err := parent.Children(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []thread.Child{
			{Ref: researcher.ID(), Name: "researcher", AgentID: "agt_r", Status: store.StatusIdle, Blocking: true, Resumable: true},
			{Ref: kids[1].Ref, Name: "writer", AgentID: "agt_w", Status: store.StatusRunning},
		}
		if !slices.Equal(kids, want) {
			t.Fatalf("registry %+v, want %+v", kids, want)
		}
		writer, err := parent.Child(ctx, kids[1].Ref)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := writer.SetStatus(ctx, store.StatusTerminated); err != nil {
			t.Fatal(err)
		}
		if _, err := writer.SetStatus(ctx, store.StatusRunning); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("restarting a terminated child: %v", err)
		}
		kids, _ = parent.Children(ctx)
		if thread.Live(kids) != 1 {
			t.Fatalf("live children %d, want 1", thread.Live(kids))
		}
		// A reference that is not a child of this thread is refused, even a real thread.
		stranger := newThread(t, st)
		if _, err := parent.Child(ctx, stranger.ID()); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Child(stranger) = %v", err)
		}
		if p, err := researcher.Parent(ctx); err != nil || p.ID() != parent.ID() {
			t.Fatalf("Parent = %v, %v", p, err)
		}
		if _, err := parent.Parent(ctx); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("root Parent: %v", err)
		}

		// R7: the child's result brings its attachment into the parent under a new path.
		fi, err := researcher.Files().Write(ctx, "/attachments/notes.txt", []byte("findings"), store.FileMeta{Description: "notes"})
		if err != nil {
			t.Fatal(err)
		}
		atts := []quiver.Attachment{thread.AttachmentRef(fi), {Name: "new.txt", MimeType: "text/plain", Data: "aGk="}}
		got, err := parent.Files().CopyAttachments(ctx, researcher, atts)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Path == fi.Path && got[0].ID == fi.ID || !strings.HasPrefix(got[0].Path, "/attachments/") || got[0].Description != "notes" {
			t.Fatalf("copied reference %+v (source %+v)", got[0], fi)
		}
		if got[1] != atts[1] {
			t.Fatalf("new data changed on the way: %+v", got[1])
		}
		data, _, err := parent.Files().Read(ctx, got[0].Path)
		if err != nil || string(data) != "findings" {
			t.Fatalf("copy in the parent: %q, %v", data, err)
		}
		if _, err := parent.Files().CopyAttachments(ctx, researcher, []quiver.Attachment{{Type: "file", Path: "/attachments/missing.txt", ID: "fil_x"}}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("copying a missing file: %v", err)
		}
	})
}

func TestQueueUpdateAndLogs(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		th := newThread(t, st)
		m, err := th.AppendUser(ctx, "helo")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := th.UpdateMessage(ctx, m.ID, "hello"); err != nil {
			t.Fatal(err)
		}
		if err := th.Queue(ctx, &store.Message{Role: store.RoleUser, Content: "child finished: 42"}); err != nil {
			t.Fatal(err)
		}
		if q, _ := th.Queued(ctx); len(q) != 1 {
			t.Fatalf("queued %d", len(q))
		}
		if _, err := th.TakeQueued(ctx); err != nil {
			t.Fatal(err)
		}
		hist, _ := th.History(ctx)
		if len(hist) != 2 || hist[0].Content != "hello" || hist[1].Content != "child finished: 42" {
			t.Fatalf("history %v", hist)
		}
		if err := th.Log(ctx, store.LevelInfo, "step started", map[string]int{"step": 1}); err != nil {
			t.Fatal(err)
		}
		if err := th.Log(ctx, store.LevelInfo, "bad data", func() {}); err == nil {
			t.Fatal("logging data that is not JSON succeeded")
		}
		logs, err := th.Logs(ctx, store.Page{})
		if err != nil || len(logs) != 1 || string(logs[0].Data) != `{"step":1}` {
			t.Fatalf("logs %+v, %v", logs, err)
		}
	})
}

// TestHandlersReachTheThread: a handler finds its thread in the context and writes to
// its file system.
func TestHandlersReachTheThread(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		th := newThread(t, st)
		save := quiver.Func("save_note", "Saves a note in the thread.", func(ctx context.Context, in struct {
			Text string `json:"text"`
		}) (string, error) {
			cur, ok := thread.FromContext(ctx)
			if !ok {
				return "", errors.New("no thread in the context")
			}
			if quiver.ScopeFrom(ctx).ThreadID != cur.ID() {
				return "", errors.New("scope and thread disagree")
			}
			fi, err := cur.Files().Write(ctx, "/notes/today.txt", []byte(in.Text), store.FileMeta{})
			if err != nil {
				return "", err
			}
			return fi.Path, nil
		})
		reg := &quiver.Registry{}
		if err := reg.Register(save); err != nil {
			t.Fatal(err)
		}
		d := &quiver.Dispatcher{Registry: reg, Recorder: th}
		if _, err := th.AppendAssistant(ctx, "", []quiver.Call{{ID: "n1", Name: "save_note", Args: json.RawMessage(`{"text":"buy milk"}`)}}); err != nil {
			t.Fatal(err)
		}
		r, err := d.Dispatch(thread.NewContext(ctx, th), quiver.Call{ID: "n1", Name: "save_note", Args: json.RawMessage(`{"text":"buy milk"}`)})
		if err != nil || r.IsError() {
			t.Fatalf("Dispatch = %+v, %v", r, err)
		}
		data, _, err := th.Files().Read(ctx, "/notes/today.txt")
		if err != nil || string(data) != "buy milk" {
			t.Fatalf("note %q, %v", data, err)
		}
		if _, ok := thread.FromContext(ctx); ok {
			t.Fatal("a bare context has a thread")
		}
	})
}

// TestConcurrentRunsOnManyThreads: runs on many threads at once, under -race, each dispatching
// its calls in order; every thread ends with its results complete and in order.
func TestConcurrentRunsOnManyThreads(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		reg := &quiver.Registry{}
		if err := reg.Register(quiver.Func("echo", "Echoes.", func(_ context.Context, in struct {
			N int `json:"n"`
		}) (int, error) {
			return in.N, nil
		})); err != nil {
			t.Fatal(err)
		}
		const threads, steps = 8, 10
		var wg sync.WaitGroup
		ths := make([]*thread.Thread, threads)
		for i := range ths {
			ths[i] = newThread(t, st)
		}
		for _, th := range ths {
			wg.Go(func() {
				d := &quiver.Dispatcher{Registry: reg, Recorder: th}
				for s := range steps {
					call := quiver.Call{ID: fmt.Sprintf("s%d", s), Name: "echo", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, s))}
					if _, err := th.AppendAssistant(ctx, "", []quiver.Call{call}); err != nil {
						t.Error(err)
						return
					}
					if _, err := d.Dispatch(ctx, call); err != nil {
						t.Error(err)
						return
					}
					if _, err := th.Advance(ctx, ""); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		for _, th := range ths {
			hist, err := th.History(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(hist) != 2*steps {
				t.Fatalf("thread %s: %d messages, want %d", th.ID(), len(hist), 2*steps)
			}
			for s := range steps {
				res := hist[2*s+1]
				if res.ToolCallID != fmt.Sprintf("s%d", s) || string(res.Result.Value) != fmt.Sprint(s) {
					t.Fatalf("thread %s step %d: %+v", th.ID(), s, res.Result)
				}
			}
			if info, _ := th.Refresh(ctx); info.StepCount != steps {
				t.Fatalf("step count %d", info.StepCount)
			}
		}
	})
}

// TestCallArgumentsSurviveStorage: what a model wrote comes back from Pending byte for byte,
// whatever it was, and the history form is always an object.
func TestCallArgumentsSurviveStorage(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		th := newThread(t, st)
		args := []string{`{"a":1}`, `{"text":`, `[1,2]`, `"just a string"`, `null`, "{\"bad utf8\":\"\xff\"}", ``}
		var calls []quiver.Call
		for i, a := range args {
			calls = append(calls, quiver.Call{ID: fmt.Sprintf("c%d", i), Name: "t", Args: json.RawMessage(a)})
		}
		if _, err := th.AppendAssistant(ctx, "", calls); err != nil {
			t.Fatal(err)
		}
		pending, err := th.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hist, _ := th.History(ctx)
		for i, a := range args {
			got := string(pending[i].Args)
			want := a
			if a == "{\"bad utf8\":\"\xff\"}" {
				want = "{\"bad utf8\":\"\uFFFD\"}" // invalid UTF-8 cannot be stored as text
			}
			if got != want {
				t.Errorf("args %q came back as %q", a, got)
			}
			h := thread.HistoryArgs(hist[0].ToolCalls[i].Args)
			if h[0] != '{' || !json.Valid(h) {
				t.Errorf("history form of %q is %s", a, h)
			}
		}
	})
}

// TestQueueSeen: an append says once what it saw of the queue; a queue written by this process
// since, through any handle on the thread, makes that too old to use.
func TestQueueSeen(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		th := newThread(t, st)
		other, err := thread.Open(ctx, st, ws, th.ID())
		if err != nil {
			t.Fatal(err)
		}
		look := func(wantQueued, wantKnown bool) {
			t.Helper()
			if queued, known := th.QueueSeen(); queued != wantQueued || known != wantKnown {
				t.Fatalf("QueueSeen = %v, %v; want %v, %v", queued, known, wantQueued, wantKnown)
			}
		}
		look(false, false) // nothing appended yet
		if _, err := th.AppendUser(ctx, "hello"); err != nil {
			t.Fatal(err)
		}
		look(false, true)
		look(false, false) // said once
		if _, err := th.AppendUser(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		if err := other.Queue(ctx, &store.Message{Role: store.RoleUser, Content: "queued through another handle"}); err != nil {
			t.Fatal(err)
		}
		look(false, false) // the append looked before that queue write
		if _, err := th.AppendUser(ctx, "third"); err != nil {
			t.Fatal(err)
		}
		look(true, true)
		if _, err := th.TakeQueued(ctx); err != nil {
			t.Fatal(err)
		}
		look(false, false)
	})
}

// plainStore hides every optional interface of its backend: what a store written without
// them gives the thread.
type plainStore struct{ backendtest.Store }

// InjectFinal ends the thread with its last message when nothing is queued, and otherwise
// stores the message and reports the queue, with the store's AppendFinal or, for a store
// without it, in steps.
func TestInjectFinal(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		for name, s := range map[string]thread.Store{"AppendFinal": st, "in steps": plainStore{st}} {
			t.Run(name, func(t *testing.T) {
				th := newThread(t, s)
				idle := func(x *store.Thread) error { x.StepCount = 7; return nil }
				if err := s.Enqueue(ctx, ws, th.ID(), &store.Message{Role: store.RoleUser, Content: "meanwhile"}); err != nil {
					t.Fatal(err)
				}
				ended, err := th.InjectFinal(ctx, idle, &store.Message{Role: store.RoleAssistant, Content: "first"})
				if err != nil || ended {
					t.Fatalf("with a message queued: %v, %v; want not ended", ended, err)
				}
				if queued, known := th.QueueSeen(); !queued || !known {
					t.Errorf("QueueSeen = %v, %v after a final append that found the queue", queued, known)
				}
				if info, _ := th.Refresh(ctx); info.StepCount != 0 {
					t.Errorf("ended anyway: %+v", info)
				}
				if _, err := th.TakeQueued(ctx); err != nil {
					t.Fatal(err)
				}
				ended, err = th.InjectFinal(ctx, idle, &store.Message{Role: store.RoleAssistant, Content: "second"})
				if err != nil || !ended || th.Info().StepCount != 7 {
					t.Fatalf("InjectFinal = %v, %v, kept %+v; want ended", ended, err, th.Info())
				}
				hist, err := th.History(ctx)
				if err != nil || len(hist) != 3 || hist[2].Content != "second" {
					t.Fatalf("history %v, %v", hist, err)
				}
			})
		}
	})
}
