// Package a2a imports agents of other platforms, reached over the Agent2Agent protocol (A2A),
// as Quiver tools: a call of the tool sends its message to the remote agent and answers with
// what the agent said, so that the dispatcher governs, confirms where configured and records
// it like any other call. It is built on the official Go SDK (github.com/a2aproject/a2a-go),
// its agent card resolver and its JSON-RPC client.
package a2a

import (
	"cmp"
	"context"
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
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/quiverhq/quiver"
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
	// Transport sends the requests (http.DefaultTransport when nil).
	Transport http.RoundTripper
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Tool reads the remote agent's card and makes its tool. The card's JSON-RPC endpoint must
// be on the origin (scheme, host and port) of r.URL: r.Headers (a key) are sent there and
// nowhere else. The agent's other transports are not used.
func Tool(ctx context.Context, r Remote) (*quiver.Tool, error) {
	c, card, err := connect(ctx, r)
	if err != nil {
		return nil, err
	}
	return quiver.NewTool(spec(r, describe(card), card.Name), c.call)
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
	return quiver.Spec{
		Name:                 r.Name,
		Description:          description,
		InputSchema:          inputSchema(),
		Timeout:              cmp.Or(r.Timeout, DefaultTimeout),
		RequiresConfirmation: r.RequiresConfirmation,
		Imported:             true,
		Annotations:          quiver.Annotations{Title: title, OpenWorldHint: quiver.Hint(true)},
	}
}

// maxBody caps what the agent answers, its card included: the SDK reads a body whole.
const maxBody = 8 << 20

// connect reads the agent's card and makes the SDK's client of its JSON-RPC endpoint.
func connect(ctx context.Context, r Remote) (*caller, *a2asdk.AgentCard, error) {
	if !toolName.MatchString(r.Name) {
		return nil, nil, fmt.Errorf("a2a: name %q: use 1 to 64 letters, digits, dots, _ and -", r.Name)
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, fmt.Errorf("a2a: %s: the URL %q is not an http or https URL of the agent or its card", r.Name, r.URL)
	}
	client := &http.Client{Transport: headers{set: r.Headers, next: r.Transport, origin: u}, Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			switch {
			case len(via) > 3:
				return errors.New("more than 3 redirects")
			case req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme:
				return errors.New("a redirect to another origin: refused")
			}
			return nil
		}}
	base, opts := r.URL, []agentcard.ResolveOption(nil)
	if strings.HasSuffix(u.Path, ".json") {
		base = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
		opts = append(opts, agentcard.WithPath(u.Path))
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	card, err := agentcard.NewResolver(client).Resolve(cctx, base, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("a2a: %s: reading the agent card at %s: %w", r.Name, u.Redacted(), withoutURL(err))
	}
	if err := checkCard(card, u); err != nil {
		return nil, nil, fmt.Errorf("a2a: %s: the agent card at %s: %w", r.Name, u.Redacted(), err)
	}
	callClient := &http.Client{Transport: client.Transport, CheckRedirect: client.CheckRedirect}
	sdk, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithDefaultsDisabled(), a2aclient.WithJSONRPCTransport(callClient))
	if err != nil {
		return nil, nil, fmt.Errorf("a2a: %s: %w", r.Name, err)
	}
	return &caller{name: r.Name, client: sdk}, card, nil
}

// checkCard refuses a card whose JSON-RPC endpoint Quiver cannot call, or that is on another
// origin than the card's configured URL (where the configured headers go, and nowhere else).
func checkCard(card *a2asdk.AgentCard, configured *url.URL) error {
	for _, iface := range append([]a2asdk.AgentInterface{{Transport: card.PreferredTransport, URL: card.URL}}, card.AdditionalInterfaces...) {
		if iface.Transport != a2asdk.TransportProtocolJSONRPC && iface.Transport != "" {
			continue
		}
		u, err := url.Parse(iface.URL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return fmt.Errorf("its JSON-RPC URL %q is not an http or https URL", iface.URL)
		case u.Scheme != configured.Scheme || u.Host != configured.Host:
			return fmt.Errorf("its JSON-RPC endpoint %s is on another origin than %s://%s, where Quiver sends the agent's headers: "+
				"configure the endpoint's own origin as the url", u.Redacted(), configured.Scheme, configured.Host)
		}
		return nil
	}
	return errors.New("it offers no JSON-RPC interface, the one transport Quiver speaks")
}

