package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
)

var ctx = context.Background()

// turnModel answers each request with the turn whose index is the number of assistant messages
// the request carries, so a run resumed by another process gets the same answers. It records
// every request.
type turnModel struct {
	dialect schema.Dialect
	turns   []model.Response
	mu      sync.Mutex
	reqs    []*model.Request
	block   chan struct{} // when set, Generate waits on it (or on ctx)
}

func (m *turnModel) Name() string { return "test:turns" }
func (m *turnModel) Dialect() schema.Dialect {
	if m.dialect == "" {
		return schema.OpenAI
	}
	return m.dialect
}

func (m *turnModel) Generate(ctx context.Context, req *model.Request, onDelta func(model.Delta)) (*model.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	if m.block != nil {
		select {
		case <-m.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n := 0
	for _, msg := range req.Messages {
		if msg.Role == model.RoleAssistant {
			n++
		}
	}
	if n >= len(m.turns) {
		return nil, fmt.Errorf("script has %d turns, asked for turn %d", len(m.turns), n+1)
	}
	t := m.turns[n]
	if onDelta != nil && t.Text != "" {
		for _, w := range strings.SplitAfter(t.Text, " ") {
			onDelta(model.Delta{Text: w})
		}
	}
	return &t, nil
}

func (m *turnModel) lastRequest() *model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[len(m.reqs)-1]
}

func calls(cs ...model.ToolCall) []model.ToolCall { return cs }

func call(id, name, args string) model.ToolCall {
	return model.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

type fixture struct {
	st    *sqlite.Store
	reg   *quiver.Registry
	ran   *runLog
	th    *thread.Thread
	r     *agent.Runner
	evs   *eventLog
	agent *agent.Agent
}

type runLog struct {
	mu  sync.Mutex
	ran []string
}

func (l *runLog) add(s string) { l.mu.Lock(); l.ran = append(l.ran, s); l.mu.Unlock() }
func (l *runLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ran)
}

type eventLog struct {
	mu  sync.Mutex
	evs []agent.Event
}

func (l *eventLog) types() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.evs {
		if e.Type != agent.EventTextDelta {
			out = append(out, string(e.Type))
		}
	}
	return out
}

func newFixture(t *testing.T, m model.Model, p *agent.Prompt) *fixture {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, reg: &quiver.Registry{}, ran: &runLog{}, evs: &eventLog{}}
	type text struct {
		Text string `json:"text" jsonschema:"the text"`
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.reg.Register(
		quiver.Func("echo", "Echoes text.", func(_ context.Context, in text) (string, error) {
			f.ran.add("echo:" + in.Text)
			return "echo: " + in.Text, nil
		}),
		quiver.Func("delete_file", "Deletes a file.", func(_ context.Context, in struct {
			Path string `json:"path"`
		}) (string, error) {
			f.ran.add("delete_file:" + in.Path)
			return "deleted " + in.Path, nil
		}, quiver.WithConfirmation()),
		quiver.Func("boom", "Panics.", func(context.Context, struct{}) (string, error) { panic("kaboom") }),
		quiver.Func("slow", "Sleeps until cancelled.", func(ctx context.Context, _ struct{}) (string, error) {
			f.ran.add("slow")
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(time.Minute):
				return "woke", nil
			}
		}, quiver.WithTimeout(50*time.Millisecond)),
		quiver.Func("finish", "Ends the task.", func(context.Context, struct{}) (string, error) {
			f.ran.add("finish")
			return "done", nil
		}),
		quiver.Func("secret_tool", "Not for this agent.", func(context.Context, struct{}) (string, error) {
			f.ran.add("secret_tool")
			return "leak", nil
		}),
	))
	geo, err := quiver.NewTool(quiver.Spec{Name: "get_location", Description: "The user's location, from their device.",
		Target: quiver.TargetClient}, nil)
	must(err)
	must(f.reg.Register(geo))
	f.th, err = thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_test", UserID: "usr_1"})
	must(err)
	if p == nil {
		p = &agent.Prompt{Name: "assistant", System: "You help.", Tools: []string{"echo", "delete_file", "boom", "slow", "finish", "get_location"}}
	}
	f.agent = &agent.Agent{Name: "assistant", Prompt: p}
	f.r = &agent.Runner{Store: st, Registry: f.reg, Model: m, Grace: 50 * time.Millisecond}
	f.r.Subscribe(func(e agent.Event) {
		f.evs.mu.Lock()
		f.evs.evs = append(f.evs.evs, e)
		f.evs.mu.Unlock()
	})
	return f
}

