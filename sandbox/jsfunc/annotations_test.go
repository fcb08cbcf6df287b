package jsfunc_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// A stored tool's annotations are kept in its input schema document (beside its variables, as
// its meta-fields are: no column, no migration) and loaded with it, on both backends.
func TestAnnotationsStored(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ctx := context.Background()
		ent, ok := st.(store.Entities)
		if !ok {
			t.Fatalf("%T stores no tools: every backend must", st)
		}
		const ws = "wsp_ann"
		if err := ent.CreateWorkspace(ctx, &store.Workspace{ID: ws, Name: "annotations"}); err != nil {
			t.Fatal(err)
		}
		enc := func(a quiver.Annotations) string { b, _ := json.Marshal(a); return string(b) }
		load := func(saved *store.Tool) quiver.Spec {
			t.Helper()
			tool, err := jsfunc.Load(ctx, ent, ws, saved, jsfunc.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			return tool.Spec()
		}
		def := jsfunc.Definition{Name: "lookup", Description: "Looks up.", Code: `export default () => "found"`,
			InputSchema: mustSchemaT(t, `{"type":"object","properties":{"q":{"type":"string"}}}`),
			Variables:   []quiver.Variable{{Name: "REGION", Type: quiver.VarText}},
			MetaFields:  []string{"_outputPath"},
			Annotations: quiver.Annotations{Title: "Lookup", ReadOnlyHint: quiver.Hint(true), OpenWorldHint: quiver.Hint(false)}}
		saved, _, err := jsfunc.Save(ctx, ent, ws, "", def)
		if err != nil {
			t.Fatal(err)
		}
		spec := load(saved)
		if got, want := enc(spec.Annotations), `{"title":"Lookup","readOnlyHint":true,"openWorldHint":false}`; got != want {
			t.Errorf("loaded annotations %s, want %s", got, want)
		}
		if len(spec.Variables) != 1 || len(spec.MetaFields) != 1 {
			t.Errorf("the variables (%v) or meta-fields (%v) were lost beside the annotations", spec.Variables, spec.MetaFields)
		}
		if b, _ := json.Marshal(spec.InputSchema); strings.Contains(string(b), "annotations") {
			t.Errorf("the annotations leaked into the arguments: %s", b)
		}
		// The stored document holds them where ParseSchemaDoc reads them.
		doc, err := ent.Schema(ctx, ws, saved.InputSchemaID)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(doc.Content, &m); err != nil || string(m["annotations"]) == "" {
			t.Fatalf("stored document %s holds no annotations (%v)", doc.Content, err)
		}

		// Saved again with other annotations: the tool follows; with none, it has none.
		def.Annotations = quiver.Annotations{DestructiveHint: quiver.Hint(false), IdempotentHint: quiver.Hint(true)}
		if saved, _, err = jsfunc.Save(ctx, ent, ws, "", def); err != nil {
			t.Fatal(err)
		}
		if got, want := enc(load(saved).Annotations), `{"destructiveHint":false,"idempotentHint":true}`; got != want {
			t.Errorf("after the second save: %s, want %s", got, want)
		}
		def.Annotations = quiver.Annotations{}
		if saved, _, err = jsfunc.Save(ctx, ent, ws, "", def); err != nil {
			t.Fatal(err)
		}
		if a := load(saved).Annotations; !a.IsZero() {
			t.Errorf("saved without annotations, loaded %+v", a)
		}

		// A document stored with annotations of the wrong type does not load as "none".
		bad := &store.Schema{WorkspaceID: ws, Content: json.RawMessage(`{"type":"object","annotations":{"readOnlyHint":"yes"}}`)}
		if err := ent.CreateSchema(ctx, bad); err != nil {
			t.Fatal(err)
		}
		broken, err := ent.UpdateTool(ctx, ws, saved.ID, "", func(tl *store.Tool) error { tl.InputSchemaID = bad.ID; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jsfunc.Load(ctx, ent, ws, broken, jsfunc.Limits{}); err == nil || !strings.Contains(err.Error(), "readOnlyHint must be true or false") {
			t.Errorf("loading annotations of the wrong type: %v", err)
		}
	})
}

func mustSchemaT(t *testing.T, doc string) *schema.Schema {
	t.Helper()
	var s schema.Schema
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}
