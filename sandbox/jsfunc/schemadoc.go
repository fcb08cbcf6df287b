package jsfunc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// SchemaDoc is what a tool's schema document holds. The document is the argument schema, in
// the form quiver.ParseSchemaTool reads: beside the parameters it may carry the tool's
// description, its name (_tool), its result schema (_output), its variables ("variables",
// a list, or "tenvs", an object schema) and the stateful meta-fields its calls may carry (a
// property _outputPath, _instance or _delegate enables it, whatever its schema), which are
// taken out of the argument schema, and its MCP annotations ("annotations", an object of
// quiver.Annotations, read strictly):
//
//	{"type": "object", "description": "Looks up a city's weather",
//	 "properties": {"city": {"type": "string"}, "_output": {"type": "object"}, "_outputPath": {"type": "string"}},
//	 "required": ["city"],
//	 "variables": [{"name": "API_KEY", "type": "secret", "required": true}],
//	 "annotations": {"readOnlyHint": true, "openWorldHint": true}}
type SchemaDoc struct {
	Name, Description string
	Input, Output     *schema.Schema
	Variables         []quiver.Variable
	// MetaFields are the meta-fields the document enables, in schema.MetaFields' order.
	MetaFields []string
	// Annotations are the tool's MCP annotations the document declares.
	Annotations quiver.Annotations
}

// ParseSchemaDoc reads a schema document. An error says what in it is wrong.
func ParseSchemaDoc(doc []byte) (*SchemaDoc, error) {
	var s schema.Schema
	if err := json.Unmarshal(doc, &s); err != nil {
		return nil, fmt.Errorf("the schema is not a JSON Schema object: %w", err)
	}
	d := &SchemaDoc{Description: s.Description}
	if d.Description == "" {
		d.Description = s.Title
	}
	if name, ok := s.Extra[schema.ToolField].(string); ok {
		d.Name = name
	} else if p := s.Properties[schema.ToolField]; p != nil && p.Const != nil {
		d.Name, _ = (*p.Const).(string)
	}
	d.Output = s.Properties[schema.OutputField]
	for _, f := range schema.MetaFields {
		if _, ok := s.Properties[f]; ok {
			d.MetaFields = append(d.MetaFields, f)
		}
	}
	if raw, ok := s.Extra[quiver.AnnotationsKey]; ok {
		a, err := quiver.ParseAnnotations(raw)
		if err != nil {
			return nil, err
		}
		d.Annotations = a
	}
	for _, key := range []string{"variables", "tenvs"} {
		raw, ok := s.Extra[key]
		if !ok {
			continue
		}
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		var vs quiver.Variables
		if err := json.Unmarshal(b, &vs); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		d.Variables = append(d.Variables, vs...)
	}
	in := s.CloneSchemas()
	in.Extra = nil
	in.Description, in.Title = "", ""
	for k := range in.Properties {
		if strings.HasPrefix(k, "_") {
			delete(in.Properties, k)
		}
	}
	in.Required = slices.DeleteFunc(in.Required, func(k string) bool { return strings.HasPrefix(k, "_") })
	in.PropertyOrder = slices.DeleteFunc(in.PropertyOrder, func(k string) bool { return strings.HasPrefix(k, "_") })
	if in.Type == "" && len(in.Types) == 0 {
		in.Type = "object"
	}
	if len(in.Properties) > 0 || in.AdditionalProperties != nil || in.Type != "object" {
		d.Input = in
	}
	return d, nil
}

// storedInput is the document kept as a stored tool's input schema: the argument schema with
// the variables and the annotations beside it and the enabled meta-fields among its
// properties, so that loading the tool finds all of them (and no stored record changes shape).
func storedInput(in *schema.Schema, vars []quiver.Variable, metaFields []string, ann quiver.Annotations) (json.RawMessage, error) {
	if in == nil {
		in = &schema.Schema{Type: "object"}
	}
	if len(metaFields) > 0 {
		in = in.CloneSchemas()
		if in.Properties == nil {
			in.Properties = map[string]*schema.Schema{}
		}
		for _, f := range metaFields {
			in.Properties[f] = metaFieldSchema(f)
			if len(in.PropertyOrder) > 0 {
				in.PropertyOrder = append(in.PropertyOrder, f)
			}
		}
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	if len(vars) == 0 && ann.IsZero() {
		return b, nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if len(vars) > 0 {
		m["variables"] = vars
	}
	if !ann.IsZero() {
		m[quiver.AnnotationsKey] = ann
	}
	return json.Marshal(m)
}

// metaFieldSchema is what a stored document says of an enabled meta-field: the shape of its
// value (what the model is offered is the runtime's own wording: the property only enables it).
func metaFieldSchema(f string) *schema.Schema {
	if f == schema.DelegateField {
		return &schema.Schema{Type: "object"}
	}
	return &schema.Schema{Type: "string"}
}

// storedOutput is the document kept as a stored tool's output schema: true when the tool
// declares none (the store needs one).
func storedOutput(out *schema.Schema) (json.RawMessage, error) {
	if out == nil {
		return json.RawMessage("true"), nil
	}
	return json.Marshal(out)
}

// outputSchema reads a stored output schema; true or {} mean none.
func outputSchema(doc []byte) (*schema.Schema, error) {
	switch strings.TrimSpace(string(doc)) {
	case "true", "{}", "":
		return nil, nil
	}
	var s schema.Schema
	if err := json.Unmarshal(doc, &s); err != nil {
		return nil, fmt.Errorf("the output schema is not a JSON Schema: %w", err)
	}
	return &s, nil
}
