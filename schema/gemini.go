package schema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// geminiMaxRefDepth bounds how deep a recursive schema is inlined: Gemini has no $ref, so past
// this depth a recursive value travels as JSON text.
const geminiMaxRefDepth = 6

// geminiMaxNodes bounds how many schema nodes a tool's rendering inlines: definitions that
// each name the next several times would otherwise render as their product (four names a
// level, six levels: 4,096 copies). Past it, a referenced value travels as JSON text too.
const geminiMaxNodes = 10_000

// geminiDoc is the schema being rendered, and how many more nodes its $refs may inline.
type geminiDoc struct {
	root *Schema
	left int
}

// geminiFormats are the formats Gemini's schema accepts, by type.
var geminiFormats = map[string][]string{
	"string":  {"enum", "date-time"},
	"integer": {"int32", "int64"},
	"number":  {"float", "double"},
}

// gemini renders s in Gemini's OpenAPI-subset schema. refDepth counts the $refs followed to
// get here, so recursive schemas terminate.
func gemini(d *geminiDoc, s *Schema, refDepth int) (map[string]any, error) {
	d.left--
	if s.Ref != "" {
		return geminiRef(d, s, refDepth)
	}
	var notes []string
	out := map[string]any{}
	nullOK := allowsNull(s)
	nonNull := slices.DeleteFunc(append(append([]*Schema{}, s.AnyOf...), s.OneOf...), func(b *Schema) bool {
		return len(types(b)) == 1 && types(b)[0] == "null"
	})
	ts := slices.DeleteFunc(slices.Clone(types(s)), func(t string) bool { return t == "null" })
	var err error
	switch {
	case len(nonNull) == 1 && len(ts) == 0:
		out, err = gemini(d, nonNull[0], refDepth)
	case len(nonNull) > 1:
		out, err = geminiAnyOf(d, nonNull, refDepth)
	case s.Const != nil:
		notes = geminiConst(*s.Const, out)
	case s.Enum != nil:
		notes = geminiEnum(s.Enum, ts, out)
	case len(ts) > 1:
		// One branch per type, each with the keywords of its type.
		branches := make([]*Schema, len(ts))
		for i, t := range ts {
			branches[i] = &Schema{Type: t, Items: s.Items, Properties: s.Properties, Required: s.Required, AdditionalProperties: s.AdditionalProperties}
		}
		out, err = geminiAnyOf(d, branches, refDepth)
	case isFreeForm(s), len(ts) == 1 && ts[0] == "object" && len(s.Properties) == 0 && !isRecord(s):
		// Gemini rejects an OBJECT without properties: such a value travels as JSON text.
		return geminiJSONText(s.Description, nullOK), nil
	case isRecord(s):
		c := s.CloneSchemas()
		toEntries(c)
		return gemini(d, c, refDepth)
	default:
		err = geminiTyped(d, s, ts, out, &notes, refDepth)
	}
	if err != nil {
		return nil, err
	}
	geminiAnnotate(s, out, notes, nullOK)
	return out, nil
}

// geminiRef renders a reference: its target's rendering, with the reference's description;
// past geminiMaxRefDepth (a recursive schema) or geminiMaxNodes, a value that travels as JSON
// text.
func geminiRef(d *geminiDoc, s *Schema, refDepth int) (map[string]any, error) {
	if refDepth >= geminiMaxRefDepth || d.left <= 0 {
		return geminiJSONText(s.Description, false), nil
	}
	target, err := resolveLocalRef(d.root, s.Ref)
	if err != nil {
		return nil, err
	}
	g, err := gemini(d, target, refDepth+1)
	if err != nil {
		return nil, err
	}
	if s.Description != "" {
		g["description"] = s.Description
	}
	return g, nil
}

// geminiAnyOf renders branches as Gemini's anyOf.
func geminiAnyOf(d *geminiDoc, branches []*Schema, refDepth int) (map[string]any, error) {
	var anyOf []any
	for _, b := range branches {
		g, err := gemini(d, b, refDepth)
		if err != nil {
			return nil, err
		}
		anyOf = append(anyOf, g)
	}
	return map[string]any{"anyOf": anyOf}, nil
}

// geminiConst renders a const: a one-value STRING enum, or the value's type with a note.
func geminiConst(c any, out map[string]any) (notes []string) {
	if str, ok := c.(string); ok {
		out["type"], out["enum"] = "STRING", []string{str}
		return nil
	}
	out["type"] = geminiTypeOf(c)
	return []string{"must be " + jsonText(c)}
}

