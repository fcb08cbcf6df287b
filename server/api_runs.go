package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// A thread's event stream (GET /v1/threads/{id}/events) is Server-Sent Events built on what is
// persisted: every message of the thread is an event whose id is its sequence number, so a
// client that reconnects with Last-Event-ID misses nothing and sees nothing twice, whichever
// process ran the run. A run wakes the stream at once, whichever node of the database runs it
// (Platform.Subscribe: on PostgreSQL the nodes relay their runs' events with LISTEN/NOTIFY),
// and adds what is not persisted: pieces of streamed model text (delta, no id) and how the run
// ended (run). The stream also reads the store every eventPoll, for what a lost notification
// did not say.

const (
	// eventPoll is how often a stream looks at the store when no run wakes it.
	eventPoll = time.Second
	// eventKeepAlive is how often an idle stream sends a comment, so that proxies keep it open.
	eventKeepAlive = 15 * time.Second
	// eventBatch is how many messages a stream reads from the store at a time.
	eventBatch = 100
)

// EventState is the thread's state: sent first on every stream, and again when it changes.
type EventState struct {
	Status string `json:"status" enum:"idle,running,waiting,failed,terminated" doc:"idle, running or terminated; waiting when the last run paused on a call (pending names it until its decision or result is in); failed when the last run could not start or go on (run says why)."`
	// Run is how the thread's last run ended (paused, finished, failed), whichever process ran
	// it.
	Run *agent.Outcome `json:"run,omitempty" doc:"How the thread's last run ended: finished, paused, or failed (reason and error say why)."`
	// Pending is the call the thread waits on, when it waits (paused for a person or a client).
	Pending *agent.Pending `json:"pending,omitempty"`
	// LastSeq is the sequence number of the thread's last message when the state was read.
	LastSeq int64 `json:"last_seq"`

	state *platform.ThreadState // what the stream compares with the next state
}

// EventRun says how a run ended, whichever node ran it: paused (waiting on Outcome.Pending),
// finished, or failed for good (Outcome's reason and error say why: the thread records it);
// or that a try of it failed and it is tried again (retrying, Error says why).
type EventRun struct {
	Type    string         `json:"type" enum:"paused,finished,failed,retrying" doc:"paused, finished or failed: how the run ended (failed: for good, as the thread records it); retrying: a try failed and the run is tried again."`
	Outcome *agent.Outcome `json:"outcome,omitempty" doc:"The run's outcome (paused, finished, failed)."`
	Error   string         `json:"error,omitempty" doc:"Why the run failed (failed) or its try did (retrying), safe to show."`
}

// EventDelta is a piece of model text as it streams; the whole text comes in the model's
// message.
type EventDelta struct {
	Step int    `json:"step"`
	Text string `json:"text"`
}

type eventsInput struct {
	ID          string `path:"id" maxLength:"64"`
	LastEventID string `header:"Last-Event-ID" maxLength:"20" doc:"The id of the last event received: the stream goes on after it. Absent: from the thread's first message."`
}

type pendingOutput struct {
	Body struct {
		Pending []*agent.Pending `json:"pending" doc:"The calls the thread waits on: at most one (the first of its step), the rest wait their turn."`
	}
}

type resultInput struct {
	ID   string `path:"id" maxLength:"64"`
	Body struct {
		// Optional, as for decisions (see decisionInput).
		Agent  string          `json:"agent,omitempty" minLength:"1" maxLength:"128" doc:"The agent whose run waits; absent: the agent that has the thread (after a handoff, the one it was handed to)."`
		CallID string          `json:"call_id" minLength:"1" maxLength:"128" doc:"The client tool's call (GET .../pending names it)."`
		Status string          `json:"status" enum:"success,error" doc:"success or error."`
		Text   string          `json:"text,omitempty" maxLength:"1000000" doc:"The result as the model reads it."`
		Value  json.RawMessage `json:"value,omitempty" doc:"The structured result."`
		Error  string          `json:"error,omitempty" maxLength:"10000" doc:"What went wrong (status error), worded for the model."`
	}
}

