package quiver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Annotations are hints about what a tool does, MCP's tool annotations, spelled as MCP spells
// them. A hint is a pointer: nil says nothing (the client assumes MCP's default: not
// read-only, destructive, not idempotent, open world), which differs from false. They are
// hints for clients and people, never trusted for governance: a tool declared read-only is
// still validated, governed, confirmed where configured and recorded like any other.
//
// Over MCP a tool that requires confirmation and declares neither DestructiveHint nor
// ReadOnlyHint is served with destructiveHint true; a tool's own declaration wins, so a tool
// that needs a person's approval for another reason (cost, privacy) may declare
// DestructiveHint false, and its calls are confirmed all the same.
type Annotations struct {
	// Title is a human-readable title for the tool.
	Title string `json:"title,omitempty" yaml:"title,omitempty"`
	// ReadOnlyHint: the tool does not modify its environment (MCP's default: false).
	ReadOnlyHint *bool `json:"readOnlyHint,omitempty" yaml:"readOnlyHint,omitempty"`
	// DestructiveHint: the tool may perform destructive updates, not only additive ones;
	// meaningful when it is not read-only (MCP's default: true).
	DestructiveHint *bool `json:"destructiveHint,omitempty" yaml:"destructiveHint,omitempty"`
	// IdempotentHint: calling the tool again with the same arguments has no further effect;
	// meaningful when it is not read-only (MCP's default: false).
	IdempotentHint *bool `json:"idempotentHint,omitempty" yaml:"idempotentHint,omitempty"`
	// OpenWorldHint: the tool interacts with an open world of external entities, as a web
	// search does, rather than a closed domain, as a memory does (MCP's default: true).
	OpenWorldHint *bool `json:"openWorldHint,omitempty" yaml:"openWorldHint,omitempty"`
}

// AnnotationsKey is the key of a tool's annotations in a JSON-schema tool's document
// ([ParseSchemaTool]) and in a stored tool's input-schema document: an object of
// [Annotations], beside "variables".
const AnnotationsKey = "annotations"

// annotationKeys are the keys an annotations object may hold, in MCP's spelling.
var annotationKeys = []string{"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

// Hint returns a pointer to v, for the fields of [Annotations]:
// quiver.Annotations{ReadOnlyHint: quiver.Hint(true)}.
func Hint(v bool) *bool { return &v }

// IsZero reports whether the annotations say nothing.
func (a Annotations) IsZero() bool {
	return a.Title == "" && a.ReadOnlyHint == nil && a.DestructiveHint == nil && a.IdempotentHint == nil && a.OpenWorldHint == nil
}

// Clone returns a copy that shares no pointer with a.
func (a Annotations) Clone() Annotations {
	c := a
	for _, p := range []**bool{&c.ReadOnlyHint, &c.DestructiveHint, &c.IdempotentHint, &c.OpenWorldHint} {
		if *p != nil {
			*p = Hint(**p)
		}
	}
	return c
}

// UnmarshalJSON reads an annotations object strictly: a key it does not know, a hint that is not
// true or false, or a title that is not a string is refused, saying which and what is expected,
// so that a declaration's mistake ("readOnlyHint": "yes", "readonlyHint": true) is not silently
// read as saying nothing.
func (a *Annotations) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return fmt.Errorf("annotations must be an object with %s, got %s", strings.Join(annotationKeys, ", "), jsonKindOf(data))
	}
	var out Annotations
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		raw := bytes.TrimSpace(fields[k])
		var hint **bool
		switch k {
		case "title":
			if err := json.Unmarshal(raw, &out.Title); err != nil || raw[0] != '"' {
				return fmt.Errorf("annotations: title must be a string, got %s", jsonKindOf(raw))
			}
			continue
		case "readOnlyHint":
			hint = &out.ReadOnlyHint
		case "destructiveHint":
			hint = &out.DestructiveHint
		case "idempotentHint":
			hint = &out.IdempotentHint
		case "openWorldHint":
			hint = &out.OpenWorldHint
		default:
			return fmt.Errorf("annotations: unknown key %q; the keys are %s", k, strings.Join(annotationKeys, ", "))
		}
		switch string(raw) {
		case "true":
			*hint = Hint(true)
		case "false":
			*hint = Hint(false)
		default:
			return fmt.Errorf("annotations: %s must be true or false (leave it out to say nothing), got %s", k, jsonKindOf(raw))
		}
	}
	*a = out
	return nil
}

// ParseAnnotations reads an annotations object as [Annotations.UnmarshalJSON] does. v is its
// JSON text ([]byte or json.RawMessage) or a decoded JSON value (a map, as a schema document's
// or a YAML definition's extra keys hold it).
func ParseAnnotations(v any) (Annotations, error) {
	var data []byte
	switch v := v.(type) {
	case []byte:
		data = v
	case json.RawMessage:
		data = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return Annotations{}, fmt.Errorf("annotations: %w", err)
		}
		data = b
	}
	var a Annotations
	if err := json.Unmarshal(data, &a); err != nil {
		return Annotations{}, err
	}
	return a, nil
}

// jsonKindOf names the kind of a JSON value for error messages: a string, a number, ...
func jsonKindOf(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string (" + truncateText(string(raw), 40) + ")"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean (" + string(raw) + ")"
	case 'n':
		return "null"
	default:
		return "a number (" + truncateText(string(raw), 40) + ")"
	}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// WithAnnotations declares the tool's annotations (see [Annotations]), which MCP clients are
// served and the API lists.
func WithAnnotations(a Annotations) Option { return func(sp *Spec) { sp.Annotations = a.Clone() } }
