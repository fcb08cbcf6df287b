//go:build unix

package jobs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/crashtest"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

// The child's side of TestKilledRunFinishesAfterRestart: it queues a run whose first call
// completes and whose second blocks, reports each call as it starts, and waits to be killed.
func TestCrashChild(t *testing.T) {
	path, dsn := os.Getenv("JOBS_CRASH_DB"), os.Getenv("JOBS_CRASH_PG")
	if path == "" && dsn == "" {
		return // not the child
	}
	var st thread.Store
	var err error
	var pool *pgxpool.Pool
	if dsn != "" {
		schemaName := os.Getenv("JOBS_CRASH_SCHEMA")
		st, pool, err = openPostgres(dsn, schemaName)
	} else {
		st, err = sqlite.Open(path)
	}
	if err != nil {
		crashtest.Fail("%v", err)
	}
	reg := &quiver.Registry{}
	for _, name := range []string{"work", "wait"} {
		reg.Register(quiver.Func(name, name, func(ctx context.Context, _ struct{}) (string, error) {
			crashtest.Report("ran " + quiver.CallFrom(ctx).ID)
			if name == "wait" {
				<-ctx.Done() // until the process is killed
			}
			return "done " + name, nil
		}))
	}
	cfg := config(st, reg, &stepModel{turns: []string{"work", "wait"}})
	var j *Jobs
	if pool != nil {
		j, err = StartPostgres(context.Background(), pool, cfg)
	} else {
		j, err = StartSQLite(context.Background(), path, cfg)
	}
	if err != nil {
		crashtest.Fail("%v", err)
	}
	th, err := thread.Create(context.Background(), st, thread.Options{WorkspaceID: ws})
	if err != nil {
		crashtest.Fail("%v", err)
	}
	if _, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", MessageID: ids.New("msg"), Message: "go"}); err != nil {
		crashtest.Fail("%v", err)
	}
	crashtest.Report("thread " + th.ID())
	select {}
}

// A process killed in the middle of a background run: the next process on the database makes
// the run available again and finishes it. The call that completed before the kill is not run
// again; the one that was running (it has no result) is.
func TestKilledRunFinishesAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	child := crashtest.Start(t, "TestCrashChild", "JOBS_CRASH_DB="+path)
	threadID, ran := killMidRun(t, child)
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tl, reg := newTools(t)
	close(tl.release) // this time the call that waited returns
	j, err := StartSQLite(context.Background(), path, config(st, reg, &stepModel{turns: []string{"work", "wait"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop(context.Background())
	checkFinished(t, st, threadID, ran, tl)
}

// On PostgreSQL, a node killed in the middle of a run loses its thread's lease with its
// connections: the next node finds the run running with its lease free and takes it again,
// without waiting for River's rescuer (RunTimeout later).
func TestKilledRunFinishesAfterRestartPostgres(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		t.Skipf("PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
	}
	dsn := pgtest.DSN(t)
	schemaName := pgtest.Schema(t, dsn)
	child := crashtest.Start(t, "TestCrashChild", "JOBS_CRASH_PG="+dsn, "JOBS_CRASH_SCHEMA="+schemaName)
	threadID, ran := killMidRun(t, child)
	st, pool, err := openPostgres(dsn, schemaName)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tl, reg := newTools(t)
	close(tl.release)
	cfg := config(st, reg, &stepModel{turns: []string{"work", "wait"}})
	cfg.orphanGrace, cfg.orphanCheck = 200*time.Millisecond, 100*time.Millisecond
	j, err := StartPostgres(context.Background(), pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop(context.Background())
	checkFinished(t, st, threadID, ran, tl)
}

// openPostgres opens the store and a pool on schemaName of dsn's database.
func openPostgres(dsn, schemaName string) (*postgres.Store, *pgxpool.Pool, error) {
	st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schemaName))
	if err != nil {
		return nil, nil, err
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	pc.ConnConfig.RuntimeParams["search_path"] = schemaName
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	return st, pool, err
}

// killMidRun waits until the child's run has completed its first call and started its
// second, kills the child, and returns the thread and the calls it ran.
func killMidRun(t testing.TB, child *crashtest.Child) (string, map[string]int) {
	t.Helper()
	threadID, ran := waitMidRun(t, child)
	kill(t, child)
	return threadID, ran
}

// waitMidRun waits until the child's run has completed its first call and started its second,
// and returns the thread and the calls it ran.
func waitMidRun(t testing.TB, child *crashtest.Child) (string, map[string]int) {
	t.Helper()
	var threadID string
	ran := map[string]int{}
	for !(threadID != "" && ran["call_2"] == 1) {
		line, ok := child.Line(30 * time.Second)
		if !ok {
			t.Fatalf("the child ended early: %s", child.Stderr())
		}
		switch {
		case strings.HasPrefix(line, "thread "):
			threadID = strings.TrimPrefix(line, "thread ")
		case strings.HasPrefix(line, "ran "):
			ran[strings.TrimPrefix(line, "ran ")]++
		case strings.HasPrefix(line, "error "):
			t.Fatal(line)
		}
	}
	return threadID, ran
}

// kill kills the child with SIGKILL and waits for it to end.
func kill(t testing.TB, child *crashtest.Child) {
	t.Helper()
	child.Kill()
	if _, killed := child.Finish(); !killed {
		t.Fatal("the child was not killed")
	}
}

// checkFinished waits for the run to finish after the restart and checks each call ran once,
// the one that was running when the child died again.
func checkFinished(t testing.TB, st thread.Store, threadID string, ran map[string]int, tl *tools) {
	t.Helper()
	th, err := thread.Open(context.Background(), st, ws, threadID)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := th.Refresh(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if h := history(t, th); len(h) > 0 && h[len(h)-1] == "assistant:done" && out.Status != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish after the restart: %q", history(t, th))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, want := strings.Join(history(t, th), " | "), "user:go | call:work | tool:work | call:wait | tool:wait | assistant:done"; got != want {
		t.Errorf("history %q, want %q", got, want)
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if ran["call_1"]+tl.ran["call_1"] != 1 || tl.ran["call_2"] != 1 {
		t.Errorf("calls run: %v before the kill, %v after; want call_1 once in all, call_2 again after", ran, tl.ran)
	}
	_ = rivertype.JobStateCompleted
}
