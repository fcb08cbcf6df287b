package platform

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/store"
)

// A trace is a thread's runs laid out in time, read from the records Quiver keeps anyway: the
// messages (an assistant message is a model request, with what it used; a call and its
// result are a tool call), the people's decisions on calls, and the children a run spawned.
// Nothing is recorded for it: the figures are those of the records, so a trace never
// disagrees with the thread.

// MaxTraceMessages bounds the messages a trace reads: the newest this many. Older ones are
// left out of the trace, which says so (Trace.Truncated).
const MaxTraceMessages = 2000

// SpanKind is what a span of a trace stands for.
type SpanKind string

// The kinds of span.
const (
	SpanModel    SpanKind = "model"    // a model request: the assistant message it wrote
	SpanTool     SpanKind = "tool"     // a tool call, from the message that asked for it to its result
	SpanApproval SpanKind = "approval" // a person's decision on a call that required one
	SpanSubagent SpanKind = "subagent" // a child thread a call spawned
)

// SpanStatus is how a span ended.
type SpanStatus string

// The statuses of a span.
const (
	SpanOK      SpanStatus = "ok"
	SpanError   SpanStatus = "error"
	SpanPending SpanStatus = "pending" // not ended yet: no result, no decision, a child still going
)

// Span is one step of a trace.
type Span struct {
	Kind SpanKind `json:"kind" enum:"model,tool,approval,subagent" doc:"model: a model request; tool: a tool call, from the message that asked for it to its result; approval: a person's decision on a call that required one; subagent: a child thread a call spawned."`
	Name string   `json:"name" doc:"The model (provider:model) of a model request, the tool of a tool call or an approval, the agent of a sub-agent (with its name when it has one)."`
	// Start and End are when the span began and ended; End is absent while it is pending.
	Start time.Time  `json:"start" doc:"When the span began."`
	End   *time.Time `json:"end,omitempty" doc:"When the span ended; absent while it is pending."`
	// DurationMS is the model request's own measure where it was recorded, else End - Start.
	DurationMS   float64    `json:"duration_ms" doc:"How long the span took, in milliseconds: a model request's own measure where it was recorded, else end - start; 0 while pending."`
	InputTokens  int64      `json:"input_tokens,omitempty" doc:"The input tokens of a model request, as the provider counted them."`
	OutputTokens int64      `json:"output_tokens,omitempty" doc:"The output tokens of a model request, as the provider counted them."`
	Status       SpanStatus `json:"status" enum:"ok,error,pending" doc:"ok; error (a tool's error result, a denied call, a failed child or model request); pending (no result, decision or end yet)."`
	ErrorCode    string     `json:"error_code,omitempty" doc:"The error's code: a tool result's (invalid_args, timeout...), denied for a denied call, a failed run's reason."`
	Error        string     `json:"error,omitempty" doc:"The error, in words safe to show."`
	Decision     string     `json:"decision,omitempty" enum:"approve,edit,deny" doc:"An approval's decision."`
	CallID       string     `json:"call_id,omitempty" doc:"The call a tool span runs, or an approval decides."`
	ThreadID     string     `json:"thread_id,omitempty" doc:"A sub-agent's thread (the child)."`
	Parent       string     `json:"parent,omitempty" doc:"The call an approval or a sub-agent belongs to."`
}

// Trace is the timeline of a thread's runs.
type Trace struct {
	ThreadID string `json:"thread_id" doc:"The thread."`
	AgentID  string `json:"agent_id,omitempty" doc:"The thread's agent."`
	Status   Status `json:"status" enum:"idle,running,waiting,failed,terminated" doc:"The thread's status, as every door shows it."`
	// Run is how the last run ended (its error among it); nil before any has.
	Run          *agent.Outcome `json:"run,omitempty" doc:"How the thread's last run ended."`
	Start        time.Time      `json:"start" doc:"When the first span began (the thread's creation when it has none)."`
	End          time.Time      `json:"end" doc:"When the last span ended, or the time of this answer while a span is pending."`
	InputTokens  int64          `json:"input_tokens" doc:"The input tokens of the model requests of the trace."`
	OutputTokens int64          `json:"output_tokens" doc:"The output tokens of the model requests of the trace."`
	Truncated    bool           `json:"truncated" doc:"Whether the thread has more messages than a trace reads (the newest 2,000): the older ones are left out."`
	Spans        []*Span        `json:"spans" doc:"The spans, by start."`
}

