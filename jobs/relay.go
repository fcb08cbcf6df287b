package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/ids"
)

// The nodes of a fleet share their runs' events over PostgreSQL's LISTEN/NOTIFY: each node
// publishes what its runs do (model text as it streams, each persisted step, how a run ended)
// on relayChannel, and every node hands what the others publish to its subscribers, so that a
// thread's event stream on any node is live whichever node runs the thread. A thread runs on
// one node at a time (its lease), and one node's notifications arrive in the order it sent
// them, so a thread's events arrive in order. What the events say that matters is in the
// store; a lost notification costs a stream its liveliness, never a message.

// relayChannel is the channel the nodes notify on, followed by a hash of the schema their
// tables are in: channels are the database's, and fleets on other schemas of it hear nothing
// of this one. A hash, because a channel's name is at most 63 bytes and a schema's may be too.
const relayChannel = "quiver_run_events_"

// maxRelayPayload keeps a notification under PostgreSQL's limit (8000 bytes): longer text is
// sent in pieces, and an event whose outcome does not fit goes without it (the stream reads
// the outcome from the store).
const maxRelayPayload = 7000

// relayQueue bounds the events waiting to be published: a node that cannot keep up drops
// text deltas first (the text comes with the persisted step).
const relayQueue = 1024

// relayed is an event as a notification carries it.
type relayed struct {
	Node    string          `json:"n"`
	Thread  string          `json:"t"`
	Type    agent.EventType `json:"y"`
	Step    int             `json:"s,omitempty"`
	Text    string          `json:"x,omitempty"`
	Outcome *agent.Outcome  `json:"o,omitempty"`
	// A note (see Jobs.Broadcast) has a topic, a key and a body, and no event.
	Topic string `json:"k,omitempty"`
	Key   string `json:"e,omitempty"`
	Body  []byte `json:"b,omitempty"`
	// Seq numbers the node's notifications: PostgreSQL delivers only one of the identical
	// notifications of a transaction, and two pieces of streamed text may be alike (the
	// pieces of one long text too).
	Seq uint64 `json:"q,omitempty"`
	// caughtUp, set on a marker rather than an event, is closed once the publisher has sent
	// everything queued before the marker (see caughtUp).
	caughtUp chan struct{}
}

// relay publishes a runner's events and delivers the other nodes'.
type relay struct {
	pool    *pgxpool.Pool
	channel string
	node    string
	logger  *slog.Logger
	out     chan relayed

	mu    sync.RWMutex
	next  int
	subs  map[int]func(agent.Event)
	notes map[int]noteSub

	listening chan struct{} // closed once the relay first listens
	listened  sync.Once
}

// noteSub is a subscriber to the notes of one topic.
type noteSub struct {
	topic string
	fn    func(key string, body []byte)
}

// startRelay starts publishing r's events on pool's database and listening for the other
// nodes'; stop ends both.
func startRelay(ctx context.Context, pool *pgxpool.Pool, r *agent.Runner, logger *slog.Logger) (rl *relay, stop func(), err error) {
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, nil, fmt.Errorf("jobs: the schema of the run events relay: %w", err)
	}
	sum := sha256.Sum256([]byte(schema))
	rl = &relay{pool: pool, channel: relayChannel + hex.EncodeToString(sum[:8]), node: ids.Random(8), logger: logger,
		out: make(chan relayed, relayQueue), subs: map[int]func(agent.Event){}, notes: map[int]noteSub{}, listening: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unsubscribe := r.Subscribe(rl.enqueue)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); rl.publish(ctx) }()
	go func() { defer wg.Done(); rl.listen(ctx) }()
	// What other nodes publish before this one listens is lost to it (an MCP client's answer
	// to what this node asked, say): start serving once listening, or after a bound.
	select {
	case <-rl.listening:
	case <-time.After(listenWait):
		logger.Warn("jobs: the run events relay is not listening yet; starting without it", "waited", listenWait)
	case <-ctx.Done():
	}
	return rl, func() { unsubscribe(); cancel(); wg.Wait() }, nil
}

// listenWait bounds how long a node waits at its start for the relay to listen.
const listenWait = 5 * time.Second

// enqueue hands a local event to the publisher without waiting: the runner calls it inline.
func (rl *relay) enqueue(e agent.Event) {
	if e.Relayed {
		return
	}
	m := rl.relayedOf(e)
	select {
	case rl.out <- m:
	default:
		if e.Type != agent.EventTextDelta {
			rl.logger.Warn("jobs: the run events relay is behind; other nodes' streams see this step at their next read",
				"thread", e.ThreadID, "event", e.Type)
		}
	}
}