// geminiEnum renders an enum: Gemini's enums hold strings only, so other values become a note.
func geminiEnum(enum []any, ts []string, out map[string]any) (notes []string) {
	var strs []string
	allStrings := true
	for _, e := range enum {
		switch x := e.(type) {
		case string:
			strs = append(strs, x)
		case nil:
		default:
			allStrings = false
		}
	}
	if allStrings {
		out["type"], out["enum"] = "STRING", strs
		return nil
	}
	t := "string"
	if len(ts) == 1 {
		t = ts[0]
	}
	out["type"] = strings.ToUpper(t)
	vals := make([]string, 0, len(enum))
	for _, e := range enum {
		vals = append(vals, jsonText(e))
	}
	return []string{"one of " + strings.Join(vals, ", ")}
}

// geminiAnnotate adds what every rendering carries: title, description (with the notes of
// what Gemini cannot express), nullable, default and an example.
func geminiAnnotate(s *Schema, out map[string]any, notes []string, nullOK bool) {
	if s.Title != "" {
		out["title"] = s.Title
	}
	if desc := withNotes(s.Description, notes); desc != "" {
		out["description"] = desc
	} else if d, ok := out["description"]; ok && d == "" {
		delete(out, "description")
	}
	if nullOK {
		out["nullable"] = true
	}
	if s.Default != nil {
		var d any
		if json.Unmarshal(s.Default, &d) == nil {
			out["default"] = d
		}
	}
	if len(s.Examples) > 0 {
		out["example"] = s.Examples[0]
	}
}

// geminiTyped renders a schema of a single JSON type.
func geminiTyped(d *geminiDoc, s *Schema, ts []string, out map[string]any, notes *[]string, refDepth int) error {
	t := ""
	if len(ts) == 1 {
		t = ts[0]
	}
	if t == "" {
		t = "string" // only null allowed: Gemini needs a type; nullable carries the meaning
	}
	out["type"] = strings.ToUpper(t)
	if s.Format != "" {
		if slices.Contains(geminiFormats[t], s.Format) {
			out["format"] = s.Format
		} else {
			*notes = append(*notes, "in "+s.Format+" format")
		}
	}
	switch t {
	case "object":
		props := map[string]any{}
		for _, name := range propertyOrder(s) {
			g, err := gemini(d, s.Properties[name], refDepth)
			if err != nil {
				return fmt.Errorf("property %q: %w", name, err)
			}
			props[name] = g
		}
		out["properties"] = props
		out["propertyOrdering"] = propertyOrder(s)
		if len(s.Required) > 0 {
			out["required"] = s.Required
		}
		setInt(out, "minProperties", s.MinProperties)
		setInt(out, "maxProperties", s.MaxProperties)
	case "array":
		if s.Items != nil {
			g, err := gemini(d, s.Items, refDepth)
			if err != nil {
				return err
			}
			out["items"] = g
		} else {
			out["items"] = geminiJSONText("", false)
		}
		setInt(out, "minItems", s.MinItems)
		setInt(out, "maxItems", s.MaxItems)
		if s.UniqueItems {
			*notes = append(*notes, "no duplicate items")
		}
	case "string":
		setInt(out, "minLength", s.MinLength)
		setInt(out, "maxLength", s.MaxLength)
		if s.Pattern != "" {
			out["pattern"] = s.Pattern
		}
	case "integer", "number":
		if s.Minimum != nil {
			out["minimum"] = *s.Minimum
		}
		if s.Maximum != nil {
			out["maximum"] = *s.Maximum
		}
		if s.ExclusiveMinimum != nil {
			*notes = append(*notes, "greater than "+jsonText(*s.ExclusiveMinimum))
		}
		if s.ExclusiveMaximum != nil {
			*notes = append(*notes, "less than "+jsonText(*s.ExclusiveMaximum))
		}
		if s.MultipleOf != nil {
			*notes = append(*notes, "a multiple of "+jsonText(*s.MultipleOf))
		}
	}
	return nil
}

func geminiJSONText(desc string, nullOK bool) map[string]any {
	g := map[string]any{"type": "STRING", "description": strings.TrimSpace(desc + " (" + jsonTextNote + ")")}
	if nullOK {
		g["nullable"] = true
	}
	return g
}

func geminiTypeOf(v any) string {
	switch v.(type) {
	case bool:
		return "BOOLEAN"
	case float64, json.Number, int, int64:
		return "NUMBER"
	default:
		return "STRING"
	}
}

func setInt(out map[string]any, key string, p *int) {
	if p != nil {
		out[key] = *p
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
