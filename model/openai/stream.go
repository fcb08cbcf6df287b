package openai

import (
	"encoding/json"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/quiverhq/quiver/model"
)

// accumulator builds a Response from streamed chunks. Tool calls arrive in pieces keyed by
// index: the first piece has the id and name, later ones add to the arguments.
type accumulator struct {
	text   strings.Builder
	calls  []*call
	byIdx  map[int64]*call
	stop   string
	usage  model.Usage
	refuse strings.Builder
}

type call struct {
	id, name string
	args     strings.Builder
}

func (a *accumulator) add(c openai.ChatCompletionChunk, onDelta func(model.Delta)) {
	if c.Usage.PromptTokens != 0 || c.Usage.CompletionTokens != 0 {
		a.usage = model.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if d := ch.Delta.Content; d != "" {
			a.text.WriteString(d)
			onDelta(model.Delta{Text: d})
		}
		a.refuse.WriteString(ch.Delta.Refusal)
		for _, tc := range ch.Delta.ToolCalls {
			a.addCall(tc)
		}
		if ch.FinishReason != "" {
			a.stop = ch.FinishReason
		}
	}
}

// addCall adds a piece of a tool call: the first has the id and name, later ones add to the
// arguments.
func (a *accumulator) addCall(tc openai.ChatCompletionChunkChoiceDeltaToolCall) {
	if a.byIdx == nil {
		a.byIdx = map[int64]*call{}
	}
	cl := a.byIdx[tc.Index]
	if cl == nil {
		cl = &call{}
		a.byIdx[tc.Index] = cl
		a.calls = append(a.calls, cl)
	}
	if tc.ID != "" {
		cl.id = tc.ID
	}
	if tc.Function.Name != "" {
		cl.name = tc.Function.Name
	}
	cl.args.WriteString(tc.Function.Arguments)
}

func (a *accumulator) response() *model.Response {
	r := &model.Response{Text: a.text.String(), StopReason: a.stop, Usage: a.usage}
	if r.Text == "" {
		r.Text = a.refuse.String()
	}
	for _, c := range a.calls {
		r.ToolCalls = append(r.ToolCalls, model.ToolCall{ID: c.id, Name: c.name, Args: json.RawMessage(c.args.String())})
	}
	return r
}
