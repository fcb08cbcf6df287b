package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/store/sqlite"
)

// A schema-tool document is one document wherever it is given (issue 46): each door reads it
// with quiver.ParseSchemaSpec, so the tool it serves has the same arguments, or the door
// refuses it in the same words. A door returns the tool it serves, nil for a door that
// serves none (a function version), or its refusal.
type schemaDocDoor struct {
	name string
	open func(t *testing.T, doc string) (*quiver.Tool, error)
}

var schemaDocDoors = []schemaDocDoor{
	{"registry file (quiver.ParseSchemaTool)", registryDoor},
	{"quiver tools add --schema", func(t *testing.T, doc string) (*quiver.Tool, error) {
		return toolsAddDoor(t, []string{"--js", "probe.js", "--schema", "probe.json", "--name", "probe"}, doc)
	}},
	{"quiver tools add DEFINITION.yaml (input_schema)", func(t *testing.T, doc string) (*quiver.Tool, error) {
		return toolsAddDoor(t, []string{"probe.yaml"}, doc)
	}},
	{"POST /v1/tools, a server tool (platform.CreateTool)", func(t *testing.T, doc string) (*quiver.Tool, error) {
		return createToolDoor(t, store.TargetServer, doc)
	}},
	{"POST /v1/tools, a client tool (platform.CreateTool)", func(t *testing.T, doc string) (*quiver.Tool, error) {
		return createToolDoor(t, store.TargetClient, doc)
	}},
	{"PATCH /v1/tools (platform.UpdateTool)", updateToolDoor},
	{"POST /v1/functions/{id}/versions (platform.CreateFunctionVersion)", versionDoor},
}

func registryDoor(_ *testing.T, doc string) (*quiver.Tool, error) {
	tool, err := quiver.ParseSchemaTool([]byte(doc))
	if err != nil {
		return nil, err
	}
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		return nil, err
	}
	served, _ := reg.Lookup(tool.Name())
	return served, nil
}

// toolsAddDoor adds the tool with the CLI (args name files in a directory holding the document
// as probe.json and as probe.yaml's input_schema) and loads it as quiver serve would.
func toolsAddDoor(t *testing.T, args []string, doc string) (*quiver.Tool, error) {
	dir := writeFiles(t, map[string]string{"probe.js": `export default () => "probed"`, "probe.json": doc,
		// JSON is YAML: the document is the definition's input_schema as it is.
		"probe.yaml": "name: probe\nfile: probe.js\ninput_schema: " + doc + "\n"})
	for i, a := range args {
		if strings.HasPrefix(a, "probe.") {
			args[i] = filepath.Join(dir, a)
		}
	}
	db := filepath.Join(dir, "q.db")
	if code, _, stderr := runCLI(t, "", append(append([]string{"tools", "add"}, args...), "--db", db)...); code != exitOK {
		return nil, errors.New(stderr)
	}
	st, err := sqlite.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tools, err := jsfunc.LoadWorkspace(context.Background(), st, localWorkspaceID, jsfunc.DefaultLimits)
	if err != nil || len(tools) != 1 {
		t.Fatalf("added, but loaded %d tools: %v", len(tools), err)
	}
	return tools[0], nil
}

