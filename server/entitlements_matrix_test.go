package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/sqlite"
)

// The entitlements matrix (issue 49): subjects × tools × doors, on SQLite and PostgreSQL. A
// workspace has four shared Go tools, two read-only and two destructive, two toolsets and
// rules of each kind: an allow list (viewers get the read-only tools), a key's deny and a
// token claim's deny that win over an allow of the same tools, and an agent's deny. Each
// subject (an admin's key of the server's own workspace, a member's, a viewer's, a key bound to a toolset, a member's key
// that a rule denies a tool, a member's access token whose claim a rule denies the
// destructive tools) is offered exactly its tools at every door, and every call answers as
// the rules say: MCP at /mcp and at /mcp/support (tools/list, tools/call, and the call as its
// session's thread records it), /v1 (the served tools, the toolsets, a call), and an agent
// run started through /v1 (the tools its model is offered, and its calls as its thread
// records them). Then a rule changes while sessions are open: the next tools/list and call of
// each follow it, on the node that took the change and, on PostgreSQL, on another node of the
// same database.

// The matrix's tools.
const (
	mxLookup = "lookup_order"      // read-only
	mxRefund = "refund_payment"    // destructive
	mxDelete = "delete_repository" // destructive
	mxSearch = "search_docs"       // read-only
	// mxMissing is a name no tool has: a hidden tool must be answered as it is.
	mxMissing = "no_such_tool"
	// mxAgent is the agent whose runs call every tool; a rule denies it delete_repository.
	mxAgent = "mx_agent"
)

var mxTools = []string{mxLookup, mxRefund, mxDelete, mxSearch}

// mxSubject is a caller of the matrix and what the rules entitle it to.
type mxSubject struct {
	name string
	// whole is what it is offered at /mcp and /v1; support at /mcp/support.
	whole, support []string
	// viewer: its role may list the tools but not call them, nor start runs.
	viewer bool
	// bound: its key is bound to the support toolset, the only one it is shown.
	bound bool
}

// mxSubjects are the matrix's callers (see newMxWorld for their keys and token).
var mxSubjects = []mxSubject{
	{name: "admin", whole: mxTools, support: []string{mxLookup, mxRefund}},
	{name: "member", whole: mxTools, support: []string{mxLookup, mxRefund}},
	{name: "viewer", whole: []string{mxLookup, mxSearch}, support: []string{mxLookup}, viewer: true},
	{name: "support", whole: []string{mxLookup, mxRefund}, support: []string{mxLookup, mxRefund}, bound: true},
	{name: "denied", whole: []string{mxLookup, mxDelete, mxSearch}, support: []string{mxLookup}},
	{name: "contractor", whole: []string{mxLookup, mxSearch}, support: []string{mxLookup}},
}

// mxToolsets are the document's toolsets.
var mxToolsets = map[string][]string{"support": {mxLookup, mxRefund}, "docs": {mxSearch}}

// mxBackend is a fresh store with its background runs, and, on PostgreSQL, how to open
// another store on the same database, as another node of the fleet would.
type mxBackend struct {
	isoBackend
	another func(t *testing.T) store.Backend
}

// mxEach runs fn on SQLite and on PostgreSQL (skipped without QUIVER_TEST_POSTGRES, failed
// under CI=true without it).
func mxEach(t *testing.T, fn func(t *testing.T, be mxBackend)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "q.db")
		st, err := sqlite.Open(path)
		mustDo(t, err)
		t.Cleanup(func() { st.Close() })
		fn(t, mxBackend{isoBackend: isoBackend{st: st, journal: path + ".journal", startJobs: func(t *testing.T, cfg jobs.Config) *jobs.Jobs {
			j, err := jobs.StartSQLite(context.Background(), path, cfg)
			mustDo(t, err)
			t.Cleanup(func() { _ = j.Stop(context.Background()) })
			return j
		}}})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		schemaName := pgtest.Schema(t, dsn)
		open := func(t *testing.T) store.Backend {
			st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schemaName))
			mustDo(t, err)
			t.Cleanup(func() { st.Close() })
			return st
		}
		fn(t, mxBackend{another: open, isoBackend: isoBackend{st: open(t), startJobs: func(t *testing.T, cfg jobs.Config) *jobs.Jobs {
			pc, err := pgxpool.ParseConfig(dsn)
			mustDo(t, err)
			pc.ConnConfig.RuntimeParams["search_path"] = schemaName
			pool, err := pgxpool.NewWithConfig(context.Background(), pc)
			mustDo(t, err)
			j, err := jobs.StartPostgres(context.Background(), pool, cfg)
			if err != nil {
				pool.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = j.Stop(context.Background()); pool.Close() })
			return j
		}}})
	})
}