// Caps on open event streams: per key and per workspace (its share, which one workspace cannot
// exceed however many keys it makes), which hold across a fleet (the streams are leases in the
// store), and per node, which bounds what one process holds.
const (
	maxStreamsPerKey       = 32
	maxStreamsPerWorkspace = 250
	maxStreams             = 1000
)

// streamLease is the kind of the leases of event streams. A stream's lease names the node's
// own as its holder (see nodelease.go): it counts while the stream is open and the node lives,
// and its expiry is only a backstop.
const (
	streamLease    = "event-stream"
	streamLeaseTTL = 24 * time.Hour
)

// streamSlots counts the open event streams: this node's, and through leases the fleet's.
type streamSlots struct {
	leases store.Leases
	node   *nodeLease
	logger *slog.Logger

	mu    sync.Mutex
	total int
}

// take holds a slot for a new stream of key in workspace (key is "" on a server without
// keys), or answers 429 (the key's or the workspace's cap) or 503 (the node's) when none is
// free; release gives it back.
func (c *streamSlots) take(ctx context.Context, workspace, key string) (release func(), err error) {
	c.mu.Lock()
	if c.total >= maxStreams {
		c.mu.Unlock()
		return nil, problemf(http.StatusServiceUnavailable, CodeUnavailable,
			fmt.Sprintf("the server has %d event streams open, the most it serves: try again shortly", maxStreams))
	}
	c.total++
	c.mu.Unlock()
	local := func() {
		c.mu.Lock()
		c.total--
		c.mu.Unlock()
	}
	limits := store.LeaseLimits{Total: -1, PerWorkspace: maxStreamsPerWorkspace, PerOwner: -1}
	if key != "" {
		limits.PerOwner = maxStreamsPerKey
	}
	l := &store.Lease{WorkspaceID: workspace, Kind: streamLease, Owner: key, Holder: c.node.id}
	if err := c.leases.AcquireLease(ctx, l, streamLeaseTTL, limits); err != nil {
		local()
		var le *store.LeaseLimitError
		switch {
		case errors.As(err, &le) && le.Cap == "owner":
			return nil, problemf(http.StatusTooManyRequests, CodeTooManyStreams,
				fmt.Sprintf("%s has %d event streams open, the most one key may: close one first", key, maxStreamsPerKey))
		case errors.As(err, &le):
			return nil, problemf(http.StatusTooManyRequests, CodeTooManyStreams,
				fmt.Sprintf("workspace %s has %d event streams open, the most one workspace may: close one first", workspace, maxStreamsPerWorkspace))
		}
		return nil, fmt.Errorf("holding a place for an event stream: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			local()
			if err := c.leases.ReleaseLease(context.Background(), workspace, l.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				c.logger.Warn("server: giving back an event stream's place", "err", err)
			}
		})
	}, nil
}

// streamEvents names the events of a thread's stream and the type of each one's data.
var streamEvents = []struct {
	name, about string
	data        reflect.Type
}{
	{"state", "The thread's state: first on every stream, and again when it changes.", reflect.TypeFor[EventState]()},
	{"message", "A message of the thread, in order; the event's id is its seq (send it back as Last-Event-ID to resume).", reflect.TypeFor[store.Message]()},
	{"delta", "A piece of model text as it streams; the whole text comes in the model's message.", reflect.TypeFor[EventDelta]()},
	{"run", "How a run ended, whichever node ran it: paused, finished or failed (for good, with the reason); retrying when a try failed and the run is tried again.", reflect.TypeFor[EventRun]()},
}

