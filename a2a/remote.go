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
	"net/http"
	"net/url"
	"regexp"
	"strings"
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
// be an http or https URL; the agent's other transports are not used.
func Tool(ctx context.Context, r Remote) (*quiver.Tool, error) {
	if !toolName.MatchString(r.Name) {
		return nil, fmt.Errorf("a2a: name %q: use 1 to 64 letters, digits, dots, _ and -", r.Name)
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("a2a: %s: the URL %q is not an http or https URL of the agent or its card", r.Name, r.URL)
	}
	client := &http.Client{Transport: headers{r.Headers, r.Transport}, Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > 3 || req.URL.Host != via[0].URL.Host {
				return errors.New("a redirect to another host, or more than 3: refused")
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
		return nil, fmt.Errorf("a2a: %s: reading the agent card at %s: %w", r.Name, u.Redacted(), err)
	}
	if err := checkCard(card); err != nil {
		return nil, fmt.Errorf("a2a: %s: the agent card at %s: %w", r.Name, u.Redacted(), err)
	}
	callClient := &http.Client{Transport: client.Transport, CheckRedirect: client.CheckRedirect}
	sdk, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithDefaultsDisabled(), a2aclient.WithJSONRPCTransport(callClient))
	if err != nil {
		return nil, fmt.Errorf("a2a: %s: %w", r.Name, err)
	}
	spec := quiver.Spec{
		Name:                 r.Name,
		Description:          describe(card),
		InputSchema:          inputSchema(),
		Timeout:              cmp.Or(r.Timeout, DefaultTimeout),
		RequiresConfirmation: r.RequiresConfirmation,
		Imported:             true,
		Annotations:          quiver.Annotations{Title: card.Name, OpenWorldHint: quiver.Hint(true)},
	}
	c := &caller{name: r.Name, client: sdk}
	return quiver.NewTool(spec, c.call)
}

// checkCard refuses a card whose JSON-RPC endpoint Quiver cannot call.
func checkCard(card *a2asdk.AgentCard) error {
	for _, iface := range append([]a2asdk.AgentInterface{{Transport: card.PreferredTransport, URL: card.URL}}, card.AdditionalInterfaces...) {
		if iface.Transport != a2asdk.TransportProtocolJSONRPC && iface.Transport != "" {
			continue
		}
		u, err := url.Parse(iface.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("its JSON-RPC URL %q is not an http or https URL", iface.URL)
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
		var parts []string
		for _, a := range r.Artifacts {
			if a != nil {
				parts = append(parts, text(a.Parts))
			}
		}
		if r.Status.Message != nil {
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

// headers adds a Remote's headers to every request.
type headers struct {
	set  map[string]string
	next http.RoundTripper
}

func (h headers) RoundTrip(req *http.Request) (*http.Response, error) {
	next := h.next
	if next == nil {
		next = http.DefaultTransport
	}
	if len(h.set) > 0 {
		req = req.Clone(req.Context())
		for k, v := range h.set {
			req.Header.Set(k, v)
		}
	}
	return next.RoundTrip(req)
}
