// Package a2a imports agents of other platforms, reached over the Agent2Agent protocol (A2A),
// as Quiver tools: a call of the tool sends its message to the remote agent and answers with
// what the agent said, so that the dispatcher governs, confirms where configured and records
// it like any other call. An agent of A2A 0.3 is called with the official Go SDK's JSON-RPC
// client (github.com/a2aproject/a2a-go), one of A2A 1.0 with Quiver's binding (package
// a2av1) until that SDK has a 1.0 release.
package a2a

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/a2a/a2av1"
	"github.com/quiverhq/quiver/schema"
)

// DefaultTimeout bounds a call when a Remote sets none: an agent may work for minutes.
const DefaultTimeout = 5 * time.Minute

// maxAnswerBytes caps the text a call answers with; the result limit of the dispatcher applies
// beside it.
const maxAnswerBytes = 1 << 20

// Remote is an agent reached over A2A.
type Remote struct {
	// Name is the tool's name (letters, digits, _, - and .).
	Name string
	// URL is where the agent's card is: the agent's base URL (the card is read at
	// /.well-known/agent-card.json under it) or the card's own URL (ending in .json).
	URL string
	// Headers are sent with every request, the card's too (an API key the agent asks for).
	Headers map[string]string
	// Timeout bounds a call (DefaultTimeout when zero).
	Timeout time.Duration
	// RequiresConfirmation makes every call wait for a person's approval.
	RequiresConfirmation bool
	// Connection, when set, has each call carry the calling person's token at a provider of
	// the workspace's connections (quiver.UserToken) as its bearer token, in place of an
	// Authorization header of Headers; the card is read without it. A person who has not
	// connected the provider is asked to, as for any tool that needs a connection.
	Connection *quiver.ConnectionNeed
	// Transport sends the requests (http.DefaultTransport when nil).
	Transport http.RoundTripper
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Tool reads the remote agent's card and makes its tool. The card may be of A2A 1.0 or 0.3
// (or both); the agent is called over JSON-RPC in the newest version both sides speak. The
// JSON-RPC endpoint must be on the origin (scheme, host and port) of r.URL: r.Headers (a key)
// are sent there and nowhere else. The agent's other transports are not used.
func Tool(ctx context.Context, r Remote) (*quiver.Tool, error) {
	c, card, err := connect(ctx, r)
	if err != nil {
		return nil, err
	}
	return quiver.NewTool(spec(r, card.describe(), card.Name), c.call)
}

// Lazy is the tool of an agent whose card could not be read (cause): each call reads it
// again and, once it can, calls the agent; until then a call fails saying why. A server
// whose partner is down at its start serves the rest, and the partner once it is back.
func Lazy(r Remote, cause error) (*quiver.Tool, error) {
	if !toolName.MatchString(r.Name) {
		return nil, fmt.Errorf("a2a: name %q: use 1 to 64 letters, digits, dots, _ and -", r.Name)
	}
	l := &lazy{r: r}
	desc := fmt.Sprintf("The agent at %s, reached over A2A (its card could not be read when this server started: %v). "+
		"Send it a message; to continue a conversation, give the context_id (and task_id) of its last answer.", r.URL, withoutURL(cause))
	return quiver.NewTool(spec(r, desc, ""), l.call)
}

type lazy struct {
	r  Remote
	mu sync.Mutex
	c  *caller
}

func (l *lazy) call(ctx context.Context, args json.RawMessage) (any, error) {
	l.mu.Lock()
	c := l.c
	if c == nil {
		var err error
		if c, _, err = connect(ctx, l.r); err != nil {
			l.mu.Unlock()
			return nil, err
		}
		l.c = c
	}
	l.mu.Unlock()
	return c.call(ctx, args)
}

func spec(r Remote, description, title string) quiver.Spec {
	var needs []quiver.ConnectionNeed
	if r.Connection != nil {
		needs = []quiver.ConnectionNeed{*r.Connection}
	}
	return quiver.Spec{
		Connections:          needs,
		Name:                 r.Name,
		Description:          description,
		InputSchema:          inputSchema(),
		Timeout:              cmp.Or(r.Timeout, DefaultTimeout),
		RequiresConfirmation: r.RequiresConfirmation,
		Imported:             true,
		Annotations:          quiver.Annotations{Title: title, OpenWorldHint: quiver.Hint(true)},
		Source:               quiver.SourceA2A + ":" + r.Name,
	}
}

// maxBody caps what the agent answers, its card included: the SDK reads a body whole.
const maxBody = 8 << 20

// cardTimeout bounds reading the card.
const cardTimeout = 30 * time.Second

// connect reads the agent's card and makes the client of its JSON-RPC interface, in the
// newest version both sides speak: 1.0 with Quiver's binding (a2av1), else 0.3 with the SDK's.
func connect(ctx context.Context, r Remote) (*caller, *card, error) {
	if !toolName.MatchString(r.Name) {
		return nil, nil, fmt.Errorf("a2a: name %q: use 1 to 64 letters, digits, dots, _ and -", r.Name)
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, fmt.Errorf("a2a: %s: the URL %q is not an http or https URL of the agent or its card", r.Name, r.URL)
	}
	client := &http.Client{Transport: headers{set: r.Headers, next: r.Transport, origin: u}, Timeout: cardTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			switch {
			case len(via) > 3:
				return errors.New("more than 3 redirects")
			case req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme:
				return errors.New("a redirect to another origin: refused")
			}
			return nil
		}}
	c, err := readCard(ctx, client, u)
	if err != nil {
		return nil, nil, fmt.Errorf("a2a: %s: reading the agent card at %s: %w", r.Name, u.Redacted(), err)
	}
	at, err := c.choose(u)
	if err != nil {
		return nil, nil, fmt.Errorf("a2a: %s: the agent card at %s: %w", r.Name, u.Redacted(), err)
	}
	callClient := &http.Client{Transport: client.Transport, CheckRedirect: client.CheckRedirect}
	if at.version == "1" {
		return &caller{name: r.Name, version: a2av1.Version, need: r.Connection, agent: &v1Agent{c: &a2av1.Client{Endpoint: at.url, HTTP: callClient}}}, c, nil
	}
	sdk, err := a2aclient.NewFromEndpoints(ctx, []a2asdk.AgentInterface{{Transport: a2asdk.TransportProtocolJSONRPC, URL: at.url}},
		a2aclient.WithDefaultsDisabled(), a2aclient.WithJSONRPCTransport(callClient))
	if err != nil {
		return nil, nil, fmt.Errorf("a2a: %s: %w", r.Name, err)
	}
	return &caller{name: r.Name, version: a2av1.LegacyVersion, need: r.Connection, agent: &legacyAgent{c: sdk}}, c, nil
}

