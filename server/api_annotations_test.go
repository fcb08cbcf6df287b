package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
)

// The API lists a tool's annotations, as it declares them: a Go tool's, and a stored tool's
// (declared in its input schema document, on both backends); annotations of the wrong type
// are refused, naming the field.
func TestAPIListsAnnotations(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ctx := context.Background()
		be, ok := st.(store.Backend)
		if !ok {
			t.Fatalf("%T keeps no entities or keys", st)
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		ws, user := &store.Workspace{Name: "acme"}, &store.User{Email: "ada@acme.test"}
		must(be.CreateWorkspace(ctx, ws))
		must(be.CreateUser(ctx, user))
		must(be.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: user.ID, Role: store.MemberRoleAdmin}))
		key, err := platform.IssueAPIKey(ctx, be, &store.APIKey{WorkspaceID: ws.ID, UserID: user.ID, Name: "admin", Role: store.KeyRoleAdmin})
		must(err)
		noop := func(context.Context, struct{}) (string, error) { return "ok", nil }
		reg := &quiver.Registry{}
		must(reg.Register(
			quiver.Func("search", "Searches the web.", noop, quiver.WithAnnotations(quiver.Annotations{
				Title: "Web search", ReadOnlyHint: quiver.Hint(true), DestructiveHint: quiver.Hint(false)})),
			quiver.Func("plain", "Declares nothing.", noop, quiver.WithConfirmation()),
		))
		p, err := platform.New(platform.Config{Store: be, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
		must(err)
		srv, err := server.New(ctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: be}, WorkspaceID: ws.ID, Logger: slog.New(slog.DiscardHandler)})
		must(err)
		ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
		t.Cleanup(func() { ts.Close(); srv.Close() })
		call := func(method, path string, body any, want int, out any) []byte {
			t.Helper()
			res, data := sendAPI(t, http.DefaultClient, method, ts.URL+path, key, body)
			if res.StatusCode != want {
				t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, data, want)
			}
			if out != nil {
				must(json.Unmarshal(data, out))
			}
			return data
		}

		// A stored tool declares them in its input schema document.
		var f store.Function
		call("POST", "/v1/functions", map[string]any{"name": "lookup"}, 201, &f)
		call("POST", "/v1/functions/"+f.ID+"/versions", map[string]any{"code": `export default () => "found"`}, 201, nil)
		doc := `{"type": "object", "description": "Looks up.", "properties": {"q": {"type": "string"}},
			"annotations": {"idempotentHint": true, "openWorldHint": false}}`
		call("POST", "/v1/tools", map[string]any{"name": "lookup", "target": "server", "function_id": f.ID, "input_schema": json.RawMessage(doc)}, 201, nil)

		type listed struct {
			Name        string          `json:"name"`
			Annotations json.RawMessage `json:"annotations"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		var list struct{ Tools []listed }
		call("GET", "/v1/tools/served", nil, 200, &list)
		got := map[string]listed{}
		for _, tl := range list.Tools {
			got[tl.Name] = tl
		}
		for name, want := range map[string]string{
			"search": `{"title":"Web search","readOnlyHint":true,"destructiveHint":false}`,
			"lookup": `{"idempotentHint":true,"openWorldHint":false}`,
			"plain":  ``, // nothing declared: absent (requires_confirmation says the rest)
		} {
			tl, ok := got[name]
			if !ok {
				t.Fatalf("%s is not listed: %+v", name, list.Tools)
			}
			if string(tl.Annotations) != want {
				t.Errorf("GET /v1/tools/served: %s's annotations = %s, want %s", name, tl.Annotations, want)
			}
		}
		if strings.Contains(string(got["lookup"].InputSchema), "annotations") {
			t.Errorf("the annotations leaked into lookup's input schema: %s", got["lookup"].InputSchema)
		}
		var one struct {
			Annotations json.RawMessage `json:"annotations"`
		}
		call("GET", "/v1/tools/served/lookup", nil, 200, &one)
		if string(one.Annotations) != `{"idempotentHint":true,"openWorldHint":false}` {
			t.Errorf("GET /v1/tools/served/lookup: annotations = %s", one.Annotations)
		}

		// The wrong type is refused, naming the input schema and what is wrong.
		bad := `{"type": "object", "description": "d", "annotations": {"readOnlyHint": "true"}}`
		data := call("POST", "/v1/tools", map[string]any{"name": "bad", "target": "server", "function_id": f.ID, "input_schema": json.RawMessage(bad)}, 400, nil)
		if !strings.Contains(string(data), "body.input_schema") || !strings.Contains(string(data), "readOnlyHint must be true or false") {
			t.Errorf("annotations of the wrong type: %s", data)
		}
	})
}
