package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/genai"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// step is one model turn: build the request from the thread, ask the model, persist its turn
// (text and calls) and count the step. Nothing is persisted when the model fails, so a retry
// asks again.
func (rs *run) step(ctx context.Context) error {
	th := rs.th
	stepNo := rs.steps + 1
	charge, err := rs.spend(ctx)
	if err != nil {
		return err
	}
	rs.r.events.emit(Event{Type: EventStepStarted, ThreadID: th.ID(), Step: stepNo, Side: rs.side})
	// The request is timed by the run's clock (stamp), as its records are: a replay under a
	// clock of its own records the same durations.
	start := stamp.Now(ctx)
	resp, err := rs.generate(ctx, stepNo)
	if charge != nil {
		var used *model.Usage
		if err == nil {
			used = &resp.Usage
		}
		charge(ctx, used)
	}
	if err != nil {
		return err
	}
	// What the request used rides on the message it wrote: a trace reads it from there, with
	// no write of its own.
	took := max(0, stamp.Now(ctx).Sub(start))
	usage := &store.ModelUsage{Model: rs.model.Name(), InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens,
		DurationMS: float64(took.Microseconds()) / 1000}
	text, calls, retry := rs.interpret(ctx, resp, rs.hist, stepNo)
	am := &store.Message{Role: store.RoleAssistant, Content: text, Side: rs.side, Usage: usage}
	for i, c := range calls {
		sc := thread.StoredCall(c)
		if rs.composed == nil && i < len(resp.ToolCalls) {
			sc.Signature = resp.ToolCalls[i].Signature // provider state to send back with the call
		}
		am.ToolCalls = append(am.ToolCalls, sc)
	}
	if len(calls) == 0 && retry == "" && rs.side == "" && rs.endReason(am) != "" {
		// The answer ends the run unless a message was queued meanwhile: the loop stores it
		// with the run's end, in one write (endWithAnswer), and announces it then.
		rs.hist, rs.steps, rs.pending, rs.heldAnswer = append(rs.hist, am), stepNo, nil, true
		return nil
	}
	if err := th.Inject(ctx, am); err != nil {
		return err
	}
	rs.hist = append(rs.hist, am)
	rs.steps = stepNo
	if rs.pending, err = rs.refuseExtraCalls(ctx, calls); err != nil {
		return err
	}
	if retry != "" {
		// The model broke the composed format: say so, and let it try again next step.
		um, err := th.AppendUser(ctx, retry)
		if err != nil {
			return err
		}
		rs.hist = append(rs.hist, um)
	}
	rs.r.events.emit(Event{Type: EventModelTurn, ThreadID: th.ID(), Step: stepNo, Side: rs.side, Text: text, Calls: rs.pending})
	return nil
}

// budgetError is a step that was not taken: the caller's budget of model requests is reached.
type budgetError struct{ budget *Budget }

func (e *budgetError) Error() string { return "agent: " + e.budget.Message }

// spend asks the caller's rules whether the next model request may go (CallerRules.Spend):
// the function that charges what it used, or a budgetError.
func (rs *run) spend(ctx context.Context) (func(context.Context, *model.Usage), error) {
	if rs.onSpend == nil {
		return nil, nil
	}
	charge, exhausted := rs.onSpend(ctx, rs.model.Name())
	if exhausted != nil {
		return nil, &budgetError{exhausted}
	}
	return charge, nil
}

// generate asks the model for step stepNo, its text announced as it comes.
func (rs *run) generate(ctx context.Context, stepNo int) (*model.Response, error) {
	hist := rs.hist
	if rs.side != "" {
		hist = sideView(hist, rs.side)
	}
	req := rs.request(hist)
	mctx, span := rs.chatSpan(ctx)
	var start time.Time
	if rs.meters != nil || rs.onRequest != nil {
		start = time.Now()
	}
	resp, err := rs.model.Generate(mctx, req, func(d model.Delta) {
		rs.r.events.emit(Event{Type: EventTextDelta, ThreadID: rs.th.ID(), Step: stepNo, Side: rs.side, Text: d.Text})
	})
	endChatSpan(span, resp, err)
	if rs.meters != nil {
		rs.meters.chat(ctx, rs.model.Name(), time.Since(start), resp, err)
	}
	if rs.onRequest != nil {
		var used *model.Usage
		if resp != nil {
			used = &resp.Usage
		}
		rs.onRequest(ctx, rs.model.Name(), used, time.Since(start), err)
	}
	if err != nil {
		return nil, &modelCallError{model: rs.model.Name(), err: err}
	}
	return resp, nil
}

