package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
)

// entitleWorld is a server with keys and access tokens over a real store, whose own workspace
// has four tools: support_lookup (read-only), support_refund and billing_charge (destructive)
// and echo (no annotations).
type entitleWorld struct {
	url    string
	client *http.Client
	ws     string
	member *store.User
	key    map[string]string        // admin, member, viewer
	rec    map[string]*store.APIKey // their records
	tokens *tokenIssuer
}

// entitleTools are the world's tools, in the order the dispatcher lists them (by name).
var entitleTools = []string{"billing_charge", "echo", "support_lookup", "support_refund"}

func newEntitleWorld(t *testing.T, st store.Backend) *entitleWorld {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ws := &store.Workspace{Name: "acme"}
	must(st.CreateWorkspace(ctx, ws))
	admin, member := &store.User{Email: "ada@acme.test", Name: "Ada"}, &store.User{Email: "bob@acme.test", Name: "Bob"}
	must(st.CreateUser(ctx, admin))
	must(st.CreateUser(ctx, member))
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: admin.ID, Role: store.MemberRoleAdmin}))
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: member.ID, Role: store.MemberRoleMember}))
	w := &entitleWorld{ws: ws.ID, member: member, key: map[string]string{}, rec: map[string]*store.APIKey{}, tokens: newTokenIssuer(t)}
	for _, k := range []struct {
		who, user string
		role      store.KeyRole
	}{{"admin", admin.ID, store.KeyRoleAdmin}, {"member", member.ID, store.KeyRoleMember}, {"viewer", member.ID, store.KeyRoleViewer}} {
		rec := &store.APIKey{WorkspaceID: ws.ID, UserID: k.user, Name: k.who, Role: k.role}
		secret, err := platform.IssueAPIKey(ctx, st, rec)
		must(err)
		w.key[k.who], w.rec[k.who] = secret, rec
	}
	type text struct {
		Text string `json:"text"`
	}
	tool := func(name string, a quiver.Annotations) *quiver.Tool {
		return quiver.Func(name, "The "+name+" tool.", func(_ context.Context, in text) (string, error) { return name + ": " + in.Text, nil },
			quiver.WithAnnotations(a))
	}
	reg := &quiver.Registry{}
	must(reg.Register(
		tool("support_lookup", quiver.Annotations{ReadOnlyHint: quiver.Hint(true)}),
		tool("support_refund", quiver.Annotations{DestructiveHint: quiver.Hint(true)}),
		tool("billing_charge", quiver.Annotations{DestructiveHint: quiver.Hint(true)}),
		tool("echo", quiver.Annotations{})))
	tokens := &server.TokenAuth{Issuer: w.tokens.url, Audiences: []string{tokenAudience}, Users: st,
		Rules: []config.ClaimRule{{Claim: "groups", Value: "eng", Workspace: ws.ID, Role: store.KeyRoleMember}}}
	srv, err := server.New(ctx, server.Config{Platform: newPlatform(t, st, reg), Auth: &server.Authenticator{Keys: st, Tokens: tokens},
		WorkspaceID: ws.ID, Logger: slog.New(slog.DiscardHandler)})
	must(err)
	ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close() })
	w.url, w.client = ts.URL, ts.Client()
	return w
}

// send sends a request to the API with the key or token (who: a name of w.key, or a token).
func (w *entitleWorld) send(t *testing.T, method, path, who string, body any) (int, []byte) {
	t.Helper()
	cred := who
	if k, ok := w.key[who]; ok {
		cred = k
	}
	res, data := sendAPI(t, w.client, method, w.url+path, cred, body)
	return res.StatusCode, data
}

