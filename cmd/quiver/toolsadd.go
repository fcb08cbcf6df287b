package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/sandbox"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
)

const toolsAddUsage = `quiver tools add --js FILE --schema FILE [--name N] [--description D] [--requires-confirmation] [--config FILE] [--db PATH | --postgres DSN]
quiver tools add DEFINITION.yaml [--requires-confirmation] [--config FILE] [--db PATH | --postgres DSN]`

// toolsAdd stores a JavaScript function tool in the local workspace: a function named like the
// tool, the code as its new default version, and the tool. Adding a tool again adds a version.
func (a *app) toolsAdd(ctx context.Context, inv *invocation) (int, error) {
	def, config, code, err := toolDefinition(inv)
	if err != nil {
		return code, err
	}
	// Stored through the platform, as the API stores tools: the same rules (a name the
	// workspace may not take: hostile input, a shared tool's, an OpenAPI document's) and the
	// same words. The configuration's tools are shared ones, as quiver serve's.
	p, actor, st, err := a.configuredPlatformForNames(ctx, inv, config)
	if err != nil {
		return exitError, err
	}
	saved, err := p.SaveFunctionTool(ctx, actor, def)
	if err != nil {
		return toolRefusal(err)
	}
	t, v := saved.Tool, saved.Version
	fmt.Fprintf(a.stdout, "added tool %s (%s): function %s version %d, in %s\n", t.Name, t.ID, t.FunctionID, v.Version, st.Where)
	if msg := quiver.NameWarning(t.Name); msg != "" {
		// A name off the convention is still valid: warn, do not reject.
		fmt.Fprintf(a.stderr, "quiver: warning: the tool name %q does not follow the naming convention: %s\n", t.Name, msg)
	}
	return exitOK, nil
}

// toolDefinition reads the tool tools add is asked to store, from a YAML definition or from
// --js and --schema, with the flags over what the files say, and the configuration file's
// --config; code is the exit status of an error.
func toolDefinition(inv *invocation) (def jsfunc.Definition, config string, code int, err error) {
	jsFile := inv.fs.String("js", "", "the JavaScript module; its default export receives the arguments and a state with env(NAME)")
	schemaFile := inv.fs.String("schema", "", "the JSON Schema of the arguments; it may also hold description, _tool (the name), _output (the result schema), variables, "+
		"and the meta-fields calls may carry (a property _outputPath, _instance or _delegate enables it)")
	name := inv.fs.String("name", "", "the tool's name (default: _tool in the schema, else the file name)")
	desc := inv.fs.String("description", "", "what the tool does, when to use it and what it returns (default: the schema's description)")
	confirm := inv.fs.Bool("requires-confirmation", false, "every call of the tool waits for a person's approval: quiver run asks in the terminal, "+
		"the API's runs wait for a decision, MCP clients are asked through elicitation (default: the definition's requires_confirmation, else false)")
	cfg := addConfigFlag(inv.fs)
	pos, err := inv.parse(0, -1, "")
	if err != nil {
		return def, "", exitUsage, err
	}
	switch {
	case len(pos) > 1:
		return def, "", exitUsage, usagef("tools add takes one definition file, got %d arguments\n%s", len(pos), toolsAddUsage)
	case len(pos) == 1 && (*jsFile != "" || *schemaFile != ""):
		return def, "", exitUsage, usagef("give a YAML definition or --js and --schema, not both\n%s", toolsAddUsage)
	case len(pos) == 1:
		def, err = readDefinition(pos[0])
	case *jsFile == "" || *schemaFile == "":
		return def, "", exitUsage, usagef("tools add needs --js FILE and --schema FILE, or a YAML definition\n%s", toolsAddUsage)
	default:
		def, err = readJSTool(*jsFile, *schemaFile)
	}
	if err != nil {
		return def, "", exitError, err
	}
	def.Name, def.Description = cmp.Or(*name, def.Name), cmp.Or(*desc, def.Description)
	// Given, the flag wins over the definition either way: --requires-confirmation=false turns
	// a definition's requirement off.
	inv.fs.Visit(func(f *flag.Flag) {
		if f.Name == "requires-confirmation" {
			def.RequiresConfirmation = *confirm
		}
	})
	return def, *cfg, exitOK, nil
}