// results returns the thread's tool results by call id.
func (f *fixture) results(t *testing.T) map[string]*quiver.Result {
	t.Helper()
	hist, err := f.th.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*quiver.Result{}
	for _, m := range hist {
		if m.Role == store.RoleTool {
			r, err := thread.Result(m.Result)
			if err != nil {
				t.Fatal(err)
			}
			out[m.ToolCallID] = r
		}
	}
	return out
}

func TestLoopRunsCallsInOrderAndFinishes(t *testing.T) {
	m := &turnModel{turns: []model.Response{
		{Text: "Let me check.", ToolCalls: calls(call("c1", "echo", `{"text":"a"}`), call("c2", "echo", `{"text":"b"}`))},
		{Text: "Both echoed."},
	}}
	f := newFixture(t, m, nil)
	out, err := f.r.Run(ctx, f.th, f.agent, "echo a and b")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != agent.RunFinished || out.Reason != agent.ReasonNoCalls || out.Text != "Both echoed." || out.Steps != 2 {
		t.Fatalf("outcome %+v", out)
	}
	if got := f.ran.list(); !slices.Equal(got, []string{"echo:a", "echo:b"}) {
		t.Fatalf("ran %v", got)
	}
	// The second request carries the calls and their results, in the provider's shape.
	req := m.lastRequest()
	var roles []model.Role
	for _, msg := range req.Messages {
		roles = append(roles, msg.Role)
	}
	if !slices.Equal(roles, []model.Role{model.RoleUser, model.RoleAssistant, model.RoleTool, model.RoleTool}) {
		t.Fatalf("roles %v", roles)
	}
	if req.Messages[2].ToolCallID != "c1" || req.Messages[2].Text != "echo: a" || req.Messages[3].ToolCallID != "c2" {
		t.Fatalf("tool messages %+v", req.Messages[2:])
	}
	if req.System != "You help." || req.Tools == nil || len(req.Tools.Tools) != 6 {
		t.Fatalf("system %q tools %v", req.System, req.Tools)
	}
	want := []string{"step_started", "model_turn", "tool_call", "tool_result", "tool_call", "tool_result", "step_started", "model_turn", "finished"}
	if got := f.evs.types(); !slices.Equal(got, want) {
		t.Fatalf("events %v\nwant   %v", got, want)
	}
	info, _ := f.th.Refresh(ctx)
	if info.Status != store.StatusIdle || info.StepCount != 2 || len(info.State) == 0 {
		t.Fatalf("thread after the run: %+v", info)
	}
}

// TestErrorsAreResults: every kind of failure becomes a result the model sees, and the loop
// goes on to the next call and the next step.
func TestErrorsAreResults(t *testing.T) {
	m := &turnModel{turns: []model.Response{
		{ToolCalls: calls(
			call("e1", "no_such_tool", `{}`),
			call("e2", "echo", `{"text":`),
			call("e3", "echo", `{"text":5}`),
			call("e4", "boom", `{}`),
			call("e5", "slow", `{}`),
			call("e6", "secret_tool", `{}`),
			call("e7", "echo", `{"text":"still runs"}`),
		)},
		{Text: "I saw the errors."},
	}}
	f := newFixture(t, m, nil)
	out, err := f.r.Run(ctx, f.th, f.agent, "try things")
	if err != nil {
		t.Fatal(err)
	}
	if out.Reason != agent.ReasonNoCalls {
		t.Fatalf("outcome %+v", out)
	}
	res := f.results(t)
	want := map[string]quiver.Code{"e1": quiver.CodeUnknownTool, "e2": quiver.CodeInvalidJSON, "e3": quiver.CodeInvalidArguments,
		"e4": quiver.CodePanic, "e5": quiver.CodeTimeout, "e6": quiver.CodePolicyDenied}
	for id, code := range want {
		if r := res[id]; r == nil || r.Code != code || !r.IsError() {
			t.Errorf("%s: %+v, want code %s", id, r, code)
		}
	}
	if r := res["e7"]; r == nil || r.IsError() {
		t.Errorf("e7 after the errors: %+v", r)
	}
	if slices.Contains(f.ran.list(), "secret_tool") {
		t.Error("a tool outside the policy ran")
	}
	req := m.lastRequest()
	errs := 0
	for _, msg := range req.Messages {
		if msg.Role == model.RoleTool && msg.IsError {
			errs++
			if strings.Contains(msg.Text, "goroutine") {
				t.Errorf("a stack reached the model: %q", msg.Text)
			}
		}
		if msg.Role == model.RoleAssistant {
			for _, c := range msg.ToolCalls {
				if !json.Valid(c.Args) || c.Args[0] != '{' {
					t.Errorf("call %s sent back with arguments %s", c.ID, c.Args)
				}
			}
		}
	}
	if errs != 6 {
		t.Errorf("%d error results reached the model, want 6", errs)
	}
}

