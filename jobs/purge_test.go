package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// The purge job removes, at start, the deleted tools whose retention has passed, logs each, and
// keeps the rest: a tool deleted with tier none and an active one.
func TestPurgeJob(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ent := b.st.(store.Entities)
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			w := &store.Workspace{Name: "purged"}
			must(ent.CreateWorkspace(ctx, w))
			in := &store.Schema{WorkspaceID: w.ID, Content: json.RawMessage(`{"type":"object"}`)}
			must(ent.CreateSchema(ctx, in))
			tool := func(name string) *store.Tool {
				tl := &store.Tool{WorkspaceID: w.ID, Name: name, Target: store.TargetClient, InputSchemaID: in.ID, OutputSchemaID: in.ID, Enabled: true}
				must(ent.CreateTool(ctx, tl))
				return tl
			}
			expired, kept, active := tool("expired"), tool("kept_forever"), tool("active")
			_, err := ent.DeleteTool(ctx, w.ID, expired.ID, store.RetentionShort)
			must(err)
			_, err = ent.DeleteTool(ctx, w.ID, kept.ID, store.RetentionNone)
			must(err)

			// Usage: a minute row past its 48 hours and an hour row past the retention go; the
			// others stay.
			at := time.Now().Add(8 * 24 * time.Hour)
			usageRow := func(span int64, age time.Duration, calls int64) *store.UsageRow {
				start := at.Add(-age).Unix() / span * span
				return &store.UsageRow{WorkspaceID: w.ID, Span: span, Dims: store.UsageAllDims, Start: start, Tool: "t",
					UsageCounts: store.UsageCounts{Calls: calls}}
			}
			us := b.st.(store.Usage)
			must(us.AddUsage(ctx, []*store.UsageRow{usageRow(60, time.Hour, 1), usageRow(60, 72*time.Hour, 2),
				usageRow(3600, 30*24*time.Hour, 4), usageRow(3600, 100*24*time.Hour, 8)}))

			logs := &lockedBuffer{}
			_, reg := newTools(t)
			cfg := config(b.st, reg, &stepModel{})
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
			cfg.Entities = ent
			cfg.Now = func() time.Time { return time.Now().Add(8 * 24 * time.Hour) } // past the short tier's 7 days
			cfg.UsageRetention = 90 * 24 * time.Hour
			b.start(t, cfg)

			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := ent.Tool(ctx, w.ID, expired.ID); errors.Is(err, store.ErrNotFound) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the expired tool is still there; log:\n%s", logs)
				}
			}
			for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), expired.ID); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the purge did not log %s:\n%s", expired.ID, logs)
				}
			}
			for _, tl := range []*store.Tool{kept, active} {
				if _, err := ent.Tool(ctx, w.ID, tl.ID); err != nil {
					t.Errorf("%s: %v, want it kept", tl.Name, err)
				}
			}
			for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "purged usage"); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the purge did not purge usage:\n%s", logs)
				}
			}
			left := 0
			for _, span := range []int64{60, 3600} {
				rows, err := us.UsageSums(ctx, &store.UsageQuery{WorkspaceID: w.ID, Span: span, Dims: store.UsageAllDims, From: 0, To: at.Unix() + 3600})
				must(err)
				for _, r := range rows {
					left += int(r.Calls)
				}
			}
			if left != 1+4 {
				t.Errorf("usage left: %d calls, want the recent minute's 1 and the 30-day-old hour's 4", left)
			}
			if strings.Contains(logs.String(), kept.ID) {
				t.Errorf("the purge logged a tool it kept:\n%s", logs)
			}
		})
	}
}
