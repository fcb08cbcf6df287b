package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// Quiver's agents over A2A: each agent of the catalog that is exposed as a tool is an A2A
// agent at /a2a/NAME (or /a2a/NAME/), its card at /a2a/NAME/.well-known/agent-card.json. It
// speaks A2A 1.0 and 0.3: 0.3 through the official SDK (its JSON-RPC handler), 1.0 through
// Quiver's package a2av1 until the SDK has it; what answers both is an adapter of a2asrv.RequestHandler
// over the platform: a context is a thread, and a task one run of the agent on it (its id
// THREAD:JOB), queued, recorded and resumed after a crash like any run: tasks/get reads the
// run's job and the thread.

// a2aPrefix is where the A2A agents are served.
const a2aPrefix = "/a2a/"

// a2aWait bounds how long a blocking message/send waits for its run; a run still going then
// is answered as working, for tasks/get to follow.
const a2aWait = 2 * time.Minute

// a2aPoll is how often a waiting request reads the run: it may go on on another node.
const a2aPoll = 100 * time.Millisecond

// a2aMaxMessage is the longest message text, as /v1's runs take.
const a2aMaxMessage = 1_000_000

// exposedAgents are the catalog's agents exposed as tools, by name.
func exposedAgents(c *agent.Catalog) map[string]*agent.Agent {
	out := map[string]*agent.Agent{}
	if c == nil {
		return out
	}
	for name, a := range c.Agents {
		if a != nil && a.ExposeAsTool {
			out[cmp.Or(a.Name, name)] = a
		}
	}
	return out
}