func TestConfirmationPausesAndResumesExactlyThere(t *testing.T) {
	cases := []struct {
		name     string
		decision quiver.Decision
		wantRan  []string
		wantCode quiver.Code
	}{
		{"approve", quiver.Decision{Action: quiver.Approve}, []string{"echo:before", "delete_file:/tmp/a", "echo:after"}, ""},
		{"edit", quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"path":"/tmp/b"}`)},
			[]string{"echo:before", "delete_file:/tmp/b", "echo:after"}, ""},
		{"edit with invalid arguments", quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"path":7}`)},
			[]string{"echo:before", "echo:after"}, quiver.CodeInvalidArguments},
		{"deny", quiver.Decision{Action: quiver.Deny, Message: "never on prod"}, []string{"echo:before", "echo:after"}, quiver.CodeDenied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &turnModel{turns: []model.Response{
				{ToolCalls: calls(call("k1", "echo", `{"text":"before"}`), call("k2", "delete_file", `{"path":"/tmp/a"}`),
					call("k3", "echo", `{"text":"after"}`))},
				{Text: "Done."},
			}}
			f := newFixture(t, m, nil)
			out, err := f.r.Run(ctx, f.th, f.agent, "clean up")
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != agent.RunPaused || out.Reason != agent.ReasonConfirmation || out.Pending == nil ||
				out.Pending.Call.ID != "k2" || out.Pending.Description != "Deletes a file." {
				t.Fatalf("outcome %+v", out)
			}
			if got := f.ran.list(); !slices.Equal(got, []string{"echo:before"}) {
				t.Fatalf("before the decision ran %v", got)
			}
			// Resuming without a decision pauses again, running nothing.
			if again, err := f.r.Resume(ctx, f.th, f.agent); err != nil || again.Status != agent.RunPaused {
				t.Fatalf("resume without decision: %+v, %v", again, err)
			}
			// A new message cannot jump the queue.
			if _, err := f.r.Run(ctx, f.th, f.agent, "hello?"); !errors.Is(err, agent.ErrPaused) {
				t.Fatalf("message while paused: %v", err)
			}
			if err := f.r.Decide(ctx, f.th, f.agent, "k3", quiver.Decision{Action: quiver.Approve}); !errors.Is(err, agent.ErrNotPending) {
				t.Fatalf("deciding a call that does not wait: %v", err)
			}
			if err := f.r.Decide(ctx, f.th, f.agent, "k2", c.decision); err != nil {
				t.Fatal(err)
			}
			if err := f.r.Decide(ctx, f.th, f.agent, "k2", c.decision); err == nil {
				t.Fatal("a second decision was accepted")
			}
			out, err = f.r.Resume(ctx, f.th, f.agent)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != agent.RunFinished || out.Text != "Done." {
				t.Fatalf("after the decision: %+v", out)
			}
			if got := f.ran.list(); !slices.Equal(got, c.wantRan) {
				t.Fatalf("ran %v, want %v", got, c.wantRan)
			}
			r := f.results(t)["k2"]
			if r == nil || r.Code != c.wantCode {
				t.Fatalf("k2 result %+v, want code %q", r, c.wantCode)
			}
			if c.decision.Action == quiver.Deny && !strings.Contains(r.Error, "never on prod") {
				t.Fatalf("denial message lost: %q", r.Error)
			}
			// Nothing runs twice: resuming a finished run changes nothing.
			if _, err := f.r.Resume(ctx, f.th, f.agent); err != nil {
				t.Fatal(err)
			}
			if got := f.ran.list(); !slices.Equal(got, c.wantRan) {
				t.Fatalf("after a second resume ran %v", got)
			}
			types := f.evs.types()
			if !slices.Contains(types, "paused") || !slices.Contains(types, "resumed") {
				t.Fatalf("events %v", types)
			}
		})
	}
}

