package quiver

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/schema"
)

// ParseSchemaTool builds a tool from a schema-tool document (see [ParseSchemaSpec]), the pure
// JSON Schema form:
//
//	{"type": "object", "description": "Analyzes text sentiment",
//	 "properties": {
//	   "_tool": {"type": "string", "const": "sentiment_analysis"},
//	   "text": {"type": "string", "description": "Text to analyze"},
//	   "_output": {"type": "object", "properties": {"sentiment": {"type": "string"}}}}}
//
// The document must name the tool (_tool). _activity (a const or a top-level string) names
// the activity that executes it; a tool with no bound activity is latent: the model's _output
// is its result.
func ParseSchemaTool(data []byte) (*Tool, error) {
	spec, err := parseSchemaDoc(data)
	switch {
	case err != nil && spec.Name != "":
		return nil, fmt.Errorf("quiver: schema tool %q: %w", spec.Name, err)
	case err != nil:
		return nil, fmt.Errorf("quiver: schema tool: %w", err)
	case spec.Name == "":
		return nil, errors.New(`quiver: schema tool: no name: set properties._tool to {"const": "NAME"} (or a top-level "_tool": "NAME")`)
	}
	return NewTool(spec, nil)
}

// ParseSchemaSpec reads a schema-tool document into the Spec it declares. It is the one
// reader of that document: registry files ([ParseSchemaTool]), stored tools and function
// versions (the API's input_schema) and quiver tools add all go through it, so a document
// means the same wherever it is given.
//
// The document is the JSON Schema of the arguments. Beside the parameters it may carry the
// tool's description (else its title), its name (_tool: a top-level string or a property with
// a const), its result schema (the property _output), the activity that executes it
// (_activity, like _tool), the stateful meta-fields its calls may carry (a property
// _outputPath, _instance or _delegate enables it, whatever its schema), its variables
// ("variables", a list of [Variable], or "tenvs", an object schema: see [Variables]) and its
// MCP annotations ("annotations", read strictly: see [ParseAnnotations]):
//
//	{"type": "object", "description": "Looks up a city's weather",
//	 "properties": {"city": {"type": "string"}, "_output": {"type": "object"}, "_outputPath": {"type": "string"}},
//	 "required": ["city"],
//	 "variables": [{"name": "API_KEY", "type": "secret", "required": true}],
//	 "annotations": {"readOnlyHint": true, "openWorldHint": true}}
//
// What is left once those are taken out is the argument schema (Spec.InputSchema), kept
// whole: patternProperties, minProperties, required, allOf and every other keyword constrain
// the arguments however few properties there are. A document that says nothing of them but
// "an object" declares a tool without arguments (InputSchema nil). A root "type" may be a
// list that includes "object" (["object", "null"]): the root becomes "object", since a call's
// arguments are always an object. Name is empty when the document names none (a stored tool
// is named by its record). An error says what is wrong and where; nothing is compiled here:
// [NewTool] checks the schemas, within the bounds of package schema.
func ParseSchemaSpec(data []byte) (Spec, error) {
	spec, err := parseSchemaDoc(data)
	if err != nil {
		return Spec{}, err
	}
	return spec, nil
}

// parseSchemaDoc is ParseSchemaSpec keeping, with an error, the name read so far, so that
// ParseSchemaTool's error can name the tool.
func parseSchemaDoc(data []byte) (Spec, error) {
	doc, err := decodeSchemaDoc(data)
	if err != nil {
		return Spec{}, err
	}
	spec := Spec{
		Name:        metaString(doc, schema.ToolField),
		Description: cmp.Or(doc.Description, doc.Title),
		Activity:    metaString(doc, schema.ActivityField),
		// _output's schema is the result's, whatever the keys beside it.
		OutputSchema: doc.Properties[schema.OutputField],
	}
	for _, f := range schema.MetaFields {
		if _, ok := doc.Properties[f]; ok {
			spec.MetaFields = append(spec.MetaFields, f)
		}
	}
	if raw, ok := doc.Extra[AnnotationsKey]; ok {
		if spec.Annotations, err = ParseAnnotations(raw); err != nil {
			return spec, err
		}
	}
	if spec.Variables, err = schemaDocVariables(doc); err != nil {
		return spec, err
	}
	spec.InputSchema = argumentSchema(doc)
	return spec, nil
}

// notObject is the start of every refusal of a document that is no JSON Schema object (the
// CLI's users and tests know it).
const notObject = "the schema is not a JSON Schema object"

