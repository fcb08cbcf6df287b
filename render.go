package quiver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/schema"
)

// ToolSchemas describes tools for rendering: latent tools (no code, no activity in r) are
// marked so that their callers are asked for _output, and a tool governance gives a provider
// name carries it (schema.Render offers it to model providers under it).
func ToolSchemas(r *Registry, tools []*Tool) []schema.ToolSchema {
	out := make([]schema.ToolSchema, len(tools))
	for i, t := range tools {
		out[i] = schema.ToolSchema{Name: t.Name(), Description: t.Description(),
			Input: t.spec.InputSchema, Output: t.spec.OutputSchema, Latent: r.Latent(t), MetaFields: slices.Clone(t.spec.MetaFields),
			ProviderName: t.providerName}
	}
	return out
}

// Render renders the tools the policy permits in dialect d, with the meta-fields each
// accepts here.
func (d *Dispatcher) Render(dialect schema.Dialect) (*schema.ToolSet, error) {
	return schema.Render(dialect, d.toolSchemas())
}

// Compose returns the composed {calls, output} schema over the permitted tools; see
// [schema.Compose]. A nil output means the final answer is text. It offers no
// _reasoningForCall: a caller that wants it sets schema.ToolSchema.Reasoning on ToolSchemas'
// answer and calls schema.Compose, as an agent with reasoning_for_call does.
func (d *Dispatcher) Compose(output *schema.Schema) (*schema.Schema, error) {
	return schema.Compose(d.toolSchemas(), output)
}

// toolSchemas describes the permitted tools, each offered the meta-fields it accepts through
// this dispatcher: its own and the dispatcher's.
func (d *Dispatcher) toolSchemas() []schema.ToolSchema {
	out := ToolSchemas(d.registry(), d.Tools())
	for i := range out {
		out[i].MetaFields = MergeMetaFields(out[i].MetaFields, d.MetaFields)
	}
	return out
}

// MergeMetaFields returns the meta-fields of a and b, each once, in the order of
// schema.MetaFields.
func MergeMetaFields(a, b []string) []string {
	var out []string
	for _, f := range schema.MetaFields {
		if slices.Contains(a, f) || slices.Contains(b, f) {
			out = append(out, f)
		}
	}
	return out
}

// ParseComposed splits a model's answer in the composed format into its calls and its output
// (null or absent when the model is not done). Each call keeps its meta-fields: _tool names it,
// _reasoningForCall becomes Reasoning, _output becomes Output, other underscore fields go to
// Meta; the remaining properties are the arguments.
func ParseComposed(data []byte) ([]Call, json.RawMessage, error) {
	var doc struct {
		Calls  []map[string]json.RawMessage `json:"calls"`
		Output json.RawMessage              `json:"output"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("quiver: composed answer: %w", err)
	}
	calls := make([]Call, 0, len(doc.Calls))
	for i, item := range doc.Calls {
		var c Call
		if err := json.Unmarshal(item[schema.ToolField], &c.Name); err != nil || c.Name == "" {
			return nil, nil, fmt.Errorf("quiver: composed answer: call %d has no %s string", i, schema.ToolField)
		}
		args := map[string]json.RawMessage{}
		for k, v := range item {
			switch {
			case k == schema.ToolField:
			case k == schema.ReasoningField:
				if json.Unmarshal(v, &c.Reasoning) != nil {
					c.Reasoning = string(v)
				}
			case k == schema.OutputField:
				c.Output = v
			case strings.HasPrefix(k, "_"):
				if c.Meta == nil {
					c.Meta = map[string]json.RawMessage{}
				}
				c.Meta[k] = v
			default:
				args[k] = v
			}
		}
		b, err := json.Marshal(args)
		if err != nil {
			return nil, nil, err
		}
		c.Args = b
		calls = append(calls, c)
	}
	if string(doc.Output) == "null" {
		doc.Output = nil
	}
	if len(calls) == 0 && doc.Output == nil {
		return nil, nil, errors.New("quiver: composed answer has neither calls nor output")
	}
	return calls, doc.Output, nil
}

// RenderExamples writes the tools' examples as text for the system prompt, or "" when
// none has any. Each names its tool by its registered name; [RenderExamplesFor] names it as a
// provider is offered it.
func RenderExamples(tools []*Tool) string { return RenderExamplesFor(nil, tools) }

// RenderExamplesFor is [RenderExamples] with each tool named as set offers it (a name the
// provider would reject is offered mapped), so that the model reads the name it calls; set nil
// names tools by their registered names.
func RenderExamplesFor(set *schema.ToolSet, tools []*Tool) string {
	var b strings.Builder
	for _, t := range tools {
		name := t.Name()
		if set != nil {
			name = set.Outbound(name)
		}
		for _, ex := range t.spec.Examples {
			if b.Len() == 0 {
				b.WriteString("Examples of tool calls:\n")
			}
			args := ex.Args
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			fmt.Fprintf(&b, "- %s %s", name, compact(args))
			if len(ex.Result) > 0 {
				fmt.Fprintf(&b, " -> %s", compact(ex.Result))
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func compact(raw json.RawMessage) string {
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return string(raw)
	}
	return out.String()
}