// servedNames are the names GET /v1/tools/served lists to who.
func (w *entitleWorld) servedNames(t *testing.T, who string) []string {
	t.Helper()
	status, body := w.send(t, "GET", "/v1/tools/served", who, nil)
	var out struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if status != 200 || json.Unmarshal(body, &out) != nil {
		t.Fatalf("the served tools for %s: %d %s", who, status, body)
	}
	names := []string{}
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// entitleDocument is the document the tests set: a support toolset, viewers left the
// read-only tools, contractors (by a token's claim) denied billing, and a rule naming a tool
// the workspace does not have (kept, and warned about).
const entitleDocument = `{
  "rules": [
    {"who": {"role": "viewer"}, "when": {"readOnlyHint": true}, "access": "allow", "description": "viewers read"},
    {"who": {"claim": "groups", "value": "contractors"}, "tools": ["billing_*"], "access": "deny"},
    {"tools": ["ghost_tool"], "access": "deny"}
  ],
  "toolsets": [
    {"name": "support", "description": "What support uses.", "include": [{"tools": ["support_*"]}]}
  ]
}`

// putDocument sets doc (JSON) at version after as the admin, and returns the answer.
func (w *entitleWorld) putDocument(t *testing.T, doc string, after int64) (int, []byte) {
	t.Helper()
	return w.send(t, "PUT", "/v1/entitlements", "admin", map[string]any{"document": json.RawMessage(doc), "after": after})
}

// TestEntitlementsDocument: GET and PUT /v1/entitlements are an admin's; a document that does
// not check is refused naming its part in body.document, a stale version with 409, and a
// name the workspace does not have is kept and warned about.
func TestEntitlementsDocument(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newEntitleWorld(t, st.(store.Backend))
		status, body := w.send(t, "GET", "/v1/entitlements", "admin", nil)
		if status != 200 || !strings.Contains(string(body), `"version":0`) || !strings.Contains(string(body), `"updated_by":null`) {
			t.Fatalf("entitlements never set: %d %s", status, body)
		}
		for _, who := range []string{"member", "viewer"} {
			if status, body := w.send(t, "GET", "/v1/entitlements", who, nil); status != 403 || !strings.Contains(string(body), `"code":"forbidden"`) {
				t.Errorf("GET as %s: %d %s", who, status, body)
			}
			status, body := w.send(t, "PUT", "/v1/entitlements", who, map[string]any{"document": json.RawMessage(entitleDocument), "after": 0})
			if status != 403 {
				t.Errorf("PUT as %s: %d %s", who, status, body)
			}
		}
		bad := []struct {
			name, doc, location string
		}{
			{"an access neither allow nor deny", `{"rules": [{"tools": ["echo"], "access": "maybe"}]}`, "body.document.rules[0].access"},
			{"a malformed pattern", `{"rules": [{"tools": ["echo", "bad["], "access": "deny"}]}`, "body.document.rules[0].tools[1]"},
			{"a toolset name that is no path segment", `{"toolsets": [{"name": "a/b", "include": [{"tools": ["echo"]}]}]}`, "body.document.toolsets[0].name"},
			{"a default neither allow nor deny", `{"default": "sometimes"}`, "body.document.default"},
		}
		for _, c := range bad {
			status, body := w.putDocument(t, c.doc, 0)
			var p server.ProblemDetails
			if status != 400 || json.Unmarshal(body, &p) != nil || len(p.Errors) != 1 || p.Errors[0].Location != c.location || p.Code != server.CodeInvalidRequest {
				t.Errorf("%s: %d %s, want 400 naming %s", c.name, status, body, c.location)
			}
		}
		if status, body := w.putDocument(t, `{"rulez": []}`, 0); status/100 != 4 || !strings.Contains(string(body), "rulez") {
			t.Errorf("a field a document does not have: %d %s", status, body)
		}
		status, body = w.putDocument(t, entitleDocument, 0)
		var got struct {
			Document struct {
				Rules    []json.RawMessage `json:"rules"`
				Toolsets []json.RawMessage `json:"toolsets"`
			} `json:"document"`
			Version   int64    `json:"version"`
			UpdatedBy string   `json:"updated_by"`
			Warnings  []string `json:"warnings"`
		}
		if status != 200 || json.Unmarshal(body, &got) != nil || got.Version != 1 || len(got.Document.Rules) != 3 || len(got.Document.Toolsets) != 1 ||
			got.UpdatedBy != w.rec["admin"].UserID {
			t.Fatalf("setting the document: %d %s", status, body)
		}
		if len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "ghost_tool") {
			t.Errorf("warnings = %q, want the rule naming ghost_tool", got.Warnings)
		}
		// Another admin decided from version 0 too: refused, and nothing changes.
		status, body = w.putDocument(t, `{"default": "deny"}`, 0)
		var p server.ProblemDetails
		if status != 409 || json.Unmarshal(body, &p) != nil || p.Code != server.CodeConflict || len(p.Errors) != 1 || p.Errors[0].Location != "body.after" {
			t.Errorf("a stale version: %d %s", status, body)
		}
		status, body = w.send(t, "GET", "/v1/entitlements", "admin", nil)
		if status != 200 || !strings.Contains(string(body), `"version":1`) || !strings.Contains(string(body), `"name":"support"`) || strings.Contains(string(body), `"default":"deny"`) {
			t.Errorf("the document after a refused change: %d %s", status, body)
		}
	})
}