// Trace returns the timeline of a thread of the actor's workspace (any other is not found):
// its model requests, tool calls, approvals and sub-agents, from the newest MaxTraceMessages
// messages.
func (p *Platform) Trace(ctx context.Context, a Actor, id string) (*Trace, error) {
	th, err := p.Thread(ctx, a, id)
	if err != nil {
		return nil, err
	}
	msgs, truncated, err := p.traceMessages(ctx, a.WorkspaceID, id)
	if err != nil {
		return nil, err
	}
	decisions, err := p.cfg.Store.Decisions(ctx, a.WorkspaceID, id)
	if err != nil {
		return nil, storeError(err, "the decisions of thread "+id, "")
	}
	kids, err := p.cfg.Store.Children(ctx, a.WorkspaceID, id)
	if err != nil {
		return nil, storeError(err, "the children of thread "+id, "")
	}
	t := &Trace{ThreadID: th.ID, AgentID: th.AgentID, Truncated: truncated}
	t.Status, t.Run = StatusOf(th)
	b := newTraceBuilder(msgs)
	b.model(msgs)
	b.tools(msgs)
	b.approvals(decisions, t.Run)
	b.subagents(th.ID, kids[:min(len(kids), MaxChildrenListed)])
	b.failure(th, t.Run, msgs)
	t.Spans = b.spans
	t.finish(th, stamp.Now(ctx).UTC())
	return t, nil
}

// traceMessages reads the thread's newest MaxTraceMessages messages, oldest first, a page at
// a time, and says whether older ones were left.
func (p *Platform) traceMessages(ctx context.Context, ws, id string) ([]*store.Message, bool, error) {
	const pageSize = 1000
	var pages [][]*store.Message
	n, before := 0, int64(0)
	for n < MaxTraceMessages {
		page, err := p.cfg.Store.Messages(ctx, ws, id, store.Page{Before: before, Limit: min(pageSize, MaxTraceMessages-n)})
		if err != nil {
			return nil, false, storeError(err, "messages of thread "+id, "")
		}
		if len(page) == 0 {
			break
		}
		pages, n, before = append(pages, page), n+len(page), page[0].Seq
		if before <= 1 {
			break
		}
	}
	out := make([]*store.Message, 0, n)
	for i := len(pages) - 1; i >= 0; i-- {
		out = append(out, pages[i]...)
	}
	// The thread's seqs run from 1 without gaps: messages before the oldest read were left.
	truncated := len(out) > 0 && out[0].Seq > 1
	return out, truncated, nil
}

// traceBuilder lays out a trace's spans.
type traceBuilder struct {
	spans []*Span
	// asked is the assistant message that asked for each call; answered the tool message
	// that answered it.
	asked, answered map[string]*store.Message
	names           map[string]string // each call's tool
}

func newTraceBuilder(msgs []*store.Message) *traceBuilder {
	b := &traceBuilder{asked: map[string]*store.Message{}, answered: map[string]*store.Message{}, names: map[string]string{}}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			b.asked[c.ID], b.names[c.ID] = m, c.Name
		}
		if m.Role == store.RoleTool {
			b.answered[m.ToolCallID] = m
		}
	}
	return b
}

// span adds a span from start to end (nil: pending), its duration end - start.
func (b *traceBuilder) span(s *Span, end *time.Time) *Span {
	s.End = end
	if end != nil {
		s.DurationMS = float64(end.Sub(s.Start).Microseconds()) / 1000
	} else {
		s.Status = SpanPending
	}
	if s.Status == "" {
		s.Status = SpanOK
	}
	b.spans = append(b.spans, s)
	return s
}

// model adds a span for each assistant message: the request ended when its message was
// written, and took its recorded duration; without one, it began when the message before it
// was written.
func (b *traceBuilder) model(msgs []*store.Message) {
	for i, m := range msgs {
		if m.Role != store.RoleAssistant {
			continue
		}
		end := m.CreatedAt
		s := &Span{Kind: SpanModel, Name: "model", Start: end}
		if i > 0 {
			s.Start = msgs[i-1].CreatedAt
		}
		u := m.Usage
		if u == nil {
			b.span(s, &end)
			continue
		}
		s.Name, s.InputTokens, s.OutputTokens = u.Model, u.InputTokens, u.OutputTokens
		took := time.Duration(u.DurationMS * float64(time.Millisecond))
		if start := end.Add(-took); i == 0 || start.After(s.Start) {
			s.Start = start
		}
		b.span(s, &end)
		s.DurationMS = u.DurationMS
	}
}

