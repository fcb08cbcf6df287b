package jobs

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
)

// Start records a run's message before it returns when no run holds the thread, and says so
// to the runner's subscribers (the thread's event streams) first; when a run holds it, the
// message waits for the job's worker, which appends it once the thread is free (on both
// databases: on PostgreSQL the worker takes the lease for the append). Either way the message
// is in the history once, before the run's answer.
func TestStartRecordsTheMessage(t *testing.T) {
	for _, b := range backends(t) {
		for _, held := range []bool{false, true} {
			name := b.name + "/free"
			if held {
				name = b.name + "/held"
			}
			t.Run(name, func(t *testing.T) {
				_, reg := newTools(t)
				j := b.start(t, config(b.st, reg, &stepModel{}))
				th := newThread(t, b.st)
				var mu sync.Mutex
				var announced []agent.EventType
				defer j.runner.Subscribe(func(e agent.Event) {
					if e.ThreadID == th.ID() {
						mu.Lock()
						announced = append(announced, e.Type)
						mu.Unlock()
					}
				})()
				var release func()
				if held {
					r, ok, err := j.threads.try(context.Background(), th.ID())
					if err != nil || !ok {
						t.Fatalf("holding the thread's lease: %v %v", ok, err)
					}
					release = r
				}
				id, err := j.Start(context.Background(), RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "hello"})
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				first := append([]agent.EventType(nil), announced...)
				mu.Unlock()
				got := strings.Join(history(t, th), " | ")
				switch {
				case !held && (!strings.HasPrefix(got, "user:hello") || len(first) == 0 || first[0] != agent.EventMessage):
					t.Errorf("as Start returned on a free thread: history %q, events %v; want the message recorded and announced", got, first)
				case held && (got != "" || len(first) != 0):
					t.Errorf("as Start returned on a held thread: history %q, events %v; want nothing yet", got, first)
				}
				if release != nil {
					release()
				}
				waitState(t, j, id, rivertype.JobStateCompleted)
				if got, want := strings.Join(history(t, th), " | "), "user:hello | assistant:done"; got != want {
					t.Errorf("history %q, want %q", got, want)
				}
			})
		}
	}
}

// A run waits for a thread's lease that another holds (Start holds it a moment to record a
// message), takes it as soon as it is given back, and gives up once its wait has passed.
func TestLeaseWaitsForAHeldOne(t *testing.T) {
	type pair struct {
		name      string
		holder    lease
		impatient lease       // waits a millisecond
		patient   lease       // waits an hour
		waiting   func() bool // whether patient waits now; nil: not observable
	}
	// One process's leases are one: its wait changes between the two acquires.
	local := newLocalLease()
	local.wait = time.Millisecond
	pairs := []pair{{name: "local", holder: local, impatient: local, patient: patientLocal{local}}}
	if dsn := postgresDSN(t); dsn != "" {
		holder := nodeLease(t, dsn, leaseWait)
		pairs = append(pairs, pair{name: "postgres", holder: holder, impatient: nodeLease(t, dsn, time.Millisecond), patient: nodeLease(t, dsn, time.Hour), waiting: func() bool {
			var n int
			if err := holder.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
				WHERE locktype = 'advisory' AND classid = $1 AND NOT granted`, int64(leaseSpace)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		}})
	}
	ctx := context.Background()
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			thread := ids.New("thr")
			release, ok, err := p.holder.acquire(ctx, thread)
			if err != nil || !ok {
				t.Fatalf("the first holder: %v %v", ok, err)
			}
			if _, ok, err := p.patient.try(ctx, thread); err != nil || ok {
				t.Fatalf("try on a held lease: %v %v, want refused at once", ok, err)
			}
			if _, ok, err := p.impatient.acquire(ctx, thread); err != nil || ok {
				t.Fatalf("acquire on a lease held past its wait: %v %v, want refused", ok, err)
			}
			got := make(chan bool, 1)
			go func() {
				again, ok, err := p.patient.acquire(ctx, thread)
				if err == nil && ok {
					again()
				}
				got <- ok
			}()
			// Until PostgreSQL shows the acquire waiting: taken after the give-back, the lease
			// proves the wait, not a try that came after it.
			for p.waiting != nil && !p.waiting() {
				time.Sleep(time.Millisecond)
			}
			release()
			if !<-got {
				t.Fatal("a lease given back while another waited for it was not taken")
			}
		})
	}
}

// patientLocal is a local lease whose acquire waits an hour.
type patientLocal struct{ *localLease }

func (p patientLocal) acquire(ctx context.Context, threadID string) (func(), bool, error) {
	p.wait = time.Hour // before the goroutine that calls this reads it, after the test's acquires
	return p.localLease.acquire(ctx, threadID)
}

// postgresDSN is the test database's DSN, or "" when PostgreSQL is not tested.
func postgresDSN(t *testing.T) string {
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		return ""
	}
	return pgtest.DSN(t)
}