// TestEntitlementsAtTheDoors: with the document set, /v1/tools/served, /v1/toolsets, explain,
// calls, keys bound to a toolset, access tokens' claims and MCP at /mcp and /mcp/support each
// offer and allow what the rules entitle, and /mcp/nope is 404.
func TestEntitlementsAtTheDoors(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		w := newEntitleWorld(t, st.(store.Backend))
		// Before any document every caller is served every tool, and there are no toolsets.
		if got := w.servedNames(t, "viewer"); !slices.Equal(got, entitleTools) {
			t.Fatalf("a viewer's tools without entitlements: %v", got)
		}
		if status, body := w.send(t, "GET", "/v1/toolsets", "member", nil); status != 200 || strings.TrimSpace(string(body)) != `{"toolsets":[]}` {
			t.Fatalf("toolsets without entitlements: %d %s", status, body)
		}
		if status, body := w.putDocument(t, entitleDocument, 0); status != 200 {
			t.Fatalf("setting the document: %d %s", status, body)
		}
		supportKey := w.bindKeys(t)

		eng := w.tokens.token(t, w.tokens.claims(time.Now(), "eng"))
		contractor := w.tokens.token(t, w.tokens.claims(time.Now(), "eng", "contractors"))
		for _, c := range []struct {
			who  string
			want []string
		}{
			{"admin", entitleTools},
			{"member", entitleTools},
			{"viewer", []string{"support_lookup"}},
			{supportKey, []string{"support_lookup", "support_refund"}},
			{eng, entitleTools},
			{contractor, []string{"echo", "support_lookup", "support_refund"}},
		} {
			if got := w.servedNames(t, c.who); !slices.Equal(got, c.want) {
				t.Errorf("%s is served %v, want %v", short(c.who), got, c.want)
			}
		}
		// A tool the caller may not call is answered as one that does not exist.
		_, missing := w.send(t, "GET", "/v1/tools/served/no_such_tool", "viewer", nil)
		for _, c := range []struct{ who, path string }{
			{"viewer", "/v1/tools/served/support_refund"},
			{supportKey, "/v1/tools/served/billing_charge"},
			{contractor, "/v1/tools/served/billing_charge"},
		} {
			status, body := w.send(t, "GET", c.path, c.who, nil)
			if status != 404 || string(body) != string(missing) {
				t.Errorf("%s GET %s: %d %s, want %s", short(c.who), c.path, status, body, missing)
			}
			status, body = w.send(t, "POST", c.path+"/validate", c.who, map[string]any{"args": map[string]any{"text": "x"}})
			if status != 404 {
				t.Errorf("%s POST %s/validate: %d %s", short(c.who), c.path, status, body)
			}
		}
		if status, body := w.send(t, "GET", "/v1/tools/served/support_lookup", "viewer", nil); status != 200 {
			t.Errorf("a viewer's read-only tool: %d %s", status, body)
		}

		// Each caller's toolsets, with the tools of them it may call.
		for _, c := range []struct{ who, want string }{
			{"member", `{"toolsets":[{"name":"support","description":"What support uses.","tools":["support_lookup","support_refund"]}]}`},
			{"viewer", `{"toolsets":[{"name":"support","description":"What support uses.","tools":["support_lookup"]}]}`},
			{supportKey, `{"toolsets":[{"name":"support","description":"What support uses.","tools":["support_lookup","support_refund"]}]}`},
		} {
			if status, body := w.send(t, "GET", "/v1/toolsets", c.who, nil); status != 200 || strings.TrimSpace(string(body)) != c.want {
				t.Errorf("%s's toolsets: %d %s, want %s", short(c.who), status, body, c.want)
			}
		}

		// A call outside the caller's entitlements is refused with not_entitled.
		for _, c := range []struct{ who, tool string }{{supportKey, "billing_charge"}, {contractor, "billing_charge"}} {
			status, body := w.send(t, "POST", "/v1/tools/"+c.tool+"/call", c.who, map[string]any{"args": map[string]any{"text": "x"}})
			var out struct {
				Result quiver.Result `json:"result"`
			}
			if status != 200 || json.Unmarshal(body, &out) != nil || out.Result.Code != quiver.CodeNotEntitled || strings.Contains(out.Result.Error, "billing_charge\" is denied") {
				t.Errorf("%s calling %s: %d %s", short(c.who), c.tool, status, body)
			}
		}
		status, body := w.send(t, "POST", "/v1/tools/support_refund/call", supportKey, map[string]any{"args": map[string]any{"text": "x"}})
		if status != 200 || !strings.Contains(string(body), `"status":"success"`) {
			t.Errorf("the support key calling support_refund: %d %s", status, body)
		}

		w.explain(t, supportKey)
		w.overMCP(t, supportKey)
	})
}

