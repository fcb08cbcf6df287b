package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"slices"
	"strings"

	a2asdk "github.com/a2aproject/a2a-go/a2a"

	"github.com/quiverhq/quiver/a2a/a2av1"
	"github.com/quiverhq/quiver/agent"
)

// A2A 1.0 beside 0.3: a request is answered in the version it speaks. Its method names it
// (1.0's are SendMessage, GetTask...; 0.3's message/send, tasks/get...), and the A2A-Version
// header, where the client sends one, must name 1.0 or 0.3 (none is 0.3, as 1.0 says). Both
// versions reach the same a2aRequests, so a task reads the same in either: its state is
// worked out once, in a2aRequests.state, from the platform's thread state.

// a2aVersions sends each request to the binding of its version.
type a2aVersions struct {
	legacy http.Handler
	v1     a2av1.Handler
	max    int64
}

func (d *a2aVersions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		d.legacy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		a2av1.WriteError(w, nil, a2av1.Errorf(a2av1.CodeInvalidRequest, "the request could not be read whole (at most %d bytes): %v", d.max, err))
		return
	}
	version := strings.TrimSpace(r.Header.Get(a2av1.VersionHeader))
	major := a2av1.Major(version)
	req, perr := a2av1.ParseRequest(body)
	switch {
	case version != "" && major != "1" && major != a2av1.LegacyVersion:
		a2av1.WriteError(w, requestID(req), a2av1.Errorf(a2av1.CodeVersionNotSupported,
			"A2A-Version %q is not spoken here: this agent speaks A2A %s and %s", version, a2av1.Version, a2av1.LegacyVersion))
	case major == "1" && perr != nil:
		a2av1.WriteError(w, requestID(req), perr)
	case perr == nil && a2av1.IsMethod(req.Method):
		a2av1.Serve(w, r, req, d.v1)
	case major == "1":
		a2av1.WriteError(w, req.ID, a2av1.Errorf(a2av1.CodeMethodNotFound,
			"%q is not a method of A2A %s, the version this request names (%s): 1.0 names them SendMessage, SendStreamingMessage, GetTask, CancelTask and SubscribeToTask",
			req.Method, a2av1.Version, a2av1.VersionHeader))
	default:
		r.Body = io.NopCloser(bytes.NewReader(body))
		d.legacy.ServeHTTP(w, r)
	}
}

func requestID(req *a2av1.Request) json.RawMessage {
	if req == nil {
		return nil
	}
	return req.ID
}

