package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver"
)

// progressLinger is how long progress notifications are still forwarded after a call ended.
const progressLinger = 2 * time.Second

// call runs one call of a remote tool.
func (r *remote) call(ctx context.Context, name string, args json.RawMessage) (any, error) {
	cs, err := r.sessionFor(ctx, name)
	if err != nil {
		return nil, err
	}
	params := &sdk.CallToolParams{Name: name, Arguments: args}
	token := newCallID()
	params.SetProgressToken(token)
	passTraceContext(ctx, params)
	passExecution(ctx, params)
	r.progress.Store(token, ctx)
	// Notifications are handled apart from responses, so the last ones may be handled just
	// after the call returned: keep the token a moment longer.
	defer time.AfterFunc(progressLinger, func() { r.progress.Delete(token) })
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // the dispatcher reports the timeout or cancellation
		}
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return nil, quiver.Fail(quiver.CodeToolError, "the MCP server %q refused the call to %s: %s", r.cfg.Name, name, rpcErr.Message)
		}
		// The connection is broken: drop it so that the loop (or the person's next call)
		// reconnects.
		r.mu.Lock()
		if r.session == cs {
			r.session = nil
			r.lastErr, r.lastTry = err.Error(), time.Now()
			if r.attempt == nil {
				r.attempt = make(chan struct{}) // the loop reconnects at once: calls wait for it
			}
		}
		r.mu.Unlock()
		go cs.Close()
		return nil, quiver.Fail(quiver.CodeToolError, "the MCP server %q could not be reached (%v); Quiver is reconnecting, so try again shortly", r.cfg.Name, err)
	}
	return FromResult(res), nil
}

// sessionFor is the session a call goes through: the person's, for a remote with a
// Connection, else the remote's own, waiting for it while it connects.
func (r *remote) sessionFor(ctx context.Context, name string) (*sdk.ClientSession, error) {
	if r.cfg.Connection != nil {
		return r.personalSession(ctx)
	}
	if cs := r.awaitSession(ctx); cs != nil {
		return cs, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // the dispatcher reports the timeout or cancellation
	}
	return nil, r.notConnected(r.quiverName(name))
}

// FromResult converts an MCP tools/call result into a Quiver result: isError becomes an error
// result whose message is the result's text; text-only content becomes the result's text,
// other content (image, audio, embedded resource, resource link) Quiver content;
// structuredContent becomes the structured value; _meta the result's metadata, as ToResult
// gives it (a remote Quiver's run_code duration, say).
//
// A remote Quiver's error code (CodeMetaKey) is not kept in the metadata: the server's code
// says what went wrong there, and the result here is the imported tool's error.
func FromResult(res *sdk.CallToolResult) *quiver.Result {
	out := fromResult(res)
	meta := res.Meta
	if _, ok := meta[CodeMetaKey]; ok {
		meta = maps.Clone(meta)
		delete(meta, CodeMetaKey)
	}
	if len(meta) > 0 {
		if b, err := json.Marshal(meta); err == nil {
			out.Meta = b
		}
	}
	return out
}

func fromResult(res *sdk.CallToolResult) *quiver.Result {
	var texts []string
	var content []quiver.Content
	textOnly := true
	for _, c := range res.Content {
		qc, ok := contentOf(c)
		if !ok {
			continue
		}
		content = append(content, qc)
		if qc.Type == quiver.ContentText {
			texts = append(texts, qc.Text)
		} else {
			textOnly = false
		}
	}
	if res.IsError {
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "the remote tool failed without saying why"
		}
		return &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeToolError, Error: msg}
	}
	out := &quiver.Result{Status: quiver.StatusSuccess}
	if textOnly {
		out.Text = strings.Join(texts, "\n")
	} else {
		out.Content = content
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil && string(b) != "null" {
			out.Value = b
		}
	}
	return out
}

// contentOf is an item of a remote result's content as Quiver's; false for one it has no use
// for (of a kind it does not know, or a resource without a URI).
func contentOf(c sdk.Content) (quiver.Content, bool) {
	switch c := c.(type) {
	case *sdk.TextContent:
		return quiver.TextContent(c.Text), true
	case *sdk.ImageContent:
		return quiver.Content{Type: quiver.ContentImage, Data: base64.StdEncoding.EncodeToString(c.Data), MimeType: mimeOr(c.MIMEType)}, true
	case *sdk.AudioContent:
		return quiver.Content{Type: quiver.ContentAudio, Data: base64.StdEncoding.EncodeToString(c.Data), MimeType: mimeOr(c.MIMEType)}, true
	case *sdk.EmbeddedResource:
		return embeddedContent(c)
	case *sdk.ResourceLink:
		return quiver.Content{Type: quiver.ContentResource, URI: c.URI, MimeType: c.MIMEType, Text: c.Name}, c.URI != ""
	}
	return quiver.Content{}, false
}

// embeddedContent is an embedded resource as content, its blob encoded; false without a URI.
func embeddedContent(c *sdk.EmbeddedResource) (quiver.Content, bool) {
	if c.Resource == nil || c.Resource.URI == "" {
		return quiver.Content{}, false
	}
	qc := quiver.Content{Type: quiver.ContentResource, URI: c.Resource.URI, MimeType: c.Resource.MIMEType, Text: c.Resource.Text}
	if len(c.Resource.Blob) > 0 {
		qc.Data = base64.StdEncoding.EncodeToString(c.Resource.Blob)
	}
	return qc, true
}

func mimeOr(m string) string {
	if m == "" {
		return "application/octet-stream"
	}
	return m
}

// The keys of a call's idempotency key in the _meta of the tools/call request a remote MCP
// tool gets: the call's id, the same in every attempt at it, and the attempt's number, from 1
// (quiver.Execution's CallID and Attempt). Quiver executes a call again when a process died
// before its result was stored, so a remote tool with an external effect keys the effect on
// CallIDMetaKey: at attempt 1 no earlier request for the call can have been sent; from 2 on
// one may have, and the tool checks whether its effect already happened. The keys follow MCP's
// _meta naming (a prefix of dot-separated labels and a slash), under Quiver's prefix io.quiver
// like ExamplesMetaKey.
const (
	CallIDMetaKey  = "io.quiver/call_id"
	AttemptMetaKey = "io.quiver/attempt"
)

// passExecution puts the call's id and attempt number in the request's _meta (see
// CallIDMetaKey). A call without an id (a Go program's that gave none) sends neither: it has
// no key to deduplicate on.
func passExecution(ctx context.Context, params *sdk.CallToolParams) {
	e, ok := quiver.ExecutionFrom(ctx)
	if !ok || e.CallID == "" {
		return
	}
	meta := params.GetMeta()
	if meta == nil {
		meta = map[string]any{}
	}
	meta[CallIDMetaKey] = e.CallID
	meta[AttemptMetaKey] = max(e.Attempt, 1)
	params.SetMeta(meta)
}

// passTraceContext puts the call's trace context (W3C traceparent and tracestate, through the
// global propagator) in the request's _meta, where MCP servers look for it, so that the remote
// tool's work joins the caller's trace.
func passTraceContext(ctx context.Context, params *sdk.CallToolParams) {
	p := otel.GetTextMapPropagator()
	if len(p.Fields()) == 0 || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	carrier := propagation.MapCarrier{}
	p.Inject(ctx, carrier)
	meta := params.GetMeta()
	if meta == nil {
		meta = map[string]any{}
	}
	for k, v := range carrier {
		meta[k] = v
	}
	params.SetMeta(meta)
}
