package schema

import (
	"fmt"
	"net/url"
	"strings"
)

// Meta-fields of a call: properties with a leading underscore are instructions for the runtime,
// never arguments for the handler.
const (
	ToolField      = "_tool"             // names the tool in a composed call
	OutputField    = "_output"           // the model's own result for a latent tool
	ReasoningField = "_reasoningForCall" // why the model makes the call; stored, not passed on
	ActivityField  = "_activity"         // binds a schema-only tool to code
	// The meta-fields a tool or an agent may enable; a model is offered only
	// those enabled, and the dispatcher refuses the others.
	OutputPathField = "_outputPath" // where the call's output goes in the thread's state
	InstanceField   = "_instance"   // whose state (which instance's) the call reads and writes
	DelegateField   = "_delegate"   // runs the call as an isolated request
)

// MetaFields lists the meta-fields a tool or an agent may enable, in the order they are
// offered.
var MetaFields = []string{OutputPathField, InstanceField, DelegateField}

// withMetaFields returns input with the optional properties of the enabled meta-fields
// (names from MetaFields) added last.
func withMetaFields(input *Schema, fields []string) *Schema {
	if len(fields) == 0 {
		return input
	}
	s := argumentsCopy(input)
	order := propertyOrder(s)
	for _, f := range MetaFields {
		if p := metaProperty(f); p != nil && containsString(fields, f) {
			s.Properties[f] = p
			order = append(order, f)
		}
	}
	s.PropertyOrder = dedupe(order)
	return s
}

// metaProperty is the schema a model is offered for a meta-field: optional, so that strict
// dialects make it nullable and a model that leaves it out is not refused.
func metaProperty(field string) *Schema {
	switch field {
	case OutputPathField:
		return &Schema{Type: "string", Description: "Optional. Keep this call's output in the conversation's state at this JSON Pointer, " +
			"like /plan/steps. A path is written once. \"/a || /b\" writes to the first path still free, \"/a && /b\" to all of them."}
	case InstanceField:
		return &Schema{Type: "string", Description: "Optional. The name of the instance whose state this call reads and writes; " +
			"leave it out for the conversation's own state."}
	case DelegateField:
		return &Schema{Type: "object", Description: "Optional. Have this call done by a separate assistant that sees only the " +
			"call's arguments: name a saved prompt in prompt, or describe one with system (its instructions), and optionally " +
			"model and tools. Its final answer is the call's result.",
			Properties: map[string]*Schema{
				"prompt": {Type: "string", Description: "The name of a saved prompt to run."},
				"system": {Type: "string", Description: "Instructions for an assistant described here instead."},
				"model":  {Type: "string", Description: "The model it uses; leave out for yours."},
				"tools":  {Type: "array", Items: &Schema{Type: "string"}, Description: "Names of tools it may call, among yours."},
			},
			PropertyOrder:        []string{"prompt", "system", "model", "tools"},
			AdditionalProperties: falseSchema()}
	}
	return nil
}

// argumentsCopy returns a copy of an argument schema that properties can be added to (an
// empty object schema for a tool without arguments).
func argumentsCopy(input *Schema) *Schema {
	if input == nil {
		return &Schema{Type: "object", Properties: map[string]*Schema{}}
	}
	s := input.CloneSchemas()
	if s.Properties == nil {
		s.Properties = map[string]*Schema{}
	}
	return s
}

// withReasoningField returns input with an optional _reasoningForCall string property first,
// for native tool calling (the composed schema adds its own, see Compose).
func withReasoningField(input *Schema) *Schema {
	s := argumentsCopy(input)
	s.Properties[ReasoningField] = reasoningProperty()
	s.PropertyOrder = dedupe(append([]string{ReasoningField}, propertyOrder(s)...))
	return s
}

func reasoningProperty() *Schema {
	return &Schema{Type: "string", Description: "Why you make this call, in one sentence."}
}

