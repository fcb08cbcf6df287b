package jsfunc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

const ws = "wsp_test"

func openStore(t *testing.T) *memstore.Store {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	if err := st.CreateWorkspace(context.Background(), &store.Workspace{ID: ws, Name: "test"}); err != nil {
		t.Fatal(err)
	}
	return st
}

func callTool(t *testing.T, tool *quiver.Tool, vars quiver.Vars, args string) *quiver.Result {
	t.Helper()
	r, err := dispatcher(t, vars, tool).Dispatch(context.Background(), quiver.Call{Name: tool.Name(), Args: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSaveAndLoad(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	def := Definition{
		Name: "add", Description: "Adds two numbers.",
		Code:         `export default ({a, b}, state) => ({sum: a + b, by: state.env("WHO")})`,
		InputSchema:  mustSchema(t, `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number","default":1}},"required":["a"]}`),
		OutputSchema: mustSchema(t, `{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`),
		Variables:    []quiver.Variable{{Name: "WHO", Type: quiver.VarText}},
		Examples:     []quiver.Example{{Args: json.RawMessage(`{"a":1,"b":2}`), Result: json.RawMessage(`{"sum":3}`)}},
	}
	saved, v1, err := Save(ctx, st, ws, "", def)
	if err != nil {
		t.Fatal(err)
	}
	if v1.Version != 1 || saved.FunctionID != v1.FunctionID || saved.Target != store.TargetServer || !saved.Enabled {
		t.Fatalf("saved %+v, version %+v", saved, v1)
	}
	tool, err := Load(ctx, st, ws, saved, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	spec := tool.Spec()
	if spec.Description != "Adds two numbers." || len(spec.Variables) != 1 || spec.Variables[0].Name != "WHO" ||
		spec.OutputSchema == nil || len(spec.Examples) != 1 || spec.Source != quiver.SourceStored {
		t.Errorf("loaded spec %+v (its source, which rules select stored tools by, must be %q)", spec, quiver.SourceStored)
	}
	if r := callTool(t, tool, quiver.Vars{"WHO": "ada"}, `{"a":2}`); r.IsError() || string(r.Value) != `{"sum":3,"by":"ada"}` {
		t.Errorf("v1 call: %+v", r)
	}

	// Saving again adds a version, makes it the default and updates the tool in place.
	def.Code = `export default ({a, b}) => ({sum: (a + b) * 10})`
	def.Variables = nil
	again, v2, err := Save(ctx, st, ws, "", def)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != saved.ID || v2.Version != 2 || v2.FunctionID != v1.FunctionID {
		t.Fatalf("second save: tool %s (first %s), version %+v", again.ID, saved.ID, v2)
	}
	tool, err = Load(ctx, st, ws, again, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if r := callTool(t, tool, nil, `{"a":2}`); string(r.Value) != `{"sum":30}` {
		t.Errorf("v2 call: %+v", r)
	}

	// A tool pinned to version 1 runs it, whatever the default.
	pinned, err := st.UpdateTool(ctx, ws, saved.ID, "", func(t *store.Tool) error { t.FunctionVersionID = v1.ID; return nil })
	if err != nil {
		t.Fatal(err)
	}
	tool, err = Load(ctx, st, ws, pinned, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if r := callTool(t, tool, quiver.Vars{}, `{"a":2}`); string(r.Value) != `{"sum":3}` {
		t.Errorf("pinned call: %+v", r)
	}
}

func TestLoadWorkspace(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	for _, d := range []Definition{
		{Name: "one", Description: "One.", Code: `export default () => 1`},
		{Name: "two", Description: "Two.", Code: `export default () => 2`, Disabled: true},
	} {
		if _, _, err := Save(ctx, st, ws, "", d); err != nil {
			t.Fatal(err)
		}
	}
	// A version written around Save, with code that does not parse, and a deleted tool.
	broken, _, err := Save(ctx, st, ws, "", Definition{Name: "broken", Description: "Broken.", Code: `export default () => 3`})
	if err != nil {
		t.Fatal(err)
	}
	bad := &store.FunctionVersion{WorkspaceID: ws, FunctionID: broken.FunctionID, Code: "export default ("}
	if err := st.CreateFunctionVersion(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetDefaultVersion(ctx, ws, broken.FunctionID, bad.ID); err != nil {
		t.Fatal(err)
	}
	gone, _, err := Save(ctx, st, ws, "", Definition{Name: "gone", Description: "Deleted.", Code: `export default () => 4`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteTool(ctx, ws, gone.ID, ""); err != nil {
		t.Fatal(err)
	}

	tools, err := LoadWorkspace(ctx, st, ws, Limits{})
	if err == nil || !strings.Contains(err.Error(), `tool "broken"`) || !strings.Contains(err.Error(), "broken.js:1:") {
		t.Errorf("error %v, want the broken tool named with where its code is wrong", err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name())
		if tool.Name() == "two" && !tool.Spec().Disabled {
			t.Error("tool two is stored disabled but loaded enabled")
		}
	}
	if strings.Join(names, ",") != "one,two" {
		t.Errorf("loaded %v, want one and two", names)
	}
}

func TestSaveRejects(t *testing.T) {
	st := openStore(t)
	_, _, err := Save(context.Background(), st, ws, "", Definition{Name: "bad", Description: "Bad.", Code: "export default ("})
	if err == nil || !strings.Contains(err.Error(), "bad.js:1:") {
		t.Errorf("error %v, want where the code is wrong", err)
	}
	fns, err := st.Functions(context.Background(), ws)
	if err != nil || len(fns) != 0 {
		t.Errorf("functions after a refused save: %v, %v", fns, err)
	}
}
