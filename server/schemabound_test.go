package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/schema"
)

// refLattice is a tool's input schema of depth definitions, each naming the next fan times
// through keyword (properties, anyOf, allOf, ...), under the argument "a": a few kilobytes
// that stand for fan^depth paths (security issue 45, break 1: 16 levels of 4 properties kept a
// core busy for hours).
func refLattice(depth, fan int, keyword string) json.RawMessage {
	defs := map[string]any{fmt.Sprintf("d%d", depth): map[string]any{"type": "object"}}
	for i := range depth {
		refs := make([]any, fan)
		props := map[string]any{}
		for j := range refs {
			refs[j] = map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)}
			props[fmt.Sprintf("p%d", j)] = refs[j]
		}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{keyword: refs}
		if keyword == "properties" {
			defs[fmt.Sprintf("d%d", i)] = map[string]any{"type": "object", "properties": props}
		}
	}
	doc, _ := json.Marshal(map[string]any{"type": "object", "description": "A lattice of references.",
		"properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/d0"}}, "$defs": defs})
	return doc
}

// openAPILattice is an OpenAPI document with an operation whose request body is a lattice of
// components, and an ordinary one.
func openAPILattice(depth, fan int) string {
	components := map[string]any{fmt.Sprintf("C%d", depth): map[string]any{"type": "object"}}
	for i := range depth {
		refs := make([]any, fan)
		for j := range refs {
			refs[j] = map[string]any{"$ref": fmt.Sprintf("#/components/schemas/C%d", i+1)}
		}
		components[fmt.Sprintf("C%d", i)] = map[string]any{"anyOf": refs}
	}
	ok := map[string]any{"200": map[string]any{"description": "ok"}}
	doc, _ := json.Marshal(map[string]any{
		"openapi": "3.0.3", "info": map[string]any{"title": "lattice", "version": "1"},
		"servers": []any{map[string]any{"url": "http://127.0.0.1:9/api"}},
		"paths": map[string]any{
			"/fine": map[string]any{"get": map[string]any{"operationId": "fine", "responses": ok}},
			"/hostile": map[string]any{"post": map[string]any{"operationId": "hostile", "responses": ok,
				"requestBody": map[string]any{"content": map[string]any{"application/json": map[string]any{
					"schema": map[string]any{"$ref": "#/components/schemas/C0"}}}}}},
		},
		"components": map[string]any{"schemas": components},
	})
	return string(doc)
}

// A schema whose $refs stand for more work than the bounds allow is refused with a 400 that
// names the field and the bound, at every door a workspace's member or admin sends schemas
// through, and nothing is stored: the graph of its $refs is read once, its paths never
// followed (before the bounds, the first of these requests took hours of CPU).
func TestHostileSchemasRefused(t *testing.T) {
	visits := fmt.Sprintf("more than %d schema nodes to visit", schema.MaxSchemaVisits)
	steps := fmt.Sprintf("more than %d steps", schema.MaxValidationSteps)
	entEach(t, func(t *testing.T, w *entWorld) {
		f, _ := w.function(t, "lattice_fn", v1Code)
		tool := func(extra map[string]any) map[string]any {
			body := map[string]any{"name": "lattice", "target": "server", "function_id": f.ID, "input_schema": json.RawMessage(inDoc)}
			for k, v := range extra {
				body[k] = v
			}
			return body
		}
		version := "/v1/functions/" + f.ID + "/versions"
		cases := []struct {
			name, who, method, path string
			body                    any
			loc, want               string
		}{
			{"a tool's input schema, 16 levels of properties", "member", "POST", "/v1/tools",
				tool(map[string]any{"input_schema": refLattice(16, 4, "properties")}), "body.input_schema", visits},
			{"a tool's input schema, 16 levels of anyOf", "member", "POST", "/v1/tools",
				tool(map[string]any{"input_schema": refLattice(16, 4, "anyOf")}), "body.input_schema", visits},
			{"a tool's input schema, 10 levels of allOf", "member", "POST", "/v1/tools",
				tool(map[string]any{"input_schema": refLattice(10, 4, "allOf")}), "body.input_schema", visits},
			{"a tool's output schema", "member", "POST", "/v1/tools",
				tool(map[string]any{"output_schema": refLattice(16, 4, "oneOf")}), "body.output_schema", visits},
			{"a tool's example, against a schema that compiles", "member", "POST", "/v1/tools",
				tool(map[string]any{"input_schema": refLattice(9, 4, "allOf"), "examples": []any{map[string]any{"args": map[string]any{"a": map[string]any{}}}}}),
				"body.examples", steps},
			{"a tool changed", "member", "PATCH", "", map[string]any{"input_schema": refLattice(16, 4, "anyOf")}, "body.input_schema", visits},
			{"a function version's input schema", "member", "POST", version,
				map[string]any{"code": v1Code, "input_schema": refLattice(16, 4, "properties")}, "body.input_schema", visits},
			{"a function version's output schema", "member", "POST", version,
				map[string]any{"code": v1Code, "output_schema": refLattice(12, 4, "allOf")}, "body.output_schema", visits},
		}
		existing := w.tool(t, "member", "existing", f.ID, nil)
		stored := w.st.schemas.Load()
		for _, c := range cases {
			path := c.path
			if c.method == "PATCH" {
				path = "/v1/tools/" + existing.ID
			}
			p := wantProblem(t, c.name, w.do(t, c.who, c.method, path, c.body), 400, "invalid_request", c.loc)
			if !strings.Contains(string(mustJSON(t, p)), c.want) {
				t.Errorf("%s: %+v does not say %q", c.name, p, c.want)
			}
		}
		if n := w.st.schemas.Load() - stored; n != 0 {
			t.Errorf("refused requests stored %d schemas", n)
		}

		// An admin's OpenAPI document: the operation is left out, saying why; the others come in.
		var im struct {
			Tools   []string `json:"tools"`
			Skipped []struct {
				Operation string `json:"operation"`
				Reason    string `json:"reason"`
			} `json:"skipped"`
		}
		w.ok(t, "admin", "POST", "/v1/openapi-sources", map[string]any{"name": "lattice", "document": openAPILattice(16, 4)}, 201, &im)
		if !slices.Equal(im.Tools, []string{"lattice.fine"}) || len(im.Skipped) != 1 || im.Skipped[0].Operation != "POST /hostile" ||
			!strings.Contains(im.Skipped[0].Reason, visits) {
			t.Errorf("import: %+v", im)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
