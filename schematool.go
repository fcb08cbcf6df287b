package quiver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/schema"
)

// ParseSchemaTool builds a tool from a pure JSON Schema definition, the pure JSON Schema form:
//
//	{"type": "object", "description": "Analyzes text sentiment",
//	 "properties": {
//	   "_tool": {"type": "string", "const": "sentiment_analysis"},
//	   "text": {"type": "string", "description": "Text to analyze"},
//	   "_output": {"type": "object", "properties": {"sentiment": {"type": "string"}}}}}
//
// _tool names the tool (a const, or a plain string at the top level); properties without a
// leading underscore are its parameters; _output is its result schema; _activity (a const or
// a top-level string) names the activity that executes it. A tool with no bound activity is
// latent: the model's _output is its result. "variables" (a list) or "tenvs" (an object
// schema) declare variables; "annotations" (an object, see [Annotations]) the tool's MCP
// annotations: {"annotations": {"readOnlyHint": true, "openWorldHint": false}}.
func ParseSchemaTool(data []byte) (*Tool, error) {
	var doc schema.Schema
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("quiver: schema tool: %w", err)
	}
	name := metaString(&doc, schema.ToolField)
	if name == "" {
		return nil, fmt.Errorf("quiver: schema tool: no name: set properties._tool to {\"const\": \"NAME\"}")
	}
	spec := Spec{Name: name, Description: doc.Description, Activity: metaString(&doc, schema.ActivityField)}
	if spec.Description == "" {
		spec.Description = doc.Title
	}
	if out := doc.Properties[schema.OutputField]; out != nil {
		spec.OutputSchema = out
	}
	// A meta-field among the properties enables it.
	for _, f := range schema.MetaFields {
		if _, ok := doc.Properties[f]; ok {
			spec.MetaFields = append(spec.MetaFields, f)
		}
	}
	if raw, ok := doc.Extra[AnnotationsKey]; ok {
		a, err := ParseAnnotations(raw)
		if err != nil {
			return nil, fmt.Errorf("quiver: schema tool %q: %w", name, err)
		}
		spec.Annotations = a
	}
	for _, key := range []string{"variables", "tenvs"} {
		raw, ok := doc.Extra[key]
		if !ok {
			continue
		}
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, fmt.Errorf("quiver: schema tool %q: %s: %w", name, key, err)
		}
		var vs Variables
		if err := json.Unmarshal(b, &vs); err != nil {
			return nil, fmt.Errorf("quiver: schema tool %q: %w", name, err)
		}
		spec.Variables = append(spec.Variables, vs...)
	}
	in := doc.CloneSchemas()
	in.Extra = nil
	in.Description, in.Title = "", ""
	for k := range in.Properties {
		if strings.HasPrefix(k, "_") {
			delete(in.Properties, k)
		}
	}
	in.Required = slices.DeleteFunc(in.Required, func(k string) bool { return strings.HasPrefix(k, "_") })
	in.PropertyOrder = slices.DeleteFunc(in.PropertyOrder, func(k string) bool { return strings.HasPrefix(k, "_") })
	if in.Type == "" {
		in.Type = "object"
	}
	// Keep the schema unless nothing is left of it but "an object": a map-shaped tool
	// (additionalProperties only) still takes arguments.
	bare := *in
	bare.Type, bare.Properties, bare.Required, bare.PropertyOrder = "", nil, nil, nil
	if len(in.Properties) > 0 || in.Type != "object" || !reflect.ValueOf(bare).IsZero() {
		spec.InputSchema = in
	}
	return NewTool(spec, nil)
}

// metaString reads a meta-field given as a top-level string or as a property with a const.
func metaString(doc *schema.Schema, key string) string {
	if s, ok := doc.Extra[key].(string); ok {
		return s
	}
	if p := doc.Properties[key]; p != nil && p.Const != nil {
		if s, ok := (*p.Const).(string); ok {
			return s
		}
	}
	return ""
}