// storedToolWorld is a platform over a store in memory with workspace wsp_a, a member and a
// function with a version.
func storedToolWorld(t *testing.T) (*platform.Platform, platform.Actor, *store.Function) {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	for _, err := range []error{
		st.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_a", Name: "a"}),
		st.CreateUser(ctx, &store.User{ID: "usr_m", Email: "m@example.com"}),
		st.AddMember(ctx, &store.Membership{WorkspaceID: "wsp_a", UserID: "usr_m", Role: store.MemberRoleMember}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err := platform.New(platform.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	a := platform.Actor{WorkspaceID: "wsp_a", UserID: "usr_m", KeyID: "key_m", Role: store.KeyRoleMember}
	fn, err := p.CreateFunction(ctx, a, "probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.CreateFunctionVersion(ctx, a, fn.ID, platform.NewVersion{Code: `export default () => "probed"`}); err != nil {
		t.Fatal(err)
	}
	return p, a, fn
}

// served is the tool the workspace serves under the name probe.
func served(t *testing.T, p *platform.Platform) *quiver.Tool {
	t.Helper()
	tool, ok := p.Workspace(context.Background(), "wsp_a").Registry().Lookup("probe")
	if !ok {
		t.Fatal("stored, but not served")
	}
	return tool
}

func createToolDoor(t *testing.T, target store.ToolTarget, doc string) (*quiver.Tool, error) {
	p, a, fn := storedToolWorld(t)
	in := platform.NewTool{Name: "probe", Target: target, InputSchema: json.RawMessage(doc)}
	if target == store.TargetServer {
		in.FunctionID = fn.ID
	}
	if _, err := p.CreateTool(context.Background(), a, in); err != nil {
		return nil, err
	}
	return served(t, p), nil
}

func updateToolDoor(t *testing.T, doc string) (*quiver.Tool, error) {
	p, a, fn := storedToolWorld(t)
	ctx := context.Background()
	tool, err := p.CreateTool(ctx, a, platform.NewTool{Name: "probe", Description: "Probes.", Target: store.TargetServer, FunctionID: fn.ID,
		InputSchema: json.RawMessage(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpdateTool(ctx, a, tool.ID, platform.ToolChange{InputSchema: json.RawMessage(doc)}); err != nil {
		return nil, err
	}
	return served(t, p), nil
}

func versionDoor(t *testing.T, doc string) (*quiver.Tool, error) {
	p, a, fn := storedToolWorld(t)
	_, err := p.CreateFunctionVersion(context.Background(), a, fn.ID, platform.NewVersion{Code: `export default () => 1`, InputSchema: json.RawMessage(doc)})
	return nil, err
}

// Each row is a document the registry's parser (quiver.ParseSchemaTool) and the stored
// tools' (jsfunc.ParseSchemaDoc) read differently before there was one, or that both got
// wrong: every door must serve the same arguments or refuse it with the same words.
func TestSchemaToolDocumentEveryDoor(t *testing.T) {
	const head = `{"_tool":"probe","description":"Probes.",`
	rows := []struct {
		name, doc string
		input     string // the served tool's argument schema; "null" when it takes no arguments
		admits    string // arguments the served tool accepts
		refuses   string // arguments it refuses
		err       string // the refusal, for a document refused
	}{
		// Stored tools kept an argument schema only for properties, additionalProperties or a
		// type other than "object": any other keyword alone was dropped.
		{name: "patternProperties alone", doc: head + `"type":"object","patternProperties":{"^x_":{"type":"string"}}}`,
			input: `{"type":"object","patternProperties":{"^x_":{"type":"string"}}}`, admits: `{"x_a":"s"}`, refuses: `{"x_a":5}`},
		{name: "minProperties alone", doc: head + `"minProperties":1}`,
			input: `{"type":"object","minProperties":1}`, admits: `{"a":1}`, refuses: `{}`},
		{name: "allOf alone", doc: head + `"allOf":[{"required":["a"]}]}`,
			input: `{"type":"object","allOf":[{"required":["a"]}]}`, admits: `{"a":1}`, refuses: `{}`},
		// Both dropped it.
		{name: "required without properties", doc: head + `"required":["a"]}`,
			input: `{"type":"object","required":["a"]}`, admits: `{"a":1}`, refuses: `{}`},
		// Registry files kept what stored tools took for nothing but "an object".
		{name: "$schema and an object", doc: head + `"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`,
			input: `null`},
		// Registry files set "type": "object" beside the list, which no schema may hold;
		// stored tools took ["object"] and refused ["object", "null"].
		{name: `type ["object", "null"]`, doc: head + `"type":["object","null"],"properties":{"a":{"type":"string"}}}`,
			input: `{"type":"object","properties":{"a":{"type":"string"}}}`, admits: `{"a":"s"}`, refuses: `{"a":5}`},
		{name: `type ["object"]`, doc: head + `"type":["object"],"properties":{"a":{"type":"string"}}}`,
			input: `{"type":"object","properties":{"a":{"type":"string"}}}`, admits: `{"a":"s"}`, refuses: `{"a":5}`},
		{name: "type list without object", doc: head + `"type":["string","null"]}`,
			err: `the input schema's root must have type "object", got ["string" "null"]`},
		// The refusals differed, and spoke of Go types.
		{name: "not an object", doc: `[1]`, err: `the schema is not a JSON Schema object: got an array; want an object like {"type": "object"`},
		{name: "a keyword of the wrong type", doc: head + `"properties":{"a":5}}`,
			err: `"properties" (or a schema inside it) holds a JSON number where a schema (an object, or true or false) belongs`},
		{name: "a variable without a name", doc: head + `"variables":[{"type":"text"}]}`, err: `variables: variable 0 has no name`},
		{name: "variables that are neither list nor schema", doc: head + `"variables":"API_KEY"}`,
			err: `variables: want a list of declarations like [{"name": "API_KEY", "type": "secret"}]`},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			for _, door := range schemaDocDoors {
				tool, err := door.open(t, row.doc)
				if row.err != "" {
					if err == nil || !strings.Contains(err.Error(), row.err) {
						t.Errorf("%s: %v, want a refusal with %q", door.name, err, row.err)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s refused it: %v", door.name, err)
					continue
				}
				if tool != nil {
					checkArguments(t, door.name, tool, row.input, row.admits, row.refuses)
				}
			}
		})
	}
}

// checkArguments checks the tool's argument schema and what it makes of two sets of arguments.
func checkArguments(t *testing.T, door string, tool *quiver.Tool, input, admits, refuses string) {
	t.Helper()
	if got, _ := json.Marshal(tool.Spec().InputSchema); string(got) != input {
		t.Errorf("%s serves the arguments %s, want %s", door, got, input)
		return
	}
	for args, ok := range map[string]bool{admits: true, refuses: false} {
		if args == "" {
			continue
		}
		v, err := schema.Decode([]byte(args))
		if err != nil {
			t.Fatal(err)
		}
		if err := tool.CompiledInput().Validate(v); (err == nil) != ok {
			t.Errorf("%s: arguments %s: %v, want accepted %v", door, args, err, ok)
		}
	}
}

// _activity and _output are read by every door, and mean what they say where they can: a
// registry's schema-only tool is bound to the activity and checked against the result schema.
// A stored tool runs its own code, and takes its result schema as output_schema: a new
// document holding either is refused, saying where it goes (quiver tools add --schema,
// whose schema file is the only place for a result schema, takes _output as it).
func TestSchemaToolDocumentStoredFields(t *testing.T) {
	const (
		activity = `{"_tool":"probe","description":"Probes.","_activity":"act","properties":{"a":{"type":"string"}}}`
		output   = `{"_tool":"probe","description":"Probes.","properties":{"a":{"type":"string"},"_output":{"type":"integer"}}}`
	)
	reg, err := registryDoor(t, activity)
	if err != nil || reg.Spec().Activity != "act" {
		t.Errorf("registry file with _activity: %v", err)
	}
	if reg, err := registryDoor(t, output); err != nil || reg.Spec().OutputSchema == nil {
		t.Errorf("registry file with _output: %v", err)
	}
	for _, door := range schemaDocDoors[1:] {
		wants := map[string]string{activity: `_activity ("act") binds a schema-only tool of a registry to an activity`,
			output: `properties._output declares the result schema, which a stored tool takes as output_schema: move it there`}
		if strings.HasPrefix(door.name, "quiver tools add") {
			wants[output] = ""
		}
		for doc, want := range wants {
			tool, err := door.open(t, doc)
			switch {
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("%s: %v, want a refusal with %q", door.name, err, want)
			case want == "" && (err != nil || tool.Spec().OutputSchema == nil):
				t.Errorf("%s: %v, want _output as the result schema", door.name, err)
			}
		}
	}
}

// A document stored before _activity and _output were refused is still served, without them,
// and a change that keeps it is not refused for them.
func TestSchemaToolDocumentStoredBefore(t *testing.T) {
	const activity = `{"_tool":"probe","description":"Probes.","_activity":"act","properties":{"_output":{"type":"integer"},"a":{"type":"string"}}}`
	p, a, fn := storedToolWorld(t)
	ctx := context.Background()
	tool, err := p.CreateTool(ctx, a, platform.NewTool{Name: "probe", Target: store.TargetServer, FunctionID: fn.ID,
		InputSchema: json.RawMessage(`{"type":"object","description":"Probes."}`)})
	if err != nil {
		t.Fatal(err)
	}
	old := &store.Schema{WorkspaceID: "wsp_a", Content: json.RawMessage(activity)}
	if err := p.Store().CreateSchema(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Store().UpdateTool(ctx, "wsp_a", tool.ID, "usr_m", func(t *store.Tool) error { t.InputSchemaID = old.ID; return nil }); err != nil {
		t.Fatal(err)
	}
	desc := platform.Optional[string]{Set: true, Value: "Probes again."}
	if _, err := p.UpdateTool(ctx, a, tool.ID, platform.ToolChange{Description: desc}); err != nil {
		t.Fatalf("a change that keeps a document stored before: %v", err)
	}
	if s := served(t, p).Spec(); s.Activity != "" || s.OutputSchema != nil || s.Description != "Probes again." {
		t.Errorf("a document stored before is served with activity %q, output schema %v", s.Activity, s.OutputSchema)
	}
}
