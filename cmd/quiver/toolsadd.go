package main

import (
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
	"github.com/quiverhq/quiver/sandbox"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
)

const toolsAddUsage = `quiver tools add --js FILE --schema FILE [--name N] [--description D] [--requires-confirmation] [--db PATH | --postgres DSN]
quiver tools add DEFINITION.yaml [--requires-confirmation] [--db PATH | --postgres DSN]`

// toolsAdd stores a JavaScript function tool in the local workspace: a function named like the
// tool, the code as its new default version, and the tool. Adding a tool again adds a version.
func (a *app) toolsAdd(ctx context.Context, inv *invocation) (int, error) {
	jsFile := inv.fs.String("js", "", "the JavaScript module; its default export receives the arguments and a state with env(NAME)")
	schemaFile := inv.fs.String("schema", "", "the JSON Schema of the arguments; it may also hold description, _tool (the name), _output (the result schema), variables, "+
		"and the meta-fields calls may carry (a property _outputPath, _instance or _delegate enables it)")
	name := inv.fs.String("name", "", "the tool's name (default: _tool in the schema, else the file name)")
	desc := inv.fs.String("description", "", "what the tool does, when to use it and what it returns (default: the schema's description)")
	confirm := inv.fs.Bool("requires-confirmation", false, "every call of the tool waits for a person's approval: quiver run asks in the terminal, "+
		"the API's runs wait for a decision, MCP clients are asked through elicitation (default: the definition's requires_confirmation, else false)")
	pos, err := inv.parse(0, -1, "")
	if err != nil {
		return exitUsage, err
	}
	var def jsfunc.Definition
	switch {
	case len(pos) > 1:
		return exitUsage, usagef("tools add takes one definition file, got %d arguments\n%s", len(pos), toolsAddUsage)
	case len(pos) == 1 && (*jsFile != "" || *schemaFile != ""):
		return exitUsage, usagef("give a YAML definition or --js and --schema, not both\n%s", toolsAddUsage)
	case len(pos) == 1:
		def, err = readDefinition(pos[0])
	case *jsFile == "" || *schemaFile == "":
		return exitUsage, usagef("tools add needs --js FILE and --schema FILE, or a YAML definition\n%s", toolsAddUsage)
	default:
		def, err = readJSTool(*jsFile, *schemaFile)
	}
	if err != nil {
		return exitError, err
	}
	if *name != "" {
		def.Name = *name
	}
	if *desc != "" {
		def.Description = *desc
	}
	// Given, the flag wins over the definition either way: --requires-confirmation=false turns
	// a definition's requirement off.
	inv.fs.Visit(func(f *flag.Flag) {
		if f.Name == "requires-confirmation" {
			def.RequiresConfirmation = *confirm
		}
	})
	if def.Name == "" {
		return exitUsage, usagef("the tool has no name: pass --name, or set _tool in the schema")
	}
	if err := quiver.CheckName(def.Name); err != nil {
		return exitUsage, usagef("%v; choose another with --name", err)
	}
	if def.Description == "" {
		return exitUsage, usagef("tool %q has no description: pass --description, or set description in the schema; say what it does, when to use it and what it returns", def.Name)
	}
	// The registry holds the built-in tools only here: stored ones are loaded by the commands
	// that list and call tools.
	if _, builtin := a.registry.Lookup(def.Name); builtin {
		return exitError, fmt.Errorf("%q is the name of a built-in tool; choose another --name", def.Name)
	}
	st, err := inv.open(ctx)
	if err != nil {
		return exitError, err
	}
	t, v, err := jsfunc.Save(ctx, st, localWorkspaceID, "", def)
	if err != nil {
		return exitError, err
	}
	fmt.Fprintf(a.stdout, "added tool %s (%s): function %s version %d, in %s\n", t.Name, t.ID, t.FunctionID, v.Version, st.Where)
	if msg := quiver.NameWarning(t.Name); msg != "" {
		// Seed 003 §8.3: warn, do not reject.
		fmt.Fprintf(a.stderr, "quiver: warning: the tool name %q does not follow the naming convention: %s\n", t.Name, msg)
	}
	return exitOK, nil
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
	doc, err := jsfunc.ParseSchemaDoc(raw)
	if err != nil {
		return jsfunc.Definition{}, fmt.Errorf("%s: %w", schemaFile, err)
	}
	def := fromDoc(doc)
	def.Code = string(code)
	def.Filename = filepath.Base(jsFile)
	if def.Name == "" {
		def.Name = strings.TrimSuffix(filepath.Base(jsFile), filepath.Ext(jsFile))
	}
	return def, nil
}