// mxWorld is a server on 127.0.0.1 whose workspace has the matrix's tools, rules and callers.
type mxWorld struct {
	be     mxBackend
	url    string
	ws     string
	reg    *quiver.Registry
	bearer map[string]string // subject -> its key or token
	user   map[string]string // subject -> its user's id
	keyID  map[string]string // subject -> its key's id (none for the token)
	issuer *tokenIssuer
	// version is the entitlement document's version now.
	version int64

	mu      sync.Mutex
	offered []string // the tools the last run's model was first offered
}

// mxModel is the agent's model: it plays a script that calls every tool of the matrix in its
// first turn and ends in its second, and notes the tools the first request offers.
type mxModel struct {
	*scripted.Model
	w *mxWorld
}

func (m mxModel) Generate(ctx context.Context, req *model.Request, onDelta func(model.Delta)) (*model.Response, error) {
	if !slices.ContainsFunc(req.Messages, func(msg model.Message) bool { return msg.Role == model.RoleTool }) {
		names := []string{}
		if req.Tools != nil {
			for _, t := range req.Tools.Tools {
				names = append(names, t.Canonical)
			}
		}
		m.w.mu.Lock()
		m.w.offered = names
		m.w.mu.Unlock()
	}
	return m.Model.Generate(ctx, req, onDelta)
}

// mxRegistry holds the four tools, shared by every workspace; each says it ran.
func mxRegistry(t *testing.T) *quiver.Registry {
	reg := &quiver.Registry{}
	tool := func(name, desc string, readOnly bool) *quiver.Tool {
		a := quiver.Annotations{ReadOnlyHint: quiver.Hint(readOnly)}
		if !readOnly {
			a.DestructiveHint = quiver.Hint(true)
		}
		return quiver.Func(name, desc, func(context.Context, struct{}) (string, error) { return "ran " + name, nil }, quiver.WithAnnotations(a))
	}
	mustDo(t, reg.Register(
		tool(mxLookup, "Looks an order up.", true),
		tool(mxRefund, "Refunds a payment.", false),
		tool(mxDelete, "Deletes a repository.", false),
		tool(mxSearch, "Searches the documentation.", true),
	))
	return reg
}

// mxDocument is the matrix's entitlements: the support and docs toolsets; viewers may call
// the read-only tools alone (an allow list); members may call every tool, less refund_payment
// for the denied key and the destructive tools for contractors (deny wins); and the agent
// never deletes a repository, whoever runs it.
func mxDocument(deniedKey string) entitle.Document {
	return entitle.Document{
		Toolsets: []entitle.Toolset{
			{Name: "support", Description: "Orders and refunds.", Include: []entitle.Selector{{Tools: []string{mxLookup, mxRefund}}}},
			{Name: "docs", Include: []entitle.Selector{{Tools: []string{"search_*"}}}},
		},
		Rules: []entitle.Rule{
			{Who: entitle.Who{Role: "viewer"}, Selector: entitle.Selector{When: quiver.Hints{ReadOnly: quiver.Hint(true)}}, Access: quiver.AccessAllow,
				Description: "viewers read"},
			{Who: entitle.Who{Role: "member"}, Selector: entitle.Selector{Tools: []string{"*"}}, Access: quiver.AccessAllow},
			{Who: entitle.Who{Key: deniedKey}, Selector: entitle.Selector{Tools: []string{mxRefund}}, Access: quiver.AccessDeny},
			{Who: entitle.Who{Claim: "groups", Value: "contractors"}, Selector: entitle.Selector{When: quiver.Hints{Destructive: quiver.Hint(true)}},
				Access: quiver.AccessDeny},
			{Who: entitle.Who{Agent: "mx_*"}, Selector: entitle.Selector{Tools: []string{mxDelete}}, Access: quiver.AccessDeny},
		},
	}
}