// withOutputField returns input extended by the _output property a latent tool's caller fills.
func withOutputField(input, output *Schema) *Schema {
	s := argumentsCopy(input)
	out := &Schema{Description: "The result of this call, which you produce yourself."}
	if output != nil {
		out = output.CloneSchemas()
		out.Schema, out.ID = "", ""
		if out.Description == "" {
			out.Description = "The result of this call, which you produce yourself."
		}
		// $defs of the output move to the root, where refs resolve from.
		if len(out.Defs) > 0 {
			if s.Defs == nil {
				s.Defs = map[string]*Schema{}
			}
			for k, d := range out.Defs {
				s.Defs[k] = d
			}
			out.Defs = nil
		}
	}
	s.Properties[OutputField] = out
	s.PropertyOrder = append(append([]string{}, propertyOrder(s)...), OutputField)
	s.PropertyOrder = dedupe(s.PropertyOrder)
	s.Required = append(append([]string{}, s.Required...), OutputField)
	return s
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	out := list[:0]
	for _, x := range list {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// Compose builds the single schema a structured-output model answers with when it may both
// call tools and give its final output, in one object:
//
//	{"calls": [{"_tool": NAME, ...arguments}], "output": OUTPUT | null}
//
// Each call item is one branch of an anyOf, told apart by the _tool const, and closed
// (additionalProperties: false unless the tool's schema says otherwise). A tool whose
// ToolSchema.Reasoning is set also offers an optional _reasoningForCall; the others do not, so
// that a model is asked for it only where an agent wants it. Latent tools carry an _output
// property the model fills with the result. An object output is closed too, unless it says
// what else it admits; a nil output means the final output is text. The tools' $defs are
// hoisted to the root under "<tool>.<name>" so refs stay valid.
func Compose(tools []ToolSchema, output *Schema) (*Schema, error) {
	root := &Schema{
		Type:                 "object",
		Properties:           map[string]*Schema{},
		PropertyOrder:        []string{"calls", "output"},
		Required:             []string{"calls", "output"},
		AdditionalProperties: falseSchema(),
	}
	var branches []*Schema
	for _, t := range tools {
		item, err := composeItem(root, t)
		if err != nil {
			return nil, err
		}
		branches = append(branches, item)
	}
	root.Properties["calls"] = callsSchema(branches)
	out, err := composeOutput(root, output)
	if err != nil {
		return nil, err
	}
	root.Properties["output"] = out
	return root, nil
}

// composeItem is the call item of one tool: its arguments, with the fields that name the tool
// (and ask for reasoning) first, closed unless they say otherwise.
func composeItem(root *Schema, t ToolSchema) (*Schema, error) {
	item := callArguments(t)
	if schemaType(item) != "object" {
		return nil, fmt.Errorf("schema: compose: tool %q: arguments must be an object schema", t.Name)
	}
	if err := hoistDefs(root, item, t.Name); err != nil {
		return nil, err
	}
	if item.Properties == nil {
		item.Properties = map[string]*Schema{} // {"type":"object"}, struct{}: no arguments
	}
	var tool any = t.Name
	item.Properties[ToolField] = &Schema{Const: &tool, Description: t.Description}
	first := []string{ToolField}
	if t.Reasoning {
		item.Properties[ReasoningField] = reasoningProperty()
		first = append(first, ReasoningField)
	}
	item.PropertyOrder = dedupe(append(first, propertyOrder(item)...))
	item.Required = dedupe(append([]string{ToolField}, item.Required...))
	if item.AdditionalProperties == nil {
		item.AdditionalProperties = falseSchema()
	}
	return item, nil
}

// callArguments is a copy of the schema of a tool's arguments, with the fields the tool's
// kind adds (a latent tool's output, meta-fields).
func callArguments(t ToolSchema) *Schema {
	in := t.Input
	if t.Latent {
		in = withOutputField(in, t.Output)
	}
	in = withMetaFields(in, t.MetaFields)
	if in == nil {
		return &Schema{Type: "object", Properties: map[string]*Schema{}}
	}
	item := in.CloneSchemas()
	item.Schema, item.ID = "", ""
	return item
}

// callsSchema is the list of calls, each one of the branches.
func callsSchema(branches []*Schema) *Schema {
	calls := &Schema{Type: "array", Description: "Tool calls to make now, in order; empty when none."}
	switch len(branches) {
	case 0:
		calls.MaxItems = new(int)
		calls.Items = &Schema{Type: "object"}
	case 1:
		calls.Items = branches[0]
	default:
		calls.Items = &Schema{AnyOf: branches}
	}
	return calls
}

// composeOutput is the final output: text when output is nil, else output, closed and null
// while tool results are awaited.
func composeOutput(root, output *Schema) (*Schema, error) {
	if output == nil {
		return &Schema{Types: []string{"string", "null"}, Description: "Your final answer, or null while you still need tool results."}, nil
	}
	out := output.CloneSchemas()
	out.Schema, out.ID = "", ""
	// Closed before hoisting, so that a copy kept for refs to its root is closed alike.
	closeObject(out)
	if err := hoistDefs(root, out, "output"); err != nil {
		return nil, err
	}
	out = nullable(out)
	if out.Description == "" {
		out.Description = "Your final output, or null while you still need tool results."
	}
	return out, nil
}

// closeObject sets additionalProperties: false on an object schema that declares its
// properties in place and says nothing of others, so that an answer carries only the
// properties the schema names. A free-form object (no properties), one that takes properties
// from elsewhere (allOf, anyOf, oneOf, $ref, if/then/else, dependentSchemas) or one that
// already says what else it admits is left as written: closing it would refuse properties it
// means to accept.
func closeObject(s *Schema) {
	if schemaType(s) != "object" || len(s.Properties) == 0 || admitsOtherProperties(s) {
		return
	}
	s.AdditionalProperties = falseSchema()
}

// admitsOtherProperties reports whether s has a keyword by which it may admit properties it
// does not declare in place.
func admitsOtherProperties(s *Schema) bool {
	for _, set := range []bool{
		s.PatternProperties != nil, s.AdditionalProperties != nil, s.UnevaluatedProperties != nil,
		s.AllOf != nil, s.AnyOf != nil, s.OneOf != nil, s.Ref != "", s.DynamicRef != "",
		s.If != nil, s.Then != nil, s.Else != nil, s.DependentSchemas != nil,
	} {
		if set {
			return true
		}
	}
	return false
}

// refersToItself reports whether s has a $ref other than to its own $defs or definitions: to
// its root ("#") or to a place inside it ("#/properties/a").
func refersToItself(s *Schema) bool {
	found := false
	walk(s, func(x *Schema) {
		if x.Ref != "" && !strings.HasPrefix(x.Ref, "#/$defs/") && !strings.HasPrefix(x.Ref, "#/definitions/") {
			found = true
		}
	})
	return found
}

// nestWhole keeps an unchanged copy of s under root's $defs[prefix] and points every local
// $ref of s (and of the copy) into it, so that references to s's root or to any place inside
// it resolve in the composed schema exactly as they did in s.
func nestWhole(root, s *Schema, prefix, escaped string) error {
	if _, dup := root.Defs[prefix]; dup {
		return fmt.Errorf("schema: compose: two definitions would be named %q", prefix)
	}
	orig := s.CloneSchemas()
	var err error
	fix := func(x *Schema) {
		if x.Ref == "" || err != nil {
			return
		}
		rest, ok := strings.CutPrefix(x.Ref, "#")
		if !ok {
			err = fmt.Errorf("schema: compose: %q has a non-local $ref %q", prefix, x.Ref)
			return
		}
		x.Ref = "#/$defs/" + escaped + rest
	}
	walk(orig, fix)
	walk(s, fix)
	s.Defs, s.Definitions = nil, nil // still reachable inside the copy
	root.Defs[prefix] = orig
	return err
}

// hoistDefs moves s's $defs to root under "<prefix>.<name>" and rewrites s's refs to them.
func hoistDefs(root, s *Schema, prefix string) error {
	if root.Defs == nil {
		root.Defs = map[string]*Schema{}
	}
	// The prefix becomes part of a JSON pointer in a URI fragment: escape it (RFC 6901, then
	// percent-encoding) so that a tool named "fs/read" or "50%off" still resolves.
	escaped := url.PathEscape(strings.NewReplacer("~", "~0", "/", "~1").Replace(prefix))
	if refersToItself(s) {
		return nestWhole(root, s, prefix, escaped)
	}
	if len(s.Defs) == 0 && len(s.Definitions) == 0 {
		return nil
	}
	moved := takeDefs(s)
	for k, d := range moved {
		if _, dup := root.Defs[prefix+"."+k]; dup {
			return fmt.Errorf("schema: compose: two definitions would be named %q", prefix+"."+k)
		}
		root.Defs[prefix+"."+k] = d
	}
	r := &refRenamer{prefix: prefix, escaped: escaped}
	walk(s, r.fix)
	for _, d := range moved {
		walk(d, r.fix)
	}
	return r.err
}

// takeDefs removes s's $defs and definitions, and returns them together.
func takeDefs(s *Schema) map[string]*Schema {
	moved := map[string]*Schema{}
	for _, defs := range []map[string]*Schema{s.Defs, s.Definitions} {
		for k, d := range defs {
			moved[k] = d
		}
	}
	s.Defs, s.Definitions = nil, nil
	return moved
}

// refRenamer points the refs to a schema's definitions to where hoistDefs moved them; err is
// the first ref it could not.
type refRenamer struct {
	prefix, escaped string
	err             error
}

func (r *refRenamer) fix(x *Schema) {
	if x.Ref != "" && r.err == nil {
		x.Ref, r.err = r.rename(x.Ref)
	}
}

func (r *refRenamer) rename(ref string) (string, error) {
	for _, p := range []string{"#/$defs/", "#/definitions/"} {
		if name, ok := strings.CutPrefix(ref, p); ok {
			return "#/$defs/" + r.escaped + "." + name, nil
		}
	}
	if ref == "#" {
		return "", fmt.Errorf("schema: compose: %q refers to its own root, which cannot be composed", r.prefix)
	}
	return ref, nil
}