// bindKeys checks POST /v1/keys's toolsets, and returns a member's key bound to support.
func (w *entitleWorld) bindKeys(t *testing.T) string {
	t.Helper()
	status, body := w.send(t, "POST", "/v1/keys", "admin", map[string]any{"name": "typo", "role": "member", "user_id": w.member.ID,
		"toolsets": []string{"support", "bad name!"}})
	var p server.ProblemDetails
	if status != 400 || json.Unmarshal(body, &p) != nil || len(p.Errors) != 1 || p.Errors[0].Location != "body.toolsets[1]" {
		t.Fatalf("a malformed toolset name: %d %s", status, body)
	}
	// A toolset the workspace does not define (yet) is kept: the key reaches nothing.
	status, body = w.send(t, "POST", "/v1/keys", "admin", map[string]any{"name": "later", "role": "member", "user_id": w.member.ID,
		"toolsets": []string{"not_yet"}})
	var later struct {
		Key    store.APIKey `json:"key"`
		Secret string       `json:"secret"`
	}
	if status != 201 || json.Unmarshal(body, &later) != nil || !slices.Equal(later.Key.Toolsets, []string{"not_yet"}) {
		t.Fatalf("a key bound to an undefined toolset: %d %s", status, body)
	}
	if got := w.servedNames(t, later.Secret); len(got) != 0 {
		t.Errorf("a key bound to an undefined toolset is served %v", got)
	}
	status, body = w.send(t, "POST", "/v1/keys", "admin", map[string]any{"name": "support desk", "role": "member", "user_id": w.member.ID,
		"toolsets": []string{"support"}})
	var made struct {
		Key    store.APIKey `json:"key"`
		Secret string       `json:"secret"`
	}
	if status != 201 || json.Unmarshal(body, &made) != nil || !slices.Equal(made.Key.Toolsets, []string{"support"}) {
		t.Fatalf("a key bound to support: %d %s", status, body)
	}
	status, body = w.send(t, "GET", "/v1/keys", "admin", nil)
	var keys struct {
		Keys []store.APIKey `json:"keys"`
	}
	if status != 200 || json.Unmarshal(body, &keys) != nil {
		t.Fatalf("listing keys: %d %s", status, body)
	}
	for _, k := range keys.Keys {
		want := map[string][]string{made.Key.ID: {"support"}, later.Key.ID: {"not_yet"}}[k.ID]
		if !slices.Equal(k.Toolsets, want) {
			t.Errorf("key %s (%s) is listed with toolsets %v, want %v", k.ID, k.Name, k.Toolsets, want)
		}
	}
	w.rec["support"] = &made.Key
	return made.Secret
}