func inputSchema() *schema.Schema {
	return &schema.Schema{Type: "object", Required: []string{"message"}, Properties: map[string]*schema.Schema{
		"message":    {Type: "string", Description: "What to ask the agent, in full."},
		"context_id": {Type: "string", Description: "The context_id of an earlier answer, to continue that conversation."},
		"task_id":    {Type: "string", Description: "The task_id of an earlier answer that asked for more input, to answer it."},
	}}
}

// caller sends one tool's calls.
type caller struct {
	name    string
	version string
	need    *quiver.ConnectionNeed // the person's connection each call carries, if any
	agent   remoteAgent
}

// remoteAgent is the agent in the version it is spoken to.
type remoteAgent interface {
	// send sends a message and waits (the agent bounds how long) for its task to settle.
	send(ctx context.Context, message, contextID, taskID string) (*answer, error)
	// get reads a task.
	get(ctx context.Context, taskID string) (*answer, error)
}

// answer is what a call returns: the agent's text and where the conversation stands. The
// state is named as 0.3 names it (completed, input-required...), whichever version was spoken.
type answer struct {
	Answer    string `json:"answer"`
	State     string `json:"state"`
	ContextID string `json:"context_id,omitempty"`
	TaskID    string `json:"task_id,omitempty"`
}

// settled reports whether the task has ended or waits on its client.
func (a *answer) settled() bool {
	return a.State != string(a2asdk.TaskStateSubmitted) && a.State != string(a2asdk.TaskStateWorking)
}