// toolRefusal is the platform's refusal of a tool as tools add says it: the API's words. An
// invalid name or description is a usage error, naming where the command takes another.
func toolRefusal(err error) (int, error) {
	var e *platform.Error
	if !errors.As(err, &e) || e.Kind != platform.Invalid {
		return exitError, err
	}
	switch e.Field {
	case "name":
		return exitUsage, usagef("the tool's name: %s; choose another with --name (or _tool in the schema)", e.Message)
	case "description":
		return exitUsage, usagef("the tool's description: %s; give one with --description (or description in the schema)", e.Message)
	}
	return exitError, err
}

// readJSTool reads --js and --schema.
func readJSTool(jsFile, schemaFile string) (jsfunc.Definition, error) {
	code, err := os.ReadFile(jsFile)
	if err != nil {
		return jsfunc.Definition{}, fmt.Errorf("reading the code: %w", err)
	}
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		return jsfunc.Definition{}, fmt.Errorf("reading the schema: %w", err)
	}
	spec, err := schemaDoc(raw)
	if err != nil {
		return jsfunc.Definition{}, fmt.Errorf("%s: %w", schemaFile, err)
	}
	def := withDoc(jsfunc.Definition{}, spec)
	def.Code = string(code)
	def.Filename = filepath.Base(jsFile)
	if def.Name == "" {
		def.Name = strings.TrimSuffix(filepath.Base(jsFile), filepath.Ext(jsFile))
	}
	return def, nil
}

// schemaDoc reads a schema-tool document (quiver.ParseSchemaSpec, the one reader of it: the
// same document means here what it means in a registry file or the API). _activity is
// refused as the API refuses it: the stored tool runs its own code. _output, unlike in the
// API, is the tool's result schema: a schema file is the only place to give one with --js.
func schemaDoc(doc []byte) (quiver.Spec, error) {
	spec, err := quiver.ParseSchemaSpec(doc)
	if err != nil {
		return spec, err
	}
	if spec.Activity != "" {
		return spec, fmt.Errorf("_activity (%q) binds a schema-only tool of a registry to an activity; "+
			"a stored tool runs its own code: remove _activity", spec.Activity)
	}
	return spec, nil
}

// withDoc is def with what a schema-tool document declares: its argument schema, and its name,
// description, result schema and annotations when it gives them, replace def's; its variables
// and meta-fields add to def's.
func withDoc(def jsfunc.Definition, s quiver.Spec) jsfunc.Definition {
	def.InputSchema = s.InputSchema
	def.Name, def.Description = cmp.Or(s.Name, def.Name), cmp.Or(s.Description, def.Description)
	if s.OutputSchema != nil {
		def.OutputSchema = s.OutputSchema
	}
	if !s.Annotations.IsZero() {
		def.Annotations = s.Annotations
	}
	def.Variables = append(def.Variables, s.Variables...)
	for _, f := range s.MetaFields {
		if !slices.Contains(def.MetaFields, f) {
			def.MetaFields = append(def.MetaFields, f)
		}
	}
	return def
}

// yamlDefinition is a function tool written as YAML. Paths are relative to the file.
type yamlDefinition struct {
	Name                 string            `yaml:"name"`
	Description          string            `yaml:"description"`
	Code                 string            `yaml:"code"`
	File                 string            `yaml:"file"`
	Language             string            `yaml:"language"`
	Schema               string            `yaml:"schema"`
	InputSchema          any               `yaml:"input_schema"`
	OutputSchema         any               `yaml:"output_schema"`
	Variables            []quiver.Variable `yaml:"variables"`
	Examples             []map[string]any  `yaml:"examples"`
	RequiresConfirmation bool              `yaml:"requires_confirmation"`
	Disabled             bool              `yaml:"disabled"`
	MetaFields           []string          `yaml:"meta_fields"`
	Annotations          any               `yaml:"annotations"`
}

const definitionHelp = `a definition has: name, description, code (or file: a path), language (js or ts),
input_schema and output_schema (JSON Schema as YAML; input_schema is read like a schema file) or schema (a path to a schema file like --schema's),
variables (name, type text|secret, required, description), examples (args, result), requires_confirmation, disabled,
meta_fields (the meta-fields calls may carry: _outputPath, _instance, _delegate),
annotations (MCP's hints, each true or false: readOnlyHint, destructiveHint, idempotentHint, openWorldHint; and title)`