// relayedOf is e as a notification carries it.
func (rl *relay) relayedOf(e agent.Event) relayed {
	m := relayed{Node: rl.node, Thread: e.ThreadID, Type: e.Type, Step: e.Step, Outcome: e.Outcome}
	switch e.Type {
	case agent.EventTextDelta, agent.EventFailed, agent.EventRetrying: // a failure's text is short (agent.FailureText)
		m.Text = e.Text
	}
	return m
}

// sendIn sends e to the other nodes in tx, the transaction that writes what e announces: they
// hear of it when, and only if, it commits, and the transaction the publisher would have made
// for it is saved. The caller announces e locally after the commit, marked Relayed.
func (rl *relay) sendIn(ctx context.Context, tx pgx.Tx, e agent.Event) error {
	var seq uint64 // alone in its transaction: no other notification to tell it from
	return rl.notify(ctx, tx, payloads(rl.relayedOf(e), &seq))
}

// sendAnnounced sends in tx the events a run will announce once tx commits (agent.Announced:
// its last answer and its end), once the publisher has sent everything queued before them:
// the thread's earlier events (its streamed text, its step's start) reach the other nodes
// first, as they would through the publisher. When the publisher does not catch up within
// relayCatchUp (it is behind, or connecting again), the events are left to it.
func (rl *relay) sendAnnounced(ctx context.Context, tx pgx.Tx, threadID string) error {
	events, sent := agent.Announced(ctx, threadID)
	if len(events) == 0 || !rl.caughtUp(ctx) {
		return nil
	}
	var seq uint64 // numbers this transaction's notifications apart (see relayed.Seq)
	var batch []string
	for _, e := range events {
		batch = append(batch, payloads(rl.relayedOf(e), &seq)...)
	}
	if err := rl.notify(ctx, tx, batch); err != nil {
		return err
	}
	sent()
	return nil
}

// relayCatchUp bounds how long a run's end waits, in its transaction, for the publisher to
// send what was queued before it: an idle publisher takes a channel send, a busy one a
// notification's round trip or a few.
const relayCatchUp = 250 * time.Millisecond

// caughtUp queues a marker behind the events queued so far and reports whether the publisher
// has sent them all, waiting at most relayCatchUp.
func (rl *relay) caughtUp(ctx context.Context) bool {
	done := make(chan struct{})
	select {
	case rl.out <- relayed{caughtUp: done}:
	default:
		return false // the queue is full: far behind
	}
	wait := time.NewTimer(relayCatchUp)
	defer wait.Stop()
	select {
	case <-done:
		return true
	case <-wait.C:
	case <-ctx.Done():
	}
	return false
}

// publish sends the queued events in order, on one connection of its own (not the pool's,
// whose connections River needs) so that they arrive in order: each event at once when the
// publisher is idle, and the events queued while it sent the last ones together, in one
// statement (see notify).
func (rl *relay) publish(ctx context.Context) {
	for {
		conn, err := rl.connect(ctx)
		if err == nil {
			err = rl.publishOn(ctx, conn)
			conn.Close(context.WithoutCancel(ctx))
		}
		if !rl.pause(ctx, "publishing", err) {
			return
		}
	}
}

func (rl *relay) publishOn(ctx context.Context, conn *pgx.Conn) error {
	var seq uint64
	for {
		var batch []string
		var markers []chan struct{} // closed once what came before them is sent
		take := func(m relayed) {
			if m.caughtUp != nil {
				markers = append(markers, m.caughtUp)
				return
			}
			batch = append(batch, payloads(m, &seq)...)
		}
		select {
		case <-ctx.Done():
			return nil
		case m := <-rl.out:
			take(m)
		}
	more:
		for len(batch) < relayBatch {
			select {
			case m := <-rl.out:
				take(m)
			default:
				break more
			}
		}
		if len(batch) > 0 {
			if err := rl.notify(ctx, conn, batch); err != nil {
				return err
			}
		}
		for _, c := range markers {
			close(c)
		}
	}
}

// relayBatch bounds the notifications sent in one statement.
const relayBatch = 64

