// Package scripted is a model.Model that plays a fixed script of turns, for tests and offline
// demos: each turn answers with text, structured output or tool calls, and may first check
// what it was sent (the tools offered, the last tool result). Importing it registers the
// provider "scripted" with model.Open, whose model name is the script's file:
// "scripted:demo.yaml".
//
// A script file is YAML or JSON:
//
//	dialect: openai            # optional; the dialect tools are rendered in
//	turns:
//	  - calls:
//	      - name: everything.echo   # the registered name; mapped to the provider's
//	        args: {message: hi}
//	  - expect:
//	      result_contains: hi       # the last tool result must contain this
//	    text: The echo said hi.
//
// Call ids are deterministic ("call_<turn>_<n>"), so a replayed run sees the same ones. A
// request whose conversation already holds k model turns gets turn k+1 even from a fresh
// Model, so a run resumed by another process (quiver run --thread) plays on where it stopped.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
)

// ErrExhausted is returned by Generate once every turn of the script has been played.
var ErrExhausted = errors.New("scripted: the script has no turns left")

// Script is a list of turns and the dialect they are offered tools in.
type Script struct {
	// Dialect is the dialect the loop renders tools in; default schema.OpenAI.
	Dialect schema.Dialect `yaml:"dialect" json:"dialect"`
	Turns   []Turn         `yaml:"turns" json:"turns"`
}

// Turn is one reply of the model.
type Turn struct {
	// Expect, when set, is checked against the request before the turn is played.
	Expect *Expect `yaml:"expect" json:"expect"`
	// Text is the reply's text.
	Text string `yaml:"text" json:"text"`
	// Output, when set, is written as JSON into the reply's text: a structured answer.
	Output any `yaml:"output" json:"output"`
	// Calls are the tool calls of the reply, in order.
	Calls []Call `yaml:"calls" json:"calls"`
	// Fail makes Generate return this error message instead of a reply, as a failing
	// provider would.
	Fail string `yaml:"fail" json:"fail"`
	// Usage is the tokens the reply says it used, as a provider's does: what limits of tokens
	// and cost count.
	Usage Usage `yaml:"usage" json:"usage"`
}

// Usage is a reply's token usage.
type Usage struct {
	InputTokens  int64 `yaml:"input_tokens" json:"input_tokens"`
	OutputTokens int64 `yaml:"output_tokens" json:"output_tokens"`
}

// Call is a tool call of a turn.
type Call struct {
	// Name is the tool's registered name; the call uses the name the tool set gives it.
	Name string `yaml:"name" json:"name"`
	// Args are the arguments, written as JSON.
	Args any `yaml:"args" json:"args"`
	// RawArgs, instead of Args, is sent as it is, to play a model that writes broken JSON.
	RawArgs string `yaml:"raw_args" json:"raw_args"`
}

// Expect is what a turn checks before it is played; a mismatch fails Generate.
type Expect struct {
	// Tools must all be offered, by registered name.
	Tools []string `yaml:"tools" json:"tools"`
	// SystemContains must be in the system prompt.
	SystemContains string `yaml:"system_contains" json:"system_contains"`
	// UserContains must be in the last user message.
	UserContains string `yaml:"user_contains" json:"user_contains"`
	// ResultContains must be in the last tool result.
	ResultContains string `yaml:"result_contains" json:"result_contains"`
	// ResultIsError, when set, is whether the last tool result must be an error.
	ResultIsError *bool `yaml:"result_is_error" json:"result_is_error"`
}

// Model plays a Script. It is safe for concurrent use; turns are played in order.
type Model struct {
	name    string
	dialect schema.Dialect
	turns   []Turn
	mu      sync.Mutex
	next    int
}

// New returns a model playing s; name identifies it in Name() ("scripted:" + name).
func New(name string, s Script) (*Model, error) {
	d := s.Dialect
	if d == "" {
		d = schema.OpenAI
	}
	if _, err := schema.ParseDialect(string(d)); err != nil {
		return nil, fmt.Errorf("scripted %s: %w", name, err)
	}
	for i, t := range s.Turns {
		if err := t.check(i + 1); err != nil {
			return nil, fmt.Errorf("scripted %s: %v", name, err)
		}
	}
	return &Model{name: name, dialect: d, turns: slices.Clone(s.Turns)}, nil
}

// check checks that turn n does something, and that its calls name a tool and give
// arguments one way.
func (t Turn) check(n int) error {
	if t.Text == "" && t.Output == nil && len(t.Calls) == 0 && t.Fail == "" {
		return fmt.Errorf("turn %d has no text, output, calls or fail", n)
	}
	for j, c := range t.Calls {
		if c.Name == "" {
			return fmt.Errorf("turn %d, call %d has no name", n, j+1)
		}
		if c.Args != nil && c.RawArgs != "" {
			return fmt.Errorf("turn %d, call %d has both args and raw_args", n, j+1)
		}
	}
	return nil
}

// Turns is a shortcut for New with the default dialect.
func Turns(turns ...Turn) *Model {
	m, err := New("script", Script{Turns: turns})
	if err != nil {
		panic(err)
	}
	return m
}

// Load reads a script file (YAML or JSON).
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a script from YAML or JSON (JSON is YAML); name is where it came from.
func Parse(name string, data []byte) (*Model, error) {
	var s Script
	d := yaml.NewDecoder(bytes.NewReader(data))
	d.KnownFields(true) // a misspelt key is an error, not a silently ignored check
	if err := d.Decode(&s); err != nil {
		return nil, fmt.Errorf("scripted %s: %w", name, err)
	}
	return New(name, s)
}