// eventStreamSchema describes the stream as the sequence of its events, one schema per event
// name, each with its data's component: what a client generator needs to read it.
func eventStreamSchema(r huma.Registry) *huma.Schema {
	events := make([]*huma.Schema, 0, len(streamEvents))
	for _, e := range streamEvents {
		ev := &huma.Schema{Type: huma.TypeObject, Description: e.about, Required: []string{"event", "data"},
			Properties: map[string]*huma.Schema{
				"event": {Type: huma.TypeString, Enum: []any{e.name}},
				"data":  r.Schema(e.data, true, ""),
			}}
		if e.name == "message" {
			ev.Properties["id"] = &huma.Schema{Type: huma.TypeString, Description: "The message's seq.", Pattern: "^[0-9]+$"}
			ev.Required = append(ev.Required, "id")
		}
		events = append(events, ev)
	}
	return &huma.Schema{Type: huma.TypeArray, Items: &huma.Schema{OneOf: events},
		Description: "Server-Sent Events, each with an event name and JSON data: " +
			"state (EventState), message (Message, id: its seq), delta (EventDelta) and run (EventRun). Comments keep an idle stream open."}
}

// registerRunEvents adds the thread's event stream and, on a server with runs, what a
// paused run waits on and the results of client tools.
func (s *Server) registerRunEvents(api huma.API) {
	op := huma.Operation{OperationID: "thread-events", Method: http.MethodGet, Path: "/v1/threads/{id}/events",
		Summary: "The thread's events as Server-Sent Events: its messages (resumable with Last-Event-ID), its state, and live run events",
		Responses: map[string]*huma.Response{"200": {Description: "An event stream: events state, message (id: the message's seq), delta and run.",
			Content: map[string]*huma.MediaType{"text/event-stream": {Schema: eventStreamSchema(api.OpenAPI().Components.Schemas)}}}}}
	register(api, op, func(ctx context.Context, in *eventsInput) (*huma.StreamResponse, error) {
		ws := s.workspaceID(ctx)
		if _, err := s.p.Store().Thread(ctx, ws, in.ID); err != nil {
			return nil, apiError(err, "thread "+in.ID)
		}
		var after int64
		if in.LastEventID != "" {
			n, err := strconv.ParseInt(in.LastEventID, 10, 64)
			if err != nil || n < 0 {
				return nil, problemf(http.StatusBadRequest, CodeInvalidRequest, "Last-Event-ID must be the id of an event of this stream (a message's seq)",
					&ProblemField{Location: "header.Last-Event-ID", Message: "a whole number, 0 or more", Value: shortValue(in.LastEventID)})
			}
			after = n
		}
		// Each stream holds a connection and a goroutine for as long as the client likes:
		// bound them per key, per workspace and in all, as MCP sessions are.
		p, _ := PrincipalFrom(ctx)
		release, err := s.streams.take(ctx, ws, p.Owner())
		if err != nil {
			return nil, err
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			defer release()
			s.streamEvents(hctx, ws, in.ID, after)
		}}, nil
	})

	if !s.runsOn() {
		return
	}
	register(api, huma.Operation{OperationID: "list-pending", Method: http.MethodGet, Path: "/v1/threads/{id}/pending",
		Summary: "The call a paused run waits on: a confirmation to decide (POST .../decisions) or a client tool's result (POST .../results)"},
		func(ctx context.Context, in *threadInput) (*pendingOutput, error) {
			th, ag, err := s.p.ThreadAgent(ctx, s.actor(ctx), in.ID, "")
			if err != nil {
				return nil, problem(err, "body")
			}
			out := &pendingOutput{}
			out.Body.Pending = []*agent.Pending{}
			if ag == nil {
				return out, nil // a thread without an agent runs nothing, so waits on nothing
			}
			p, err := s.p.Runner().Waiting(ctx, th, ag)
			if err != nil {
				return nil, apiError(err, "what thread "+in.ID+" waits on")
			}
			if p != nil {
				out.Body.Pending = append(out.Body.Pending, p)
			}
			return out, nil
		})

	register(api, huma.Operation{OperationID: "post-result", Method: http.MethodPost, Path: "/v1/threads/{id}/results",
		Summary:       "Answer a client tool's call: the result is recorded once and the run resumes in the background",
		DefaultStatus: http.StatusAccepted},
		func(ctx context.Context, in *resultInput) (*runOutput, error) {
			b := &in.Body
			return runAnswer(s.p.SubmitResult(ctx, s.actor(ctx), in.ID, platform.NewResult{Agent: b.Agent, CallID: b.CallID,
				Result: quiver.Result{Status: quiver.Status(b.Status), Text: b.Text, Value: b.Value, Error: b.Error}}))
		})
}