// a2aHandler serves /a2a/: the cards without a key (they hold no workspace's data), the
// JSON-RPC endpoints behind the keys, a member's at least. The agents served are the
// platform's catalog's, read again when a new version of the fleet's configuration changes it.
func (s *Server) a2aHandler() http.Handler {
	var cache atomic.Pointer[a2aServed]
	served := func() *a2aServed {
		c := s.p.Catalog()
		if cur := cache.Load(); cur != nil && cur.catalog == c {
			return cur
		}
		next := s.a2aServe(c)
		cache.Store(next)
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, a2aPrefix)
		name, sub, _ := strings.Cut(rest, "/")
		now := served()
		a, ok := now.agents[name]
		switch {
		case name == ".well-known":
			a2aNoCardHere(w, now)
		case !ok:
			http.NotFound(w, r)
		case r.Method == http.MethodGet && (sub == strings.TrimPrefix(a2asrv.WellKnownAgentCardPath, "/") || sub == ""):
			// The card at its well-known path, and at the agent's URL itself, with or without
			// its trailing slash, for the clients that are given the card's URL.
			s.writeA2ACard(w, r, name, a)
		case sub == "":
			now.rpc[name].ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// a2aServed is what /a2a/ serves of one catalog: its exposed agents and their endpoints.
type a2aServed struct {
	catalog *agent.Catalog
	agents  map[string]*agent.Agent
	rpc     map[string]http.Handler
}

func (s *Server) a2aServe(c *agent.Catalog) *a2aServed {
	out := &a2aServed{catalog: c, agents: exposedAgents(c), rpc: map[string]http.Handler{}}
	for name, a := range out.agents {
		// The SDK's handler reads a body whole: capped as /mcp's requests are.
		// Each request is answered in the version it speaks: 1.0 by this package's binding, 0.3
		// by the SDK's handler, both over the same requests (a2aserve_v1.go).
		reqs := &a2aRequests{s: s, name: name, agent: a}
		max := cmp.Or(s.cfg.MaxRequestBytes, 4<<20)
		var h http.Handler = http.MaxBytesHandler(&a2aVersions{legacy: a2asrv.NewJSONRPCHandler(reqs), v1: &a2aRequestsV1{reqs}, max: max}, max)
		if s.cfg.Auth != nil {
			h = s.cfg.Auth.Require(store.KeyRoleMember, h)
		}
		out.rpc[name] = h
	}
	return out
}

// a2aCard is an agent's card as A2A 0.3 has it: its endpoint, its one skill (the agent itself)
// and the bearer key it asks for. The card served adds 1.0's fields (a2aCardV1).
func (s *Server) a2aCard(r *http.Request, name string, a *agent.Agent) *a2asdk.AgentCard {
	base := strings.TrimSuffix(s.cfg.PublicURL, "/")
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	desc := cmp.Or(strings.TrimSpace(a.Description), "The agent "+name+" of a Quiver server.")
	card := &a2asdk.AgentCard{Name: name, Description: desc, URL: base + a2aPrefix + name, Version: "1",
		ProtocolVersion: "0.3.0", PreferredTransport: a2asdk.TransportProtocolJSONRPC,
		DefaultInputModes: []string{"text"}, DefaultOutputModes: []string{"text"},
		Capabilities: a2asdk.AgentCapabilities{Streaming: true},
		Skills:       []a2asdk.AgentSkill{{ID: name, Name: name, Description: desc, Tags: []string{"quiver"}}}}
	if s.cfg.Auth != nil {
		card.SecuritySchemes = a2asdk.NamedSecuritySchemes{"quiverKey": a2asdk.HTTPAuthSecurityScheme{Scheme: "bearer",
			Description: "A Quiver API key (qvk_...), a member's at least, as Authorization: Bearer"}}
		card.Security = []a2asdk.SecurityRequirements{{"quiverKey": a2asdk.SecuritySchemeScopes{}}}
	}
	return card
}

// a2aRequests answers one agent's A2A requests over the platform.
type a2aRequests struct {
	s     *Server
	name  string
	agent *agent.Agent
}

var _ a2asrv.RequestHandler = (*a2aRequests)(nil)

// OnSendMessage starts a run of the agent with the message: on a new thread, or on the
// thread the message's task or context names. A blocking request waits for the run to end or
// pause, a bounded time.
func (h *a2aRequests) OnSendMessage(ctx context.Context, params *a2asdk.MessageSendParams) (a2asdk.SendMessageResult, error) {
	id, err := h.start(ctx, params)
	if err != nil {
		return nil, err
	}
	if params.Config != nil && params.Config.Blocking != nil && !*params.Config.Blocking {
		return h.task(ctx, id)
	}
	var last *a2asdk.Task
	err = h.watch(ctx, id, func(t *a2asdk.Task, done bool) bool {
		last = t
		return !done
	})
	if last == nil {
		return nil, err
	}
	return last, nil
}

// OnSendMessageStream starts the run as OnSendMessage does, and streams the task's states
// until the run ends or pauses.
func (h *a2aRequests) OnSendMessageStream(ctx context.Context, params *a2asdk.MessageSendParams) iter.Seq2[a2asdk.Event, error] {
	return func(yield func(a2asdk.Event, error) bool) {
		id, err := h.start(ctx, params)
		if err != nil {
			yield(nil, err)
			return
		}
		h.stream(ctx, id, yield)
	}
}

// OnResubscribeToTask streams a task's states from now until its run ends or pauses.
func (h *a2aRequests) OnResubscribeToTask(ctx context.Context, params *a2asdk.TaskIDParams) iter.Seq2[a2asdk.Event, error] {
	return func(yield func(a2asdk.Event, error) bool) {
		id, err := parseTaskID(string(params.ID))
		if err != nil {
			yield(nil, err)
			return
		}
		h.stream(ctx, id, yield)
	}
}

// stream yields the task, then each change of its state, the last one final.
func (h *a2aRequests) stream(ctx context.Context, id taskID, yield func(a2asdk.Event, error) bool) {
	first := true
	var last a2asdk.TaskState
	err := h.watch(ctx, id, func(t *a2asdk.Task, done bool) bool {
		if first {
			first, last = false, t.Status.State
			if !yield(t, nil) {
				return false
			}
			if !done {
				return true
			}
		}
		if t.Status.State == last && !done {
			return true
		}
		last = t.Status.State
		ev := a2asdk.NewStatusUpdateEvent(t, t.Status.State, t.Status.Message)
		ev.Final = done
		return yield(ev, nil) && !done
	})
	if err != nil {
		yield(nil, err)
	}
}

// watch reads the task every a2aPoll and hands it to fn with whether its run has ended or
// paused, until fn says stop, the run settles, a2aWait passes, the request ends or the server
// shuts down. A stream holds one of the server's stream places while it watches.
func (h *a2aRequests) watch(ctx context.Context, id taskID, fn func(t *a2asdk.Task, done bool) bool) error {
	a := h.s.actor(ctx)
	release, err := h.s.streams.take(ctx, a.WorkspaceID, a.KeyID)
	if err != nil {
		return errors.Join(a2asdk.ErrServerError, err)
	}
	defer release()
	deadline := time.NewTimer(a2aWait)
	defer deadline.Stop()
	for {
		t, done, err := h.state(ctx, id)
		if err != nil {
			return err
		}
		if !fn(t, done) || done {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-h.s.closing:
			return nil
		case <-deadline.C:
			return nil
		case <-time.After(a2aPoll):
		}
	}
}

// OnGetTask returns a task: a run of the agent on a thread of the key's workspace.
func (h *a2aRequests) OnGetTask(ctx context.Context, query *a2asdk.TaskQueryParams) (*a2asdk.Task, error) {
	id, err := parseTaskID(string(query.ID))
	if err != nil {
		return nil, err
	}
	return h.task(ctx, id)
}

// OnCancelTask is refused: a run is not stopped from outside (its calls are exactly-once).
func (h *a2aRequests) OnCancelTask(context.Context, *a2asdk.TaskIDParams) (*a2asdk.Task, error) {
	return nil, a2asdk.ErrTaskNotCancelable
}

func (h *a2aRequests) OnGetTaskPushConfig(context.Context, *a2asdk.GetTaskPushConfigParams) (*a2asdk.TaskPushConfig, error) {
	return nil, a2asdk.ErrPushNotificationNotSupported
}

func (h *a2aRequests) OnListTaskPushConfig(context.Context, *a2asdk.ListTaskPushConfigParams) ([]*a2asdk.TaskPushConfig, error) {
	return nil, a2asdk.ErrPushNotificationNotSupported
}

func (h *a2aRequests) OnSetTaskPushConfig(context.Context, *a2asdk.TaskPushConfig) (*a2asdk.TaskPushConfig, error) {
	return nil, a2asdk.ErrPushNotificationNotSupported
}

func (h *a2aRequests) OnDeleteTaskPushConfig(context.Context, *a2asdk.DeleteTaskPushConfigParams) error {
	return a2asdk.ErrPushNotificationNotSupported
}

func (h *a2aRequests) OnGetExtendedAgentCard(context.Context) (*a2asdk.AgentCard, error) {
	return nil, a2asdk.ErrAuthenticatedExtendedCardNotConfigured
}

// taskID names a task: a run's job on a thread.
type taskID struct {
	thread string
	job    int64
}

func (id taskID) String() string { return id.thread + ":" + strconv.FormatInt(id.job, 10) }

// parseTaskID reads THREAD:JOB; anything else is a task not found.
func parseTaskID(s string) (taskID, error) {
	thread, job, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(job, 10, 64)
	if !ok || err != nil || thread == "" || n <= 0 {
		return taskID{}, a2asdk.ErrTaskNotFound
	}
	return taskID{thread, n}, nil
}

// start queues the run a message asks for: on the thread of its task or context, else a new
// one. A thread waiting on a call is refused: its run goes on once the call is decided or
// answered (through Quiver's API), not with a message.
func (h *a2aRequests) start(ctx context.Context, params *a2asdk.MessageSendParams) (taskID, error) {
	if params == nil || params.Message == nil {
		return taskID{}, a2asdk.ErrInvalidParams
	}
	var text []string
	for _, p := range params.Message.Parts {
		switch x := p.(type) {
		case a2asdk.TextPart:
			text = append(text, x.Text)
		case *a2asdk.TextPart:
			text = append(text, x.Text)
		}
	}
	message := strings.TrimSpace(strings.Join(text, "\n"))
	switch {
	case message == "":
		return taskID{}, errors.Join(a2asdk.ErrInvalidParams, errors.New("the message has no text: this agent reads text"))
	case len(message) > a2aMaxMessage:
		return taskID{}, errors.Join(a2asdk.ErrInvalidParams, fmt.Errorf("the message is longer than %d bytes", a2aMaxMessage))
	}
	a := h.s.actor(ctx)
	var th *store.Thread
	var err error
	switch {
	case params.Message.TaskID != "":
		var id taskID
		if id, err = parseTaskID(string(params.Message.TaskID)); err == nil {
			th, err = h.thread(ctx, id.thread)
		}
	case params.Message.ContextID != "":
		th, err = h.thread(ctx, params.Message.ContextID)
	default:
		th, err = h.s.p.OpenThread(ctx, a, platform.NewThread{Agent: h.name, Tags: []string{"a2a"}})
		err = a2aError(err)
	}
	if err != nil {
		return taskID{}, err
	}
	if st := h.s.threadState(ctx, th.WorkspaceID, th, 0); st.Pending != nil {
		return taskID{}, errors.Join(a2asdk.ErrInvalidParams, fmt.Errorf("the thread's run waits on the call %s (%s): decide or answer it "+
			"through Quiver's API (POST /v1/threads/%s/decisions or /results); the run goes on from there", st.Pending.Call.Name, st.Pending.Reason, th.ID))
	}
	run, err := h.s.p.StartRun(ctx, a, th.ID, h.name, message)
	if err != nil {
		return taskID{}, a2aError(err)
	}
	return taskID{th.ID, run.JobID}, nil
}

// thread is a thread of the key's workspace that this agent has, else task not found.
func (h *a2aRequests) thread(ctx context.Context, id string) (*store.Thread, error) {
	th, err := h.s.p.Thread(ctx, h.s.actor(ctx), id)
	if err != nil || agent.CurrentAgent(th) != h.name && th.AgentID != h.name {
		return nil, a2asdk.ErrTaskNotFound
	}
	return th, nil
}

func (h *a2aRequests) task(ctx context.Context, id taskID) (*a2asdk.Task, error) {
	t, _, err := h.state(ctx, id)
	return t, err
}

// state is a task as its run's job and its thread say, and whether the run has settled
// (ended, paused, or been given up).
func (h *a2aRequests) state(ctx context.Context, id taskID) (*a2asdk.Task, bool, error) {
	th, err := h.thread(ctx, id.thread)
	if err != nil {
		return nil, false, err
	}
	j := h.s.p.Jobs()
	if j == nil {
		return nil, false, errors.Join(a2asdk.ErrServerError, errors.New("this server runs no agents"))
	}
	run, err := j.RunStatus(ctx, th.WorkspaceID, th.ID, id.job)
	if errors.Is(err, jobs.ErrRunNotFound) {
		return nil, false, a2asdk.ErrTaskNotFound
	}
	if err != nil {
		return nil, false, errors.Join(a2asdk.ErrServerError, errors.New("the task's run could not be read"))
	}
	t := &a2asdk.Task{ID: a2asdk.TaskID(id.String()), ContextID: th.ID}
	agentText := func(s string) *a2asdk.Message {
		m := a2asdk.NewMessage(a2asdk.MessageRoleAgent, a2asdk.TextPart{Text: s})
		m.TaskID, m.ContextID = t.ID, t.ContextID
		return m
	}
	switch run {
	case jobs.RunWaiting:
		t.Status.State = a2asdk.TaskStateSubmitted
		return t, false, nil
	case jobs.RunGoing:
		t.Status.State = a2asdk.TaskStateWorking
		return t, false, nil
	}
	// Ended: the thread says how. A later run on the thread would have changed it, so a
	// task's answer is read while it is the thread's last run.
	st := h.s.p.ThreadState(ctx, th.WorkspaceID, th)
	switch {
	case st.Status == platform.StatusFailed:
		// The failure's words are the thread's, safe to show (agent.FailureText).
		t.Status.State = a2asdk.TaskStateFailed
		t.Status.Message = agentText("The run failed (" + string(st.Run.Reason) + "): " + st.Run.Error)
	case run == jobs.RunGivenUp:
		t.Status.State = a2asdk.TaskStateFailed
		t.Status.Message = agentText("The run failed, and was given up.")
	case st.Status == platform.StatusTerminated:
		t.Status.State = a2asdk.TaskStateCanceled
	case st.Status == platform.StatusRunning:
		// The run went on as another (a decision, a budget with room again): still working.
		t.Status.State = a2asdk.TaskStateWorking
		return t, false, nil
	case st.Run != nil && st.Run.Budget != nil:
		// No one is asked: the run goes on by itself, and the task with it. A request that
		// waits for the run is answered now: the budget may have room only tomorrow.
		t.Status.State = a2asdk.TaskStateWorking
		t.Status.Message = agentText("The run stopped before its next model request (budget_exhausted): " + st.Run.Budget.Message + ".")
		return t, true, nil
	case st.Pending != nil:
		t.Status.State = a2asdk.TaskStateInputRequired
		t.Status.Message = agentText("The run waits on the call " + st.Pending.Call.Name + " (" + string(st.Pending.Reason) +
			"): decide or answer it through Quiver's API, and the run goes on.")
	case st.Run != nil:
		t.Status.State = a2asdk.TaskStateCompleted
		text := st.Run.Text
		if text == "" && len(st.Run.Output) > 0 {
			text = string(st.Run.Output)
		}
		t.Status.Message = agentText(text)
		t.Artifacts = []*a2asdk.Artifact{{ID: a2asdk.ArtifactID("answer-" + id.String()), Name: "answer", Parts: a2asdk.ContentParts{a2asdk.TextPart{Text: text}}}}
	default:
		t.Status.State = a2asdk.TaskStateCompleted
	}
	return t, true, nil
}

// a2aError is a platform refusal as the protocol's error: not found is task not found, an
// input at fault invalid params, the rest the server's error.
func a2aError(err error) error {
	if err == nil {
		return nil
	}
	var e *platform.Error
	if errors.As(err, &e) {
		switch e.Kind {
		case platform.NotFound:
			return a2asdk.ErrTaskNotFound
		case platform.Invalid, platform.MissingVariables, platform.Forbidden, platform.RunQueued:
			return errors.Join(a2asdk.ErrInvalidParams, errors.New(e.Error()))
		}
	}
	return errors.Join(a2asdk.ErrServerError, errors.New("the run could not be started"))
}