func newMxWorld(t *testing.T, be mxBackend) *mxWorld {
	t.Helper()
	ctx := context.Background()
	st := be.st
	w := &mxWorld{be: be, bearer: map[string]string{}, user: map[string]string{}, keyID: map[string]string{}, reg: mxRegistry(t)}
	ws := &store.Workspace{Name: "matrix"}
	mustDo(t, st.CreateWorkspace(ctx, ws))
	w.ws = ws.ID
	ada := &store.User{Email: "ada@matrix.test", Name: "Ada"}
	mustDo(t, st.CreateUser(ctx, ada))
	mustDo(t, st.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: ada.ID, Role: store.MemberRoleAdmin}))
	adminKey := &store.APIKey{WorkspaceID: ws.ID, UserID: ada.ID, Name: "admin", Role: store.KeyRoleAdmin}
	secretKey, err := platform.IssueAPIKey(ctx, st, adminKey)
	mustDo(t, err)
	w.bearer["admin"], w.user["admin"], w.keyID["admin"] = secretKey, ada.ID, adminKey.ID

	ag := &agent.Agent{Name: mxAgent, Prompt: &agent.Prompt{Name: mxAgent, Model: "mx:script", Tools: mxTools, Stop: agent.StopRules{MaxSteps: 4}}}
	openModel := func(spec string) (model.Model, error) {
		if spec != "mx:script" {
			return nil, fmt.Errorf("no model %q", spec)
		}
		calls := make([]scripted.Call, 0, len(mxTools)+1)
		for _, name := range append(slices.Clone(mxTools), mxMissing) {
			calls = append(calls, scripted.Call{Name: name, Args: map[string]any{}})
		}
		return mxModel{Model: scripted.Turns(scripted.Turn{Calls: calls}, scripted.Turn{Text: "done"}), w: w}, nil
	}
	p, err := platform.New(platform.Config{Store: st, Registry: w.reg, Logger: slog.New(slog.DiscardHandler),
		Catalog: &agent.Catalog{Agents: map[string]*agent.Agent{mxAgent: ag}}, OpenModel: openModel})
	mustDo(t, err)
	mustDo(t, be.openJournal(ctx, p))
	mustDo(t, p.StartJobs(ctx, func(_ context.Context, c jobs.Config) (*jobs.Jobs, error) { return be.startJobs(t, c), nil }))

	// Access tokens: a token whose groups hold contractors is a member of the workspace.
	w.issuer = newTokenIssuer(t)
	w.url = w.serve(t, p, st)

	// The members and their keys, through the API: the support key bound to its toolset.
	for _, s := range []struct {
		name, role string
		toolsets   []string
	}{{"member", "member", nil}, {"viewer", "viewer", nil}, {"support", "member", []string{"support"}}, {"denied", "member", nil}} {
		var m struct {
			UserID string `json:"user_id"`
		}
		w.ok(t, "admin", "POST", "/v1/members", map[string]any{"email": s.name + "@matrix.test", "name": s.name}, 201, &m)
		var k struct {
			Key    store.APIKey `json:"key"`
			Secret string       `json:"secret"`
		}
		body := map[string]any{"user_id": m.UserID, "role": s.role, "name": s.name}
		if s.toolsets != nil {
			body["toolsets"] = s.toolsets
		}
		w.ok(t, "admin", "POST", "/v1/keys", body, 201, &k)
		if !slices.Equal(k.Key.Toolsets, s.toolsets) {
			t.Fatalf("the %s key is bound to %v, want %v", s.name, k.Key.Toolsets, s.toolsets)
		}
		w.bearer[s.name], w.user[s.name], w.keyID[s.name] = k.Secret, m.UserID, k.Key.ID
	}
	claims := w.issuer.claims(time.Now(), "contractors")
	claims["sub"], claims["name"] = "cora", "Cora"
	w.bearer["contractor"] = w.issuer.token(t, claims)
	var session struct {
		UserID string `json:"user_id"`
		Role   string `json:"role"`
	}
	w.ok(t, "contractor", "GET", "/v1/session", nil, 200, &session)
	if session.Role != "member" {
		t.Fatalf("the contractor's token acts as a %s, want a member", session.Role)
	}
	w.user["contractor"] = session.UserID

	w.setDocument(t, mxDocument(w.keyID["denied"]))
	return w
}