func TestClientToolPausesForTheClientsResult(t *testing.T) {
	m := &turnModel{turns: []model.Response{
		{ToolCalls: calls(call("g1", "get_location", `{}`))},
		{Text: "You are in Paris."},
	}}
	f := newFixture(t, m, nil)
	out, err := f.r.Run(ctx, f.th, f.agent, "where am I?")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != agent.RunPaused || out.Reason != agent.ReasonClientTool || out.Pending.Call.ID != "g1" {
		t.Fatalf("outcome %+v", out)
	}
	if err := f.r.SubmitResult(ctx, f.th, f.agent, "g1", nil); err == nil {
		t.Fatal("a nil result was accepted")
	}
	if err := f.r.Decide(ctx, f.th, f.agent, "g1", quiver.Decision{Action: quiver.Approve}); !errors.Is(err, agent.ErrNotPending) {
		t.Fatalf("approving a client call: %v", err)
	}
	if err := f.r.SubmitResult(ctx, f.th, f.agent, "g1", quiver.Text("48.85,2.35")); err != nil {
		t.Fatal(err)
	}
	if err := f.r.SubmitResult(ctx, f.th, f.agent, "g1", quiver.Text("again")); !errors.Is(err, agent.ErrNotPending) {
		t.Fatalf("a second result: %v", err)
	}
	out, err = f.r.Resume(ctx, f.th, f.agent)
	if err != nil || out.Text != "You are in Paris." {
		t.Fatalf("after the result: %+v, %v", out, err)
	}
	req := m.lastRequest()
	if last := req.Messages[len(req.Messages)-1]; last.Role != model.RoleTool || last.Text != "48.85,2.35" {
		t.Fatalf("the model did not get the client's result: %+v", last)
	}
}

func TestStopRules(t *testing.T) {
	loop := model.Response{ToolCalls: calls(call("", "echo", `{"text":"again"}`))}
	cases := []struct {
		name       string
		prompt     agent.Prompt
		turns      []model.Response
		wantReason agent.Reason
		wantSteps  int
	}{
		{"max steps", agent.Prompt{Tools: []string{"echo"}, Stop: agent.StopRules{MaxSteps: 3}},
			[]model.Response{loop, loop, loop, loop, loop}, agent.ReasonMaxSteps, 3},
		{"stop tool", agent.Prompt{Tools: []string{"echo", "finish"}, Stop: agent.StopRules{Tools: []string{"finish"}}},
			[]model.Response{loop, {ToolCalls: calls(call("f", "finish", `{}`))}, loop}, agent.ReasonStopTool, 2},
		{"no calls", agent.Prompt{Tools: []string{"echo"}}, []model.Response{loop, {Text: "ok"}}, agent.ReasonNoCalls, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.prompt
			p.Name = "p"
			f := newFixture(t, &turnModel{turns: c.turns}, &p)
			out, err := f.r.Run(ctx, f.th, f.agent, "go")
			if err != nil {
				t.Fatal(err)
			}
			if out.Reason != c.wantReason || out.Steps != c.wantSteps {
				t.Fatalf("outcome %+v, want %s after %d steps", out, c.wantReason, c.wantSteps)
			}
		})
	}
}

// TestRepeatedCallIDsAreMadeUnique: some OpenAI-compatible servers number calls from 0 every
// turn; the thread keeps every call, under ids of its own.
func TestRepeatedCallIDsAreMadeUnique(t *testing.T) {
	m := &turnModel{turns: []model.Response{
		{ToolCalls: calls(call("call_0", "echo", `{"text":"1"}`))},
		{ToolCalls: calls(call("call_0", "echo", `{"text":"2"}`), call("bad id!", "echo", `{"text":"3"}`))},
		{Text: "ok"},
	}}
	f := newFixture(t, m, nil)
	if _, err := f.r.Run(ctx, f.th, f.agent, "go"); err != nil {
		t.Fatal(err)
	}
	if got := f.ran.list(); !slices.Equal(got, []string{"echo:1", "echo:2", "echo:3"}) {
		t.Fatalf("ran %v", got)
	}
	if len(f.results(t)) != 3 {
		t.Fatalf("results %v", f.results(t))
	}
}

