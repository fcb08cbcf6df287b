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

// geminiFormats are the formats Gemini's schema accepts, by type.
var geminiFormats = map[string][]string{
	"string":  {"enum", "date-time"},
	"integer": {"int32", "int64"},
	"number":  {"float", "double"},
}

// gemini renders s in Gemini's OpenAPI-subset schema. refDepth counts the $refs followed to
// get here, so recursive schemas terminate.
func gemini(root, s *Schema, refDepth int) (map[string]any, error) {
	if s.Ref != "" {
		if refDepth >= geminiMaxRefDepth {
			return geminiJSONText(s.Description, false), nil
		}
		target, err := resolveLocalRef(root, s.Ref)
		if err != nil {
			return nil, err
		}
		g, err := gemini(root, target, refDepth+1)
		if err != nil {
			return nil, err
		}
		if s.Description != "" {
			g["description"] = s.Description
		}
		return g, nil
	}
	var notes []string
	out := map[string]any{}
	nullOK := allowsNull(s)

	branches := append(append([]*Schema{}, s.AnyOf...), s.OneOf...)
	var nonNull []*Schema
	for _, b := range branches {
		if !(len(types(b)) == 1 && types(b)[0] == "null") {
			nonNull = append(nonNull, b)
		}
	}
	ts := slices.DeleteFunc(slices.Clone(types(s)), func(t string) bool { return t == "null" })

	switch {
	case len(nonNull) == 1 && len(ts) == 0:
		g, err := gemini(root, nonNull[0], refDepth)
		if err != nil {
			return nil, err
		}
		out = g
	case len(nonNull) > 1:
		var any []any
		for _, b := range nonNull {
			g, err := gemini(root, b, refDepth)
			if err != nil {
				return nil, err
			}
			any = append(any, g)
		}
		out["anyOf"] = any
	case s.Const != nil:
		if str, ok := (*s.Const).(string); ok {
			out["type"], out["enum"] = "STRING", []string{str}
		} else {
			out["type"] = geminiTypeOf(*s.Const)
			notes = append(notes, "must be "+jsonText(*s.Const))
		}
	case s.Enum != nil:
		var strs []string
		allStrings := true
		for _, e := range s.Enum {
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
		} else {
			t := "string"
			if len(ts) == 1 {
				t = ts[0]
			}
			out["type"] = strings.ToUpper(t)
			vals := make([]string, 0, len(s.Enum))
			for _, e := range s.Enum {
				vals = append(vals, jsonText(e))
			}
			notes = append(notes, "one of "+strings.Join(vals, ", "))
		}
	case len(ts) > 1:
		var any []any
		for _, t := range ts {
			g, err := gemini(root, &Schema{Type: t, Items: s.Items, Properties: s.Properties,
				Required: s.Required, AdditionalProperties: s.AdditionalProperties}, refDepth)
			if err != nil {
				return nil, err
			}
			any = append(any, g)
		}
		out["anyOf"] = any
	case isFreeForm(s), len(ts) == 1 && ts[0] == "object" && len(s.Properties) == 0 && !isRecord(s):
		// Gemini rejects an OBJECT without properties: such a value travels as JSON text.
		return geminiJSONText(s.Description, nullOK), nil
	case isRecord(s):
		c := s.CloneSchemas()
		toEntries(c)
		return gemini(root, c, refDepth)
	default:
		if err := geminiTyped(root, s, ts, out, &notes, refDepth); err != nil {
			return nil, err
		}
	}

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
	return out, nil
}

// geminiTyped renders a schema of a single JSON type.
func geminiTyped(root, s *Schema, ts []string, out map[string]any, notes *[]string, refDepth int) error {
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
			g, err := gemini(root, s.Properties[name], refDepth)
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
			g, err := gemini(root, s.Items, refDepth)
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