// serve serves p, with API keys in st and the issuer's tokens, on 127.0.0.1; it returns its
// URL. The matrix's workspace is the server's own, whose admin the rules decide too. Every
// answer of /v1 is checked against the OpenAPI document.
func (w *mxWorld) serve(t *testing.T, p *platform.Platform, st store.Backend) string {
	t.Helper()
	ta := &server.TokenAuth{Issuer: w.issuer.url, Audiences: []string{tokenAudience}, Users: st,
		Rules: []config.ClaimRule{{Claim: "groups", Value: "contractors", Workspace: w.ws, Role: store.KeyRoleMember}}}
	srv, err := server.New(context.Background(), server.Config{Platform: p, Auth: &server.Authenticator{Keys: st, Tokens: ta},
		WorkspaceID: w.ws, Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close(); _ = p.Close() })
	return ts.URL
}

// ok sends a request as the subject to the node at base ("" for the world's) and checks its
// status; out, when set, receives the JSON answer.
func (w *mxWorld) ok(t *testing.T, who, method, path string, body any, want int, out any) []byte {
	t.Helper()
	return w.okAt(t, w.url, who, method, path, body, want, out)
}

func (w *mxWorld) okAt(t *testing.T, base, who, method, path string, body any, want int, out any) []byte {
	t.Helper()
	res, data := sendAPI(t, http.DefaultClient, method, base+path, w.bearer[who], body)
	if res.StatusCode != want {
		t.Fatalf("%s %s as %s: %d %s, want %d", method, path, who, res.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s as %s: %v in %s", method, path, who, err, data)
		}
	}
	return data
}

// setDocument puts the document through the API, as the admin, from the version now.
func (w *mxWorld) setDocument(t *testing.T, doc entitle.Document) {
	t.Helper()
	var out struct {
		Version  int64    `json:"version"`
		Warnings []string `json:"warnings"`
	}
	w.ok(t, "admin", "PUT", "/v1/entitlements", map[string]any{"document": doc, "after": w.version}, 200, &out)
	if out.Version != w.version+1 || len(out.Warnings) != 0 {
		t.Fatalf("the document put after version %d: version %d, warnings %q", w.version, out.Version, out.Warnings)
	}
	w.version = out.Version
}

