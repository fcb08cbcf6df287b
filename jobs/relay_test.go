package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/thread"
)

// deltaModel answers in streamed pieces, one of them longer than a notification holds; asked
// "briefly", in one short piece.
type deltaModel struct{ pieces []string }

func (m *deltaModel) Name() string            { return "test:deltas" }
func (m *deltaModel) Dialect() schema.Dialect { return schema.OpenAI }

func (m *deltaModel) Generate(_ context.Context, req *model.Request, onDelta func(model.Delta)) (*model.Response, error) {
	pieces := m.pieces
	if last := req.Messages[len(req.Messages)-1]; last.Text == "briefly" {
		pieces = []string{"Hi"}
	}
	for _, p := range pieces {
		if onDelta != nil {
			onDelta(model.Delta{Text: p})
		}
	}
	return &model.Response{Text: strings.Join(pieces, "")}, nil
}

// eventLog collects the events of one thread that a subscription hears.
type eventLog struct {
	mu     sync.Mutex
	thread string
	events []agent.Event
}

func (l *eventLog) add(e agent.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.ThreadID == l.thread {
		l.events = append(l.events, e)
	}
}

func (l *eventLog) snapshot() []agent.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]agent.Event(nil), l.events...)
}

// A run on one node reaches the subscribers of the other nodes of its database, in order: its
// streamed text whole (a piece longer than a notification included), its steps and how it
// ended; the node that ran it hears nothing of its own from the relay, and a fleet on another
// schema of the same database nothing at all.
func TestRelayCarriesRunEventsToOtherNodes(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		t.Skipf("PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
	}
	dsn := pgtest.DSN(t)
	schemaName, otherSchema := pgtest.Schema(t, dsn), pgtest.Schema(t, dsn)
	pieces := []string{"Hello", ", ", strings.Repeat("é", 5000), " world"}
	node := func(schemaName string) (*Jobs, *agent.Runner, thread.Store) {
		return startNode(t, dsn, schemaName, &deltaModel{pieces: pieces})
	}
	a, runnerA, st := node(schemaName)
	b, _, _ := node(schemaName)
	elsewhere, _, _ := node(otherSchema)

	ctx := context.Background()
	th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: ws})
	if err != nil {
		t.Fatal(err)
	}
	heardByB, heardByA, heardElsewhere := &eventLog{thread: th.ID()}, &eventLog{thread: th.ID()}, &eventLog{thread: th.ID()}
	defer b.Subscribe(heardByB.add)()
	defer a.Subscribe(heardByA.add)()
	defer elsewhere.Subscribe(heardElsewhere.add)()

	ag, err := config(st, nil, nil).Agents(ctx, "helper")
	if err != nil {
		t.Fatal(err)
	}
	out, err := runnerA.Run(ctx, th, ag, "greet")
	if err != nil || out.Text != strings.Join(pieces, "") {
		t.Fatalf("the run on A: %+v %v", out, err)
	}
	got := awaitEnd(t, heardByB, 1)
	var text strings.Builder
	var types []agent.EventType
	for _, e := range got {
		if e.Type == agent.EventTextDelta {
			text.WriteString(e.Text)
			continue
		}
		types = append(types, e.Type)
	}
	if text.String() != strings.Join(pieces, "") {
		t.Errorf("the text B heard is %d bytes, want the %d A streamed", text.Len(), len(strings.Join(pieces, "")))
	}
	if want := []agent.EventType{agent.EventStepStarted, agent.EventModelTurn, agent.EventFinished}; !equalTypes(types, want) {
		t.Errorf("B heard %v besides the text, want %v in that order", types, want)
	}
	// An outcome too long for a notification goes without it (the store has it); one that
	// fits comes with the end.
	if end := got[len(got)-1]; end.Outcome != nil {
		t.Errorf("the end of a run whose outcome does not fit came with %d bytes of text", len(end.Outcome.Text))
	}
	if _, err = runnerA.Run(ctx, th, ag, "briefly"); err != nil {
		t.Fatal(err)
	}
	got = awaitEnd(t, heardByB, 2)
	if end := got[len(got)-1]; end.Outcome == nil || end.Outcome.Text != "Hi" {
		t.Errorf("the end B heard: %+v, want the run's outcome", end.Outcome)
	}
	time.Sleep(200 * time.Millisecond) // what A or the other schema would hear has arrived by now
	if n := len(heardByA.snapshot()); n != 0 {
		t.Errorf("A heard %d of its own events back from the relay", n)
	}
	if n := len(heardElsewhere.snapshot()); n != 0 {
		t.Errorf("a fleet on another schema heard %d events of this one", n)
	}
}