// streamEvents writes the thread's events until the client goes or the server shuts down.
func (s *Server) streamEvents(hctx huma.Context, ws, threadID string, after int64) {
	ctx := hctx.Context()
	es := &eventStream{w: hctx.BodyWriter(), lastRead: -1}
	es.flusher, _ = unwrapFlusher(es.w)
	hctx.SetHeader("Content-Type", "text/event-stream")
	hctx.SetHeader("Cache-Control", "no-store")
	hctx.SetHeader("X-Accel-Buffering", "no") // nginx: pass events on as they come
	live, wake, unsubscribe := s.subscribeRuns(threadID)
	defer unsubscribe()
	poll := time.NewTicker(eventPoll)
	defer poll.Stop()
	keepAlive := time.NewTicker(eventKeepAlive)
	defer keepAlive.Stop()
	for {
		var ok bool
		if after, ok = s.catchUp(ctx, es, ws, threadID, after); !ok {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case e := <-live:
			if !s.sendLive(e, es.send) {
				return
			}
			if e.Type != agent.EventTextDelta {
				// The run has ended and is making its thread idle: the state follows in a moment.
				s.awaitIdle(ctx, ws, threadID)
			}
		case <-wake:
		case <-poll.C:
		case <-keepAlive.C:
			if !es.comment("keep-alive") {
				return
			}
		}
	}
}

// eventStream writes one thread's events to one client, remembering the state it sent last.
type eventStream struct {
	w        io.Writer
	flusher  http.Flusher
	last     *EventState
	lastRead int64 // the seq the state was last read at
	// lastStatus is the thread's stored status when its state was last read.
	lastStatus store.ThreadStatus
	// lastUpdated is the thread's update time when its state was last read: a run that
	// failed before it began changes the thread's outcome but neither its status nor its
	// messages.
	lastUpdated time.Time
}

// send writes an event; false when the client is gone.
func (es *eventStream) send(event, id string, data any) bool {
	b, err := json.Marshal(data)
	if err != nil {
		return false
	}
	if id != "" {
		fmt.Fprintf(es.w, "id: %s\n", id)
	}
	if _, err := fmt.Fprintf(es.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return false
	}
	es.flush()
	return true
}

// comment writes an SSE comment (a keep-alive); false when the client is gone.
func (es *eventStream) comment(text string) bool {
	if _, err := fmt.Fprintf(es.w, ": %s\n\n", text); err != nil {
		return false
	}
	es.flush()
	return true
}

func (es *eventStream) flush() {
	if es.flusher != nil {
		es.flusher.Flush()
	}
}