// explain checks GET /v1/entitlements/explain for key, role, claim and toolset subjects, and
// a caller asking about itself.
func (w *entitleWorld) explain(t *testing.T, supportKey string) {
	t.Helper()
	type answer struct {
		Subject string `json:"subject"`
		Tool    string `json:"tool"`
		Allowed bool   `json:"allowed"`
		Rule    int    `json:"rule"`
		Reason  string `json:"reason"`
	}
	for _, c := range []struct {
		who, subject, tool string
		allowed            bool
		rule               int
	}{
		{"admin", "key:" + w.rec["viewer"].ID, "support_lookup", true, 0},
		{"admin", "key:" + w.rec["viewer"].ID, "support_refund", false, -1},
		{"admin", "role:member", "support_refund", true, -1},
		{"admin", "claim:groups=contractors", "billing_charge", false, 1},
		{"admin", "role:member,claim:groups=contractors", "echo", true, -1},
		{"admin", "key:" + w.rec["support"].ID, "billing_charge", false, -1},
		{"admin", "key:" + w.rec["support"].ID, "support_refund", true, -1},
		{"admin", "toolset:support", "echo", false, -1},
		{"admin", "", "ghost_tool", false, 2}, // not there: 404 below
		{"member", "", "echo", true, -1},
		{"viewer", "", "support_refund", false, -1},
		{supportKey, "", "support_lookup", true, -1},
	} {
		q := "/v1/entitlements/explain?tool=" + c.tool
		if c.subject != "" {
			q += "&subject=" + c.subject
		}
		status, body := w.send(t, "GET", q, c.who, nil)
		if c.tool == "ghost_tool" {
			if status != 404 || !strings.Contains(string(body), `"location":"query.tool"`) {
				t.Errorf("explain of a tool the workspace does not have: %d %s", status, body)
			}
			continue
		}
		var a answer
		if status != 200 || json.Unmarshal(body, &a) != nil || a.Allowed != c.allowed || a.Rule != c.rule || a.Reason == "" || a.Tool != c.tool {
			t.Errorf("%s explaining %q %s: %d %s, want allowed %v by rule %d", short(c.who), c.subject, c.tool, status, body, c.allowed, c.rule)
		}
	}
	// What decided a refusal is an admin's to read: the viewer learns that it may not.
	if _, body := w.send(t, "GET", "/v1/entitlements/explain?tool=support_refund", "viewer", nil); strings.Contains(string(body), "viewers read") {
		t.Errorf("a viewer's explanation tells the rules: %s", body)
	}
	for _, c := range []struct {
		who, query string
		status     int
		location   string
	}{
		{"member", "?tool=echo&subject=role:viewer", 403, ""},
		{"admin", "?tool=echo&subject=colour:blue", 400, "query.subject[0]"},
		{"admin", "?tool=echo&subject=key:key_nope", 404, "query.subject[0]"},
		{"admin", "?subject=role:viewer", 422, "query.tool"},
	} {
		status, body := w.send(t, "GET", "/v1/entitlements/explain"+c.query, c.who, nil)
		if status != c.status || (c.location != "" && !strings.Contains(string(body), `"location":"`+c.location+`"`)) {
			t.Errorf("%s explain%s: %d %s, want %d naming %q", c.who, c.query, status, body, c.status, c.location)
		}
	}
}