// A queued run's message reaches the other nodes once, first, and with the commit that stores
// it: sent in the transaction that queues the run, not again by the relay; a run refused (the
// thread has one queued) sends nothing.
func TestQueuedRunsMessageReachesOtherNodesOnce(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		t.Skipf("PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
	}
	dsn := pgtest.DSN(t)
	schemaName := pgtest.Schema(t, dsn)
	node := func() (*Jobs, *agent.Runner, thread.Store) {
		return startNode(t, dsn, schemaName, &deltaModel{pieces: []string{"Hi"}})
	}
	a, _, st := node()
	b, runnerB, _ := node()
	ctx := context.Background()
	th := newThread(t, st)
	// What B's streams see: the other nodes' events, and its own runs' (either node may take
	// the job).
	heard := &eventLog{thread: th.ID()}
	defer b.Subscribe(heard.add)()
	defer runnerB.Subscribe(heard.add)()
	if _, err := a.Start(ctx, RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "greet"}); err != nil {
		t.Fatal(err)
	}
	got := awaitEnd(t, heard, 1)
	var types []agent.EventType
	for _, e := range got {
		types = append(types, e.Type)
	}
	if want := []agent.EventType{agent.EventMessage, agent.EventStepStarted, agent.EventTextDelta, agent.EventModelTurn, agent.EventFinished}; !equalTypes(types, want) {
		t.Errorf("B heard %v, want %v: the message once, first", types, want)
	}
	// A run refused: its transaction rolled back, and its notification with it.
	other := newThread(t, st)
	heardOther := &eventLog{thread: other.ID()}
	defer b.Subscribe(heardOther.add)()
	defer runnerB.Subscribe(heardOther.add)()
	if _, err := a.client.Insert(ctx, RunArgs{WorkspaceID: ws, ThreadID: other.ID(), Agent: "helper"},
		&river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Start(ctx, RunArgs{WorkspaceID: ws, ThreadID: other.ID(), Agent: "helper", Message: "refused"}); !errors.Is(err, ErrRunQueued) {
		t.Fatalf("a run while one is queued: %v, want ErrRunQueued", err)
	}
	time.Sleep(200 * time.Millisecond) // what B would hear has arrived by now
	if got := heardOther.snapshot(); len(got) != 0 {
		t.Errorf("B heard %+v of a refused run, want nothing", got)
	}
}

