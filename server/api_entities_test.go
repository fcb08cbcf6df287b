package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
)

// entStore is what the entity endpoints need of a store; both backends provide it.
type entStore = store.Backend

// schemaCounter counts the schemas stored, to show that a refused request stores none.
type schemaCounter struct {
	entStore
	schemas atomic.Int64
}

func (c *schemaCounter) CreateSchema(ctx context.Context, s *store.Schema) error {
	err := c.entStore.CreateSchema(ctx, s)
	if err == nil {
		c.schemas.Add(1)
	}
	return err
}

// entWorld is a server on a real store, served over HTTP on 127.0.0.1, with two workspaces:
// A, where an admin's, a member's and a viewer's keys act, and B, with an admin key of its own
// ("b"), whose records A's keys must never reach.
type entWorld struct {
	st                    *schemaCounter
	url                   string
	a, b                  *store.Workspace
	admin, member, bAdmin *store.User
	key                   map[string]string
	keyRec                map[string]*store.APIKey
	// offset moves the authenticator's clock ahead of the real one (past its cache).
	offset atomic.Int64
}

// entEach runs fn against a fresh world on each backend: SQLite, and PostgreSQL when
// QUIVER_TEST_POSTGRES names a server.
func entEach(t *testing.T, fn func(t *testing.T, w *entWorld)) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		es, ok := st.(entStore)
		if !ok {
			t.Fatalf("%T keeps no entities or keys", st)
		}
		fn(t, newEntWorld(t, &schemaCounter{entStore: es}))
	})
}