// decodeSchemaDoc decodes the document, refusing in the author's terms what the JSON Schema
// library would refuse in Go's (a Go type name is no help to someone writing JSON).
func decodeSchemaDoc(data []byte) (*schema.Schema, error) {
	var probe any
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s: not valid JSON: %v", notObject, err)
	}
	if _, ok := probe.(map[string]any); !ok {
		return nil, fmt.Errorf(`%s: got %s; want an object like {"type": "object", "properties": {...}}`, notObject, jsonKindOf(data))
	}
	var doc schema.Schema
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %s", notObject, schemaDecodeError(err))
	}
	return &doc, nil
}

// schemaDecodeError words a decoding error of a JSON Schema: a value of the wrong JSON type
// names the keyword and what it takes.
func schemaDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" {
		return err.Error()
	}
	// schemaWithoutMethods is the library's inner struct, not a keyword.
	field := strings.ReplaceAll(te.Field, "schemaWithoutMethods.", "")
	want := "a " + te.Type.Kind().String()
	switch te.Type.Kind() {
	case reflect.Struct, reflect.Pointer:
		want = "a schema (an object, or true or false)"
	case reflect.Map:
		want = "an object"
	case reflect.Slice:
		want = "an array"
	case reflect.Float64, reflect.Int, reflect.Int64:
		want = "a number"
	}
	return fmt.Sprintf("%q (or a schema inside it) holds a JSON %s where %s belongs", field, te.Value, want)
}

// schemaDocVariables reads the variables the document declares under "variables", then
// "tenvs"; each key takes either form, a list of declarations or a tenvs object schema.
func schemaDocVariables(doc *schema.Schema) ([]Variable, error) {
	var all []Variable
	for _, key := range []string{"variables", "tenvs"} {
		raw, ok := doc.Extra[key]
		if !ok {
			continue
		}
		switch raw.(type) {
		case []any, map[string]any:
		default:
			b, _ := json.Marshal(raw)
			return nil, fmt.Errorf(`%s: want a list of declarations like [{"name": "API_KEY", "type": "secret"}], `+
				`or a tenvs object schema like {"type": "object", "properties": {"API_KEY": {"type": "string"}}}; got %s`, key, jsonKindOf(b))
		}
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		var vs Variables
		if err := json.Unmarshal(b, &vs); err != nil {
			// Variables names the form it read ("variables: ", "tenvs: "): said once, as the key.
			return nil, fmt.Errorf("%s: %s", key, strings.TrimPrefix(err.Error(), key+": "))
		}
		all = append(all, vs...)
	}
	return all, nil
}

// argumentSchema is the document's schema of a call's arguments: the document without what
// describes the tool (description, title, the meta-fields among its properties, the keys
// beside the schema), nil when what is left says nothing but "an object".
func argumentSchema(doc *schema.Schema) *schema.Schema {
	in := doc.CloneSchemas()
	// Unknown keywords constrain nothing; "variables", "annotations" and the like are the tool's.
	in.Extra = nil
	in.Description, in.Title = "", ""
	meta := func(k string) bool { return strings.HasPrefix(k, "_") }
	maps.DeleteFunc(in.Properties, func(k string, _ *schema.Schema) bool { return meta(k) })
	in.Required = slices.DeleteFunc(in.Required, meta)
	in.PropertyOrder = slices.DeleteFunc(in.PropertyOrder, meta)
	switch {
	case in.Type == "" && len(in.Types) == 0:
		in.Type = "object"
	case in.Type == "" && slices.Contains(in.Types, "object"):
		// A call's arguments are always an object (none, or null, are read as {}): the list's
		// other types ("null", as generators write an optional object) can never be met, and
		// providers want an "object" root. A list without "object" is left for NewTool to
		// refuse, naming it.
		in.Type, in.Types = "object", nil
	}
	if bareObject(in) {
		return nil
	}
	return in
}

// bareObject reports whether s says nothing but "an object" ($schema and $comment say
// nothing of the arguments): such a document declares a tool without arguments, as a stored
// tool's {"type": "object"} always has. Any other keyword constrains the arguments.
func bareObject(s *schema.Schema) bool {
	if s.Type != "object" || len(s.Properties) > 0 {
		return false
	}
	rest := *s
	rest.Type, rest.Properties, rest.PropertyOrder, rest.Schema, rest.Comment = "", nil, nil, "", ""
	return reflect.ValueOf(rest).IsZero()
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