// writeA2ACard writes an agent's card for clients of both versions: 0.3's fields, and 1.0's
// supportedInterfaces (1.0 first, preferred, then 0.3, at the same URL).
func (s *Server) writeA2ACard(w http.ResponseWriter, r *http.Request, name string, a *agent.Agent) {
	legacy := s.a2aCard(r, name, a)
	b, err := json.Marshal(legacy)
	if err == nil {
		b, err = a2av1.WithLegacyCard(b, a2aCardV1(legacy))
	}
	if err != nil {
		http.Error(w, "the agent card could not be written", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// a2aCardV1 is the 1.0 card of the same agent as legacy.
func a2aCardV1(legacy *a2asdk.AgentCard) *a2av1.AgentCard {
	streaming := legacy.Capabilities.Streaming
	card := &a2av1.AgentCard{Name: legacy.Name, Description: legacy.Description, Version: legacy.Version,
		SupportedInterfaces: []a2av1.AgentInterface{
			{URL: legacy.URL, ProtocolBinding: a2av1.BindingJSONRPC, ProtocolVersion: a2av1.Version},
			{URL: legacy.URL, ProtocolBinding: a2av1.BindingJSONRPC, ProtocolVersion: a2av1.LegacyVersion},
		},
		Capabilities:      a2av1.AgentCapabilities{Streaming: &streaming},
		DefaultInputModes: legacy.DefaultInputModes, DefaultOutputModes: legacy.DefaultOutputModes}
	for _, sk := range legacy.Skills {
		card.Skills = append(card.Skills, a2av1.AgentSkill{ID: sk.ID, Name: sk.Name, Description: sk.Description, Tags: sk.Tags})
	}
	if len(legacy.SecuritySchemes) > 0 {
		card.SecuritySchemes = map[string]a2av1.SecurityScheme{}
		for n, sc := range legacy.SecuritySchemes {
			if h, ok := sc.(a2asdk.HTTPAuthSecurityScheme); ok {
				card.SecuritySchemes[string(n)] = a2av1.SecurityScheme{HTTP: &a2av1.HTTPAuthSecurityScheme{Scheme: h.Scheme, Description: h.Description}}
			}
		}
		for _, req := range legacy.Security {
			r := a2av1.SecurityRequirement{Schemes: map[string]a2av1.StringList{}}
			for n, scopes := range req {
				r.Schemes[string(n)] = a2av1.StringList{List: append([]string{}, scopes...)}
			}
			card.SecurityRequirements = append(card.SecurityRequirements, r)
		}
	}
	return card
}

// a2aNoCardHere answers /a2a/.well-known/agent-card.json, where a client looks for the card
// of an agent it was given without the trailing slash (/a2a/NAME): it says where the cards are.
func a2aNoCardHere(w http.ResponseWriter, now *a2aServed) {
	names := make([]string, 0, len(now.agents))
	for n := range now.agents {
		names = append(names, a2aPrefix+n+"/.well-known/agent-card.json")
	}
	slices.Sort(names)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	json.NewEncoder(w).Encode(map[string]any{"error": "no agent is at /a2a/: each agent's card is under its own URL, /a2a/NAME/ " +
		"(with its trailing slash, a client resolving .well-known/agent-card.json against /a2a/NAME looks here)", "cards": names})
}

// a2aRequestsV1 answers A2A 1.0's methods with the same a2aRequests as 0.3's.
type a2aRequestsV1 struct{ h *a2aRequests }

var _ a2av1.Handler = (*a2aRequestsV1)(nil)

func (v *a2aRequestsV1) SendMessage(ctx context.Context, req *a2av1.SendMessageRequest) (*a2av1.SendMessageResponse, error) {
	res, err := v.h.OnSendMessage(ctx, legacyParams(req))
	if err != nil {
		return nil, v1Error(err)
	}
	switch x := res.(type) {
	case *a2asdk.Task:
		return &a2av1.SendMessageResponse{Task: v1Task(x)}, nil
	case *a2asdk.Message:
		return &a2av1.SendMessageResponse{Message: v1Message(x)}, nil
	}
	return nil, fmt.Errorf("an answer of %T", res)
}

func (v *a2aRequestsV1) SendStreamingMessage(ctx context.Context, req *a2av1.SendMessageRequest) iter.Seq2[*a2av1.StreamResponse, error] {
	return v1Events(v.h.OnSendMessageStream(ctx, legacyParams(req)))
}

func (v *a2aRequestsV1) SubscribeToTask(ctx context.Context, req *a2av1.SubscribeToTaskRequest) iter.Seq2[*a2av1.StreamResponse, error] {
	return v1Events(v.h.OnResubscribeToTask(ctx, &a2asdk.TaskIDParams{ID: a2asdk.TaskID(req.ID)}))
}

func (v *a2aRequestsV1) GetTask(ctx context.Context, req *a2av1.GetTaskRequest) (*a2av1.Task, error) {
	t, err := v.h.OnGetTask(ctx, &a2asdk.TaskQueryParams{ID: a2asdk.TaskID(req.ID)})
	if err != nil {
		return nil, v1Error(err)
	}
	return v1Task(t), nil
}

func (v *a2aRequestsV1) CancelTask(ctx context.Context, req *a2av1.CancelTaskRequest) (*a2av1.Task, error) {
	// The task must exist for the refusal to be that it cannot be canceled.
	if _, err := v.h.OnGetTask(ctx, &a2asdk.TaskQueryParams{ID: a2asdk.TaskID(req.ID)}); err != nil {
		return nil, v1Error(err)
	}
	t, err := v.h.OnCancelTask(ctx, &a2asdk.TaskIDParams{ID: a2asdk.TaskID(req.ID)})
	if err != nil {
		return nil, v1Error(err)
	}
	return v1Task(t), nil
}

// v1Events are 0.3's events as 1.0's.
func v1Events(events iter.Seq2[a2asdk.Event, error]) iter.Seq2[*a2av1.StreamResponse, error] {
	return func(yield func(*a2av1.StreamResponse, error) bool) {
		for ev, err := range events {
			if err != nil {
				yield(nil, v1Error(err))
				return
			}
			var out a2av1.StreamResponse
			switch x := ev.(type) {
			case *a2asdk.Task:
				out.Task = v1Task(x)
			case *a2asdk.Message:
				out.Message = v1Message(x)
			case *a2asdk.TaskStatusUpdateEvent:
				out.StatusUpdate = &a2av1.TaskStatusUpdateEvent{TaskID: string(x.TaskID), ContextID: x.ContextID, Status: v1Status(x.Status)}
			case *a2asdk.TaskArtifactUpdateEvent:
				out.ArtifactUpdate = &a2av1.TaskArtifactUpdateEvent{TaskID: string(x.TaskID), ContextID: x.ContextID,
					Artifact: v1Artifact(x.Artifact), Append: x.Append, LastChunk: x.LastChunk}
			default:
				continue
			}
			if !yield(&out, nil) {
				return
			}
		}
	}
}

// legacyParams is a 1.0 SendMessage's params as 0.3's: the message's text, its task and
// context, and whether to wait.
func legacyParams(req *a2av1.SendMessageRequest) *a2asdk.MessageSendParams {
	m := req.Message
	var parts a2asdk.ContentParts
	for _, p := range m.Parts {
		if p.Text != nil {
			parts = append(parts, a2asdk.TextPart{Text: *p.Text})
		}
	}
	msg := a2asdk.NewMessage(a2asdk.MessageRoleUser, parts...)
	msg.ContextID, msg.TaskID = m.ContextID, a2asdk.TaskID(m.TaskID)
	blocking := req.Configuration == nil || !req.Configuration.ReturnImmediately
	return &a2asdk.MessageSendParams{Message: msg, Config: &a2asdk.MessageSendConfig{Blocking: &blocking}}
}

func v1Task(t *a2asdk.Task) *a2av1.Task {
	if t == nil {
		return nil
	}
	out := &a2av1.Task{ID: string(t.ID), ContextID: t.ContextID, Status: v1Status(t.Status)}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, v1Artifact(a))
	}
	return out
}

func v1Status(s a2asdk.TaskStatus) a2av1.TaskStatus {
	out := a2av1.TaskStatus{State: v1State(s.State), Message: v1Message(s.Message)}
	if s.Timestamp != nil {
		out.Timestamp = s.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	return out
}

// v1State is a 0.3 state's 1.0 name: the same states, spelled as 1.0's enum.
func v1State(s a2asdk.TaskState) a2av1.TaskState {
	if s == a2asdk.TaskStateUnknown || s == "" {
		return "TASK_STATE_UNSPECIFIED"
	}
	return a2av1.TaskState("TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(string(s), "-", "_")))
}

func v1Message(m *a2asdk.Message) *a2av1.Message {
	if m == nil {
		return nil
	}
	role := a2av1.RoleAgent
	if m.Role == a2asdk.MessageRoleUser {
		role = a2av1.RoleUser
	}
	return &a2av1.Message{MessageID: m.ID, ContextID: m.ContextID, TaskID: string(m.TaskID), Role: role, Parts: v1Parts(m.Parts)}
}

func v1Artifact(a *a2asdk.Artifact) a2av1.Artifact {
	if a == nil {
		return a2av1.Artifact{}
	}
	return a2av1.Artifact{ArtifactID: string(a.ID), Name: a.Name, Description: a.Description, Parts: v1Parts(a.Parts)}
}

func v1Parts(parts a2asdk.ContentParts) []a2av1.Part {
	out := make([]a2av1.Part, 0, len(parts))
	for _, p := range parts {
		switch x := p.(type) {
		case a2asdk.TextPart:
			out = append(out, a2av1.TextPart(x.Text))
		case *a2asdk.TextPart:
			out = append(out, a2av1.TextPart(x.Text))
		case a2asdk.DataPart:
			b, _ := json.Marshal(x.Data)
			out = append(out, a2av1.Part{Data: b})
		}
	}
	return out
}

// v1Error is an error of a2aRequests (0.3's) as 1.0's: the same codes, the words kept.
func v1Error(err error) error {
	codes := []struct {
		err  error
		code int
	}{
		{a2asdk.ErrTaskNotFound, a2av1.CodeTaskNotFound},
		{a2asdk.ErrTaskNotCancelable, a2av1.CodeTaskNotCancelable},
		{a2asdk.ErrPushNotificationNotSupported, a2av1.CodePushNotificationUnsupported},
		{a2asdk.ErrUnsupportedOperation, a2av1.CodeUnsupportedOperation},
		{a2asdk.ErrInvalidParams, a2av1.CodeInvalidParams},
		{a2asdk.ErrServerError, a2av1.CodeInternalError},
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return a2av1.Errorf(c.code, "%s", strings.ReplaceAll(err.Error(), "\n", ": "))
		}
	}
	return a2av1.Errorf(a2av1.CodeInternalError, "internal error")
}