// readDefinition reads a YAML (or JSON) definition.
func readDefinition(path string) (jsfunc.Definition, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return jsfunc.Definition{}, fmt.Errorf("reading the definition: %w", err)
	}
	var y yamlDefinition
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&y); err != nil {
		return jsfunc.Definition{}, fmt.Errorf("%s: %w\n%s", path, err, definitionHelp)
	}
	dir := filepath.Dir(path)
	def, err := definitionSchemas(path, &y)
	if err != nil {
		return def, err
	}
	def.Language, def.RequiresConfirmation, def.Disabled = sandbox.Language(y.Language), y.RequiresConfirmation, y.Disabled
	switch {
	case y.Code != "" && y.File != "":
		return def, fmt.Errorf("%s: give code or file, not both", path)
	case y.File != "":
		b, err := os.ReadFile(filepath.Join(dir, y.File))
		if err != nil {
			return def, fmt.Errorf("%s: file: %w", path, err)
		}
		def.Code, def.Filename = string(b), filepath.Base(y.File)
	case y.Code != "":
		def.Code = y.Code
	default:
		return def, fmt.Errorf("%s: no code: set code (the module) or file (a path to it)", path)
	}
	if y.Name != "" {
		def.Name = y.Name
	}
	if y.Description != "" {
		def.Description = y.Description
	}
	def.Variables = append(def.Variables, y.Variables...)
	if y.Annotations != nil {
		// Given here, they replace those of the schema file.
		a, err := quiver.ParseAnnotations(y.Annotations)
		if err != nil {
			return def, fmt.Errorf("%s: %w", path, err)
		}
		def.Annotations = a
	}
	for _, f := range y.MetaFields {
		if !slices.Contains(def.MetaFields, f) {
			def.MetaFields = append(def.MetaFields, f)
		}
	}
	for i, e := range y.Examples {
		var ex quiver.Example
		if err := remarshal(e, &ex); err != nil {
			return def, fmt.Errorf("%s: example %d: %w", path, i+1, err)
		}
		def.Examples = append(def.Examples, ex)
	}
	return def, nil
}

// definitionSchemas reads a definition's schemas: its schema file, then its input_schema, a
// schema-tool document too (it is stored as the tool's input schema, which is read as one when
// the tool is loaded: read the same way here, what is added is what will be served), then its
// output_schema, a plain JSON Schema.
func definitionSchemas(path string, y *yamlDefinition) (jsfunc.Definition, error) {
	var def jsfunc.Definition
	if y.Schema != "" {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(path), y.Schema))
		if err != nil {
			return def, fmt.Errorf("%s: schema: %w", path, err)
		}
		spec, err := schemaDoc(b)
		if err != nil {
			return def, fmt.Errorf("%s: schema %s: %w", path, y.Schema, err)
		}
		def = withDoc(def, spec)
	}
	if y.InputSchema != nil {
		b, err := json.Marshal(y.InputSchema)
		if err != nil {
			return def, fmt.Errorf("%s: input_schema is not a JSON Schema: %w", path, err)
		}
		spec, err := schemaDoc(b)
		if err != nil {
			return def, fmt.Errorf("%s: input_schema: %w", path, err)
		}
		def = withDoc(def, spec)
	}
	if y.OutputSchema != nil {
		if err := remarshal(y.OutputSchema, &def.OutputSchema); err != nil {
			return def, fmt.Errorf("%s: output_schema is not a JSON Schema: %w", path, err)
		}
	}
	return def, nil
}

// remarshal converts what YAML decoded into a JSON-shaped Go value.
func remarshal(v, to any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}

// exists reports whether the flags name a database that is there: one given explicitly, a
// PostgreSQL DSN, or the default SQLite file once created. Listing and calling tools never
// creates a database.
func (f storeFlags) exists() bool {
	if *f.db != "" || *f.postgres != "" || os.Getenv("QUIVER_POSTGRES") != "" {
		return true
	}
	dir, err := dataDir()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, defaultDBName))
	return !errors.Is(err, fs.ErrNotExist)
}