// pollEvery is how often a call reads a task the agent answered before it settled.
var pollEvery = 500 * time.Millisecond

func (c *caller) call(ctx context.Context, args json.RawMessage) (any, error) {
	var in struct {
		Message   string `json:"message"`
		ContextID string `json:"context_id"`
		TaskID    string `json:"task_id"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, quiver.Fail(quiver.CodeInvalidArguments, "the arguments are not an object: %v", err)
	}
	if c.need != nil {
		tok, err := quiver.UserToken(ctx, c.need.Provider, c.need.Scopes...)
		if err != nil {
			return nil, err
		}
		ctx = context.WithValue(ctx, bearerKey{}, tok)
	}
	out, err := c.agent.send(ctx, in.Message, in.ContextID, in.TaskID)
	// A task answered before it settled is read until it does, within the call's time.
	for err == nil && !out.settled() && out.TaskID != "" {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the agent %s: task %s still %s when the call's time ran out", c.name, out.TaskID, out.State)
		case <-time.After(pollEvery):
		}
		out, err = c.agent.get(ctx, out.TaskID)
	}
	if err != nil {
		return nil, fmt.Errorf("the agent %s (A2A %s): %w", c.name, c.version, withoutURL(err))
	}
	switch a2asdk.TaskState(out.State) {
	case a2asdk.TaskStateFailed, a2asdk.TaskStateRejected, a2asdk.TaskStateCanceled:
		return nil, fmt.Errorf("the agent %s: task %s %s: %s", c.name, out.TaskID, out.State, cmp.Or(out.Answer, "no reason given"))
	}
	if len(out.Answer) > maxAnswerBytes {
		out.Answer = out.Answer[:maxAnswerBytes]
	}
	return *out, nil
}

// legacyAgent speaks A2A 0.3 through the SDK.
type legacyAgent struct{ c *a2aclient.Client }

func (l *legacyAgent) send(ctx context.Context, message, contextID, taskID string) (*answer, error) {
	msg := a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: message})
	msg.ContextID, msg.TaskID = contextID, a2asdk.TaskID(taskID)
	blocking := true
	res, err := l.c.SendMessage(ctx, &a2asdk.MessageSendParams{Message: msg, Config: &a2asdk.MessageSendConfig{Blocking: &blocking}})
	if err != nil {
		return nil, err
	}
	switch r := res.(type) {
	case *a2asdk.Message:
		return &answer{Answer: text(r.Parts), State: string(a2asdk.TaskStateCompleted), ContextID: r.ContextID, TaskID: string(r.TaskID)}, nil
	case *a2asdk.Task:
		return legacyAnswer(r), nil
	}
	return nil, fmt.Errorf("it answered %T, neither a message nor a task", res)
}

func (l *legacyAgent) get(ctx context.Context, taskID string) (*answer, error) {
	t, err := l.c.GetTask(ctx, &a2asdk.TaskQueryParams{ID: a2asdk.TaskID(taskID)})
	if err != nil {
		return nil, err
	}
	return legacyAnswer(t), nil
}

// legacyAnswer is a 0.3 task's answer. The artifacts are the task's result; the status message
// says why it waits or failed, and is the answer when there are none (an agent may put it in
// both).
func legacyAnswer(t *a2asdk.Task) *answer {
	var parts []string
	for _, a := range t.Artifacts {
		if a != nil {
			parts = append(parts, text(a.Parts))
		}
	}
	if len(parts) == 0 && t.Status.Message != nil {
		parts = append(parts, text(t.Status.Message.Parts))
	}
	return &answer{Answer: strings.TrimSpace(strings.Join(parts, "\n")), State: string(t.Status.State), ContextID: t.ContextID, TaskID: string(t.ID)}
}

// v1Agent speaks A2A 1.0 through Quiver's binding.
type v1Agent struct{ c *a2av1.Client }

func (v *v1Agent) send(ctx context.Context, message, contextID, taskID string) (*answer, error) {
	msg := &a2av1.Message{MessageID: rand.Text(), ContextID: contextID, TaskID: taskID, Role: a2av1.RoleUser,
		Parts: []a2av1.Part{a2av1.TextPart(message)}}
	res, err := v.c.SendMessage(ctx, &a2av1.SendMessageRequest{Message: msg})
	if err != nil {
		return nil, err
	}
	if res.Message != nil {
		return &answer{Answer: res.Message.Text(), State: string(a2asdk.TaskStateCompleted), ContextID: res.Message.ContextID, TaskID: res.Message.TaskID}, nil
	}
	return v1Answer(res.Task), nil
}

func (v *v1Agent) get(ctx context.Context, taskID string) (*answer, error) {
	t, err := v.c.GetTask(ctx, &a2av1.GetTaskRequest{ID: taskID})
	if err != nil {
		return nil, err
	}
	return v1Answer(t), nil
}

// v1Answer is a 1.0 task's answer, read as legacyAnswer reads 0.3's.
func v1Answer(t *a2av1.Task) *answer {
	var parts []string
	for _, a := range t.Artifacts {
		parts = append(parts, a2av1.JoinParts(a.Parts))
	}
	if len(parts) == 0 && t.Status.Message != nil {
		parts = append(parts, t.Status.Message.Text())
	}
	return &answer{Answer: strings.TrimSpace(strings.Join(parts, "\n")), State: t.Status.State.Legacy(), ContextID: t.ContextID, TaskID: t.ID}
}

// text joins the text parts of a message or artifact; other parts are named.
func text(parts a2asdk.ContentParts) string {
	var out []string
	for _, p := range parts {
		switch x := p.(type) {
		case a2asdk.TextPart:
			out = append(out, x.Text)
		case *a2asdk.TextPart:
			out = append(out, x.Text)
		case a2asdk.DataPart:
			b, _ := json.Marshal(x.Data)
			out = append(out, string(b))
		case *a2asdk.DataPart:
			b, _ := json.Marshal(x.Data)
			out = append(out, string(b))
		default:
			out = append(out, fmt.Sprintf("[a %T the agent sent]", p))
		}
	}
	return strings.Join(out, "\n")
}

// withoutURL is err without an *url.Error's URL.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// bearerKey is the context key of the person's token a call's requests carry.
type bearerKey struct{}

// headers adds a Remote's headers to the requests to its origin (only), and caps the bodies
// of the answers.
type headers struct {
	set    map[string]string
	next   http.RoundTripper
	origin *url.URL
}

func (h headers) RoundTrip(req *http.Request) (*http.Response, error) {
	next := h.next
	if next == nil {
		next = http.DefaultTransport
	}
	bearer, _ := req.Context().Value(bearerKey{}).(string)
	if (len(h.set) > 0 || bearer != "") && req.URL.Scheme == h.origin.Scheme && req.URL.Host == h.origin.Host {
		req = req.Clone(req.Context())
		for k, v := range h.set {
			req.Header.Set(k, v)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
	}
	resp, err := next.RoundTrip(req)
	if err == nil {
		resp.Body = &capped{r: resp.Body, left: maxBody}
	}
	return resp, err
}

// capped fails a body read past its cap, rather than cutting it (a cut JSON answer would
// mislead).
type capped struct {
	r    io.ReadCloser
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("the agent's answer is larger than %d bytes", maxBody)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *capped) Close() error { return c.r.Close() }