// session opens an MCP session with the official go-sdk client over streamable HTTP, as the
// subject, at base + path; it is closed when the test ends.
func (w *mxWorld) session(t *testing.T, base, path, who string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "matrix-test", Version: "1"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: base + path, MaxRetries: -1, HTTPClient: &http.Client{Transport: isoBearer{w.bearer[who]}}}, nil)
	if err != nil {
		t.Fatalf("an MCP session at %s as %s: %v", path, who, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// mxOutcome is what a call answers: "success", or an error result's code.
type mxOutcome string

const (
	mxSuccess     mxOutcome = "success"
	mxNotEntitled mxOutcome = mxOutcome(quiver.CodeNotEntitled)
	mxViewerCall  mxOutcome = mxOutcome(quiver.CodePolicyDenied) // a viewer's call of a tool it is offered
)

// want is what the subject's call of tool answers where it is offered offered.
func (s mxSubject) want(tool string, offered []string) mxOutcome {
	switch {
	case !slices.Contains(offered, tool):
		return mxNotEntitled
	case s.viewer:
		return mxViewerCall
	}
	return mxSuccess
}

// mxRefusal is the text of a refusal with the tool's name taken out: a hidden tool's refusal
// must read as a missing tool's.
func mxRefusal(text, name string) string {
	return strings.Replace(text, fmt.Sprintf("%q", name), "NAME", 1)
}

// mcpDoor checks the subject's MCP session at path (/mcp or /mcp/support): its tools/list is
// offered exactly, and a tools/call of each tool, and of a name no tool has, answers as the
// rules say; it returns the outcomes, by tool, to be found on the session's thread.
func (w *mxWorld) mcpDoor(t *testing.T, s mxSubject, path string, offered []string) []string {
	t.Helper()
	ctx := context.Background()
	cs := w.session(t, w.url, path, s.name)
	if got := mxListed(t, cs); !slices.Equal(got, mxSorted(offered)) {
		t.Errorf("MCP %s as %s: tools/list %v, want %v", path, s.name, got, mxSorted(offered))
	}
	call := func(name string) *sdk.CallToolResult {
		r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("MCP %s as %s: tools/call %s: %v", path, s.name, name, err)
		}
		return r
	}
	m := call(mxMissing)
	missing := mxRefusal(isoText(m), mxMissing)
	if code := mxCode(m); code != mxNotEntitled {
		t.Errorf("MCP %s as %s: tools/call %s: %s %q, want not_entitled", path, s.name, mxMissing, code, isoText(m))
	}
	recorded := []string{mxMissing + "=" + string(mxNotEntitled)}
	for _, name := range mxTools {
		r, want := call(name), s.want(name, offered)
		text, code := isoText(r), mxCode(r)
		switch {
		case code != want:
			t.Errorf("MCP %s as %s: tools/call %s: %s %q, want %s", path, s.name, name, code, text, want)
		case want == mxSuccess && text != "ran "+name:
			t.Errorf("MCP %s as %s: tools/call %s: %q, want it run", path, s.name, name, text)
		case want == mxViewerCall && !strings.Contains(text, "is a viewer's"):
			t.Errorf("MCP %s as %s: tools/call %s: %q, want a viewer's refusal", path, s.name, name, text)
		case want == mxNotEntitled && mxRefusal(text, name) != missing:
			t.Errorf("MCP %s as %s: tools/call %s: %q, want the refusal of a missing tool: %q", path, s.name, name, text, missing)
		}
		recorded = append(recorded, name+"="+string(want))
	}
	return recorded
}

// mxCode is an MCP tools/call result's outcome: success, or the code its error result
// carries in _meta (mcp.CodeMetaKey); "error without a code" when it carries none.
func mxCode(r *sdk.CallToolResult) mxOutcome {
	if !r.IsError {
		return mxSuccess
	}
	if code, ok := r.Meta[mcp.CodeMetaKey].(string); ok {
		return mxOutcome(code)
	}
	return "error without a code"
}

// mxListed is the session's tools/list, sorted.
func mxListed(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	names := []string{}
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return mxSorted(names)
}

func mxSorted(s []string) []string {
	out := slices.Clone(s)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return out
}

// mcpRecords waits for the subject's MCP sessions' threads to record want (tool=outcome, in
// any order): refusals are recorded like every call. Calls reach the store through the
// journal, a moment after they are answered.
func (w *mxWorld) mcpRecords(t *testing.T, s mxSubject, want []string) {
	t.Helper()
	ctx := context.Background()
	want = mxSorted(want)
	var got []string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(25 * time.Millisecond) {
		threads, _, err := w.be.st.Threads(ctx, w.ws, store.ThreadFilter{Tag: "mcp", Limit: 100})
		mustDo(t, err)
		got = []string{}
		for _, th := range threads {
			if th.UserID != w.user[s.name] {
				continue
			}
			msgs, err := w.be.st.Messages(ctx, w.ws, th.ID, store.Page{Limit: 1000})
			mustDo(t, err)
			for _, m := range msgs {
				if m.Role == store.RoleTool && m.Result != nil {
					got = append(got, m.ToolName+"="+mxOutcomeOf(m.Result.Status, m.Result.Code))
				}
			}
		}
		if got = mxSorted(got); slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the MCP sessions of %s record %v, want %v", s.name, got, want)
			return
		}
	}
}

