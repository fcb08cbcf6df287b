package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// Quiver's agents over A2A: each agent of the catalog that is exposed as a tool is an A2A
// agent at /a2a/NAME, its card at /a2a/NAME/.well-known/agent-card.json. The protocol is the
// official SDK's (its JSON-RPC handler); what answers is an adapter of a2asrv.RequestHandler
// over the platform, so that a task is a thread and each message a run of the agent on it,
// queued, recorded and resumed after a crash like any run: tasks/get reads the thread.

// a2aPrefix is where the A2A agents are served.
const a2aPrefix = "/a2a/"

// a2aWait bounds how long a blocking message/send waits for its run; a run still going then
// is answered as working, for tasks/get to follow.
const a2aWait = 2 * time.Minute

// a2aPoll is how often a waiting request reads the thread: a run may go on on another node.
const a2aPoll = 50 * time.Millisecond

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
// JSON-RPC endpoints behind the keys, a member's at least.
func (s *Server) a2aHandler() http.Handler {
	agents := exposedAgents(s.p.Runner().Catalog)
	rpc := map[string]http.Handler{}
	for name, a := range agents {
		var h http.Handler = a2asrv.NewJSONRPCHandler(&a2aRequests{s: s, name: name, agent: a})
		if s.cfg.Auth != nil {
			h = s.cfg.Auth.Require(store.KeyRoleMember, h)
		}
		rpc[name] = h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, a2aPrefix)
		name, sub, _ := strings.Cut(rest, "/")
		a, ok := agents[name]
		switch {
		case !ok:
			http.NotFound(w, r)
		case sub == strings.TrimPrefix(a2asrv.WellKnownAgentCardPath, "/") && r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(s.a2aCard(r, name, a))
		case sub == "":
			rpc[name].ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// a2aCard is an agent's card: its endpoint, its one skill (the agent itself) and the bearer
// key it asks for.
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
// thread the message's task (or context) names. A blocking request waits for the run to end
// or pause.
func (h *a2aRequests) OnSendMessage(ctx context.Context, params *a2asdk.MessageSendParams) (a2asdk.SendMessageResult, error) {
	th, before, err := h.start(ctx, params)
	if err != nil {
		return nil, err
	}
	if params.Config != nil && params.Config.Blocking != nil && !*params.Config.Blocking {
		return h.task(ctx, th.ID)
	}
	wctx, cancel := context.WithTimeout(ctx, a2aWait)
	defer cancel()
	for {
		t, done, err := h.settled(ctx, th.ID, before)
		if err != nil || done {
			return t, err
		}
		select {
		case <-wctx.Done():
			return h.task(ctx, th.ID)
		case <-time.After(a2aPoll):
		}
	}
}

// OnSendMessageStream starts the run as OnSendMessage does, and streams the task's states
// until the run ends or pauses.
func (h *a2aRequests) OnSendMessageStream(ctx context.Context, params *a2asdk.MessageSendParams) iter.Seq2[a2asdk.Event, error] {
	return func(yield func(a2asdk.Event, error) bool) {
		th, before, err := h.start(ctx, params)
		if err != nil {
			yield(nil, err)
			return
		}
		h.follow(ctx, th.ID, before, yield)
	}
}

// OnResubscribeToTask streams a task's states from now until its run ends or pauses.
func (h *a2aRequests) OnResubscribeToTask(ctx context.Context, params *a2asdk.TaskIDParams) iter.Seq2[a2asdk.Event, error] {
	return func(yield func(a2asdk.Event, error) bool) {
		th, err := h.thread(ctx, string(params.ID))
		if err != nil {
			yield(nil, err)
			return
		}
		h.follow(ctx, th.ID, nil, yield)
	}
}

// follow yields the task, then each change of its state, the last one final.
func (h *a2aRequests) follow(ctx context.Context, threadID string, before []byte, yield func(a2asdk.Event, error) bool) {
	t, err := h.task(ctx, threadID)
	if err != nil || !yield(t, nil) {
		if err != nil {
			yield(nil, err)
		}
		return
	}
	last := t.Status.State
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(a2aPoll):
		}
		t, done, err := h.settled(ctx, threadID, before)
		if err != nil {
			yield(nil, err)
			return
		}
		if t.Status.State != last || done {
			ev := a2asdk.NewStatusUpdateEvent(t, t.Status.State, t.Status.Message)
			ev.Final = done
			if !yield(ev, nil) || done {
				return
			}
			last = t.Status.State
		}
	}
}

