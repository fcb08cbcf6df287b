package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/quiverhq/quiver/model"
)

// block is one content block of the reply.
type block struct {
	kind     string // "text", "tool_use", or one the loop has no use for ("thinking")
	id, name string
	text     string
	input    []byte
	streamed bool // input came as input_json_delta pieces, replacing the start's {}
}

// accumulator builds a Response from the reply's blocks, streamed or not. It keeps a tool's
// input exactly as the model wrote it, even when a cut-off reply leaves it invalid JSON.
type accumulator struct {
	blocks  []*block
	byIdx   map[int64]*block
	stop    string
	usage   model.Usage
	out     *output
	onDelta func(model.Delta)
}

func (a *accumulator) add(e anthropic.MessageStreamEventUnion) {
	switch e.Type {
	case "message_start":
		a.usage = model.Usage{InputTokens: e.Message.Usage.InputTokens, OutputTokens: e.Message.Usage.OutputTokens}
	case "content_block_start":
		a.start(e)
	case "content_block_delta":
		if b := a.byIdx[e.Index]; b != nil {
			a.delta(b, e.Delta)
		}
	case "message_delta":
		a.stop = string(e.Delta.StopReason)
		a.usage.OutputTokens = e.Usage.OutputTokens
		if e.Usage.InputTokens > 0 {
			a.usage.InputTokens = e.Usage.InputTokens
		}
	}
}

// start begins a content block.
func (a *accumulator) start(e anthropic.MessageStreamEventUnion) {
	b := &block{kind: e.ContentBlock.Type, id: e.ContentBlock.ID, name: e.ContentBlock.Name, text: e.ContentBlock.Text}
	if b.kind == "tool_use" {
		b.input = []byte("{}")
	}
	if a.byIdx == nil {
		a.byIdx = map[int64]*block{}
	}
	a.byIdx[e.Index] = b
	a.blocks = append(a.blocks, b)
}

// delta adds a piece of a block: text, or a tool's input as JSON. What the caller reads as it
// comes is the text, or the output as it is written.
func (a *accumulator) delta(b *block, d anthropic.MessageStreamEventUnionDelta) {
	switch d.Type {
	case "text_delta":
		b.text += d.Text
		if b.kind == "text" && a.out == nil {
			a.onDelta(model.Delta{Text: d.Text})
		}
	case "input_json_delta":
		if !b.streamed {
			b.input, b.streamed = nil, true
		}
		b.input = append(b.input, d.PartialJSON...)
		if a.streamsOutput(b) && d.PartialJSON != "" {
			a.onDelta(model.Delta{Text: d.PartialJSON})
		}
	}
}

// streamsOutput reports whether b's input is the output, as the caller reads it.
func (a *accumulator) streamsOutput(b *block) bool {
	return a.out != nil && b.name == a.out.name && !a.out.wrapped
}

func (a *accumulator) response(out *output) (*model.Response, error) {
	r := &model.Response{StopReason: a.stop, Usage: a.usage}
	var text strings.Builder
	for _, b := range a.blocks {
		switch {
		case b.kind == "text":
			text.WriteString(b.text)
		case b.kind == "tool_use" && out != nil && b.name == out.name:
			answer, err := out.answer(b.input)
			if err != nil {
				return nil, err
			}
			r.Text = answer
		case b.kind == "tool_use":
			r.ToolCalls = append(r.ToolCalls, model.ToolCall{ID: b.id, Name: b.name, Args: json.RawMessage(b.input)})
		}
	}
	if out == nil {
		r.Text = text.String()
	}
	return r, nil
}

// answer is the final output in the input of the output's tool.
func (out *output) answer(input []byte) (string, error) {
	if !out.wrapped {
		return string(input), nil
	}
	var w struct{ Value json.RawMessage }
	if err := json.Unmarshal(input, &w); err != nil || w.Value == nil {
		return "", fmt.Errorf("anthropic: the output %q has no value: %s", out.name, input)
	}
	return string(w.Value), nil
}