// overMCP checks the MCP doors: /mcp/support offers and allows support's tools alone, of those
// the caller may call; /mcp stays the caller's whole entitlement; an undefined toolset is 404;
// and a change of the rules reaches an open session's next tools/list.
func (w *entitleWorld) overMCP(t *testing.T, supportKey string) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct {
		who, path string
		want      []string
	}{
		{"member", "/mcp", entitleTools},
		{"member", "/mcp/support", []string{"support_lookup", "support_refund"}},
		{"viewer", "/mcp/support", []string{"support_lookup"}},
		{"admin", "/mcp/support", []string{"support_lookup", "support_refund"}},
		{supportKey, "/mcp", []string{"support_lookup", "support_refund"}},
		{supportKey, "/mcp/support", []string{"support_lookup", "support_refund"}},
	} {
		cs := w.mcpSession(t, c.who, c.path)
		if got := isoToolNames(t, cs); !slices.Equal(got, c.want) {
			t.Errorf("%s at %s lists %v, want %v", short(c.who), c.path, got, c.want)
		}
	}
	cs := w.mcpSession(t, "member", "/mcp/support")
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "billing_charge", Arguments: map[string]any{"text": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := mcpText(res); !res.IsError || !strings.Contains(text, `no tool "billing_charge" is available to this caller`) ||
		!strings.Contains(text, "Available tools: support_lookup, support_refund.") {
		t.Errorf("calling billing_charge at /mcp/support: error %v %q", res.IsError, text)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "support_refund", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.IsError || mcpText(res) != "support_refund: x" {
		t.Errorf("calling support_refund at /mcp/support: %v %+v", err, res)
	}
	// The rules change while the session is open: its next list follows them.
	doc := strings.Replace(entitleDocument, `"tools": ["support_*"]`, `"tools": ["support_*", "echo"]`, 1)
	if status, body := w.putDocument(t, doc, 1); status != 200 {
		t.Fatalf("changing the document: %d %s", status, body)
	}
	if got := isoToolNames(t, cs); !slices.Equal(got, []string{"echo", "support_lookup", "support_refund"}) {
		t.Errorf("/mcp/support lists %v after echo joined support", got)
	}
	for _, path := range []string{"/mcp/nope", "/mcp/bad%20name", "/mcp/" + strings.Repeat("a", 65)} {
		status, body := w.send(t, "POST", path, "member", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if status != 404 || !strings.Contains(string(body), `"code":"not_found"`) {
			t.Errorf("POST %s: %d %s", path, status, body)
		}
	}
	// Without credentials, a toolset's address sends an MCP client where /mcp does: the
	// protected resource metadata of the server, whose tokens every address takes.
	unauth, _ := sendAPI(t, w.client, "POST", w.url+"/mcp/support", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if h := unauth.Header.Get("WWW-Authenticate"); unauth.StatusCode != 401 || !strings.Contains(h, `resource_metadata="https://quiver.test/.well-known/oauth-protected-resource/mcp"`) {
		t.Errorf("/mcp/support without a key: %d, WWW-Authenticate %q", unauth.StatusCode, h)
	}
	contractor := w.tokens.token(t, w.tokens.claims(time.Now(), "eng", "contractors"))
	// A token's claims decide over MCP as over /v1: contractors are denied billing.
	if got := isoToolNames(t, w.mcpSession(t, contractor, "/mcp")); !slices.Equal(got, []string{"echo", "support_lookup", "support_refund"}) {
		t.Errorf("a contractor's token at /mcp lists %v", got)
	}
}

// mcpSession opens an MCP session at path with who's key (or a key itself).
func (w *entitleWorld) mcpSession(t *testing.T, who, path string) *sdk.ClientSession {
	t.Helper()
	key := who
	if k, ok := w.key[who]; ok {
		key = k
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "entitlements-test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: w.url + path, MaxRetries: -1, HTTPClient: &http.Client{Transport: isoBearer{key}}}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", path, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// mcpText is the text of an MCP result's content.
func mcpText(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// short names a caller in a failure: a key's or token's first characters.
func short(who string) string {
	if len(who) > 12 {
		return who[:12] + "..."
	}
	return who
}

// TestToolsetWithoutKeys: a server that asks for no key serves a toolset's address too, to
// its operator, limited to the toolset; /mcp stays every tool.
func TestToolsetWithoutKeys(t *testing.T) {
	r := start(t, server.Config{}, "")
	res, body := sendAPI(t, http.DefaultClient, "PUT", r.url+"/v1/entitlements", "",
		map[string]any{"document": json.RawMessage(`{"toolsets": [{"name": "echoes", "include": [{"tools": ["echo"]}]}]}`), "after": 0})
	if res.StatusCode != 200 {
		t.Fatalf("setting the document: %d %s", res.StatusCode, body)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "entitlements-test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: r.url + "/mcp/echoes", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := isoToolNames(t, cs); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("/mcp/echoes lists %v", got)
	}
	if got := isoToolNames(t, connect(t, r.url, "all")); !slices.Equal(got, []string{"boom", "echo"}) {
		t.Errorf("/mcp lists %v", got)
	}
}