func TestCancellationStopsTheLoopAndTheTool(t *testing.T) {
	m := &turnModel{turns: []model.Response{{ToolCalls: calls(call("s1", "slow", `{}`))}, {Text: "never"}}}
	p := &agent.Prompt{Name: "p", Tools: []string{"slow"}}
	f := newFixture(t, m, p)
	f.reg.Unregister("slow")
	started := make(chan struct{})
	if err := f.reg.Register(quiver.Func("slow", "Waits.", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-started; cancel() }()
	_, err := f.r.Run(cctx, f.th, f.agent, "wait")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if info, _ := f.th.Refresh(ctx); info.Status != store.StatusIdle {
		t.Fatalf("status after cancel: %s", info.Status)
	}
	if !slices.Contains(f.evs.types(), "failed") {
		t.Fatalf("events %v", f.evs.types())
	}
	// Cancelling while the model thinks stops too.
	m2 := &turnModel{turns: []model.Response{{Text: "x"}}, block: make(chan struct{})}
	f2 := newFixture(t, m2, nil)
	cctx2, cancel2 := context.WithCancel(ctx)
	go func() {
		for {
			m2.mu.Lock()
			n := len(m2.reqs)
			m2.mu.Unlock()
			if n > 0 {
				cancel2()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if _, err := f2.r.Run(cctx2, f2.th, f2.agent, "think"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run while the model thinks = %v", err)
	}
}

func TestComposedOutputMode(t *testing.T) {
	out := &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"answer": {Type: "string"}}, Required: []string{"answer"}}
	m := &turnModel{turns: []model.Response{
		{Text: `not json`},
		{Text: `{"calls":[{"_tool":"echo","text":"hi","_reasoningForCall":"to check"}],"output":null}`},
		{Text: `{"calls":[],"output":{"answer":"hi"}}`},
	}}
	p := &agent.Prompt{Name: "p", Tools: []string{"echo"}, Output: out, ReasoningForCall: true}
	f := newFixture(t, m, p)
	o, err := f.r.Run(ctx, f.th, f.agent, "say hi")
	if err != nil {
		t.Fatal(err)
	}
	if o.Reason != agent.ReasonOutput || string(o.Output) != `{"answer":"hi"}` {
		t.Fatalf("outcome %+v (%s)", o, o.Output)
	}
	if got := f.ran.list(); !slices.Equal(got, []string{"echo:hi"}) {
		t.Fatalf("ran %v", got)
	}
	req := m.lastRequest()
	if req.Output == nil || req.Tools != nil {
		t.Fatalf("composed request: output %v tools %v", req.Output, req.Tools)
	}
	var sawRetry, sawResult bool
	for _, msg := range req.Messages {
		sawRetry = sawRetry || strings.Contains(msg.Text, "not a JSON document")
		sawResult = sawResult || strings.Contains(msg.Text, "echo: hi")
	}
	if !sawRetry || !sawResult {
		t.Fatalf("the model was not told (retry %v, result %v): %+v", sawRetry, sawResult, req.Messages)
	}
	hist, _ := f.th.History(ctx)
	var reasoning string
	for _, msg := range hist {
		for _, c := range msg.ToolCalls {
			reasoning = c.Reasoning
		}
	}
	if reasoning != "to check" {
		t.Fatalf("_reasoningForCall not stored: %q", reasoning)
	}
}

func TestExamplesAndNameMappingReachTheModel(t *testing.T) {
	m := &turnModel{dialect: schema.OpenAI, turns: []model.Response{
		{ToolCalls: calls(call("x1", "everything_echo", `{"text":"mapped"}`))},
		{Text: "ok"},
	}}
	p := &agent.Prompt{Name: "p", System: "Sys.", Tools: []string{"everything.echo"}}
	f := newFixture(t, m, p)
	ex, err := quiver.NewFunc("everything.echo", "Echoes, remotely.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		f.ran.add("remote:" + in.Text)
		return in.Text, nil
	}, quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{"text":"hello"}`), Result: json.RawMessage(`"hello"`)}))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.Register(ex); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Run(ctx, f.th, f.agent, "go"); err != nil {
		t.Fatal(err)
	}
	if got := f.ran.list(); !slices.Equal(got, []string{"remote:mapped"}) {
		t.Fatalf("ran %v", got)
	}
	req := m.lastRequest()
	if !strings.Contains(req.System, "hello") || !strings.HasPrefix(req.System, "Sys.") {
		t.Fatalf("examples not in the system prompt: %q", req.System)
	}
	if req.Messages[1].ToolCalls[0].Name != "everything_echo" || req.Messages[2].ToolName != "everything_echo" {
		t.Fatalf("history names not mapped back out: %+v", req.Messages[1:])
	}
	hist, _ := f.th.History(ctx)
	if hist[1].ToolCalls[0].Name != "everything.echo" {
		t.Fatalf("stored under %q", hist[1].ToolCalls[0].Name)
	}
}

func TestRunRefusals(t *testing.T) {
	f := newFixture(t, &turnModel{turns: []model.Response{{Text: "x"}}}, nil)
	noModel := &agent.Runner{Store: f.st, Registry: f.reg}
	if _, err := noModel.Run(ctx, f.th, f.agent, "hi"); !errors.Is(err, agent.ErrNoModel) || !strings.Contains(err.Error(), "model:") {
		t.Fatalf("without a model: %v", err)
	}
	bad := &agent.Agent{Name: "a", Prompt: &agent.Prompt{Name: "p", Tools: []string{"nope"}}}
	if _, err := f.r.Run(ctx, f.th, bad, "hi"); !errors.Is(err, agent.ErrDefinition) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown tool: %v", err)
	}
	if _, err := f.th.SetStatus(ctx, store.StatusTerminated); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Run(ctx, f.th, f.agent, "hi"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("terminated thread: %v", err)
	}
}

// TestLatentToolReturnsTheModelsOutput: a schema-only tool without an activity is executed by
// the model itself: its _output is the result, checked against the output schema.
func TestLatentToolReturnsTheModelsOutput(t *testing.T) {
	m := &turnModel{turns: []model.Response{
		{ToolCalls: calls(
			call("l1", "sentiment", `{"text":"great!","_output":{"sentiment":"positive"}}`),
			call("l2", "sentiment", `{"text":"meh","_output":{"sentiment":42}}`),
		)},
		{Text: "positive"},
	}}
	p := &agent.Prompt{Name: "p", Tools: []string{"sentiment"}}
	f := newFixture(t, m, p)
	tool, err := quiver.ParseSchemaTool([]byte(`{"type":"object","description":"Analyzes sentiment.","properties":{
		"_tool":{"const":"sentiment"},"text":{"type":"string"},
		"_output":{"type":"object","properties":{"sentiment":{"type":"string"}},"required":["sentiment"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Run(ctx, f.th, f.agent, "how does this sound?"); err != nil {
		t.Fatal(err)
	}
	res := f.results(t)
	if r := res["l1"]; r == nil || r.IsError() || string(r.Value) != `{"sentiment":"positive"}` {
		t.Fatalf("latent result %+v", r)
	}
	if r := res["l2"]; r == nil || r.Code != quiver.CodeInvalidOutput {
		t.Fatalf("output breaking its schema: %+v", r)
	}
	// The tool is offered with its _output property for the model to fill.
	if rt, ok := m.reqs[0].Tools.Lookup("sentiment"); !ok || !strings.Contains(string(rt.Parameters), "_output") {
		t.Fatalf("latent tool offered as %+v", rt)
	}
}

// The request rebuilt for each step carries an earlier result's images (decoded from the stored
// content) and its failure, on the tool message the model sees.
func TestResultImagesAndErrorsReachTheModel(t *testing.T) {
	m := &turnModel{turns: []model.Response{
		{ToolCalls: calls(call("i1", "snapshot", `{}`), call("i2", "boom", `{}`))},
		{ToolCalls: calls(call("i3", "echo", `{"text":"again"}`))},
		{Text: "done"},
	}}
	f := newFixture(t, m, &agent.Prompt{Name: "assistant", Tools: []string{"snapshot", "boom", "echo"}})
	png := []byte("\x89PNG\r\n\x1a\nnot really")
	if err := f.reg.Register(quiver.Func("snapshot", "Takes a picture.", func(context.Context, struct{}) (*quiver.Result, error) {
		return &quiver.Result{Status: quiver.StatusSuccess, Text: "a picture",
			Content: []quiver.Content{quiver.TextContent("a picture"), quiver.ImageContent(png, "image/png")}}, nil
	})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Run(ctx, f.th, f.agent, "look"); err != nil {
		t.Fatal(err)
	}
	// The last request holds both steps' results: the first step's are read back from the
	// history, not from the call that produced them.
	tools := map[string]model.Message{}
	for _, msg := range m.lastRequest().Messages {
		if msg.Role == model.RoleTool {
			tools[msg.ToolCallID] = msg
		}
	}
	if img := tools["i1"].Images; len(img) != 1 || img[0].MIMEType != "image/png" || !bytes.Equal(img[0].Data, png) || tools["i1"].IsError {
		t.Errorf("snapshot's message: %+v, want one image/png of %q, not an error", tools["i1"], png)
	}
	if !tools["i2"].IsError || len(tools["i2"].Images) != 0 {
		t.Errorf("boom's message: %+v, want an error without images", tools["i2"])
	}
	if tools["i3"].IsError || len(tools["i3"].Images) != 0 {
		t.Errorf("echo's message: %+v, want a plain success", tools["i3"])
	}
}
