package memstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/store/storetest"
)

func openThreads(t *testing.T) *memstore.Store {
	s := memstore.New()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openThreads(t) })
}

func TestFilesConformance(t *testing.T) {
	storetest.RunFiles(t, func(t *testing.T) storetest.FilesStore { return openThreads(t) })
}

func TestVariables(t *testing.T) {
	storetest.RunVariables(t, func(t *testing.T) store.Store { return openThreads(t) })
}

func TestSecretKeys(t *testing.T) {
	storetest.RunSecretKeys(t, func(t *testing.T) storetest.SecretKeysStore { return openThreads(t) })
}

const threadWS = "wsp_1"

func threadsOK(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestThreadStamps: the thread records' ids and times come from the context, the names of
// attachments included, so a run replayed on a fresh store leaves identical records.
func TestThreadStamps(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	run := func() (*store.Thread, string) {
		n := 0
		ctx := stamp.WithClock(context.Background(), func() time.Time { return at })
		ctx = stamp.WithIDs(ctx, func(prefix string) string { n++; return fmt.Sprintf("%s_%d", prefix, n) })
		s := openThreads(t)
		th := &store.Thread{WorkspaceID: threadWS}
		threadsOK(t, s.CreateThread(ctx, th))
		call := &store.Message{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c1", Name: "f"}, {ID: "c2", Name: "f"}}}
		res := &store.Message{Role: store.RoleTool, ToolCallID: "c1", Result: &store.ToolResult{Status: "success"}}
		threadsOK(t, s.Append(ctx, threadWS, th.ID, call),
			s.AppendState(ctx, threadWS, th.ID, &store.StateWrite{Paths: []string{"/x"}, Value: json.RawMessage(`1`)}, res),
			s.Enqueue(ctx, threadWS, th.ID, &store.Message{Role: store.RoleUser, Content: "next"}),
			s.Decide(ctx, threadWS, th.ID, &store.Decision{CallID: "c2", Action: store.Approve}),
			s.Log(ctx, threadWS, th.ID, &store.LogEntry{Level: store.LevelInfo, Message: "m"}),
			s.SetVariable(ctx, threadWS, store.LayerThread, th.ID, "V", "v", false, false))
		_, err := s.AppendQueued(ctx, threadWS, th.ID)
		threadsOK(t, err)
		_, err = s.WriteFile(ctx, threadWS, th.ID, "/d/f.txt", []byte("f"), store.FileMeta{})
		threadsOK(t, err)
		a, err := s.AddAttachment(ctx, threadWS, th.ID, store.NewAttachment{Name: "a.txt", Data: []byte("a")})
		threadsOK(t, err)
		_, err = s.CopyFiles(ctx, threadWS, th.ID, []string{a.Path}, th.ID)
		threadsOK(t, err)
		return th, dumpThread(t, s, th.ID)
	}
	th, first := run()
	_, second := run()
	if first != second {
		t.Errorf("a replayed run left other records:\n%s\nthen\n%s", first, second)
	}
	if th.ID != "thr_1" || !th.CreatedAt.Equal(at) {
		t.Errorf("thread %s created at %v, want thr_1 at %v", th.ID, th.CreatedAt, at)
	}
}

// dumpThread renders what the store holds of a thread as JSON.
func dumpThread(t *testing.T, s *memstore.Store, threadID string) string {
	t.Helper()
	ctx := context.Background()
	th, err := s.Thread(ctx, threadWS, threadID)
	threadsOK(t, err)
	msgs, err := s.Messages(ctx, threadWS, threadID, store.Page{})
	threadsOK(t, err)
	decisions, err := s.Decisions(ctx, threadWS, threadID)
	threadsOK(t, err)
	logs, err := s.Logs(ctx, threadWS, threadID, store.Page{})
	threadsOK(t, err)
	vars, err := s.Variables(ctx, threadWS, store.LayerThread, threadID)
	threadsOK(t, err)
	paths, _, err := s.Find(ctx, threadWS, threadID, "/", "")
	threadsOK(t, err)
	var files []*store.FileInfo
	for _, p := range paths {
		fi, err := s.Stat(ctx, threadWS, threadID, p)
		threadsOK(t, err)
		files = append(files, fi)
	}
	b, err := json.MarshalIndent([]any{th, msgs, decisions, logs, vars, files}, "", " ")
	threadsOK(t, err)
	return string(b)
}

// TestThreadCopies: what a caller hands in or gets back shares nothing with the stored records.
func TestThreadCopies(t *testing.T) {
	ctx := context.Background()
	s := openThreads(t)
	th := &store.Thread{WorkspaceID: threadWS, Tags: []string{"a"}, State: json.RawMessage(`{"a":1}`)}
	threadsOK(t, s.CreateThread(ctx, th))
	call := &store.Message{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: "c1", Name: "f", Args: json.RawMessage(`{"a":1}`)}}}
	threadsOK(t, s.Append(ctx, threadWS, th.ID, call))
	var kept *store.Thread
	_, err := s.UpdateThread(ctx, threadWS, th.ID, func(t *store.Thread) error { kept = t; return nil })
	threadsOK(t, err)
	msgs, err := s.Messages(ctx, threadWS, th.ID, store.Page{})
	threadsOK(t, err)
	pending, err := s.PendingCalls(ctx, threadWS, th.ID)
	threadsOK(t, err)
	data := []byte("data")
	_, err = s.WriteFile(ctx, threadWS, th.ID, "/f", data, store.FileMeta{})
	threadsOK(t, err)
	read, _, err := s.ReadFile(ctx, threadWS, th.ID, "/f")
	threadsOK(t, err)

	before := dumpThread(t, s, th.ID)
	th.Tags[0], th.State[2], kept.Tags[0], kept.State[2] = "X", 'X', "Y", 'Y'
	call.ToolCalls[0].Args[2], msgs[0].ToolCalls[0].Args[2], msgs[0].Content, pending[0].Args[2] = 'X', 'Y', "changed", 'Z'
	data[0], read[1] = 'X', 'Y'
	if after := dumpThread(t, s, th.ID); after != before {
		t.Errorf("the stored thread changed with a caller's copy:\n%s\nthen\n%s", before, after)
	}
	if got, _, err := s.ReadFile(ctx, threadWS, th.ID, "/f"); err != nil || string(got) != "data" {
		t.Errorf("the stored file changed with a caller's copy: %q, %v", got, err)
	}
}