// describe is the tool's description: the card's, and its skills.
func describe(card *a2asdk.AgentCard) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(card.Description))
	if b.Len() == 0 {
		fmt.Fprintf(&b, "The agent %s, reached over A2A.", card.Name)
	}
	if len(card.Skills) > 0 {
		b.WriteString("\n\nIts skills:")
		for _, s := range card.Skills {
			fmt.Fprintf(&b, "\n- %s: %s", s.Name, strings.TrimSpace(s.Description))
		}
	}
	b.WriteString("\n\nSend it a message; to continue a conversation, give the context_id (and task_id) of its last answer.")
	return b.String()
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
	name   string
	client *a2aclient.Client
}

// answer is what a call returns: the agent's text and where the conversation stands.
type answer struct {
	Answer    string `json:"answer"`
	State     string `json:"state"`
	ContextID string `json:"context_id,omitempty"`
	TaskID    string `json:"task_id,omitempty"`
}

func (c *caller) call(ctx context.Context, args json.RawMessage) (any, error) {
	var in struct {
		Message   string `json:"message"`
		ContextID string `json:"context_id"`
		TaskID    string `json:"task_id"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, quiver.Fail(quiver.CodeInvalidArguments, "the arguments are not an object: %v", err)
	}
	msg := a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.TextPart{Text: in.Message})
	msg.ContextID, msg.TaskID = in.ContextID, a2asdk.TaskID(in.TaskID)
	blocking := true
	res, err := c.client.SendMessage(ctx, &a2asdk.MessageSendParams{Message: msg, Config: &a2asdk.MessageSendConfig{Blocking: &blocking}})
	if err != nil {
		return nil, fmt.Errorf("the agent %s: %w", c.name, withoutURL(err))
	}
	var out answer
	switch r := res.(type) {
	case *a2asdk.Message:
		out = answer{Answer: text(r.Parts), State: "completed", ContextID: r.ContextID, TaskID: string(r.TaskID)}
	case *a2asdk.Task:
		out = answer{State: string(r.Status.State), ContextID: r.ContextID, TaskID: string(r.ID)}
		// The artifacts are the task's result; the status message says why it waits or
		// failed, and is the answer when there are none (an agent may put it in both).
		var parts []string
		for _, a := range r.Artifacts {
			if a != nil {
				parts = append(parts, text(a.Parts))
			}
		}
		if len(parts) == 0 && r.Status.Message != nil {
			parts = append(parts, text(r.Status.Message.Parts))
		}
		out.Answer = strings.TrimSpace(strings.Join(parts, "\n"))
		switch r.Status.State {
		case a2asdk.TaskStateFailed, a2asdk.TaskStateRejected, a2asdk.TaskStateCanceled:
			return nil, fmt.Errorf("the agent %s: task %s %s: %s", c.name, r.ID, r.Status.State, cmp.Or(out.Answer, "no reason given"))
		}
	default:
		return nil, fmt.Errorf("the agent %s answered %T, neither a message nor a task", c.name, res)
	}
	if len(out.Answer) > maxAnswerBytes {
		out.Answer = out.Answer[:maxAnswerBytes]
	}
	return out, nil
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
	if len(h.set) > 0 && req.URL.Scheme == h.origin.Scheme && req.URL.Host == h.origin.Host {
		req = req.Clone(req.Context())
		for k, v := range h.set {
			req.Header.Set(k, v)
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