// OnGetTask returns a task: a thread of the key's workspace that the agent runs.
func (h *a2aRequests) OnGetTask(ctx context.Context, query *a2asdk.TaskQueryParams) (*a2asdk.Task, error) {
	th, err := h.thread(ctx, string(query.ID))
	if err != nil {
		return nil, err
	}
	return h.task(ctx, th.ID)
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

// start queues the run a message asks for and returns its thread and the thread's outcome
// before it (what "the run ended" is told from).
func (h *a2aRequests) start(ctx context.Context, params *a2asdk.MessageSendParams) (*store.Thread, []byte, error) {
	if params == nil || params.Message == nil {
		return nil, nil, a2asdk.ErrInvalidParams
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
	if message == "" {
		return nil, nil, errors.Join(a2asdk.ErrInvalidParams, errors.New("the message has no text: this agent reads text"))
	}
	a := h.s.actor(ctx)
	var th *store.Thread
	var err error
	if id := cmp.Or(string(params.Message.TaskID), params.Message.ContextID); id != "" {
		th, err = h.thread(ctx, id)
	} else {
		th, err = h.s.p.OpenThread(ctx, a, platform.NewThread{Agent: h.name, Tags: []string{"a2a"}})
		err = a2aError(err)
	}
	if err != nil {
		return nil, nil, err
	}
	before := outcomeOf(th)
	if _, err := h.s.p.StartRun(ctx, a, th.ID, h.name, message); err != nil {
		return nil, nil, a2aError(err)
	}
	return th, before, nil
}

// thread is a thread of the key's workspace that this agent has, else task not found.
func (h *a2aRequests) thread(ctx context.Context, id string) (*store.Thread, error) {
	th, err := h.s.p.Thread(ctx, h.s.actor(ctx), id)
	if err != nil || agent.CurrentAgent(th) != h.name && th.AgentID != h.name {
		return nil, a2asdk.ErrTaskNotFound
	}
	return th, nil
}

// settled reads the task and says whether the run started after before ended or paused.
func (h *a2aRequests) settled(ctx context.Context, threadID string, before []byte) (*a2asdk.Task, bool, error) {
	th, err := h.s.p.Thread(ctx, h.s.actor(ctx), threadID)
	if err != nil {
		return nil, false, a2aError(err)
	}
	t := h.taskOf(ctx, th)
	done := th.Status != store.StatusRunning && t.Status.State != a2asdk.TaskStateSubmitted &&
		(before == nil || string(outcomeOf(th)) != string(before))
	return t, done, nil
}

func (h *a2aRequests) task(ctx context.Context, threadID string) (*a2asdk.Task, error) {
	th, err := h.s.p.Thread(ctx, h.s.actor(ctx), threadID)
	if err != nil {
		return nil, a2aError(err)
	}
	return h.taskOf(ctx, th), nil
}

// taskOf is a thread as an A2A task: its id is the thread's (the context's too), its state
// the run's, its answer the agent's last text, as a status message and an artifact.
func (h *a2aRequests) taskOf(ctx context.Context, th *store.Thread) *a2asdk.Task {
	t := &a2asdk.Task{ID: a2asdk.TaskID(th.ID), ContextID: th.ID}
	st := h.s.threadState(ctx, th.WorkspaceID, th, 0)
	agentText := func(s string) *a2asdk.Message {
		m := a2asdk.NewMessage(a2asdk.MessageRoleAgent, a2asdk.TextPart{Text: s})
		m.TaskID, m.ContextID = t.ID, t.ContextID
		return m
	}
	switch {
	case th.Status == store.StatusRunning:
		t.Status.State = a2asdk.TaskStateWorking
	case th.Status == store.StatusTerminated:
		t.Status.State = a2asdk.TaskStateCanceled
	case st.Pending != nil:
		t.Status.State = a2asdk.TaskStateInputRequired
		t.Status.Message = agentText("The run waits on the call " + st.Pending.Call.Name + " (" + string(st.Pending.Reason) +
			"): decide or answer it through Quiver's API, then send a message to go on.")
	case st.Run == nil:
		t.Status.State = a2asdk.TaskStateSubmitted
	default:
		t.Status.State = a2asdk.TaskStateCompleted
		text := st.Run.Text
		if text == "" && len(st.Run.Output) > 0 {
			text = string(st.Run.Output)
		}
		t.Status.Message = agentText(text)
		t.Artifacts = []*a2asdk.Artifact{{ID: a2asdk.ArtifactID("answer-" + th.ID), Name: "answer", Parts: a2asdk.ContentParts{a2asdk.TextPart{Text: text}}}}
	}
	return t
}

// outcomeOf is the thread's last run outcome, as JSON (nil for none).
func outcomeOf(th *store.Thread) []byte {
	o := agent.ReadState(th).Outcome
	if o == nil {
		return nil
	}
	b, _ := json.Marshal(o)
	return b
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