func newEntWorld(t *testing.T, st *schemaCounter) *entWorld {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	w := &entWorld{st: st, key: map[string]string{}, keyRec: map[string]*store.APIKey{},
		a: &store.Workspace{Name: "acme"}, b: &store.Workspace{Name: "globex"},
		admin: &store.User{Email: "ada@acme.test", Name: "Ada"}, member: &store.User{Email: "bob@acme.test", Name: "Bob"},
		bAdmin: &store.User{Email: "gil@globex.test", Name: "Gil"}}
	must(st.CreateWorkspace(ctx, w.a))
	must(st.CreateWorkspace(ctx, w.b))
	for _, u := range []*store.User{w.admin, w.member, w.bAdmin} {
		must(st.CreateUser(ctx, u))
	}
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: w.a.ID, UserID: w.admin.ID, Role: store.MemberRoleAdmin}))
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: w.a.ID, UserID: w.member.ID, Role: store.MemberRoleMember}))
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: w.b.ID, UserID: w.bAdmin.ID, Role: store.MemberRoleAdmin}))
	for _, k := range []struct {
		who, ws, user string
		role          store.KeyRole
	}{
		{"admin", w.a.ID, w.admin.ID, store.KeyRoleAdmin},
		{"member", w.a.ID, w.member.ID, store.KeyRoleMember},
		{"viewer", w.a.ID, w.member.ID, store.KeyRoleViewer},
		{"b", w.b.ID, w.bAdmin.ID, store.KeyRoleAdmin},
	} {
		rec := &store.APIKey{WorkspaceID: k.ws, UserID: k.user, Name: k.who, Role: k.role}
		secret, err := platform.IssueAPIKey(ctx, st, rec)
		must(err)
		w.key[k.who], w.keyRec[k.who] = secret, rec
	}
	reg := &quiver.Registry{}
	must(reg.Register(quiver.Func("echo", "Echoes its text.", func(_ context.Context, a struct {
		Text string `json:"text"`
	}) (string, error) {
		return a.Text, nil
	}, quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{"text":"hi"}`), Result: json.RawMessage(`"hi"`)}))))
	auth := &server.Authenticator{Keys: st, Now: func() time.Time { return time.Now().Add(time.Duration(w.offset.Load())) }}
	// An agent whose tools are a glob of the stored ones, less one it denies.
	picker := &agent.Agent{Name: "picker", Prompt: &agent.Prompt{Name: "picker", Tools: []string{"pick_*"}, Deny: []string{"pick_b"}}}
	// The services OpenAPI sources call in these tests listen on 127.0.0.1, which the
	// operator allows; any other internal address (localhost by name included) is refused.
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler),
		Catalog: &agent.Catalog{Agents: map[string]*agent.Agent{"picker": picker}}, OpenAPIInternal: []string{"127.0.0.1"}})
	must(err)
	// A is the server's own workspace: its admins are the operator's, who make workspaces.
	srv, err := server.New(ctx, server.Config{Platform: p, Auth: auth, WorkspaceID: w.a.ID, Logger: slog.New(slog.DiscardHandler)})
	must(err)
	ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close() })
	w.url = ts.URL
	return w
}

// tick moves the authenticator's clock past its cache, so that a change to keys or members
// is seen.
func (w *entWorld) tick() { w.offset.Add(int64(1100 * time.Millisecond)) }

type entResp struct {
	status int
	ctype  string
	body   []byte
}

// do sends a request with the key of who ("" for none); body is sent as is when a string,
// else as JSON.
func (w *entWorld) do(t *testing.T, who, method, path string, body any) entResp {
	t.Helper()
	secret, ok := w.key[who]
	if !ok {
		secret = who // a key itself, or "" for none
	}
	res, data := sendAPI(t, http.DefaultClient, method, w.url+path, secret, body)
	return entResp{status: res.StatusCode, ctype: res.Header.Get("Content-Type"), body: data}
}

// ok sends a request that must answer want, and decodes the answer into out (when not nil).
func (w *entWorld) ok(t *testing.T, who, method, path string, body any, want int, out any) {
	t.Helper()
	r := w.do(t, who, method, path, body)
	if r.status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, r.body)
		}
	}
}

type entProblem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Errors []struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	} `json:"errors"`
}

// wantProblem checks that r is a problem of status and code naming the field at loc (when
// loc is not empty).
func wantProblem(t *testing.T, what string, r entResp, status int, code, loc string) entProblem {
	t.Helper()
	var p entProblem
	if err := json.Unmarshal(r.body, &p); err != nil || r.ctype != "application/problem+json" {
		t.Errorf("%s: a %d answer that is not a problem (%s): %s", what, r.status, r.ctype, r.body)
		return p
	}
	if r.status != status || p.Status != status || p.Code != code {
		t.Errorf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
	}
	if loc != "" && !slices.ContainsFunc(p.Errors, func(e struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	}) bool {
		return e.Location == loc && e.Message != ""
	}) {
		t.Errorf("%s: %s names no field %s", what, r.body, loc)
	}
	return p
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

const (
	v1Code = "export default function (args) { return {v: 1} }"
	v2Code = "export default function (args) { return {v: 2} }"
	inDoc  = `{"type": "object", "description": "Says which version runs.", "properties": {"x": {"type": "integer"}}}`
)

// function creates a function with versions of the codes given, through the API.
func (w *entWorld) function(t *testing.T, name string, codes ...string) (*store.Function, []*store.FunctionVersion) {
	t.Helper()
	var f store.Function
	w.ok(t, "member", "POST", "/v1/functions", map[string]any{"name": name}, 201, &f)
	var vs []*store.FunctionVersion
	for _, code := range codes {
		var v store.FunctionVersion
		w.ok(t, "member", "POST", "/v1/functions/"+f.ID+"/versions", map[string]any{"code": code}, 201, &v)
		vs = append(vs, &v)
	}
	w.ok(t, "viewer", "GET", "/v1/functions/"+f.ID, nil, 200, &f) // with its default version
	return &f, vs
}

// tool creates a server tool running fn through the API.
func (w *entWorld) tool(t *testing.T, who, name, fn string, extra map[string]any) *store.Tool {
	t.Helper()
	body := map[string]any{"name": name, "target": "server", "function_id": fn, "input_schema": json.RawMessage(inDoc)}
	for k, v := range extra {
		body[k] = v
	}
	var tl store.Tool
	w.ok(t, who, "POST", "/v1/tools", body, 201, &tl)
	return &tl
}

// bTool makes a function, a version and a tool in workspace B, directly in the store.
func (w *entWorld) bTool(t *testing.T) (*store.Function, *store.FunctionVersion, *store.Tool) {
	t.Helper()
	ctx := context.Background()
	f := &store.Function{WorkspaceID: w.b.ID, Name: "b_fn"}
	if err := w.st.CreateFunction(ctx, f); err != nil {
		t.Fatal(err)
	}
	v := &store.FunctionVersion{WorkspaceID: w.b.ID, FunctionID: f.ID, Code: v1Code}
	if err := w.st.CreateFunctionVersion(ctx, v); err != nil {
		t.Fatal(err)
	}
	in, out := &store.Schema{WorkspaceID: w.b.ID, Content: json.RawMessage(inDoc)}, &store.Schema{WorkspaceID: w.b.ID, Content: json.RawMessage("true")}
	if err := w.st.CreateSchema(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := w.st.CreateSchema(ctx, out); err != nil {
		t.Fatal(err)
	}
	tl := &store.Tool{WorkspaceID: w.b.ID, Name: "b_tool", Target: store.TargetServer, FunctionID: f.ID,
		InputSchemaID: in.ID, OutputSchemaID: out.ID, Enabled: true, CreatedBy: w.bAdmin.ID}
	if err := w.st.CreateTool(ctx, tl); err != nil {
		t.Fatal(err)
	}
	return f, v, tl
}

// systemTool makes a system tool (no workspace), directly in the store.
func (w *entWorld) systemTool(t *testing.T, name string) *store.Tool {
	t.Helper()
	ctx := context.Background()
	in, out := &store.Schema{Content: json.RawMessage(inDoc)}, &store.Schema{Content: json.RawMessage("true")}
	if err := w.st.CreateSchema(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := w.st.CreateSchema(ctx, out); err != nil {
		t.Fatal(err)
	}
	tl := &store.Tool{Name: name, Description: "A built-in tool.", Target: store.TargetClient, InputSchemaID: in.ID, OutputSchemaID: out.ID,
		Enabled: true, System: true}
	if err := w.st.CreateTool(ctx, tl); err != nil {
		t.Fatal(err)
	}
	return tl
}

// callTool calls a tool through the API and returns its result's value.
func (w *entWorld) callTool(t *testing.T, name string) string {
	t.Helper()
	var out struct {
		Result quiver.Result `json:"result"`
	}
	w.ok(t, "member", "POST", "/v1/tools/"+name+"/call", map[string]any{"args": map[string]any{}}, 200, &out)
	if out.Result.IsError() {
		t.Fatalf("calling %s: %s", name, out.Result.Error)
	}
	return string(out.Result.Value)
}

func TestEntityAPIWorkspaces(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		ctx := context.Background()
		var got store.Workspace
		w.ok(t, "viewer", "GET", "/v1/workspaces/"+w.a.ID, nil, 200, &got)
		if got.ID != w.a.ID || got.Name != "acme" || got.RetentionTier != store.RetentionMedium {
			t.Errorf("GET the key's workspace: %+v", got)
		}

		w.ok(t, "admin", "PATCH", "/v1/workspaces/"+w.a.ID, map[string]any{"name": "Acme Inc", "retention_tier": "long",
			"default_runtime_user_id": w.member.ID}, 200, &got)
		stored, err := w.st.Workspace(ctx, w.a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Name != "Acme Inc" || stored.RetentionTier != store.RetentionLong || stored.DefaultRuntimeUserID != w.member.ID || got.Name != "Acme Inc" {
			t.Errorf("after PATCH: stored %+v, answered %+v", stored, got)
		}
		// null clears the runtime user; the fields not given stay.
		w.ok(t, "admin", "PATCH", "/v1/workspaces/"+w.a.ID, `{"default_runtime_user_id": null}`, 200, &got)
		if stored, _ = w.st.Workspace(ctx, w.a.ID); stored.DefaultRuntimeUserID != "" || stored.Name != "Acme Inc" {
			t.Errorf("after clearing the runtime user: %+v", stored)
		}

		for _, tt := range []struct {
			name, who, method, path string
			body                    any
			status                  int
			code, loc               string
		}{
			{"another workspace's", "viewer", "GET", "/v1/workspaces/" + w.b.ID, nil, 404, "not_found", ""},
			{"a workspace that does not exist", "viewer", "GET", "/v1/workspaces/wsp_nothere", nil, 404, "not_found", ""},
			{"an id of another kind", "viewer", "GET", "/v1/workspaces/" + w.admin.ID, nil, 400, "invalid_request", "path.id"},
			{"a change by a member", "member", "PATCH", "/v1/workspaces/" + w.a.ID, map[string]any{"name": "x"}, 403, "forbidden", ""},
			{"a change by a viewer", "viewer", "PATCH", "/v1/workspaces/" + w.a.ID, map[string]any{"name": "x"}, 403, "forbidden", ""},
			{"a change to another workspace", "admin", "PATCH", "/v1/workspaces/" + w.b.ID, map[string]any{"name": "x"}, 404, "not_found", ""},
			{"an empty name", "admin", "PATCH", "/v1/workspaces/" + w.a.ID, map[string]any{"name": ""}, 422, "invalid_request", "body.name"},
			{"a name of control characters", "admin", "PATCH", "/v1/workspaces/" + w.a.ID, map[string]any{"name": "a\x01b"}, 400, "invalid_request", "body.name"},
			{"an unknown tier", "admin", "PATCH", "/v1/workspaces/" + w.a.ID, map[string]any{"retention_tier": "forever"}, 422, "invalid_request", "body.retention_tier"},
			{"a runtime user of another workspace", "admin", "PATCH", "/v1/workspaces/" + w.a.ID, map[string]any{"default_runtime_user_id": w.bAdmin.ID}, 400, "invalid_request", "body.default_runtime_user_id"},
			{"a runtime user id of another kind", "admin", "PATCH", "/v1/workspaces/" + w.a.ID, map[string]any{"default_runtime_user_id": w.a.ID}, 400, "invalid_request", "body.default_runtime_user_id"},
			{"an unknown field", "admin", "PATCH", "/v1/workspaces/" + w.a.ID, map[string]any{"owner": "me"}, 422, "invalid_request", "body.owner"},
			{"a workspace made by a member", "member", "POST", "/v1/workspaces", map[string]any{"name": "x"}, 403, "forbidden", ""},
			{"a workspace made by a viewer", "viewer", "POST", "/v1/workspaces", map[string]any{"name": "x"}, 403, "forbidden", ""},
			// A tenant's admin who could make workspaces could multiply every per-workspace cap.
			{"a workspace made by another workspace's admin", "b", "POST", "/v1/workspaces", map[string]any{"name": "x"}, 403, "forbidden", ""},
			{"a workspace without a name", "admin", "POST", "/v1/workspaces", map[string]any{}, 422, "invalid_request", "body.name"},
			{"a workspace with a 129-byte name", "admin", "POST", "/v1/workspaces", map[string]any{"name": strings.Repeat("é", 65)}, 400, "invalid_request", "body.name"},
			{"no key", "", "GET", "/v1/workspaces/" + w.a.ID, nil, 401, "unauthorized", ""},
		} {
			wantProblem(t, tt.name, w.do(t, tt.who, tt.method, tt.path, tt.body), tt.status, tt.code, tt.loc)
		}
		if stored, _ = w.st.Workspace(ctx, w.a.ID); stored.Name != "Acme Inc" || stored.RetentionTier != store.RetentionLong {
			t.Errorf("refused changes changed the workspace: %+v", stored)
		}
		if b, _ := w.st.Workspace(ctx, w.b.ID); b.Name != "globex" {
			t.Errorf("workspace B was changed: %+v", b)
		}

		// A new workspace: its creator administers it, and its first key works there and only there.
		var made struct {
			Workspace store.Workspace `json:"workspace"`
			Key       store.APIKey    `json:"key"`
			Secret    string          `json:"secret"`
		}
		w.ok(t, "admin", "POST", "/v1/workspaces", map[string]any{"name": "Acme Labs", "retention_tier": "short"}, 201, &made)
		if made.Workspace.Name != "Acme Labs" || made.Workspace.RetentionTier != store.RetentionShort || !strings.HasPrefix(made.Workspace.ID, "wsp_") {
			t.Errorf("new workspace: %+v", made.Workspace)
		}
		if m, err := w.st.Member(ctx, made.Workspace.ID, w.admin.ID); err != nil || m.Role != store.MemberRoleAdmin {
			t.Errorf("the creator's membership of the new workspace: %+v, %v", m, err)
		}
		if made.Key.Role != store.KeyRoleAdmin || made.Key.WorkspaceID != made.Workspace.ID || made.Key.UserID != w.admin.ID || !strings.HasPrefix(made.Secret, "qvk_") {
			t.Errorf("the new workspace's key: %+v", made.Key)
		}
		w.ok(t, made.Secret, "GET", "/v1/workspaces/"+made.Workspace.ID, nil, 200, nil)
		wantProblem(t, "the new key on the old workspace", w.do(t, made.Secret, "GET", "/v1/workspaces/"+w.a.ID, nil), 404, "not_found", "")
		wantProblem(t, "the old key on the new workspace", w.do(t, "admin", "GET", "/v1/workspaces/"+made.Workspace.ID, nil), 404, "not_found", "")
	})
}

func TestEntityAPIMembers(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		ctx := context.Background()
		type member struct {
			UserID string `json:"user_id"`
			Email  string `json:"email"`
			Name   string `json:"name"`
			Role   string `json:"role"`
		}
		var list struct{ Members []member }
		w.ok(t, "viewer", "GET", "/v1/members", nil, 200, &list)
		if len(list.Members) != 2 || list.Members[0] != (member{w.admin.ID, "ada@acme.test", "Ada", "admin"}) ||
			list.Members[1] != (member{w.member.ID, "bob@acme.test", "Bob", "member"}) {
			t.Errorf("members of A: %+v", list.Members)
		}

		// A new email makes a user; a known one (B's admin) adds that user.
		var cy, gil member
		w.ok(t, "admin", "POST", "/v1/members", map[string]any{"email": " Cy@Acme.test ", "name": "Cy"}, 201, &cy)
		if cy.Role != "member" || cy.Name != "Cy" || !strings.HasPrefix(cy.UserID, "usr_") {
			t.Errorf("new member: %+v", cy)
		}
		if u, err := w.st.UserByEmail(ctx, "cy@acme.test"); err != nil || u.ID != cy.UserID {
			t.Errorf("the new user: %+v, %v", u, err)
		}
		w.ok(t, "admin", "POST", "/v1/members", map[string]any{"email": "gil@globex.test", "name": "ignored", "role": "admin"}, 201, &gil)
		if gil.UserID != w.bAdmin.ID || gil.Role != "admin" || gil.Name != "Gil" {
			t.Errorf("a known user added: %+v, want user %s, admin, named Gil", gil, w.bAdmin.ID)
		}

		// Roles change; the last admin stays one.
		w.ok(t, "admin", "PATCH", "/v1/members/"+gil.UserID, map[string]any{"role": "member"}, 200, &gil)
		if m, _ := w.st.Member(ctx, w.a.ID, w.bAdmin.ID); m.Role != store.MemberRoleMember || gil.Role != "member" {
			t.Errorf("after the demotion: %+v", m)
		}
		if m, _ := w.st.Member(ctx, w.b.ID, w.bAdmin.ID); m.Role != store.MemberRoleAdmin {
			t.Errorf("the user's role in B changed too: %+v", m)
		}
		wantProblem(t, "demoting B's last admin", w.do(t, "b", "PATCH", "/v1/members/"+w.bAdmin.ID, map[string]any{"role": "member"}), 400, "invalid_request", "")
		wantProblem(t, "removing B's last admin", w.do(t, "b", "DELETE", "/v1/members/"+w.bAdmin.ID, nil), 400, "invalid_request", "")

		// A member tools run as is removed all the same (the tools then refuse to run as them:
		// TestToolsRunAsTheirRuntimeUser); the workspace keeps naming them until an admin changes it.
		w.ok(t, "admin", "PATCH", "/v1/workspaces/"+w.a.ID, map[string]any{"default_runtime_user_id": cy.UserID}, 200, nil)
		w.ok(t, "admin", "DELETE", "/v1/members/"+cy.UserID, nil, 204, nil)
		if _, err := w.st.Member(ctx, w.a.ID, cy.UserID); err == nil {
			t.Error("the removed member is still one")
		}
		if ws, err := w.st.Workspace(ctx, w.a.ID); err != nil || ws.DefaultRuntimeUserID != cy.UserID {
			t.Errorf("the workspace after its default runtime user's removal: %+v, %v", ws, err)
		}
		w.ok(t, "admin", "PATCH", "/v1/workspaces/"+w.a.ID, map[string]any{"default_runtime_user_id": ""}, 200, nil)

		for _, tt := range []struct {
			name, who, method, path string
			body                    any
			status                  int
			code, loc               string
		}{
			{"an add by a member", "member", "POST", "/v1/members", map[string]any{"email": "dan@acme.test"}, 403, "forbidden", ""},
			{"an add by a viewer", "viewer", "POST", "/v1/members", map[string]any{"email": "dan@acme.test"}, 403, "forbidden", ""},
			{"a member twice", "admin", "POST", "/v1/members", map[string]any{"email": "BOB@acme.test"}, 409, "conflict", "body.email"},
			{"not an email", "admin", "POST", "/v1/members", map[string]any{"email": "bob at acme"}, 400, "invalid_request", "body.email"},
			{"an over-long email", "admin", "POST", "/v1/members", map[string]any{"email": strings.Repeat("a", 250) + "@x.io"}, 422, "invalid_request", "body.email"},
			{"an unknown role", "admin", "POST", "/v1/members", map[string]any{"email": "dan@acme.test", "role": "owner"}, 422, "invalid_request", "body.role"},
			{"a viewer role (keys only)", "admin", "POST", "/v1/members", map[string]any{"email": "dan@acme.test", "role": "viewer"}, 422, "invalid_request", "body.role"},
			{"a role change by a member", "member", "PATCH", "/v1/members/" + w.member.ID, map[string]any{"role": "admin"}, 403, "forbidden", ""},
			{"a role change by a viewer", "viewer", "PATCH", "/v1/members/" + w.member.ID, map[string]any{"role": "admin"}, 403, "forbidden", ""},
			{"a role change of a non-member", "admin", "PATCH", "/v1/members/usr_nobody", map[string]any{"role": "admin"}, 404, "not_found", ""},
			{"a role change with another kind of id", "admin", "PATCH", "/v1/members/" + w.a.ID, map[string]any{"role": "admin"}, 400, "invalid_request", "path.user_id"},
			{"a role change without a role", "admin", "PATCH", "/v1/members/" + w.member.ID, map[string]any{}, 422, "invalid_request", "body.role"},
			{"B's admin through A", "admin", "PATCH", "/v1/members/" + w.bAdmin.ID, map[string]any{"role": "admin"}, 200, "", ""},
			{"a removal by a member", "member", "DELETE", "/v1/members/" + w.admin.ID, nil, 403, "forbidden", ""},
			{"a removal by a viewer", "viewer", "DELETE", "/v1/members/" + w.admin.ID, nil, 403, "forbidden", ""},
			{"a removal of a non-member", "admin", "DELETE", "/v1/members/usr_nobody", nil, 404, "not_found", ""},
			{"a removal with another kind of id", "admin", "DELETE", "/v1/members/key_x", nil, 400, "invalid_request", "path.user_id"},
		} {
			r := w.do(t, tt.who, tt.method, tt.path, tt.body)
			if tt.code == "" {
				if r.status != tt.status {
					t.Errorf("%s: %d %s, want %d", tt.name, r.status, r.body, tt.status)
				}
				continue
			}
			wantProblem(t, tt.name, r, tt.status, tt.code, tt.loc)
		}
		// B's members are B's: A's admin changed the user's role in A only.
		if m, _ := w.st.Member(ctx, w.b.ID, w.bAdmin.ID); m.Role != store.MemberRoleAdmin {
			t.Errorf("B's admin: %+v", m)
		}
		if _, err := w.st.Member(ctx, w.a.ID, w.member.ID); err != nil {
			t.Errorf("a refused removal removed: %v", err)
		}
		// Another workspace's member is not a member here: removing them from A is 404 once
		// they are out of A.
		w.ok(t, "admin", "DELETE", "/v1/members/"+w.bAdmin.ID, nil, 204, nil)
		wantProblem(t, "B's admin, no longer in A", w.do(t, "admin", "DELETE", "/v1/members/"+w.bAdmin.ID, nil), 404, "not_found", "")
		if _, err := w.st.Member(ctx, w.b.ID, w.bAdmin.ID); err != nil {
			t.Errorf("B's admin left B too: %v", err)
		}
	})
}

func TestEntityAPIKeys(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		ctx := context.Background()
		r := w.do(t, "admin", "GET", "/v1/keys", nil)
		var list struct{ Keys []store.APIKey }
		if err := json.Unmarshal(r.body, &list); r.status != 200 || err != nil {
			t.Fatalf("GET /v1/keys: %d %s", r.status, r.body)
		}
		if len(list.Keys) != 3 {
			t.Errorf("A's keys: %d, want 3 (not B's)", len(list.Keys))
		}
		for who, secret := range w.key {
			if bytes.Contains(r.body, []byte(secret)) || bytes.Contains(r.body, []byte(secret[len(secret)-20:])) {
				t.Errorf("the list holds %s's key itself", who)
			}
		}
		if bytes.Contains(r.body, []byte(`"hash"`)) || bytes.Contains(r.body, []byte(w.keyRec["b"].ID)) {
			t.Errorf("the list holds hashes or B's key: %s", r.body)
		}

		var made struct {
			Key    store.APIKey `json:"key"`
			Secret string       `json:"secret"`
		}
		soon := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		w.ok(t, "admin", "POST", "/v1/keys", map[string]any{"user_id": w.member.ID, "role": "viewer", "name": "dashboards", "expires_at": soon}, 201, &made)
		if made.Key.Role != store.KeyRoleViewer || made.Key.UserID != w.member.ID || made.Key.ExpiresAt == nil || !made.Key.ExpiresAt.Equal(soon) ||
			!strings.HasPrefix(made.Secret, made.Key.Prefix) {
			t.Errorf("new key: %+v", made.Key)
		}
		w.ok(t, made.Secret, "GET", "/v1/members", nil, 200, nil)
		wantProblem(t, "the new viewer key writing", w.do(t, made.Secret, "POST", "/v1/functions", map[string]any{"name": "f"}), 403, "forbidden", "")
		// Without a user, the key is the caller's.
		var mine struct{ Key store.APIKey }
		w.ok(t, "admin", "POST", "/v1/keys", map[string]any{"role": "admin", "name": "ci"}, 201, &mine)
		if mine.Key.UserID != w.admin.ID || mine.Key.Role != store.KeyRoleAdmin {
			t.Errorf("a key for the caller: %+v", mine.Key)
		}

		for _, tt := range []struct {
			name, who, method, path string
			body                    any
			status                  int
			code, loc               string
		}{
			{"the list by a member", "member", "GET", "/v1/keys", nil, 403, "forbidden", ""},
			{"the list by a viewer", "viewer", "GET", "/v1/keys", nil, 403, "forbidden", ""},
			{"a key made by a member", "member", "POST", "/v1/keys", map[string]any{"role": "viewer", "name": "x"}, 403, "forbidden", ""},
			{"a key made by a viewer", "viewer", "POST", "/v1/keys", map[string]any{"role": "viewer", "name": "x"}, 403, "forbidden", ""},
			{"an admin key for a member", "admin", "POST", "/v1/keys", map[string]any{"user_id": w.member.ID, "role": "admin", "name": "x"}, 400, "invalid_request", "body.role"},
			{"a key for another workspace's user", "admin", "POST", "/v1/keys", map[string]any{"user_id": w.bAdmin.ID, "role": "viewer", "name": "x"}, 400, "invalid_request", "body.user_id"},
			{"a key for an id of another kind", "admin", "POST", "/v1/keys", map[string]any{"user_id": w.a.ID, "role": "viewer", "name": "x"}, 400, "invalid_request", "body.user_id"},
			{"a key that expired", "admin", "POST", "/v1/keys", map[string]any{"role": "viewer", "name": "x", "expires_at": time.Now().Add(-time.Minute)}, 400, "invalid_request", "body.expires_at"},
			{"an expiry that is not a time", "admin", "POST", "/v1/keys", map[string]any{"role": "viewer", "name": "x", "expires_at": "tomorrow"}, 422, "invalid_request", "body.expires_at"},
			{"a key without a name", "admin", "POST", "/v1/keys", map[string]any{"role": "viewer"}, 422, "invalid_request", "body.name"},
			{"a key with a 101-character name", "admin", "POST", "/v1/keys", map[string]any{"role": "viewer", "name": strings.Repeat("k", 101)}, 422, "invalid_request", "body.name"},
			{"a key of an unknown role", "admin", "POST", "/v1/keys", map[string]any{"role": "root", "name": "x"}, 422, "invalid_request", "body.role"},
			{"a revocation by a member", "member", "DELETE", "/v1/keys/" + w.keyRec["viewer"].ID, nil, 403, "forbidden", ""},
			{"a revocation by a viewer", "viewer", "DELETE", "/v1/keys/" + w.keyRec["viewer"].ID, nil, 403, "forbidden", ""},
			{"a revocation of B's key", "admin", "DELETE", "/v1/keys/" + w.keyRec["b"].ID, nil, 404, "not_found", ""},
			{"a revocation with another kind of id", "admin", "DELETE", "/v1/keys/" + w.admin.ID, nil, 400, "invalid_request", "path.id"},
		} {
			wantProblem(t, tt.name, w.do(t, tt.who, tt.method, tt.path, tt.body), tt.status, tt.code, tt.loc)
		}
		if keys, _ := w.st.APIKeys(ctx, w.a.ID); len(keys) != 5 {
			t.Errorf("A has %d keys after the refusals, want 5", len(keys))
		}
		// A workspace has at most MaxKeysPerWorkspace working keys; a revoked one frees a place.
		var last struct{ Key store.APIKey }
		for i := 5; i < platform.MaxKeysPerWorkspace; i++ {
			w.ok(t, "admin", "POST", "/v1/keys", map[string]any{"role": "viewer", "name": fmt.Sprintf("k%d", i)}, 201, &last)
		}
		wantProblem(t, "a key past the workspace's bound", w.do(t, "admin", "POST", "/v1/keys", map[string]any{"role": "viewer", "name": "over"}), 409, "conflict", "")
		w.ok(t, "admin", "DELETE", "/v1/keys/"+last.Key.ID, nil, 200, nil)
		w.ok(t, "admin", "POST", "/v1/keys", map[string]any{"role": "viewer", "name": "again"}, 201, nil)
		w.ok(t, "b", "GET", "/v1/workspaces/"+w.b.ID, nil, 200, nil)

		// A revoked key is refused once the authenticator's cache (a second) has passed.
		var revoked store.APIKey
		w.ok(t, "admin", "DELETE", "/v1/keys/"+made.Key.ID, nil, 200, &revoked)
		if revoked.RevokedAt == nil || revoked.ID != made.Key.ID {
			t.Errorf("revoked: %+v", revoked)
		}
		w.tick()
		wantProblem(t, "a revoked key", w.do(t, made.Secret, "GET", "/v1/members", nil), 401, "unauthorized", "")
		w.ok(t, "viewer", "GET", "/v1/members", nil, 200, nil)
	})
}

func TestEntityAPIFunctions(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		ctx := context.Background()
		bFn, bV, _ := w.bTool(t)
		f, vs := w.function(t, "versions", v1Code, v2Code)
		if vs[0].Version != 1 || vs[1].Version != 2 || vs[0].FunctionID != f.ID {
			t.Errorf("versions: %+v %+v", vs[0], vs[1])
		}
		var got store.Function
		w.ok(t, "viewer", "GET", "/v1/functions/"+f.ID, nil, 200, &got)
		if got.DefaultVersionID != vs[0].ID {
			t.Errorf("the first version is not the default: %+v", got)
		}
		var list struct{ Functions []store.Function }
		w.ok(t, "viewer", "GET", "/v1/functions", nil, 200, &list)
		if len(list.Functions) != 1 || list.Functions[0].ID != f.ID {
			t.Errorf("A's functions: %+v", list.Functions)
		}
		var versions struct{ Versions []store.FunctionVersion }
		w.ok(t, "viewer", "GET", "/v1/functions/"+f.ID+"/versions", nil, 200, &versions)
		if len(versions.Versions) != 2 || versions.Versions[1].Code != v2Code {
			t.Errorf("versions listed: %+v", versions.Versions)
		}

		// A version with schemas stores them.
		var v3 store.FunctionVersion
		w.ok(t, "member", "POST", "/v1/functions/"+f.ID+"/versions", map[string]any{"code": v2Code,
			"input_schema":  json.RawMessage(`{"type": "object", "properties": {"q": {"type": "string"}}, "variables": [{"name": "API_KEY"}]}`),
			"output_schema": json.RawMessage(`{"type": "object"}`)}, 201, &v3)
		if sc, err := w.st.Schema(ctx, w.a.ID, v3.InputSchemaID); err != nil || !strings.Contains(string(sc.Content), "API_KEY") {
			t.Errorf("the version's input schema: %+v, %v", sc, err)
		}
		if sc, err := w.st.Schema(ctx, w.a.ID, v3.OutputSchemaID); err != nil || string(sc.Content) != `{"type":"object"}` {
			t.Errorf("the version's output schema: %+v, %v", sc, err)
		}

		w.ok(t, "member", "PUT", "/v1/functions/"+f.ID+"/default-version", map[string]any{"version_id": vs[1].ID}, 200, &got)
		if stored, _ := w.st.Function(ctx, w.a.ID, f.ID); stored.DefaultVersionID != vs[1].ID || got.DefaultVersionID != vs[1].ID {
			t.Errorf("after the default switch: %+v", stored)
		}

		other, _ := w.function(t, "other", v1Code)
		schemas := w.st.schemas.Load()
		for _, tt := range []struct {
			name, who, method, path string
			body                    any
			status                  int
			code, loc               string
		}{
			{"a function made by a viewer", "viewer", "POST", "/v1/functions", map[string]any{"name": "v"}, 403, "forbidden", ""},
			{"a function name taken", "member", "POST", "/v1/functions", map[string]any{"name": "versions"}, 409, "conflict", "body.name"},
			// A function's name is a tool's name: spaces are fine (seed 003 §8.3), hostile input is not.
			{"a function name with a tab", "member", "POST", "/v1/functions", map[string]any{"name": "two\twords"}, 400, "invalid_request", "body.name"},
			{"a 513-character function name", "member", "POST", "/v1/functions", map[string]any{"name": strings.Repeat("f", 513)}, 422, "invalid_request", "body.name"},
			{"a function name that is a number", "member", "POST", "/v1/functions", `{"name": 7}`, 422, "invalid_request", "body.name"},
			{"B's function", "viewer", "GET", "/v1/functions/" + bFn.ID, nil, 404, "not_found", ""},
			{"B's function's versions", "viewer", "GET", "/v1/functions/" + bFn.ID + "/versions", nil, 404, "not_found", ""},
			{"a tool id for a function", "viewer", "GET", "/v1/functions/tol_x", nil, 400, "invalid_request", "path.id"},
			{"a version by a viewer", "viewer", "POST", "/v1/functions/" + f.ID + "/versions", map[string]any{"code": v1Code}, 403, "forbidden", ""},
			{"a version of B's function", "member", "POST", "/v1/functions/" + bFn.ID + "/versions", map[string]any{"code": v1Code}, 404, "not_found", ""},
			{"code that does not parse", "member", "POST", "/v1/functions/" + f.ID + "/versions", map[string]any{"code": "export default function ( {"}, 400, "invalid_request", "body.code"},
			{"empty code", "member", "POST", "/v1/functions/" + f.ID + "/versions", map[string]any{"code": ""}, 422, "invalid_request", "body.code"},
			{"blank code", "member", "POST", "/v1/functions/" + f.ID + "/versions", map[string]any{"code": "  \n"}, 400, "invalid_request", "body.code"},
			{"an input schema that is a list", "member", "POST", "/v1/functions/" + f.ID + "/versions", map[string]any{"code": v1Code, "input_schema": []int{1}}, 400, "invalid_request", "body.input_schema"},
			{"an input schema that does not compile", "member", "POST", "/v1/functions/" + f.ID + "/versions", map[string]any{"code": v1Code, "input_schema": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": 5}}}}, 400, "invalid_request", "body.input_schema"},
			{"an output schema that is a string", "member", "POST", "/v1/functions/" + f.ID + "/versions", map[string]any{"code": v1Code, "output_schema": "any"}, 400, "invalid_request", "body.output_schema"},
			{"a default by a viewer", "viewer", "PUT", "/v1/functions/" + f.ID + "/default-version", map[string]any{"version_id": vs[0].ID}, 403, "forbidden", ""},
			{"another function's version as default", "member", "PUT", "/v1/functions/" + f.ID + "/default-version", map[string]any{"version_id": other.DefaultVersionID}, 404, "not_found", "body.version_id"},
			{"B's version as default", "member", "PUT", "/v1/functions/" + f.ID + "/default-version", map[string]any{"version_id": bV.ID}, 404, "not_found", "body.version_id"},
			{"a default for B's function", "member", "PUT", "/v1/functions/" + bFn.ID + "/default-version", map[string]any{"version_id": bV.ID}, 404, "not_found", ""},
			{"a tool id as default", "member", "PUT", "/v1/functions/" + f.ID + "/default-version", map[string]any{"version_id": "tol_x"}, 400, "invalid_request", "body.version_id"},
			{"no version id", "member", "PUT", "/v1/functions/" + f.ID + "/default-version", map[string]any{}, 422, "invalid_request", "body.version_id"},
			{"an empty version id", "member", "PUT", "/v1/functions/" + f.ID + "/default-version", map[string]any{"version_id": ""}, 422, "invalid_request", "body.version_id"},
		} {
			wantProblem(t, tt.name, w.do(t, tt.who, tt.method, tt.path, tt.body), tt.status, tt.code, tt.loc)
		}
		if n := w.st.schemas.Load() - schemas; n != 0 {
			t.Errorf("refused versions stored %d schemas", n)
		}
		if vs, _ := w.st.FunctionVersions(ctx, w.a.ID, f.ID); len(vs) != 3 {
			t.Errorf("function has %d versions after the refusals, want 3", len(vs))
		}
		if stored, _ := w.st.Function(ctx, w.a.ID, f.ID); stored.DefaultVersionID != vs[1].ID {
			t.Errorf("a refused default changed it: %+v", stored)
		}
		if b, _ := w.st.Function(ctx, w.b.ID, bFn.ID); b.DefaultVersionID != bV.ID {
			t.Errorf("B's function changed: %+v", b)
		}
		p := wantProblem(t, "a syntax error", w.do(t, "member", "POST", "/v1/functions/"+f.ID+"/versions", map[string]any{"code": "export default function ( {"}), 400, "invalid_request", "body.code")
		if !strings.Contains(p.Detail, "SyntaxError") {
			t.Errorf("a syntax error, without the interpreter's word: %q", p.Detail)
		}

		// A system function is read, not changed.
		sys := &store.Function{Name: "sys_fn"}
		if err := w.st.CreateFunction(ctx, sys); err != nil {
			t.Fatal(err)
		}
		w.ok(t, "viewer", "GET", "/v1/functions/"+sys.ID, nil, 200, nil)
		wantProblem(t, "a version of a system function", w.do(t, "member", "POST", "/v1/functions/"+sys.ID+"/versions", map[string]any{"code": v1Code}), 403, "forbidden", "")
	})
}

func TestEntityAPITools(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		ctx := context.Background()
		_, bV, bTool := w.bTool(t)
		f, vs := w.function(t, "versions", v1Code, v2Code)
		other, _ := w.function(t, "other", v1Code)
		empty, _ := w.function(t, "empty")
		sys := w.systemTool(t, "sys_tool")

		// A server tool, created with everything.
		schemas := w.st.schemas.Load()
		tl := w.tool(t, "member", "versioned", f.ID, map[string]any{"description": "Says which version runs.",
			"output_schema": map[string]any{"type": "object"},
			"examples":      []map[string]any{{"args": map[string]any{"x": 1}, "result": map[string]any{"v": 1}}}, "requires_confirmation": false})
		stored, err := w.st.Tool(ctx, w.a.ID, tl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Name != "versioned" || stored.WorkspaceID != w.a.ID || stored.CreatedBy != w.member.ID || !stored.Enabled ||
			stored.Target != store.TargetServer || stored.FunctionID != f.ID || stored.FunctionVersionID != "" || len(stored.Examples) != 1 ||
			stored.System || stored.DeletedAt != nil || tl.ID != stored.ID || !strings.HasPrefix(tl.ID, "tol_") {
			t.Errorf("stored tool: %+v", stored)
		}
		if n := w.st.schemas.Load() - schemas; n != 2 {
			t.Errorf("a tool stored %d schemas, want 2", n)
		}
		if sc, err := w.st.Schema(ctx, w.a.ID, stored.InputSchemaID); err != nil || !jsonEqual(sc.Content, []byte(inDoc)) {
			t.Errorf("the input schema: %+v, %v", sc, err)
		}
		// The default version runs, until the tool pins one or the default changes.
		if got := w.callTool(t, "versioned"); got != `{"v":1}` {
			t.Errorf("the tool runs %s, want version 1", got)
		}
		w.ok(t, "member", "PATCH", "/v1/tools/"+tl.ID, map[string]any{"function_version_id": vs[1].ID}, 200, tl)
		if tl.FunctionVersionID != vs[1].ID {
			t.Errorf("pinned: %+v", tl)
		}
		if got := w.callTool(t, "versioned"); got != `{"v":2}` {
			t.Errorf("pinned to version 2, the tool runs %s", got)
		}
		w.ok(t, "member", "PATCH", "/v1/tools/"+tl.ID, `{"function_version_id": null}`, 200, tl)
		if stored, _ = w.st.Tool(ctx, w.a.ID, tl.ID); stored.FunctionVersionID != "" || tl.FunctionVersionID != "" {
			t.Errorf("unpinned: %+v", stored)
		}
		if got := w.callTool(t, "versioned"); got != `{"v":1}` {
			t.Errorf("following the default again, the tool runs %s", got)
		}
		w.ok(t, "member", "PUT", "/v1/functions/"+f.ID+"/default-version", map[string]any{"version_id": vs[1].ID}, 200, nil)
		if got := w.callTool(t, "versioned"); got != `{"v":2}` {
			t.Errorf("after the default switch, the tool runs %s", got)
		}
		w.ok(t, "member", "PATCH", "/v1/tools/"+tl.ID, map[string]any{"function_version_id": vs[0].ID}, 200, tl)
		if v, err := w.st.ResolveToolVersion(ctx, w.a.ID, tl.ID); err != nil || v.ID != vs[0].ID {
			t.Errorf("pinned to version 1: resolves %+v, %v", v, err)
		}

		// A client tool, and other changes.
		var client store.Tool
		w.ok(t, "member", "POST", "/v1/tools", map[string]any{"name": "ask_user", "target": "client", "description": "Asks the user.",
			"input_schema": map[string]any{"type": "object"}, "enabled": false, "requires_confirmation": true}, 201, &client)
		if client.Target != store.TargetClient || client.FunctionID != "" || client.Enabled || !client.RequiresConfirmation {
			t.Errorf("client tool: %+v", client)
		}
		w.ok(t, "member", "PATCH", "/v1/tools/"+client.ID, map[string]any{"name": "ask_person", "enabled": true,
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}}, 200, &client)
		if stored, _ = w.st.Tool(ctx, w.a.ID, client.ID); stored.Name != "ask_person" || !stored.Enabled || !stored.RequiresConfirmation ||
			stored.Description != "Asks the user." {
			t.Errorf("after the change: %+v", stored)
		}
		if sc, _ := w.st.Schema(ctx, w.a.ID, stored.InputSchemaID); !strings.Contains(string(sc.Content), `"q"`) {
			t.Errorf("the new input schema: %s", sc.Content)
		}
		// A server tool becomes a client tool when its function goes with it.
		conv := w.tool(t, "member", "convertible", other.ID, map[string]any{"function_version_id": other.DefaultVersionID})
		w.ok(t, "member", "PATCH", "/v1/tools/"+conv.ID, map[string]any{"target": "client", "function_id": nil, "function_version_id": ""}, 200, conv)
		if conv.Target != store.TargetClient || conv.FunctionID != "" || conv.FunctionVersionID != "" {
			t.Errorf("converted: %+v", conv)
		}

		// The runtime user is an admin's to set, and a member's to be.
		var ran store.Tool
		w.ok(t, "admin", "PATCH", "/v1/tools/"+tl.ID, map[string]any{"runtime_user_id": w.member.ID}, 200, &ran)
		if ran.RuntimeUserID != w.member.ID {
			t.Errorf("runtime user: %+v", ran)
		}
		admins := w.tool(t, "admin", "admins_tool", f.ID, map[string]any{"runtime_user_id": w.admin.ID})
		if admins.RuntimeUserID != w.admin.ID || admins.CreatedBy != w.admin.ID {
			t.Errorf("created with a runtime user: %+v", admins)
		}

		// A system tool is read, never changed.
		var got store.Tool
		w.ok(t, "viewer", "GET", "/v1/tools/"+sys.ID, nil, 200, &got)
		if !got.System || got.WorkspaceID != "" || got.Name != "sys_tool" {
			t.Errorf("system tool: %+v", got)
		}
		w.ok(t, "viewer", "GET", "/v1/tools/"+tl.ID, nil, 200, &got)
		if got.ID != tl.ID || got.RuntimeUserID != w.member.ID || got.FunctionVersionID != vs[0].ID {
			t.Errorf("GET the tool: %+v", got)
		}
		// The served tools and calls keep their paths beside the records.
		var served struct{ Tools []struct{ Name string } }
		w.ok(t, "viewer", "GET", "/v1/tools/served", nil, 200, &served)
		if !slices.ContainsFunc(served.Tools, func(s struct{ Name string }) bool { return s.Name == "echo" }) ||
			!slices.ContainsFunc(served.Tools, func(s struct{ Name string }) bool { return s.Name == "versioned" }) {
			t.Errorf("served tools: %+v", served.Tools)
		}

		schemas = w.st.schemas.Load()
		tools := func() int {
			page, err := w.st.ListTools(ctx, store.ToolFilter{WorkspaceID: w.a.ID, Deleted: store.DeletedInclude, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			return len(page.Tools)
		}
		before := tools()
		srv := func(extra map[string]any) map[string]any {
			b := map[string]any{"name": "fresh", "target": "server", "function_id": f.ID, "input_schema": json.RawMessage(inDoc)}
			for k, v := range extra {
				b[k] = v
			}
			return b
		}
		for _, tt := range []struct {
			name, who, method, path string
			body                    any
			status                  int
			code, loc               string
		}{
			{"a tool made by a viewer", "viewer", "POST", "/v1/tools", srv(nil), 403, "forbidden", ""},
			{"the name of a served tool", "member", "POST", "/v1/tools", srv(map[string]any{"name": "echo"}), 409, "conflict", "body.name"},
			{"a name taken", "member", "POST", "/v1/tools", srv(map[string]any{"name": "versioned"}), 409, "conflict", "body.name"},
			// Spaces and path-like names are accepted with a warning (seed 003 §8.3); hostile input is not.
			{"a name with a newline", "member", "POST", "/v1/tools", srv(map[string]any{"name": "two\nlines"}), 400, "invalid_request", "body.name"},
			{"a blank name", "member", "POST", "/v1/tools", srv(map[string]any{"name": "   "}), 400, "invalid_request", "body.name"},
			{"a 513-character name", "member", "POST", "/v1/tools", srv(map[string]any{"name": strings.Repeat("t", 513)}), 422, "invalid_request", "body.name"},
			{"a name that is a number", "member", "POST", "/v1/tools", srv(map[string]any{"name": 12}), 422, "invalid_request", "body.name"},
			{"a description over 10000 characters", "member", "POST", "/v1/tools", srv(map[string]any{"description": strings.Repeat("d", 10001)}), 422, "invalid_request", "body.description"},
			{"a body over the cap", "member", "POST", "/v1/tools", srv(map[string]any{"description": strings.Repeat("d", 2<<20)}), 413, "too_large", ""},
			{"an unknown target", "member", "POST", "/v1/tools", srv(map[string]any{"target": "edge"}), 422, "invalid_request", "body.target"},
			{"a server tool without a function", "member", "POST", "/v1/tools", srv(map[string]any{"function_id": ""}), 400, "invalid_request", "body.function_id"},
			{"a client tool with a function", "member", "POST", "/v1/tools", srv(map[string]any{"target": "client"}), 400, "invalid_request", "body.function_id"},
			{"a tool id as function", "member", "POST", "/v1/tools", srv(map[string]any{"function_id": tl.ID}), 400, "invalid_request", "body.function_id"},
			{"B's function", "member", "POST", "/v1/tools", srv(map[string]any{"function_id": bTool.FunctionID}), 404, "not_found", "body.function_id"},
			{"a function without versions", "member", "POST", "/v1/tools", srv(map[string]any{"function_id": empty.ID}), 400, "invalid_request", "body.function_id"},
			{"another function's version", "member", "POST", "/v1/tools", srv(map[string]any{"function_version_id": other.DefaultVersionID}), 400, "invalid_request", "body.function_version_id"},
			{"B's version", "member", "POST", "/v1/tools", srv(map[string]any{"function_version_id": bV.ID}), 404, "not_found", "body.function_version_id"},
			{"a function id as version", "member", "POST", "/v1/tools", srv(map[string]any{"function_version_id": f.ID}), 400, "invalid_request", "body.function_version_id"},
			{"no input schema", "member", "POST", "/v1/tools", map[string]any{"name": "fresh", "target": "server", "function_id": f.ID}, 422, "invalid_request", "body.input_schema"},
			{"a null input schema", "member", "POST", "/v1/tools", srv(map[string]any{"input_schema": nil}), 400, "invalid_request", "body.input_schema"},
			{"an input schema that is a string", "member", "POST", "/v1/tools", srv(map[string]any{"input_schema": "object"}), 400, "invalid_request", "body.input_schema"},
			{"an input schema of a string", "member", "POST", "/v1/tools", srv(map[string]any{"input_schema": map[string]any{"type": "string"}}), 400, "invalid_request", "body.input_schema"},
			{"an input schema that does not compile", "member", "POST", "/v1/tools", srv(map[string]any{"input_schema": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"minimum": "one"}}}}), 400, "invalid_request", "body.input_schema"},
			{"an output schema that does not compile", "member", "POST", "/v1/tools", srv(map[string]any{"output_schema": map[string]any{"type": 12}}), 400, "invalid_request", "body.output_schema"},
			{"no description anywhere", "member", "POST", "/v1/tools", srv(map[string]any{"input_schema": map[string]any{"type": "object"}}), 400, "invalid_request", "body.description"},
			{"examples against the input schema", "member", "POST", "/v1/tools", srv(map[string]any{"examples": []map[string]any{{"args": map[string]any{"x": "one"}}}}), 400, "invalid_request", "body.examples"},
			{"examples whose args are a list", "member", "POST", "/v1/tools", srv(map[string]any{"examples": []map[string]any{{"args": []int{1}}}}), 400, "invalid_request", "body.examples"},
			{"21 examples", "member", "POST", "/v1/tools", srv(map[string]any{"examples": make([]map[string]any, 21)}), 422, "invalid_request", "body.examples"},
			{"a runtime user set by a member", "member", "POST", "/v1/tools", srv(map[string]any{"runtime_user_id": w.member.ID}), 403, "forbidden", "body.runtime_user_id"},
			{"a runtime user who is not a member", "admin", "POST", "/v1/tools", srv(map[string]any{"runtime_user_id": w.bAdmin.ID}), 400, "invalid_request", "body.runtime_user_id"},
			{"a runtime user id of another kind", "admin", "POST", "/v1/tools", srv(map[string]any{"runtime_user_id": w.keyRec["admin"].ID}), 400, "invalid_request", "body.runtime_user_id"},
			{"an unknown field", "member", "POST", "/v1/tools", srv(map[string]any{"functionId": f.ID}), 422, "invalid_request", "body.functionId"},
			{"enabled as a string", "member", "POST", "/v1/tools", srv(map[string]any{"enabled": "yes"}), 422, "invalid_request", "body.enabled"},
			{"malformed JSON", "member", "POST", "/v1/tools", `{"name": "fresh",`, 400, "invalid_request", ""},
			{"a body that is a list", "member", "POST", "/v1/tools", `[]`, 422, "invalid_request", ""},

			{"B's tool", "viewer", "GET", "/v1/tools/" + bTool.ID, nil, 404, "not_found", ""},
			{"a tool that does not exist", "viewer", "GET", "/v1/tools/tol_nothere", nil, 404, "not_found", ""},
			{"a function id as tool", "viewer", "GET", "/v1/tools/" + f.ID, nil, 400, "invalid_request", "path.id"},
			{"a change by a viewer", "viewer", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"enabled": false}, 403, "forbidden", ""},
			{"a change to B's tool", "member", "PATCH", "/v1/tools/" + bTool.ID, map[string]any{"enabled": false}, 404, "not_found", ""},
			{"a change to a system tool", "admin", "PATCH", "/v1/tools/" + sys.ID, map[string]any{"enabled": false}, 403, "forbidden", ""},
			{"a change with a function id as tool", "member", "PATCH", "/v1/tools/" + f.ID, map[string]any{"enabled": false}, 400, "invalid_request", "path.id"},
			{"a rename to a served tool", "member", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"name": "echo"}, 409, "conflict", "body.name"},
			{"a rename to a name taken", "member", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"name": "ask_person"}, 409, "conflict", "body.name"},
			{"a client tool keeping its function", "member", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"target": "client"}, 400, "invalid_request", "body.function_id"},
			{"a pin to another function's version", "member", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"function_version_id": other.DefaultVersionID}, 400, "invalid_request", "body.function_version_id"},
			{"a pin to B's version", "member", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"function_version_id": bV.ID}, 404, "not_found", "body.function_version_id"},
			{"a pin to a tool id", "member", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"function_version_id": tl.ID}, 400, "invalid_request", "body.function_version_id"},
			{"a description removed with none in the schema", "member", "PATCH", "/v1/tools/" + client.ID, `{"description": null}`, 400, "invalid_request", "body.description"},
			{"a new input schema failing the examples", "member", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"input_schema": map[string]any{"type": "object", "description": "d", "properties": map[string]any{"x": map[string]any{"type": "string"}}}}, 400, "invalid_request", "body.examples"},
			{"a runtime user changed by a member", "member", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"runtime_user_id": nil}, 403, "forbidden", "body.runtime_user_id"},
			{"a runtime user who is not a member", "admin", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"runtime_user_id": w.bAdmin.ID}, 400, "invalid_request", "body.runtime_user_id"},
			{"an unknown field in a change", "member", "PATCH", "/v1/tools/" + tl.ID, map[string]any{"system": true}, 422, "invalid_request", "body.system"},
			{"a deletion by a viewer", "viewer", "DELETE", "/v1/tools/" + tl.ID, nil, 403, "forbidden", ""},
			{"a deletion of B's tool", "member", "DELETE", "/v1/tools/" + bTool.ID, nil, 404, "not_found", ""},
			{"a deletion of a system tool", "admin", "DELETE", "/v1/tools/" + sys.ID, nil, 403, "forbidden", ""},
			{"a deletion with an unknown tier", "member", "DELETE", "/v1/tools/" + tl.ID + "?retention_tier=forever", nil, 422, "invalid_request", "query.retention_tier"},
			{"a deletion with a version id", "member", "DELETE", "/v1/tools/" + vs[0].ID, nil, 400, "invalid_request", "path.id"},
		} {
			wantProblem(t, tt.name, w.do(t, tt.who, tt.method, tt.path, tt.body), tt.status, tt.code, tt.loc)
		}
		if n := w.st.schemas.Load() - schemas; n != 0 {
			t.Errorf("refused requests stored %d schemas", n)
		}
		if n := tools(); n != before {
			t.Errorf("refused requests left %d tools, want %d", n, before)
		}
		if now, _ := w.st.Tool(ctx, w.a.ID, tl.ID); now.Name != "versioned" || now.FunctionVersionID != vs[0].ID || now.RuntimeUserID != w.member.ID ||
			!now.Enabled {
			t.Errorf("refused changes changed the tool: %+v", now)
		}
		if b, _ := w.st.Tool(ctx, w.b.ID, bTool.ID); b.DeletedAt != nil || !b.Enabled {
			t.Errorf("B's tool changed: %+v", b)
		}
		if s, _ := w.st.Tool(ctx, "", sys.ID); s.DeletedAt != nil || !s.Enabled {
			t.Errorf("the system tool changed: %+v", s)
		}

		// huma takes null for an optional field as its absence: no change.
		w.ok(t, "member", "PATCH", "/v1/tools/"+tl.ID, `{"name": null, "enabled": null}`, 200, &got)
		if got.Name != "versioned" || !got.Enabled {
			t.Errorf("after a change of nulls: %+v", got)
		}

		// Deletion snapshots the tier asked for, or the workspace's.
		var del store.Tool
		w.ok(t, "member", "DELETE", "/v1/tools/"+tl.ID+"?retention_tier=long", nil, 200, &del)
		if del.DeletedAt == nil || del.RetentionTier != store.RetentionLong {
			t.Errorf("deleted: %+v", del)
		}
		if s, _ := w.st.Tool(ctx, w.a.ID, tl.ID); s.DeletedAt == nil || s.RetentionTier != store.RetentionLong {
			t.Errorf("stored after deletion: %+v", s)
		}
		w.ok(t, "admin", "PATCH", "/v1/workspaces/"+w.a.ID, map[string]any{"retention_tier": "none"}, 200, nil)
		w.ok(t, "member", "DELETE", "/v1/tools/"+client.ID, nil, 200, &del)
		if del.RetentionTier != store.RetentionNone {
			t.Errorf("deleted with the workspace's tier: %+v", del)
		}
		w.ok(t, "viewer", "GET", "/v1/tools/"+tl.ID, nil, 200, &got)
		if got.DeletedAt == nil {
			t.Errorf("a deleted tool read: %+v", got)
		}
		wantProblem(t, "a deletion twice", w.do(t, "member", "DELETE", "/v1/tools/"+tl.ID, nil), 404, "not_found", "")
		wantProblem(t, "a change to a deleted tool", w.do(t, "member", "PATCH", "/v1/tools/"+tl.ID, map[string]any{"enabled": false}), 404, "not_found", "")
		var out struct {
			Result quiver.Result `json:"result"`
		}
		w.ok(t, "member", "POST", "/v1/tools/versioned/call", map[string]any{"args": map[string]any{}}, 200, &out)
		if !out.Result.IsError() {
			t.Errorf("a deleted tool still runs: %+v", out.Result)
		}
		// Its name is free again.
		w.tool(t, "member", "versioned", f.ID, nil)
	})
}

func TestEntityAPIToolPages(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		ctx := context.Background()
		f, _ := w.function(t, "paged", v1Code)
		in, out := &store.Schema{WorkspaceID: w.a.ID, Content: json.RawMessage(inDoc)}, &store.Schema{WorkspaceID: w.a.ID, Content: json.RawMessage("true")}
		if err := w.st.CreateSchema(ctx, in); err != nil {
			t.Fatal(err)
		}
		if err := w.st.CreateSchema(ctx, out); err != nil {
			t.Fatal(err)
		}
		// 250 tools: every third a server tool, every fifth confirmed, every seventh deleted.
		var (
			all     []string
			created []*store.Tool
			byName  []string // the id of t000, t001...
		)
		for i := range 250 {
			tl := &store.Tool{WorkspaceID: w.a.ID, Name: fmt.Sprintf("t%03d", i), Target: store.TargetClient, InputSchemaID: in.ID,
				OutputSchemaID: out.ID, Enabled: true, RequiresConfirmation: i%5 == 0}
			if i%3 == 0 {
				tl.Target, tl.FunctionID = store.TargetServer, f.ID
			}
			if err := w.st.CreateTool(ctx, tl); err != nil {
				t.Fatal(err)
			}
			created = append(created, tl)
			byName = append(byName, tl.ID)
		}
		// Listed oldest first, by creation time then id: the order of creation but for ties.
		slices.SortStableFunc(created, func(x, y *store.Tool) int {
			if c := x.CreatedAt.Compare(y.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(x.ID, y.ID)
		})
		for _, tl := range created {
			all = append(all, tl.ID)
		}
		for i := 0; i < 250; i += 7 {
			if _, err := w.st.DeleteTool(ctx, w.a.ID, byName[i], ""); err != nil {
				t.Fatal(err)
			}
		}
		w.bTool(t)
		sys := w.systemTool(t, "sys_tool")

		// pages lists every tool of query, limit at a time, checking each page's size.
		pages := func(t *testing.T, query string, limit int) []store.Tool {
			t.Helper()
			var got []store.Tool
			cursor := ""
			for range 1000 {
				q := url.Values{}
				if query != "" {
					q, _ = url.ParseQuery(query)
				}
				if limit > 0 {
					q.Set("limit", fmt.Sprint(limit))
				}
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				var page struct {
					Tools      []store.Tool `json:"tools"`
					NextCursor string       `json:"next_cursor"`
				}
				w.ok(t, "viewer", "GET", "/v1/tools?"+q.Encode(), nil, 200, &page)
				size := limit
				if size == 0 {
					size = 20
				}
				if len(page.Tools) > size || page.NextCursor != "" && len(page.Tools) != size {
					t.Fatalf("%s limit %d: a page of %d", query, limit, len(page.Tools))
				}
				got = append(got, page.Tools...)
				if page.NextCursor == "" {
					return got
				}
				cursor = page.NextCursor
			}
			t.Fatal("no last page")
			return nil
		}
		filtered := func(keep func(i int) bool) []string {
			var out []string
			for _, tl := range created {
				var i int
				fmt.Sscanf(tl.Name, "t%03d", &i)
				if keep(i) {
					out = append(out, tl.ID)
				}
			}
			return out
		}
		isDeleted := func(i int) bool { return i%7 == 0 }
		deleted := filtered(isDeleted)
		active := filtered(func(i int) bool { return !isDeleted(i) })
		ids := func(tools []store.Tool) []string {
			out := make([]string, len(tools))
			for i, tl := range tools {
				out[i] = tl.ID
			}
			return out
		}
		for _, limit := range []int{0, 1, 2, 3, 7, 19, 20, 50, 99, 100} {
			if got := ids(pages(t, "", limit)); !slices.Equal(got, active) {
				t.Errorf("limit %d: %d tools, want the %d active ones in order, each once", limit, len(got), len(active))
			}
		}
		for _, tt := range []struct {
			query string
			want  []string
		}{
			{"include_deleted=true", all},
			{"include_deleted=only", deleted},
			{"target=server", filtered(func(i int) bool { return i%3 == 0 && !isDeleted(i) })},
			{"target=client&requires_confirmation=true", filtered(func(i int) bool { return i%3 != 0 && i%5 == 0 && !isDeleted(i) })},
			{"requires_confirmation=false&include_deleted=only", filtered(func(i int) bool { return i%5 != 0 && isDeleted(i) })},
			{"function_id=" + f.ID, filtered(func(i int) bool { return i%3 == 0 && !isDeleted(i) })},
			{"name=t123", []string{byName[123]}},
			{"name=t12&name_prefix=true", filtered(func(i int) bool { return i >= 120 && i < 130 && !isDeleted(i) })},
			{"name=t1&name_prefix=true&target=server", filtered(func(i int) bool { return i >= 100 && i < 200 && i%3 == 0 && !isDeleted(i) })},
			{"include_system=true&name=sys_tool", []string{sys.ID}},
			{"name=sys_tool", nil},
			{"name=b_tool", nil},
		} {
			for _, limit := range []int{1, 7, 100} {
				if got := ids(pages(t, tt.query, limit)); !slices.Equal(got, tt.want) {
					t.Errorf("%s, limit %d: %d tools, want %d", tt.query, limit, len(got), len(tt.want))
				}
			}
		}

		var first struct {
			NextCursor string `json:"next_cursor"`
		}
		w.ok(t, "viewer", "GET", "/v1/tools?limit=5", nil, 200, &first)
		raw, err := base64.RawURLEncoding.DecodeString(first.NextCursor)
		if err != nil {
			t.Fatal(err)
		}
		raw[3] ^= 0x40 // in the part that ties the cursor to its filters
		tampered := base64.RawURLEncoding.EncodeToString(raw)
		// A cursor made the store's way, with the right filters but no tool's id in it.
		unfiltered := store.ToolFilter{WorkspaceID: w.a.ID, Limit: 5}
		forged := unfiltered.EncodeCursor(store.ToolCursor{CreatedAt: time.Now(), ID: "../thr_x"})
		for _, tt := range []struct {
			name, query string
			status      int
			loc         string
		}{
			{"a tampered cursor", "limit=5&cursor=" + tampered, 400, "query.cursor"},
			{"a cursor of other filters", "limit=5&target=server&cursor=" + first.NextCursor, 400, "query.cursor"},
			{"a cursor that is not one", "cursor=" + url.QueryEscape("not a cursor!"), 400, "query.cursor"},
			{"a made-up cursor", "cursor=AQAAAAAAAAAAAAAAAAAAAAAAdG9s", 400, "query.cursor"},
			{"a forged cursor", "limit=5&cursor=" + forged, 400, "query.cursor"},
			{"limit 0", "limit=0", 422, "query.limit"},
			{"limit 1000", "limit=1000", 422, "query.limit"},
			{"limit -1", "limit=-1", 422, "query.limit"},
			{"limit a word", "limit=ten", 422, "query.limit"},
			{"an unknown target", "target=edge", 422, "query.target"},
			{"an unknown deleted filter", "include_deleted=maybe", 422, "query.include_deleted"},
			{"requires_confirmation a word", "requires_confirmation=yes", 422, "query.requires_confirmation"},
			{"a prefix without a name", "name_prefix=true", 400, "query.name"},
			{"a tool id as function", "function_id=" + byName[0], 400, "query.function_id"},
			{"an over-long cursor", "cursor=" + strings.Repeat("A", 600), 422, "query.cursor"},
		} {
			wantProblem(t, tt.name, w.do(t, "viewer", "GET", "/v1/tools?"+tt.query, nil), tt.status, "invalid_request", tt.loc)
		}
		// B sees its own tool only.
		var bPage struct{ Tools []store.Tool }
		w.ok(t, "b", "GET", "/v1/tools", nil, 200, &bPage)
		if len(bPage.Tools) != 1 || bPage.Tools[0].Name != "b_tool" {
			t.Errorf("B's tools: %+v", bPage.Tools)
		}
	})
}

// Every write answers 403 to a viewer, and every admin endpoint to a member, before looking at
// anything else.
func TestEntityAPIRoles(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		f, _ := w.function(t, "fn", v1Code)
		tl := w.tool(t, "member", "tl", f.ID, nil)
		writes := []struct {
			method, path string
			body         any
			admin        bool
		}{
			{"POST", "/v1/workspaces", map[string]any{"name": "x"}, true},
			{"PATCH", "/v1/workspaces/" + w.a.ID, map[string]any{"name": "x"}, true},
			{"POST", "/v1/members", map[string]any{"email": "x@acme.test"}, true},
			{"PATCH", "/v1/members/" + w.member.ID, map[string]any{"role": "admin"}, true},
			{"DELETE", "/v1/members/" + w.member.ID, nil, true},
			{"GET", "/v1/keys", nil, true},
			{"POST", "/v1/keys", map[string]any{"role": "viewer", "name": "x"}, true},
			{"DELETE", "/v1/keys/" + w.keyRec["viewer"].ID, nil, true},
			{"POST", "/v1/tools", map[string]any{"name": "x", "target": "client", "input_schema": json.RawMessage(inDoc)}, false},
			{"PATCH", "/v1/tools/" + tl.ID, map[string]any{"enabled": false}, false},
			{"DELETE", "/v1/tools/" + tl.ID, nil, false},
			{"POST", "/v1/functions", map[string]any{"name": "x"}, false},
			{"POST", "/v1/functions/" + f.ID + "/versions", map[string]any{"code": v1Code}, false},
			{"PUT", "/v1/functions/" + f.ID + "/default-version", map[string]any{"version_id": f.DefaultVersionID}, false},
		}
		for _, wr := range writes {
			wantProblem(t, "a viewer's "+wr.method+" "+wr.path, w.do(t, "viewer", wr.method, wr.path, wr.body), 403, "forbidden", "")
			if wr.admin {
				wantProblem(t, "a member's "+wr.method+" "+wr.path, w.do(t, "member", wr.method, wr.path, wr.body), 403, "forbidden", "")
			}
		}
		// Nothing was written: the member is still one, the keys and tool are there.
		ctx := context.Background()
		if m, err := w.st.Member(ctx, w.a.ID, w.member.ID); err != nil || m.Role != store.MemberRoleMember {
			t.Errorf("the member: %+v, %v", m, err)
		}
		if s, _ := w.st.Tool(ctx, w.a.ID, tl.ID); s.DeletedAt != nil || !s.Enabled {
			t.Errorf("the tool: %+v", s)
		}
		if ws, _ := w.st.Workspace(ctx, w.a.ID); ws.Name != "acme" {
			t.Errorf("the workspace: %+v", ws)
		}
	})
}

// The OpenAPI document describes the entity endpoints.
func TestEntityAPIDocument(t *testing.T) {
	doc, err := server.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	for path, methods := range map[string][]string{
		"/v1/workspaces": {"post"}, "/v1/workspaces/{id}": {"get", "patch"},
		"/v1/members": {"get", "post"}, "/v1/members/{user_id}": {"patch", "delete"},
		"/v1/keys": {"get", "post"}, "/v1/keys/{id}": {"delete"},
		"/v1/tools": {"get", "post"}, "/v1/tools/{id}": {"get", "patch", "delete"}, "/v1/tools/served": {"get"},
		"/v1/functions": {"get", "post"}, "/v1/functions/{id}": {"get"},
		"/v1/functions/{id}/versions": {"get", "post"}, "/v1/functions/{id}/default-version": {"put"},
	} {
		for _, m := range methods {
			if _, ok := d.Paths[path][m]; !ok {
				t.Errorf("the document has no %s %s", m, path)
			}
		}
	}
}

// GET /v1/tools?agent=NAME lists the stored tools the agent may call: its globs resolved, its
// deny list applied, paged like any listing; an unknown agent names query.agent.
func TestEntityAPIToolsOfAnAgent(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		for _, name := range []string{"pick_a", "pick_b", "pick_c", "other"} {
			r := w.do(t, "member", "POST", "/v1/tools", map[string]any{"name": name, "description": "A tool to pick.", "target": "client",
				"input_schema": map[string]any{"type": "object"}})
			if r.status != 201 {
				t.Fatalf("creating %s: %d %s", name, r.status, r.body)
			}
		}
		var got []string
		cursor := ""
		for range 5 {
			r := w.do(t, "viewer", "GET", "/v1/tools?agent=picker&limit=1&cursor="+url.QueryEscape(cursor), nil)
			var page struct {
				Tools      []struct{ Name string }
				NextCursor string `json:"next_cursor"`
			}
			if r.status != 200 || json.Unmarshal(r.body, &page) != nil {
				t.Fatalf("the agent's tools: %d %s", r.status, r.body)
			}
			for _, tl := range page.Tools {
				got = append(got, tl.Name)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if strings.Join(got, ",") != "pick_a,pick_c" {
			t.Fatalf("the agent's tools: %v, want pick_a, pick_c", got)
		}
		r := w.do(t, "viewer", "GET", "/v1/tools?agent=nobody", nil)
		if r.status != 400 || !strings.Contains(string(r.body), `"location":"query.agent"`) {
			t.Fatalf("an unknown agent: %d %s", r.status, r.body)
		}
		// Another workspace's tools of the same names are not the agent's here.
		if r := w.do(t, "b", "GET", "/v1/tools?agent=picker", nil); r.status != 200 || strings.Contains(string(r.body), "pick_") {
			t.Fatalf("workspace B through the agent filter: %d %s", r.status, r.body)
		}
	})
}

// A tool's examples reach API clients in the served list, as they reach models and MCP clients.
func TestServedToolsCarryExamples(t *testing.T) {
	entEach(t, func(t *testing.T, w *entWorld) {
		var served struct {
			Tools []struct {
				Name     string           `json:"name"`
				Examples []quiver.Example `json:"examples"`
			} `json:"tools"`
		}
		w.ok(t, "viewer", "GET", "/v1/tools/served", nil, 200, &served)
		for _, tl := range served.Tools {
			if tl.Name == "echo" {
				if len(tl.Examples) != 1 || string(tl.Examples[0].Args) != `{"text":"hi"}` || string(tl.Examples[0].Result) != `"hi"` {
					t.Errorf("echo's examples: %+v", tl.Examples)
				}
				return
			}
		}
		t.Errorf("echo is not served: %+v", served.Tools)
	})
}