func mxOutcomeOf(status, code string) string {
	if status == string(quiver.StatusSuccess) {
		return string(mxSuccess)
	}
	return code
}

// apiDoor checks /v1 as the subject: the served tools and the toolsets list exactly what it
// is offered, and a call of each tool, and of a name no tool has, answers as the rules say (a
// viewer's call is refused with 403 before any tool is looked at).
func (w *mxWorld) apiDoor(t *testing.T, s mxSubject) {
	t.Helper()
	var served struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	w.ok(t, s.name, "GET", "/v1/tools/served", nil, 200, &served)
	names := []string{}
	for _, tl := range served.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Equal(mxSorted(names), mxSorted(s.whole)) {
		t.Errorf("GET /v1/tools/served as %s: %v, want %v", s.name, mxSorted(names), mxSorted(s.whole))
	}

	var sets struct {
		Toolsets []struct {
			Name  string   `json:"name"`
			Tools []string `json:"tools"`
		} `json:"toolsets"`
	}
	w.ok(t, s.name, "GET", "/v1/toolsets", nil, 200, &sets)
	got, want := map[string][]string{}, map[string][]string{}
	for _, ts := range sets.Toolsets {
		got[ts.Name] = mxSorted(ts.Tools)
	}
	for name, tools := range mxToolsets {
		if s.bound && name != "support" {
			continue
		}
		want[name] = mxSorted(slices.DeleteFunc(slices.Clone(tools), func(tool string) bool { return !slices.Contains(s.whole, tool) }))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GET /v1/toolsets as %s: %v, want %v", s.name, got, want)
	}

	type result struct {
		Result struct {
			Status string `json:"status"`
			Text   string `json:"result"`
			Error  string `json:"error"`
			Code   string `json:"code"`
		} `json:"result"`
	}
	call := func(name string) (int, result) {
		res, data := sendAPI(t, http.DefaultClient, "POST", w.url+"/v1/tools/"+url.PathEscape(name)+"/call", w.bearer[s.name], map[string]any{"args": map[string]any{}})
		var out result
		if res.StatusCode == 200 {
			mustDo(t, json.Unmarshal(data, &out))
		}
		return res.StatusCode, out
	}
	status, missing := call(mxMissing)
	for _, name := range mxTools {
		code, r := call(name)
		want := s.want(name, s.whole)
		switch {
		case s.viewer && (code != 403 || status != 403):
			t.Errorf("POST /v1/tools/%s/call as %s: %d, and %d for a missing tool, want 403 for both", name, s.name, code, status)
		case s.viewer:
		case code != 200:
			t.Errorf("POST /v1/tools/%s/call as %s: %d, want 200", name, s.name, code)
		case want == mxSuccess && (r.Result.Status != "success" || r.Result.Text != "ran "+name):
			t.Errorf("POST /v1/tools/%s/call as %s: %+v, want it run", name, s.name, r.Result)
		case want == mxNotEntitled && (r.Result.Code != string(quiver.CodeNotEntitled) || missing.Result.Code != r.Result.Code ||
			mxRefusal(r.Result.Error, name) != mxRefusal(missing.Result.Error, mxMissing)):
			t.Errorf("POST /v1/tools/%s/call as %s: %+v, want not_entitled as a missing tool: %+v", name, s.name, r.Result, missing.Result)
		}
	}
}

