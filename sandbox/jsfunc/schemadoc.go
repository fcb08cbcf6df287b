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
// description, its name (_tool), its result schema (_output) and its variables ("variables",
// a list, or "tenvs", an object schema), which are taken out of the argument schema:
//
//	{"type": "object", "description": "Looks up a city's weather",
//	 "properties": {"city": {"type": "string"}, "_output": {"type": "object"}},
//	 "required": ["city"],
//	 "variables": [{"name": "API_KEY", "type": "secret", "required": true}]}
type SchemaDoc struct {
	Name, Description string
	Input, Output     *schema.Schema
	Variables         []quiver.Variable
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
// the variables beside it, so that loading the tool finds both.
func storedInput(in *schema.Schema, vars []quiver.Variable) (json.RawMessage, error) {
	if in == nil {
		in = &schema.Schema{Type: "object"}
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	if len(vars) == 0 {
		return b, nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["variables"] = vars
	return json.Marshal(m)
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