func fromDoc(d *jsfunc.SchemaDoc) jsfunc.Definition {
	return jsfunc.Definition{Name: d.Name, Description: d.Description, InputSchema: d.Input, OutputSchema: d.Output, Variables: d.Variables,
		MetaFields: d.MetaFields, Annotations: d.Annotations}
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
input_schema and output_schema (JSON Schema as YAML) or schema (a path to a schema file like --schema's),
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
	def := jsfunc.Definition{Language: sandbox.Language(y.Language), RequiresConfirmation: y.RequiresConfirmation, Disabled: y.Disabled}
	if y.Schema != "" {
		b, err := os.ReadFile(filepath.Join(dir, y.Schema))
		if err != nil {
			return def, fmt.Errorf("%s: schema: %w", path, err)
		}
		doc, err := jsfunc.ParseSchemaDoc(b)
		if err != nil {
			return def, fmt.Errorf("%s: schema %s: %w", path, y.Schema, err)
		}
		def = fromDoc(doc)
		def.Language, def.RequiresConfirmation, def.Disabled = sandbox.Language(y.Language), y.RequiresConfirmation, y.Disabled
	}
	for _, s := range []struct {
		key string
		v   any
		to  **schema.Schema
	}{{"input_schema", y.InputSchema, &def.InputSchema}, {"output_schema", y.OutputSchema, &def.OutputSchema}} {
		if s.v == nil {
			continue
		}
		if err := remarshal(s.v, s.to); err != nil {
			return def, fmt.Errorf("%s: %s is not a JSON Schema: %w", path, s.key, err)
		}
	}
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

// loadStoredTools puts the JavaScript tools stored in the local workspace beside the built-in
// ones, in a registry of the command's own. A stored tool that cannot be loaded, or that is
// named like a built-in one, is left out with a warning.
func (a *app) loadStoredTools(ctx context.Context, inv *invocation) error {
	if !inv.store.exists() {
		return nil
	}
	st, err := inv.open(ctx)
	if err != nil {
		return err
	}
	a.registry, err = a.withStoredTools(ctx, st)
	return err
}

// withStoredTools returns a registry of the app's tools and the JavaScript tools stored in
// st's local workspace.
func (a *app) withStoredTools(ctx context.Context, st *opened) (*quiver.Registry, error) {
	reg := &quiver.Registry{Logger: a.registry.Logger}
	if err := reg.Register(a.registry.Tools()...); err != nil {
		return nil, err
	}
	a.registerStored(ctx, st, reg)
	return reg, nil
}

// registerStored adds the JavaScript tools stored in the local workspace to reg. A stored tool
// that cannot be loaded, or that is named like one already in reg, is left out with a warning.
func (a *app) registerStored(ctx context.Context, st *opened, reg *quiver.Registry) {
	tools, err := jsfunc.LoadWorkspace(ctx, st, localWorkspaceID, jsfunc.DefaultLimits)
	if err != nil {
		fmt.Fprintf(a.stderr, "quiver: warning: some stored tools are not loaded: %v\n", err)
	}
	for _, t := range tools {
		if err := reg.Register(t); err != nil {
			fmt.Fprintf(a.stderr, "quiver: warning: stored tool %q is not loaded: %v\n", t.Name(), err)
		}
	}
}
