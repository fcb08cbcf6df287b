package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// leftFile writes a journal file as a killed process leaves it: the header, a frame per
// record, then tail.
func leftFile(t *testing.T, path string, recs []*record, tail []byte) {
	t.Helper()
	b := []byte(magic)
	for _, r := range recs {
		if err := check(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		frame, err := encode(r)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, frame...)
	}
	b = append(b, tail...)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func callRecord(threadID, callID string, at time.Time) *record {
	return &record{WorkspaceID: "wsp_r", ThreadID: threadID, At: at, Messages: []*store.Message{
		{Role: store.RoleAssistant, ToolCalls: []store.ToolCall{{ID: callID, Name: "echo"}}},
		{Role: store.RoleTool, ToolCallID: callID, ToolName: "echo", Result: &store.ToolResult{Status: "success", Text: callID}},
	}}
}

func openReplayStore(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	th := &store.Thread{WorkspaceID: "wsp_r"}
	if err := st.CreateThread(context.Background(), th); err != nil {
		t.Fatal(err)
	}
	return st, th.ID
}

func storedCalls(t *testing.T, st store.Store, threadID string) (ids []string, times []time.Time) {
	t.Helper()
	msgs, err := st.Messages(context.Background(), "wsp_r", threadID, store.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Role == store.RoleTool {
			ids = append(ids, m.ToolCallID)
			times = append(times, m.CreatedAt)
		}
	}
	return ids, times
}

// TestReplayDamagedTail: the frames before a damaged or cut-short one are stored, in order and
// at the time they were appended; the rest of the file is reported and discarded.
func TestReplayDamagedTail(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tc := range []struct {
		name string
		tail func(frame []byte) []byte // what follows the two good frames, given a third one
		want int                       // bytes reported discarded (-1: the whole tail)
	}{
		{"clean end", func([]byte) []byte { return nil }, 0},
		{"header cut short", func(f []byte) []byte { return f[:5] }, -1},
		{"payload cut short", func(f []byte) []byte { return f[:len(f)-3] }, -1},
		{"payload damaged", func(f []byte) []byte { g := bytes.Clone(f); g[20] ^= 0x40; return g }, -1},
		{"checksum damaged", func(f []byte) []byte { g := bytes.Clone(f); g[5] ^= 1; return g }, -1},
		{"absurd length", func(f []byte) []byte { g := bytes.Clone(f); g[3] = 0xff; return g }, -1},
		{"zeros (a file extended but never written)", func([]byte) []byte { return make([]byte, 4096) }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, th := openReplayStore(t)
			dir := t.TempDir()
			third := callRecord(th, "c3", at)
			if err := check(context.Background(), third); err != nil {
				t.Fatal(err)
			}
			frame, err := encode(third)
			if err != nil {
				t.Fatal(err)
			}
			tail := tc.tail(frame)
			path := filepath.Join(dir, "20260101T000000.000000000-dead-000001.journal")
			leftFile(t, path, []*record{callRecord(th, "c1", at), callRecord(th, "c2", at.Add(time.Second))}, tail)
			var logs bytes.Buffer
			j, err := Open(context.Background(), dir, st, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			ids, times := storedCalls(t, st, th)
			if strings.Join(ids, ",") != "c1,c2" {
				t.Fatalf("replayed %v, want c1,c2", ids)
			}
			if !times[0].Equal(at) || !times[1].Equal(at.Add(time.Second)) {
				t.Errorf("replayed appends stored at %v, want the times they were appended", times)
			}
			discarded := strings.Contains(logs.String(), "damaged or cut short")
			if (len(tail) > 0) != discarded || (discarded && !strings.Contains(logs.String(), fmt.Sprintf("bytes=%d", len(tail)))) {
				t.Errorf("tail of %d bytes; the log says:\n%s", len(tail), logs.String())
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("the replayed file is still there: %v", err)
			}
		})
	}
}

// TestReplayStoresNothingTwice: a process killed after the store committed a batch and before
// it emptied its file leaves appends that are stored already; the replay recognises them and
// stores only the others.
func TestReplayStoresNothingTwice(t *testing.T) {
	st, th := openReplayStore(t)
	dir := t.TempDir()
	at := time.Now().UTC()
	var recs []*record
	for i := range 6 {
		r := callRecord(th, fmt.Sprintf("c%d", i), at)
		if err := check(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	// c0..c2 were stored before the kill; c3.. were not.
	for _, r := range recs[:3] {
		copies := make([]*store.Message, len(r.Messages))
		for i, m := range r.Messages {
			c := *m
			copies[i] = &c
		}
		if err := st.Append(context.Background(), r.WorkspaceID, r.ThreadID, copies...); err != nil {
			t.Fatal(err)
		}
	}
	leftFile(t, filepath.Join(dir, "x-000001.journal"), recs, nil)
	j, err := Open(context.Background(), dir, st, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ids, _ := storedCalls(t, st, th)
	if strings.Join(ids, ",") != "c0,c1,c2,c3,c4,c5" {
		t.Fatalf("after the replay: %v", ids)
	}
	if j.Refused() != 0 {
		t.Fatalf("Refused = %d: appends stored already were counted as refused", j.Refused())
	}
}

// TestReplaySkipsAnUndecodableRecord: a whole frame (its checksum matches) whose record does not
// decode is skipped and reported; the records after it are stored.
func TestReplaySkipsAnUndecodableRecord(t *testing.T) {
	st, th := openReplayStore(t)
	dir := t.TempDir()
	at := time.Now().UTC()
	bad := []byte(`{"w": 42}`)
	var frame [frameHeader]byte
	binary.LittleEndian.PutUint32(frame[0:4], uint32(len(bad)))
	binary.LittleEndian.PutUint32(frame[4:8], crc32.Checksum(bad, crcTable))
	first, second := callRecord(th, "c1", at), callRecord(th, "c2", at)
	for _, r := range []*record{first, second} {
		if err := check(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	f1, _ := encode(first)
	f2, _ := encode(second)
	data := slices.Concat([]byte(magic), f1, frame[:], bad, f2)
	if err := os.WriteFile(filepath.Join(dir, "x-000001.journal"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	j, err := Open(context.Background(), dir, st, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if ids, _ := storedCalls(t, st, th); strings.Join(ids, ",") != "c1,c2" {
		t.Fatalf("replayed %v, want c1,c2", ids)
	}
	if !strings.Contains(logs.String(), "do not decode") || !strings.Contains(logs.String(), "records=1") {
		t.Fatalf("the skipped record is not reported:\n%s", logs.String())
	}
}

// TestOpenRemovesFilesLeftWhileStarting: a file a dead process was starting (locked by nobody)
// is removed; one a live process is starting is left alone.
func TestOpenRemovesFilesLeftWhileStarting(t *testing.T) {
	st, _ := openReplayStore(t)
	dir := t.TempDir()
	dead := filepath.Join(dir, "a-000001.journal"+tmpSuffix)
	live := filepath.Join(dir, "b-000001.journal"+tmpSuffix)
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, []byte(magic), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := lock(f); err != nil {
		t.Fatal(err)
	}
	j, err := Open(context.Background(), dir, st, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead process's file is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live process's file was removed: %v", err)
	}
}
