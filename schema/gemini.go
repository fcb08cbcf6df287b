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
	ts := nonNullTypes(s)
	var err error
	switch branches := nonNullBranches(s); {
	case len(branches) == 1 && len(ts) == 0:
		out, err = gemini(d, branches[0], refDepth)
	case len(branches) > 1:
		out, err = geminiAnyOf(d, branches, refDepth)
	case s.Const != nil:
		notes = geminiConst(*s.Const, out)
	case s.Enum != nil:
		notes = geminiEnum(s.Enum, ts, out)
	case len(ts) > 1:
		out, err = geminiAnyOf(d, typeBranches(s, ts), refDepth)
	case isFreeForm(s), isBareObject(s, ts):
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

// nonNullBranches are the anyOf and oneOf branches of s that admit more than null.
func nonNullBranches(s *Schema) []*Schema {
	return slices.DeleteFunc(append(append([]*Schema{}, s.AnyOf...), s.OneOf...), isNullOnly)
}

func isNullOnly(s *Schema) bool {
	ts := types(s)
	return len(ts) == 1 && ts[0] == "null"
}

// nonNullTypes are the types s names, but null: Gemini says nullable instead.
func nonNullTypes(s *Schema) []string {
	return slices.DeleteFunc(slices.Clone(types(s)), func(t string) bool { return t == "null" })
}

// typeBranches splits a schema of several types into one branch per type, each with the
// keywords of its type.
func typeBranches(s *Schema, ts []string) []*Schema {
	branches := make([]*Schema, len(ts))
	for i, t := range ts {
		branches[i] = &Schema{Type: t, Items: s.Items, Properties: s.Properties, Required: s.Required, AdditionalProperties: s.AdditionalProperties}
	}
	return branches
}

// isBareObject reports whether s is an object without properties that is not a map.
func isBareObject(s *Schema, ts []string) bool {
	return len(ts) == 1 && ts[0] == "object" && len(s.Properties) == 0 && !isRecord(s)
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
	geminiDescribe(out, withNotes(s.Description, notes))
	if nullOK {
		out["nullable"] = true
	}
	if d, ok := decodeDefault(s.Default); ok {
		out["default"] = d
	}
	if len(s.Examples) > 0 {
		out["example"] = s.Examples[0]
	}
}

// geminiDescribe sets the description, or drops an empty one a branch rendered.
func geminiDescribe(out map[string]any, desc string) {
	if desc != "" {
		out["description"] = desc
	} else if d, ok := out["description"]; ok && d == "" {
		delete(out, "description")
	}
}

// decodeDefault is a schema's default, decoded; false when it has none, or none that decodes.
func decodeDefault(raw json.RawMessage) (any, bool) {
	var d any
	if raw == nil || json.Unmarshal(raw, &d) != nil {
		return nil, false
	}
	return d, true
}

// geminiTyped renders a schema of a single JSON type.
func geminiTyped(d *geminiDoc, s *Schema, ts []string, out map[string]any, notes *[]string, refDepth int) error {
	t := "string" // only null allowed: Gemini needs a type; nullable carries the meaning
	if len(ts) == 1 && ts[0] != "" {
		t = ts[0]
	}
	out["type"] = strings.ToUpper(t)
	geminiFormat(s.Format, t, out, notes)
	switch t {
	case "object":
		return geminiObject(d, s, out, refDepth)
	case "array":
		return geminiArray(d, s, out, notes, refDepth)
	case "string":
		setInt(out, "minLength", s.MinLength)
		setInt(out, "maxLength", s.MaxLength)
		if s.Pattern != "" {
			out["pattern"] = s.Pattern
		}
	case "integer", "number":
		geminiNumber(s, out, notes)
	}
	return nil
}

// geminiFormat keeps a format Gemini accepts for type t, and notes any other.
func geminiFormat(format, t string, out map[string]any, notes *[]string) {
	switch {
	case format == "":
	case slices.Contains(geminiFormats[t], format):
		out["format"] = format
	default:
		*notes = append(*notes, "in "+format+" format")
	}
}

func geminiObject(d *geminiDoc, s *Schema, out map[string]any, refDepth int) error {
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
	return nil
}

// geminiArray renders an array's items (as JSON text when they have no schema) and counts.
func geminiArray(d *geminiDoc, s *Schema, out map[string]any, notes *[]string, refDepth int) error {
	out["items"] = geminiJSONText("", false)
	if s.Items != nil {
		g, err := gemini(d, s.Items, refDepth)
		if err != nil {
			return err
		}
		out["items"] = g
	}
	setInt(out, "minItems", s.MinItems)
	setInt(out, "maxItems", s.MaxItems)
	if s.UniqueItems {
		*notes = append(*notes, "no duplicate items")
	}
	return nil
}

// geminiNumber renders numeric bounds: Gemini has minimum and maximum; the others become notes.
func geminiNumber(s *Schema, out map[string]any, notes *[]string) {
	setFloat(out, "minimum", s.Minimum)
	setFloat(out, "maximum", s.Maximum)
	noteNumber(notes, "greater than ", s.ExclusiveMinimum)
	noteNumber(notes, "less than ", s.ExclusiveMaximum)
	noteNumber(notes, "a multiple of ", s.MultipleOf)
}

func noteNumber(notes *[]string, words string, p *float64) {
	if p != nil {
		*notes = append(*notes, words+jsonText(*p))
	}
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

func setFloat(out map[string]any, key string, p *float64) {
	if p != nil {
		out[key] = *p
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