// runDoor starts a run of the agent through /v1 as the subject: its model is offered the
// subject's tools less the one the agent is denied, and its calls of every tool, and of a name
// no tool has, are recorded on its thread as the rules say. A viewer may not start one.
func (w *mxWorld) runDoor(t *testing.T, s mxSubject) {
	t.Helper()
	if s.viewer {
		w.ok(t, s.name, "POST", "/v1/threads", map[string]any{"agent": mxAgent}, 403, nil)
		return
	}
	var th struct {
		ID string `json:"id"`
	}
	w.ok(t, s.name, "POST", "/v1/threads", map[string]any{"agent": mxAgent}, 201, &th)
	w.ok(t, s.name, "POST", "/v1/threads/"+th.ID+"/runs", map[string]any{"message": "Call them all."}, 202, nil)
	offered := slices.DeleteFunc(slices.Clone(s.whole), func(tool string) bool { return tool == mxDelete })
	want := []string{mxMissing + "=" + string(mxNotEntitled)}
	for _, name := range mxTools {
		want = append(want, name+"="+string(s.want(name, offered)))
	}
	want = mxSorted(want)
	var page struct {
		Messages []struct {
			Role     string `json:"role"`
			Content  string `json:"content"`
			ToolName string `json:"tool_name"`
			Result   *struct {
				Status string `json:"status"`
				Code   string `json:"code"`
			} `json:"result"`
		} `json:"messages"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(25 * time.Millisecond) {
		w.ok(t, s.name, "GET", "/v1/threads/"+th.ID+"/messages", nil, 200, &page)
		got, ended := []string{}, false
		for _, m := range page.Messages {
			if m.Result != nil {
				got = append(got, m.ToolName+"="+mxOutcomeOf(m.Result.Status, m.Result.Code))
			}
			ended = ended || m.Role == "assistant" && m.Content == "done"
		}
		if ended {
			if got = mxSorted(got); !slices.Equal(got, want) {
				t.Errorf("the run of %s as %s records %v, want %v", mxAgent, s.name, got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run of %s as %s did not end within 30 s: %+v", mxAgent, s.name, page.Messages)
		}
	}
	w.mu.Lock()
	got := mxSorted(w.offered)
	w.mu.Unlock()
	if !slices.Equal(got, mxSorted(offered)) {
		t.Errorf("the run of %s as %s offered its model %v, want %v", mxAgent, s.name, got, mxSorted(offered))
	}
}

// TestEntitlementsMatrix: every door offers and allows each subject exactly what the
// workspace's entitlements give it, and follows a rule changed while sessions are open.
func TestEntitlementsMatrix(t *testing.T) {
	mxEach(t, func(t *testing.T, be mxBackend) {
		w := newMxWorld(t, be)
		for _, s := range mxSubjects {
			t.Run(s.name, func(t *testing.T) {
				recorded := w.mcpDoor(t, s, "/mcp", s.whole)
				recorded = append(recorded, w.mcpDoor(t, s, "/mcp/support", s.support)...)
				w.mcpRecords(t, s, recorded)
				w.apiDoor(t, s)
				w.runDoor(t, s)
			})
		}
		t.Run("explain", func(t *testing.T) { w.explain(t) })
		t.Run("a toolset the workspace does not define", func(t *testing.T) {
			res, data := sendAPI(t, http.DefaultClient, "POST", w.url+"/mcp/billing", w.bearer["member"],
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
			if res.StatusCode != http.StatusNotFound || strings.Contains(string(data), mxLookup) {
				t.Errorf("POST /mcp/billing: %d %s, want 404 naming no tool", res.StatusCode, data)
			}
		})
		t.Run("a rule changed while sessions are open", func(t *testing.T) { w.ruleChanged(t) })
	})
}

// explain checks the decisions the API explains: deny wins over the members' allow, and a
// caller that is not an admin may ask about itself alone.
func (w *mxWorld) explain(t *testing.T) {
	var x struct {
		Allowed bool   `json:"allowed"`
		Rule    int    `json:"rule"`
		Reason  string `json:"reason"`
	}
	w.ok(t, "admin", "GET", "/v1/entitlements/explain?subject="+url.QueryEscape("key:"+w.keyID["denied"])+"&tool="+mxRefund, nil, 200, &x)
	if x.Allowed || x.Rule != 2 {
		t.Errorf("explain the denied key's refund: %+v, want refused by rule 2", x)
	}
	w.ok(t, "admin", "GET", "/v1/entitlements/explain?subject="+url.QueryEscape("claim:groups=contractors,role:member")+"&tool="+mxDelete, nil, 200, &x)
	if x.Allowed || x.Rule != 3 {
		t.Errorf("explain a contractor's delete: %+v, want refused by rule 3", x)
	}
	w.ok(t, "member", "GET", "/v1/entitlements/explain?tool="+mxRefund, nil, 200, &x)
	if !x.Allowed {
		t.Errorf("explain the member's own refund: %+v, want allowed", x)
	}
	w.ok(t, "member", "GET", "/v1/entitlements/explain?subject="+url.QueryEscape("key:"+w.keyID["denied"])+"&tool="+mxRefund, nil, 403, nil)
}

// ruleChanged opens MCP sessions of the member's (at /mcp, and on PostgreSQL at another node
// of the same database too), then puts a document that denies members search_docs: each
// session's next tools/list and call follow it, the other node's within a few seconds.
func (w *mxWorld) ruleChanged(t *testing.T) {
	ctx := context.Background()
	nodes := map[string]string{"this node": w.url}
	if w.be.another != nil {
		st := w.be.another(t)
		p, err := platform.New(platform.Config{Store: st, Registry: w.reg, Logger: slog.New(slog.DiscardHandler)})
		mustDo(t, err)
		nodes["another node"] = w.serve(t, p, st)
	}
	sessions := map[string]*sdk.ClientSession{}
	for node, base := range nodes {
		cs := w.session(t, base, "/mcp", "member")
		if got := mxListed(t, cs); !slices.Equal(got, mxSorted(mxTools)) {
			t.Fatalf("the member's session on %s lists %v before the change", node, got)
		}
		sessions[node] = cs
	}
	doc := mxDocument(w.keyID["denied"])
	doc.Rules = append(doc.Rules, entitle.Rule{Who: entitle.Who{Role: "member"}, Selector: entitle.Selector{Tools: []string{mxSearch}}, Access: quiver.AccessDeny})
	w.setDocument(t, doc)
	want := []string{mxDelete, mxLookup, mxRefund}
	for node, cs := range sessions {
		// The node that took the change follows at once; another within its recheck of the
		// workspace's tools: polled, not timed.
		deadline := time.Now().Add(15 * time.Second)
		for got := mxListed(t, cs); !slices.Equal(got, want); got = mxListed(t, cs) {
			if node == "this node" || time.Now().After(deadline) {
				t.Fatalf("the member's open session on %s lists %v after the change, want %v", node, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
		r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mxSearch, Arguments: map[string]any{}})
		mustDo(t, err)
		if code := mxCode(r); code != mxNotEntitled {
			t.Errorf("the member's open session on %s calls %s after the change: %s %q, want not_entitled", node, mxSearch, code, isoText(r))
		}
		if r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mxLookup, Arguments: map[string]any{}}); err != nil || r.IsError {
			t.Errorf("the member's open session on %s calls %s after the change: %v %+v", node, mxLookup, err, r)
		}
	}
	// The API follows too.
	var served struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	for node, base := range nodes {
		w.okAt(t, base, "member", "GET", "/v1/tools/served", nil, 200, &served)
		names := []string{}
		for _, tl := range served.Tools {
			names = append(names, tl.Name)
		}
		if !slices.Equal(mxSorted(names), want) {
			t.Errorf("GET /v1/tools/served as the member on %s after the change: %v, want %v", node, mxSorted(names), want)
		}
	}
}