// subscribeRuns makes the runs of this process and of the other nodes of its database wake a
// thread's stream: live carries its deltas and run endings as they are, wake says the thread
// may have changed.
func (s *Server) subscribeRuns(threadID string) (live chan agent.Event, wake chan struct{}, unsubscribe func()) {
	wake, live = make(chan struct{}, 1), make(chan agent.Event, 64)
	if s.p.Jobs() == nil {
		return live, wake, func() {}
	}
	return live, wake, s.p.Subscribe(func(e agent.Event) {
		if e.ThreadID != threadID {
			return
		}
		switch e.Type {
		case agent.EventTextDelta, agent.EventPaused, agent.EventFinished, agent.EventFailed, agent.EventRetrying:
			select {
			case live <- e:
			default: // a slow client loses deltas, never messages: those are read from the store
			}
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	})
}

// catchUp sends the thread's messages after seq after, then the state they lead to when it
// changed, and returns the last seq sent; false when the client is gone.
func (s *Server) catchUp(ctx context.Context, es *eventStream, ws, threadID string, after int64) (int64, bool) {
	// Messages first, then the state they lead to: a client that sees "idle" has seen every
	// message before it. So the thread is read before its messages: a run writes its last
	// message before it makes the thread idle, and the messages read after the thread hold
	// every message written before it. (Read after them, the thread could be idle while the
	// messages read had not yet seen the run's last one: the state went out before that
	// message, and after it the same state was not sent again.)
	th, err := s.p.Store().Thread(ctx, ws, threadID)
	after, ok := s.sendMessages(ctx, ws, threadID, after, es.send)
	if !ok {
		return after, false
	}
	// What the thread waits on changes only with its messages or status, and how its last run
	// ended only with an update of the thread: read the thread each time, the rest only then.
	if err == nil && (es.last == nil || th.Status != es.lastStatus || after != es.lastRead || !th.UpdatedAt.Equal(es.lastUpdated)) {
		st := s.threadState(ctx, ws, th, after)
		es.lastRead, es.lastUpdated, es.lastStatus = after, th.UpdatedAt, th.Status
		if es.last == nil || !st.state.Same(es.last.state) {
			if !es.send("state", "", st) {
				return after, false
			}
			es.last = st
		}
	}
	return after, true
}

// sendMessages sends the thread's messages after seq after, oldest first, and returns the last
// seq sent; false when the client is gone.
func (s *Server) sendMessages(ctx context.Context, ws, threadID string, after int64, send func(string, string, any) bool) (int64, bool) {
	// Pages run newest first: walk back to the first message after after, then send forward.
	// A stream that keeps up reads one page per wake.
	var batch []*store.Message
	before := int64(0)
	for {
		page, err := s.p.Store().Messages(ctx, ws, threadID, store.Page{Before: before, Limit: eventBatch})
		if err != nil {
			return after, ctx.Err() == nil // a store hiccup: try again at the next wake
		}
		i := len(page)
		for i > 0 && page[i-1].Seq > after {
			i--
		}
		batch = append(page[i:], batch...)
		if i > 0 || len(page) < eventBatch {
			break
		}
		before = page[0].Seq
	}
	for _, m := range batch {
		if !send("message", strconv.FormatInt(m.Seq, 10), m) {
			return after, false
		}
		after = m.Seq
	}
	return after, true
}

// threadState is the thread's state as the stream sends it.
func (s *Server) threadState(ctx context.Context, ws string, th *store.Thread, lastSeq int64) *EventState {
	st := s.p.ThreadState(ctx, ws, th)
	return &EventState{Status: string(st.Status), Run: st.Run, Pending: st.Pending, LastSeq: lastSeq, state: st}
}

// awaitIdle waits, briefly, for a run that just ended to mark its thread idle, so that the
// stream's next state says so at once rather than at the next poll.
func (s *Server) awaitIdle(ctx context.Context, ws, threadID string) {
	for range 50 {
		th, err := s.p.Store().Thread(ctx, ws, threadID)
		if err != nil || th.Status != store.StatusRunning {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sendLive sends what a run of this process said that the store does not hold.
func (s *Server) sendLive(e agent.Event, send func(string, string, any) bool) bool {
	switch e.Type {
	case agent.EventTextDelta:
		return send("delta", "", EventDelta{Step: e.Step, Text: e.Text})
	case agent.EventFailed:
		if e.Outcome == nil {
			return true // stopped resumably: its job's retrying event says so, or its caller hears it
		}
		return send("run", "", EventRun{Type: "failed", Outcome: e.Outcome, Error: e.Outcome.Error})
	case agent.EventRetrying:
		return send("run", "", EventRun{Type: "retrying", Error: "retrying: " + e.Text})
	default:
		return send("run", "", EventRun{Type: string(e.Type), Outcome: e.Outcome})
	}
}

type flusherUnwrapper interface{ Unwrap() http.ResponseWriter }

// unwrapFlusher finds the http.Flusher under w's wrappers.
func unwrapFlusher(w any) (http.Flusher, bool) {
	for {
		if f, ok := w.(http.Flusher); ok {
			return f, true
		}
		u, ok := w.(flusherUnwrapper)
		if !ok {
			return nil, false
		}
		w = u.Unwrap()
	}
}

// agentName is the name of the agent that runs a thread, as threadAgent found it.
