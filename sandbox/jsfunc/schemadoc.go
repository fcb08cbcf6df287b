package jsfunc

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// storedInput is the document kept as a stored tool's input schema, in the form
// quiver.ParseSchemaSpec reads (the one reader of it: Load too): the argument schema with the
// variables and the annotations beside it and the enabled meta-fields among its properties, so
// that loading the tool finds all of them (and no stored record changes shape).
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