func init() {
	model.Register("scripted", func(name string, _ model.Config) (model.Model, error) { return Load(name) })
}

// Name is "scripted:" and the script's name.
func (m *Model) Name() string { return "scripted:" + m.name }

// Dialect is the script's dialect.
func (m *Model) Dialect() schema.Dialect { return m.dialect }

// Remaining is the number of turns not played yet.
func (m *Model) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.turns) - m.next
}

// Generate plays the next turn, after checking its expectations against req. Text is streamed
// to onDelta word by word.
func (m *Model) Generate(ctx context.Context, req *model.Request, onDelta func(model.Delta)) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t, n, err := m.nextTurn(req)
	if err != nil {
		return nil, err
	}
	if t.Expect != nil {
		if err := t.Expect.check(req); err != nil {
			return nil, fmt.Errorf("%s, turn %d: %w", m.Name(), n, err)
		}
	}
	if t.Fail != "" {
		return nil, fmt.Errorf("%s, turn %d: %s", m.Name(), n, t.Fail)
	}
	r, err := m.play(t, n, req.Tools)
	if err != nil {
		return nil, err
	}
	if onDelta != nil && r.Text != "" {
		for _, w := range strings.SplitAfter(r.Text, " ") {
			onDelta(model.Delta{Text: w})
		}
	}
	return r, nil
}

// nextTurn takes the turn to play, and its number. A conversation that already holds k model
// turns (a run resumed by another process, a thread continued later) gets turn k+1, so a
// script replays the same whatever process plays it.
func (m *Model) nextTurn(req *model.Request) (Turn, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := assistantTurns(req.Messages); k > m.next {
		m.next = k
	}
	if m.next >= len(m.turns) {
		return Turn{}, 0, fmt.Errorf("%w: %s has %d turns and all were played", ErrExhausted, m.Name(), len(m.turns))
	}
	m.next++
	return m.turns[m.next-1], m.next, nil
}

// play is turn n's reply: its text or output, and its calls under the names the tool set
// gives them.
func (m *Model) play(t Turn, n int, tools *schema.ToolSet) (*model.Response, error) {
	r := &model.Response{Text: t.Text, StopReason: "stop", Usage: model.Usage{InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens}}
	if t.Output != nil {
		b, err := json.Marshal(t.Output)
		if err != nil {
			return nil, fmt.Errorf("%s, turn %d: output: %w", m.Name(), n, err)
		}
		r.Text = string(b)
	}
	for j, c := range t.Calls {
		args, err := c.args()
		if err != nil {
			return nil, fmt.Errorf("%s, turn %d, call %d: args: %w", m.Name(), n, j+1, err)
		}
		name := c.Name
		if tools != nil {
			name = tools.Outbound(name)
		}
		r.ToolCalls = append(r.ToolCalls, model.ToolCall{ID: fmt.Sprintf("call_%d_%d", n, j+1), Name: name, Args: args})
		r.StopReason = "tool_calls"
	}
	return r, nil
}

// args are the call's arguments as JSON: RawArgs as written, else Args ({} when unset).
func (c Call) args() (json.RawMessage, error) {
	if c.RawArgs != "" {
		return json.RawMessage(c.RawArgs), nil
	}
	v := c.Args
	if v == nil {
		v = map[string]any{}
	}
	return json.Marshal(v)
}

func (e *Expect) check(req *model.Request) error {
	for _, name := range e.Tools {
		if !offered(req.Tools, name) {
			return fmt.Errorf("expected tool %q to be offered", name)
		}
	}
	if !strings.Contains(req.System, e.SystemContains) {
		return fmt.Errorf("expected the system prompt to contain %q", e.SystemContains)
	}
	if e.UserContains != "" {
		last := lastOf(req.Messages, model.RoleUser)
		if last == nil || !strings.Contains(last.Text, e.UserContains) {
			return fmt.Errorf("expected the last user message to contain %q", e.UserContains)
		}
	}
	if e.ResultContains != "" || e.ResultIsError != nil {
		return e.checkResult(lastOf(req.Messages, model.RoleTool))
	}
	return nil
}

// offered reports whether the tool registered as name is in tools.
func offered(tools *schema.ToolSet, name string) bool {
	return tools != nil && slices.ContainsFunc(tools.Tools, func(t schema.RenderedTool) bool { return t.Canonical == name })
}

// checkResult checks the last tool result, last.
func (e *Expect) checkResult(last *model.Message) error {
	if last == nil {
		return errors.New("expected a tool result, and there is none")
	}
	if !strings.Contains(last.Text, e.ResultContains) {
		return fmt.Errorf("expected the last tool result to contain %q; it is %q", e.ResultContains, shorten(last.Text))
	}
	if e.ResultIsError != nil && last.IsError != *e.ResultIsError {
		return fmt.Errorf("expected the last tool result's error flag to be %v", *e.ResultIsError)
	}
	return nil
}

func lastOf(msgs []model.Message, role model.Role) *model.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == role {
			return &msgs[i]
		}
	}
	return nil
}

func shorten(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// assistantTurns counts the model turns a conversation holds.
func assistantTurns(msgs []model.Message) int {
	n := 0
	for _, msg := range msgs {
		if msg.Role == model.RoleAssistant {
			n++
		}
	}
	return n
}
