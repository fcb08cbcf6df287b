package platform_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// sources are a clock that ticks a millisecond per reading and ids that count per prefix:
// what a replay gives the records instead of the time and randomness.
type sources struct {
	mu    sync.Mutex
	ticks int
	count map[string]int
}

func (s *sources) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticks++
	return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(s.ticks) * time.Millisecond)
}

func (s *sources) id(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count[prefix]++
	return fmt.Sprintf("%s_%026d", prefix, s.count[prefix])
}

// scriptedRun runs a scripted agent on a fresh store under fresh sources: it calls a typed
// tool that logs and one that returns an attachment, then answers. It returns every record
// the run left, as JSON.
func scriptedRun(t *testing.T, st store.Backend) string {
	t.Helper()
	src := &sources{count: map[string]int{}}
	ctx := quiver.WithIDs(quiver.WithClock(context.Background(), src.now), src.id)

	type sumArgs struct {
		A, B int
	}
	add := quiver.Func("add", "Adds two numbers.", func(ctx context.Context, a sumArgs) (string, error) {
		if th, ok := thread.FromContext(ctx); ok {
			if err := th.Log(ctx, store.LevelInfo, "adding", a); err != nil {
				return "", err
			}
		}
		return fmt.Sprint(a.A + a.B), nil
	})
	chart := quiver.Func("chart", "Draws a chart.", func(context.Context, struct{}) (*quiver.Result, error) {
		return &quiver.Result{Status: quiver.StatusSuccess, Text: "drawn", Attachments: []quiver.Attachment{
			{Name: "chart.png", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString([]byte("\x89PNG fake"))}}}, nil
	})
	reg := &quiver.Registry{}
	must(t, reg.Register(add, chart))
	adder := &agent.Agent{Name: "adder", Prompt: &agent.Prompt{Name: "adder", Model: "scripted:adder", Tools: []string{"add", "chart"}}}
	p, err := platform.New(platform.Config{Store: st, Registry: reg,
		Catalog: &agent.Catalog{Agents: map[string]*agent.Agent{"adder": adder}},
		OpenModel: func(string) (model.Model, error) {
			return scripted.Turns(
				scripted.Turn{Calls: []scripted.Call{{Name: "add", Args: map[string]any{"A": 2, "B": 3}}}},
				scripted.Turn{Calls: []scripted.Call{{Name: "chart"}}},
				scripted.Turn{Text: "2 + 3 = 5, and here is a chart."}), nil
		}})
	must(t, err)
	info, err := p.OpenThread(ctx, platform.Operator("wsp_local", "usr_1"), platform.NewThread{Agent: "adder", Tags: []string{"replay"}})
	must(t, err)
	th, err := thread.Open(ctx, st, info.WorkspaceID, info.ID)
	must(t, err)
	out, err := p.Runner().Run(ctx, th, adder, "What is 2 + 3?")
	must(t, err)
	if out.Text != "2 + 3 = 5, and here is a chart." {
		t.Fatalf("the run ended with %+v", out)
	}

	ws := info.WorkspaceID
	rec := map[string]any{}
	rec["thread"], err = st.Thread(ctx, ws, info.ID)
	must(t, err)
	rec["messages"], err = st.Messages(ctx, ws, info.ID, store.Page{Limit: 1000})
	must(t, err)
	rec["logs"], err = st.Logs(ctx, ws, info.ID, store.Page{Limit: 1000})
	must(t, err)
	rec["state"], err = st.State(ctx, ws, info.ID, "")
	must(t, err)
	rec["files"], err = st.ReadDir(ctx, ws, info.ID, store.AttachmentsDir)
	must(t, err)
	b, err := json.MarshalIndent(rec, "", " ")
	must(t, err)
	return string(b)
}

// A scripted run replayed on a fresh store with the same clock and id sources leaves
// identical records, on every backend: the runner, the dispatcher and the stores take their
// times and ids from the context (quiver.WithClock, quiver.WithIDs), not from the process.
func TestScriptedRunReplaysToIdenticalRecords(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) store.Backend
	}{
		{"memstore", func(*testing.T) store.Backend { return memstore.New() }},
		{"sqlite", func(t *testing.T) store.Backend {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
			must(t, err)
			t.Cleanup(func() { st.Close() })
			return st
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			first, second := scriptedRun(t, b.open(t)), scriptedRun(t, b.open(t))
			if first != second {
				t.Fatalf("the replay differs:\nfirst:\n%s\nsecond:\n%s", first, second)
			}
			// The sources were used, not the clock and randomness: had they not been, the
			// two runs could not agree.
			for _, want := range []string{`"id": "thr_00000000000000000000000001"`, `"created_at": "2026-01-02T03:04:05.`,
				`"message": "adding"`, `/attachments/20260102T0304`} {
				if !strings.Contains(first, want) {
					t.Errorf("the records hold no %s:\n%s", want, first)
				}
			}
		})
	}
}