// notify sends the payloads in order in one statement, and so in one transaction: each
// notifying transaction takes an id and a commit (not waited for on disk: it writes nothing
// else), and a run's events come close together (a step's start, its text, the step, the
// run's end), so a busy publisher sends them in a few transactions instead of one each.
// PostgreSQL delivers a transaction's notifications in the order it sent them.
func (rl *relay) notify(ctx context.Context, db execer, payloads []string) error {
	if len(payloads) == 1 {
		_, err := db.Exec(ctx, `SELECT pg_notify($1, $2)`, rl.channel, payloads[0])
		return err
	}
	_, err := db.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) WITH ORDINALITY AS u(p, i) ORDER BY i`, rl.channel, payloads)
	return err
}

// execer is a connection or a transaction of pgx's.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// payloads encodes m as one notification or, for long text, several in order, each numbered
// with the next of seq.
func payloads(m relayed, seq *uint64) []string {
	*seq++
	m.Seq = *seq
	b, _ := json.Marshal(m)
	if len(b) <= maxRelayPayload {
		return []string{string(b)}
	}
	if m.Type != agent.EventTextDelta {
		m.Outcome = nil
		b, _ = json.Marshal(m)
		return []string{string(b)}
	}
	var out []string
	text := []rune(m.Text)
	for len(text) > 0 {
		n := min(len(text), maxRelayPayload/8) // a rune is at most 4 bytes, 6 escaped in JSON
		piece := m
		piece.Text, text = string(text[:n]), text[n:]
		*seq++
		piece.Seq = *seq
		b, _ := json.Marshal(piece)
		out = append(out, string(b))
	}
	return out
}

// listen delivers the other nodes' events to the subscribers, listening again after a lost
// connection.
func (rl *relay) listen(ctx context.Context) {
	for {
		err := rl.listenOnce(ctx)
		if !rl.pause(ctx, "listening", err) {
			return
		}
	}
}

// connect takes a connection of the relay's own out of the pool, made as the pool makes its
// connections (its BeforeConnect and AfterConnect hooks included: a pool that fetches a
// fresh password for each connection does so for these too), and no longer counted in it.
func (rl *relay) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := rl.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return c.Hijack(), nil
}

func (rl *relay) listenOnce(ctx context.Context) error {
	conn, err := rl.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{rl.channel}.Sanitize()); err != nil {
		return err
	}
	rl.listened.Do(func() { close(rl.listening) })
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var m relayed
		if json.Unmarshal([]byte(n.Payload), &m) != nil || m.Node == rl.node {
			continue
		}
		if m.Topic != "" {
			rl.deliverNote(m)
			continue
		}
		rl.deliver(agent.Event{Type: m.Type, ThreadID: m.Thread, Step: m.Step, Text: m.Text, Outcome: m.Outcome})
	}
}

// pause logs err and waits a moment before trying again; false when ctx has ended.
func (rl *relay) pause(ctx context.Context, doing string, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	rl.logger.WarnContext(ctx, "jobs: the run events relay stopped "+doing+"; trying again", "err", err)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Second):
		return true
	}
}

func (rl *relay) deliver(e agent.Event) {
	rl.mu.RLock()
	defer rl.mu.RUnlock()
	for _, fn := range rl.subs {
		fn(e)
	}
}

// subscribe calls fn with every event another node's runs publish, until unsubscribe.
func (rl *relay) subscribe(fn func(agent.Event)) (unsubscribe func()) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	id := rl.next
	rl.next++
	rl.subs[id] = fn
	return func() {
		rl.mu.Lock()
		defer rl.mu.Unlock()
		delete(rl.subs, id)
	}
}

// broadcast publishes a note to the other nodes' subscribers of its topic, in order with the
// events; a body that does not fit in a notification is refused.
func (rl *relay) broadcast(ctx context.Context, topic, key string, body []byte) error {
	m := relayed{Node: rl.node, Topic: topic, Key: key, Body: body}
	if b, _ := json.Marshal(m); len(b) > maxRelayPayload {
		return fmt.Errorf("jobs: a note of %d bytes does not fit in a notification (at most %d)", len(b), maxRelayPayload)
	}
	select {
	case rl.out <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (rl *relay) deliverNote(m relayed) {
	rl.mu.RLock()
	defer rl.mu.RUnlock()
	for _, s := range rl.notes {
		if s.topic == m.Topic {
			s.fn(m.Key, m.Body)
		}
	}
}

// hear calls fn with every note of topic another node broadcasts, until unsubscribe.
func (rl *relay) hear(topic string, fn func(key string, body []byte)) (unsubscribe func()) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	id := rl.next
	rl.next++
	rl.notes[id] = noteSub{topic, fn}
	return func() {
		rl.mu.Lock()
		defer rl.mu.Unlock()
		delete(rl.notes, id)
	}
}
