package quiver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/quiverhq/quiver/schema"
)

func (d *Dispatcher) decode(next Handler) Handler {
	return func(ctx context.Context, c *Call) *Result {
		if r := d.prepareArgs(c); r != nil {
			return r
		}
		return next(ctx, c)
	}
}

// prepareArgs checks and decodes c.Args, moves meta-fields out, applies defaults and validates.
// It returns an error result, or nil when the arguments are ready for the handler.
func (d *Dispatcher) prepareArgs(c *Call) *Result {
	t := c.tool
	limit := d.MaxArgsBytes
	if limit <= 0 {
		limit = defaultMaxArgsBytes
	}
	args := bytes.TrimSpace(c.Args)
	if len(args) > limit {
		return Errorf(CodeInvalidArguments, "arguments for %s are %d bytes, over the limit of %d bytes", t.Name(), len(args), limit)
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	// A composed answer carries its meta-fields in Meta already (ParseComposed).
	if r := d.refuseActivity(c); r != nil {
		return r
	}
	in, err := t.inputSchema()
	if err != nil {
		return Errorf(CodeToolError, "tool %s: its input schema cannot be compiled: %v", t.Name(), err)
	}
	if in != nil {
		if ready, ok := in.QuickCheck(args); ok {
			c.Args = ready
			return nil
		}
	}
	if !utf8.Valid(args) {
		return Errorf(CodeInvalidJSON, "arguments for %s are not valid UTF-8 (first bad byte at offset %d); send a JSON object with %s. %s",
			t.Name(), invalidUTF8Offset(args), t.params, d.available(c.entitled))
	}
	v, err := schema.Decode(args)
	if err != nil {
		return Errorf(CodeInvalidJSON, "arguments for %s are not valid JSON (%v); send a JSON object with %s. %s", t.Name(), err, t.params, d.available(c.entitled))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Errorf(CodeInvalidArguments, "arguments for %s must be a JSON object, got %s; send an object with %s", t.Name(), jsonKind(v), t.params)
	}
	changed := extractMeta(c, obj)
	if r := d.refuseActivity(c); r != nil {
		return r
	}
	if in == nil {
		if len(obj) > 0 {
			return Errorf(CodeInvalidArguments, "tool %s takes no arguments, got %s", t.Name(), propertyNames(obj))
		}
	} else {
		applied, err := in.ApplyDefaults(obj)
		if err != nil {
			return Errorf(CodeInvalidArguments, "arguments for %s: applying defaults: %v", t.Name(), err)
		}
		changed = changed || applied
		if err := in.Validate(obj); err != nil {
			r := Errorf(CodeInvalidArguments, "invalid arguments for %s: %v. Correct them and call the tool again.", t.Name(), err)
			var ve *schema.ValidationError
			if errors.As(err, &ve) {
				r.Problems = ve.Problems
			}
			return r
		}
	}
	if changed {
		b, err := json.Marshal(obj)
		if err != nil {
			return Errorf(CodeInvalidArguments, "arguments for %s: %v", t.Name(), err)
		}
		args = b
	}
	c.Args = args
	return nil
}

// extractMeta moves the call's meta-fields (properties with a leading underscore) out of the
// arguments and reports whether there were any.
func extractMeta(c *Call, obj map[string]any) bool {
	found := false
	for k, v := range obj {
		if !strings.HasPrefix(k, "_") {
			continue
		}
		found = true
		delete(obj, k)
		switch k {
		case schema.ToolField:
			// The tool is named by the call. (_activity stays in Meta, for refuseActivity.)
		case schema.ReasoningField:
			if s, ok := v.(string); ok {
				c.Reasoning = s
			} else {
				c.Reasoning = jsonString(v)
			}
		case schema.OutputField:
			c.Output = json.RawMessage(jsonString(v))
		default:
			if c.Meta == nil {
				c.Meta = map[string]json.RawMessage{}
			}
			c.Meta[k] = json.RawMessage(jsonString(v))
		}
	}
	return found
}

// refuseActivity answers a call that names _activity with an error result saying what is
// wrong, where, and what a call may carry instead. The code behind a tool is the definition's
// to bind (its _activity, else the activity under its name); a call that could choose it
// would let a model run any registered activity under the name and policy of a tool it may
// call. Dropping the key silently would leave the model believing it had chosen.
func (d *Dispatcher) refuseActivity(c *Call) *Result {
	if _, ok := c.Meta[schema.ActivityField]; !ok {
		return nil
	}
	allowed := []string{schema.ReasoningField}
	if d.registry().Latent(c.tool) {
		allowed = append(allowed, schema.OutputField)
	}
	for _, f := range schema.MetaFields {
		if d.accepts(c, f) {
			allowed = append(allowed, f)
		}
	}
	r := Errorf(CodeInvalidArguments, "the call to %s sets %s in its arguments, which no call may: the code that runs a tool is bound "+
		"by the tool's definition, not chosen by a call. Remove %s and call again with the tool's arguments (%s); the other "+
		"underscore fields a call to %s may carry here are: %s.", c.Name, schema.ActivityField, schema.ActivityField,
		c.tool.params, c.Name, strings.Join(allowed, ", "))
	r.Problems = []schema.Problem{{Pointer: "/" + schema.ActivityField,
		Message: "not allowed in a call: a tool's activity is bound by its definition"}}
	return r
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func propertyNames(obj map[string]any) string {
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, fmt.Sprintf("%q", truncate(k, 40)))
		if len(names) == 10 {
			names = append(names, "...")
			break
		}
	}
	return strings.Join(names, ", ")
}

func invalidUTF8Offset(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// ArgsForHistory returns a call's arguments as they may be sent back to a provider in the
// assistant message that made the call: unchanged when they are a JSON object, else {}.
// Providers reject a conversation whose tool-call arguments are not an object; what was wrong
// with them is already in the call's error result.
func ArgsForHistory(args json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) > 0 && trimmed[0] == '{' && utf8.Valid(trimmed) && json.Valid(trimmed) {
		return args
	}
	return json.RawMessage("{}")
}