// A queued run's last events (the model's turn, the run's end) reach the other nodes with the
// commit that ends the run, sent in its transaction (the node that ran it announces them
// marked Relayed, and its relay does not send them again), and after everything the run
// streamed before, which the node's publisher may still have been sending then.
func TestRunsEndReachesOtherNodesWithItsCommit(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) == "" && os.Getenv("CI") != "true" {
		t.Skipf("PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
	}
	dsn := pgtest.DSN(t)
	schemaName := pgtest.Schema(t, dsn)
	var pieces []string
	for i := range 1000 {
		pieces = append(pieces, fmt.Sprintf("w%d ", i))
	}
	type node struct {
		jobs          *Jobs
		relay, local  *eventLog
		store         thread.Store
		subscriptions []func()
	}
	start := func() *node {
		j, runner, st := startNode(t, dsn, schemaName, &deltaModel{pieces: pieces})
		n := &node{jobs: j, relay: &eventLog{}, local: &eventLog{}, store: st}
		n.subscriptions = []func(){j.Subscribe(n.relay.add), runner.Subscribe(n.local.add)}
		return n
	}
	nodes := []*node{start(), start()}
	ctx := context.Background()
	th := newThread(t, nodes[0].store)
	for _, n := range nodes {
		n.relay.thread, n.local.thread = th.ID(), th.ID()
		defer func() {
			for _, unsubscribe := range n.subscriptions {
				unsubscribe()
			}
		}()
	}
	if _, err := nodes[0].jobs.Start(ctx, RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", Message: "greet"}); err != nil {
		t.Fatal(err)
	}
	// Either node may take the job: the one whose runner announced the end ran it.
	var ran, other *node
	for deadline := time.Now().Add(30 * time.Second); ran == nil; time.Sleep(10 * time.Millisecond) {
		for i, n := range nodes {
			if got := n.local.snapshot(); len(got) > 0 && got[len(got)-1].Type == agent.EventFinished {
				ran, other = n, nodes[1-i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no node ended the run within 30s")
		}
	}
	for _, e := range ran.local.snapshot() {
		last := e.Type == agent.EventModelTurn || e.Type == agent.EventFinished
		if last != e.Relayed && e.Type != agent.EventMessage {
			t.Errorf("the node that ran it announced %s with Relayed %v", e.Type, e.Relayed)
		}
	}
	got := awaitEnd(t, other.relay, 1)
	var text strings.Builder
	var types []agent.EventType
	for _, e := range got {
		switch e.Type {
		case agent.EventMessage: // heard when the node that queued the run is not this one
			continue
		case agent.EventTextDelta:
			if len(types) == 0 || types[len(types)-1] != agent.EventStepStarted {
				t.Fatalf("text heard after %v: the run's end overtook what it streamed", types)
			}
			text.WriteString(e.Text)
			continue
		}
		types = append(types, e.Type)
	}
	if want := []agent.EventType{agent.EventStepStarted, agent.EventModelTurn, agent.EventFinished}; !equalTypes(types, want) {
		t.Errorf("the other node heard %v besides the text, want %v in that order", types, want)
	}
	if text.String() != strings.Join(pieces, "") {
		t.Errorf("the other node heard %d bytes of text, want the %d streamed, before the run's end", text.Len(), len(strings.Join(pieces, "")))
	}
}

// startNode starts a node of a fleet on the PostgreSQL schema of dsn, its agent answering
// with m, stopped when the test ends.
func startNode(t *testing.T, dsn, schemaName string, m model.Model) (*Jobs, *agent.Runner, thread.Store) {
	t.Helper()
	st, pool, err := openPostgres(dsn, schemaName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	_, reg := newTools(t)
	cfg := config(st, reg, m)
	j, err := StartPostgres(context.Background(), pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Stop(context.Background()) })
	return j, cfg.Runner, st
}

// awaitEnd waits until l holds the ends of n runs, and returns what it holds.
func awaitEnd(t *testing.T, l *eventLog, n int) []agent.Event {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, ends := l.snapshot(), 0
		for _, e := range got {
			if e.Type == agent.EventFinished {
				ends++
			}
		}
		if ends == n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("heard %d events and %d run ends within 30s, want %d ends: %+v", len(got), ends, n, got)
		}
	}
}

func equalTypes(a, b []agent.EventType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The relay's connections are made as the pool makes its own: a pool's BeforeConnect hook (one
// that fetches a fresh password, say) runs for them too.
func TestRelayConnectsThroughThePoolsHooks(t *testing.T) {
	dsn := postgresDSN(t)
	if dsn == "" {
		t.Skipf("PostgreSQL not tested: %s is not set", pgtest.EnvDSN)
	}
	schemaName := pgtest.Schema(t, dsn)
	st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schemaName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.RuntimeParams["search_path"] = schemaName
	name := "quiver_hook_" + schemaName[len(schemaName)-12:]
	pc.BeforeConnect = func(_ context.Context, c *pgx.ConnConfig) error {
		c.RuntimeParams["application_name"] = name
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	_, reg := newTools(t)
	j, err := StartPostgres(context.Background(), pool, config(st, reg, &stepModel{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Stop(context.Background()) })
	// StartPostgres returns once the relay listens: its connection is there, named by the hook.
	var listening int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN "' || $2 || '%'`, name, relayChannel).Scan(&listening); err != nil {
		t.Fatal(err)
	}
	if listening != 1 {
		t.Errorf("%d listening connections made through the pool's hook, want 1", listening)
	}
}

// A run's end waits for the relay's publisher at most relayCatchUp, and not at all when its
// queue is full: then the end's events are left to the publisher, and the end commits.
func TestRelayCatchUpIsBounded(t *testing.T) {
	stalled := &relay{out: make(chan relayed, 4)} // no publisher takes from it
	start := time.Now()
	if stalled.caughtUp(context.Background()) {
		t.Fatal("caught up with a publisher that sends nothing")
	}
	if took := time.Since(start); took < relayCatchUp || took > relayCatchUp+5*time.Second {
		t.Errorf("gave up after %s, want about %s", took, relayCatchUp)
	}
	full := &relay{out: make(chan relayed)} // no room: far behind
	start = time.Now()
	if full.caughtUp(context.Background()) || time.Since(start) > time.Second {
		t.Errorf("a full queue: caught up, or waited %s", time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if stalled.caughtUp(ctx) {
		t.Error("caught up under an ended context")
	}
}