// refuseExtraCalls returns the calls of a step up to the prompt's limit. Every call must be
// answered before the model is asked again: the calls past the limit get an error result now,
// and are never run.
func (rs *run) refuseExtraCalls(ctx context.Context, calls []quiver.Call) ([]quiver.Call, error) {
	limit := rs.prompt.maxCallsPerStep()
	if len(calls) <= limit {
		return calls, nil
	}
	for _, c := range calls[limit:] {
		res := quiver.Errorf(quiver.CodeTooManyCalls, "call %s was not run: this step asked for %d tool calls, over the limit of %d "+
			"calls in one step; the first %d ran. Ask for at most %d calls at a time.", c.Name, len(calls), limit, limit, limit)
		m, err := rs.th.Record(ctx, &c, res)
		if err != nil && !errors.Is(err, store.ErrResultExists) {
			return nil, err
		}
		if m != nil {
			rs.hist = append(rs.hist, m)
		}
	}
	return calls[:limit], nil
}

// chatSpan starts the span of a model request ("chat MODEL"), nil when the run makes no spans.
func (rs *run) chatSpan(ctx context.Context) (context.Context, trace.Span) {
	if rs.tracer == nil {
		return ctx, nil
	}
	provider, name := splitModel(rs.model.Name())
	attrs := []attribute.KeyValue{genai.Operation.String(genai.OpChat), genai.RequestModel.String(name)}
	if provider != "" {
		attrs = append(attrs, genai.ProviderName.String(provider))
	}
	return rs.tracer.Start(ctx, genai.OpChat+" "+name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endChatSpan ends a model request's span with its usage and finish reason, or its error.
func endChatSpan(span trace.Span, resp *model.Response, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(genai.ErrorType.String(errorType(err)))
	} else if resp != nil {
		span.SetAttributes(genai.UsageInputTokens.Int64(resp.Usage.InputTokens), genai.UsageOutputTokens.Int64(resp.Usage.OutputTokens))
		if resp.StopReason != "" {
			span.SetAttributes(genai.ResponseFinish.StringSlice([]string{resp.StopReason}))
		}
	}
	span.End()
}

// request renders the thread's history for the model.
func (rs *run) request(hist []*store.Message) *model.Request {
	p := rs.prompt
	req := &model.Request{System: rs.system, Tools: rs.tools, Output: rs.composed, MaxTokens: p.MaxTokens,
		Temperature: p.Temperature, Messages: make([]model.Message, 0, len(hist))}
	for _, m := range hist {
		switch m.Role {
		case store.RoleUser:
			req.Messages = append(req.Messages, model.Message{Role: model.RoleUser, Text: m.Content})
		case store.RoleSystem:
			// Providers take one system prompt; a system message later in a thread (a runtime
			// notice) reaches the model as a user message that says what it is.
			req.Messages = append(req.Messages, model.Message{Role: model.RoleUser, Text: "[system notice] " + m.Content})
		case store.RoleAssistant:
			req.Messages = append(req.Messages, rs.turnMessage(m))
		case store.RoleTool:
			req.Messages = append(req.Messages, rs.resultMessage(m))
		}
	}
	return req
}

// turnMessage is an assistant's turn as the model reads it: in composed mode, the document
// it answered with.
func (rs *run) turnMessage(m *store.Message) model.Message {
	if rs.composed != nil {
		return model.Message{Role: model.RoleAssistant, Text: composedDocument(m)}
	}
	am := model.Message{Role: model.RoleAssistant, Text: m.Content}
	for _, c := range m.ToolCalls {
		am.ToolCalls = append(am.ToolCalls, model.ToolCall{ID: c.ID, Name: rs.outbound(c.Name), Args: historyArgs(c),
			Signature: c.Signature})
	}
	return am
}

// resultMessage is a tool's result as the model reads it. The history is rebuilt for every
// request, so a step must not decode every earlier result again: the status says whether it
// failed, and only content that can hold an image is decoded.
func (rs *run) resultMessage(m *store.Message) model.Message {
	isErr := m.Result != nil && quiver.Status(m.Result.Status) == quiver.StatusError
	text := m.Content
	if rs.prompt.UntrustedToolOutput {
		// Error results too: a tool's error often quotes what it read.
		text = untrusted(text)
	}
	if rs.composed != nil {
		// Without native tool calling, results come back as a user message.
		label := "Result"
		if isErr {
			label = "Error"
		}
		return model.Message{Role: model.RoleUser, Text: fmt.Sprintf("%s of call %s (%s): %s", label, m.ToolCallID, m.ToolName, text)}
	}
	tm := model.Message{Role: model.RoleTool, ToolCallID: m.ToolCallID, ToolName: rs.outbound(m.ToolName), Text: text,
		IsError: isErr}
	if m.Result != nil && bytes.Contains(m.Result.Content, []byte(`"image"`)) {
		var content []quiver.Content
		if json.Unmarshal(m.Result.Content, &content) == nil {
			tm.Images = images(content)
		}
	}
	return tm
}

// outbound is the name the provider knows a tool by.
func (rs *run) outbound(name string) string {
	if rs.tools == nil {
		return name
	}
	return rs.tools.Outbound(name)
}

// images returns the image content of a result, decoded.
func images(content []quiver.Content) []model.Image {
	var out []model.Image
	for _, c := range content {
		if c.Type != quiver.ContentImage || c.Data == "" {
			continue
		}
		if data, err := base64.StdEncoding.DecodeString(c.Data); err == nil {
			out = append(out, model.Image{MIMEType: c.MimeType, Data: data})
		}
	}
	return out
}

// historyArgs returns a stored call's arguments as the model sent them: its reasoning (kept
// apart from the arguments, see splitReasoning) goes back in, so the history the model sees is
// what it wrote.
func historyArgs(c store.ToolCall) json.RawMessage {
	args := thread.HistoryArgs(c.Args)
	if c.Reasoning == "" {
		return args
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return args
	}
	obj[schema.ReasoningField], _ = json.Marshal(c.Reasoning)
	b, err := json.Marshal(obj)
	if err != nil {
		return args
	}
	return b
}

// splitReasoning takes the model's _reasoningForCall out of a native call's arguments,
// so the stored call holds the arguments and the reasoning apart, as in composed mode.
// Arguments that are not a JSON object are left for the dispatcher to refuse.
func splitReasoning(args json.RawMessage) (json.RawMessage, string) {
	if !bytes.Contains(args, []byte(schema.ReasoningField)) {
		return args, ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return args, ""
	}
	raw, ok := obj[schema.ReasoningField]
	if !ok {
		return args, ""
	}
	var reasoning string
	if json.Unmarshal(raw, &reasoning) != nil {
		if string(raw) == "null" {
			raw = nil
		}
		reasoning = string(raw)
	}
	delete(obj, schema.ReasoningField)
	b, err := json.Marshal(obj)
	if err != nil {
		return args, ""
	}
	return b, reasoning
}

// composedDocument rebuilds the {calls, output} document an assistant turn of composed mode
// answered with, from what was stored of it.
func composedDocument(m *store.Message) string {
	calls := make([]map[string]json.RawMessage, 0, len(m.ToolCalls))
	for _, c := range m.ToolCalls {
		var args map[string]json.RawMessage
		_ = json.Unmarshal(thread.HistoryArgs(c.Args), &args)
		if args == nil {
			args = map[string]json.RawMessage{}
		}
		args["_tool"], _ = json.Marshal(c.Name)
		if c.Reasoning != "" {
			args["_reasoningForCall"], _ = json.Marshal(c.Reasoning)
		}
		calls = append(calls, args)
	}
	doc := map[string]any{"calls": calls, "output": nil}
	if m.Content != "" && json.Valid([]byte(m.Content)) {
		doc["output"] = json.RawMessage(m.Content)
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

// validCallID is what every provider accepts as a call id (Anthropic's rule is the strictest).
var validCallID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// interpret turns the model's turn into what is stored: the text (in composed mode, the output
// document or ""), the calls in canonical names with ids unique in the thread, and, when the
// model broke the composed format, a message telling it so.
func (rs *run) interpret(ctx context.Context, resp *model.Response, hist []*store.Message, step int) (text string, calls []quiver.Call, retry string) {
	if rs.composed != nil {
		parsed, output, err := quiver.ParseComposed([]byte(resp.Text))
		if err != nil {
			return "", nil, fmt.Sprintf("Your last answer was not a JSON document of the required form (%v). "+
				"Answer again with {\"calls\": [...], \"output\": ...}.", err)
		}
		for i := range parsed {
			parsed[i].ID = ""
		}
		calls = parsed
		if len(output) > 0 && string(output) != "null" {
			text = string(output)
		}
	} else {
		text, calls = resp.Text, rs.nativeCalls(resp.ToolCalls)
	}
	giveCallIDs(ctx, calls, usedCallIDs(hist), step)
	return text, calls, ""
}

// nativeCalls are the calls of a provider's tool calling in canonical names, their reasoning
// apart from their arguments.
func (rs *run) nativeCalls(tcs []model.ToolCall) []quiver.Call {
	var calls []quiver.Call
	for _, tc := range tcs {
		name, args := tc.Name, []byte(tc.Args)
		if rs.tools != nil {
			name, args, _ = rs.tools.Inbound(tc.Name, tc.Args)
		}
		args, reasoning := splitReasoning(args)
		calls = append(calls, quiver.Call{ID: tc.ID, Name: name, Args: args, Reasoning: reasoning})
	}
	return calls
}

// usedCallIDs are the ids of the calls in hist.
func usedCallIDs(hist []*store.Message) map[string]bool {
	used := map[string]bool{}
	for _, m := range hist {
		for _, c := range m.ToolCalls {
			used[c.ID] = true
		}
	}
	return used
}

// giveCallIDs gives each call an id unique in the thread. Some servers repeat ids across
// turns ("call_0") or send none; the thread needs them unique, and the model only needs them
// consistent.
func giveCallIDs(ctx context.Context, calls []quiver.Call, used map[string]bool, step int) {
	for i := range calls {
		id := calls[i].ID
		if id == "" || used[id] || !validCallID.MatchString(id) {
			fresh := stamp.ID(ctx, "call")
			id = fmt.Sprintf("call_s%d_%d_%s", step, i, fresh[len(fresh)-10:]) // the random end of the id
		}
		used[id] = true
		calls[i].ID = id
	}
}