// tools adds a span for each call, from the message that asked for it to its result.
func (b *traceBuilder) tools(msgs []*store.Message) {
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			s := &Span{Kind: SpanTool, Name: c.Name, Start: m.CreatedAt, CallID: c.ID}
			res := b.answered[c.ID]
			if res == nil {
				b.span(s, nil)
				continue
			}
			if r := res.Result; r != nil && r.Status == "error" {
				s.Status, s.ErrorCode, s.Error = SpanError, r.Code, r.Error
			}
			b.span(s, &res.CreatedAt)
		}
	}
}

// approvals adds a span for each decision, from the message that asked for the call to the
// decision, and a pending one for the call a paused run waits on a person for.
func (b *traceBuilder) approvals(ds []*store.Decision, run *agent.Outcome) {
	decided := map[string]bool{}
	for _, d := range ds {
		decided[d.CallID] = true
		s := &Span{Kind: SpanApproval, Name: b.names[d.CallID], Start: d.DecidedAt, Decision: string(d.Action),
			CallID: d.CallID, Parent: d.CallID}
		if m := b.asked[d.CallID]; m != nil && m.CreatedAt.Before(d.DecidedAt) {
			s.Start = m.CreatedAt
		}
		if d.Action == store.Deny {
			s.Status, s.ErrorCode, s.Error = SpanError, "denied", cmp.Or(d.Message, "the call was denied")
		}
		at := d.DecidedAt
		b.span(s, &at)
	}
	if run == nil || run.Status != agent.RunPaused || run.Pending == nil || run.Pending.Reason != agent.ReasonConfirmation {
		return
	}
	id := run.Pending.Call.ID
	if m := b.asked[id]; m != nil && !decided[id] && b.answered[id] == nil {
		b.span(&Span{Kind: SpanApproval, Name: b.names[id], Start: m.CreatedAt, CallID: id, Parent: id}, nil)
	}
}

// subagents adds a span for each child: from its creation to its last change, pending while
// it runs or waits.
func (b *traceBuilder) subagents(parentID string, kids []*store.Thread) {
	for _, k := range kids {
		s := &Span{Kind: SpanSubagent, Name: k.AgentID, Start: k.CreatedAt, ThreadID: k.ID}
		for _, tag := range k.Tags {
			if call, ok := strings.CutPrefix(tag, "call:"+parentID+"/"); ok {
				s.Parent = call
			} else if name, ok := strings.CutPrefix(tag, "name:"); ok {
				s.Name += " (" + name + ")"
			}
		}
		status, run := StatusOf(k)
		switch status {
		case StatusRunning, StatusWaiting:
			b.span(s, nil)
			continue
		case StatusFailed:
			s.Status, s.ErrorCode, s.Error = SpanError, string(run.Reason), run.Error
		}
		end := k.UpdatedAt
		b.span(s, &end)
	}
}

// failure adds a failed model request when the last run failed at the model: it wrote no
// message, and began after the last one.
func (b *traceBuilder) failure(th *store.Thread, run *agent.Outcome, msgs []*store.Message) {
	if run == nil || run.Status != agent.RunFailed || th.Status == store.StatusRunning {
		return
	}
	switch run.Reason {
	case agent.ReasonModelUnavailable, agent.ReasonModelRefused, agent.ReasonModelSetup, agent.ReasonTimeout:
	default:
		return
	}
	start, end := th.CreatedAt, th.UpdatedAt
	if len(msgs) > 0 && msgs[len(msgs)-1].CreatedAt.Before(end) {
		start = msgs[len(msgs)-1].CreatedAt
	}
	b.span(&Span{Kind: SpanModel, Name: "model", Start: start, Status: SpanError, ErrorCode: string(run.Reason),
		Error: run.Error}, &end)
}

// finish orders the spans by start and sums the trace up; now ends it while a span is pending.
func (t *Trace) finish(th *store.Thread, now time.Time) {
	slices.SortStableFunc(t.Spans, func(x, y *Span) int { return x.Start.Compare(y.Start) })
	t.Start, t.End = th.CreatedAt, th.CreatedAt
	if len(t.Spans) > 0 {
		t.Start = t.Spans[0].Start
	}
	for _, s := range t.Spans {
		t.InputTokens += s.InputTokens
		t.OutputTokens += s.OutputTokens
		end := now
		if s.End != nil {
			end = *s.End
		}
		t.End = maxTime(t.End, end)
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
