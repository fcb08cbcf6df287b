package server_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"database/sql"
	"encoding/json"
	"net/url"
	"time"
	"slices"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

type noAppend struct{ *sqlite.Store }

func (noAppend) Append(context.Context, string, string, ...*store.Message) error { return nil }

func BenchmarkExpNoRecord(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("echo", "Echoes its text.", func(_ context.Context, a echoArgs) (string, error) { return a.Text, nil }))
	srv, err := server.New(context.Background(), server.Config{Store: noAppend{st}, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	benchCalls(b, ts.URL+"/mcp")
}

type workerAppend struct {
	*sqlite.Store
	jobs chan func()
}

func (w workerAppend) Append(ctx context.Context, ws, th string, msgs ...*store.Message) error {
	done := make(chan error, 1)
	w.jobs <- func() { done <- w.Store.Append(ctx, ws, th, msgs...) }
	return <-done
}

func BenchmarkExpWorker(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	w := workerAppend{st, make(chan func())}
	go func() {
		for f := range w.jobs {
			f()
		}
	}()
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("echo", "Echoes its text.", func(_ context.Context, a echoArgs) (string, error) { return a.Text, nil }))
	srv, err := server.New(context.Background(), server.Config{Store: w, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	benchCalls(b, ts.URL+"/mcp")
}

type timedAppend struct {
	*sqlite.Store
	lat *[]time.Duration
}

func (w timedAppend) Append(ctx context.Context, ws, th string, msgs ...*store.Message) error {
	t0 := time.Now()
	err := w.Store.Append(ctx, ws, th, msgs...)
	*w.lat = append(*w.lat, time.Since(t0))
	return err
}

func BenchmarkExpTimed(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var lat []time.Duration
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("echo", "Echoes its text.", func(_ context.Context, a echoArgs) (string, error) { return a.Text, nil }))
	srv, err := server.New(context.Background(), server.Config{Store: timedAppend{st, &lat}, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	benchCalls(b, ts.URL+"/mcp")
	slices.Sort(lat)
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "append-p50-µs")
	b.ReportMetric(float64(sum.Microseconds())/float64(len(lat)), "append-mean-µs")
}

type rawAppend struct {
	*sqlite.Store
	db  *sql.DB
	ins *sql.Stmt
}

func (w rawAppend) Append(ctx context.Context, ws, th string, msgs ...*store.Message) error {
	b, _ := json.Marshal(msgs)
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Stmt(w.ins).Exec(th, string(b)); err != nil {
		return err
	}
	return tx.Commit()
}

func BenchmarkExpRaw(b *testing.B) {
	dir := b.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "bench.db")+"?"+url.Values{
		"_pragma": {"busy_timeout(5000)", "foreign_keys(1)", "journal_mode(WAL)", "synchronous(NORMAL)"},
		"_txlock": {"immediate"},
	}.Encode())
	db.SetMaxOpenConns(1)
	db.Exec(`CREATE TABLE rawlog (id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, body TEXT NOT NULL)`)
	ins, _ := db.Prepare(`INSERT INTO rawlog (thread_id, body) VALUES (?, ?)`)
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("echo", "Echoes its text.", func(_ context.Context, a echoArgs) (string, error) { return a.Text, nil }))
	srv, err := server.New(context.Background(), server.Config{Store: rawAppend{st, db, ins}, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	benchCalls(b, ts.URL+"/mcp")
}
