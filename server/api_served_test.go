package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

// The endpoints of api_served.go and api_variables.go: a served tool with its provider
// renderings, arguments checked against its schema, and the variables of agents and users.

// conWorld is a thrWorld (workspace A with a member's, a viewer's and an admin's keys; B with
// a member's) whose server runs the agent "helper" and serves tools of its own.
type conWorld struct {
	*thrWorld
	member, admin, other string // the users of A (member and admin) and of B
}

func conEach(t *testing.T, fn func(t *testing.T, w *conWorld)) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		fn(t, newConWorld(t, st.(thrStore)))
	})
}

func newConWorld(t *testing.T, st thrStore) *conWorld {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	a, b := &store.Workspace{Name: "acme"}, &store.Workspace{Name: "globex"}
	must(st.CreateWorkspace(ctx, a))
	must(st.CreateWorkspace(ctx, b))
	ua, uadm, ub := &store.User{Email: "bob@acme.test"}, &store.User{Email: "ada@acme.test"}, &store.User{Email: "gil@globex.test"}
	for _, u := range []*store.User{ua, uadm, ub} {
		must(st.CreateUser(ctx, u))
	}
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: a.ID, UserID: ua.ID, Role: store.MemberRoleMember}))
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: a.ID, UserID: uadm.ID, Role: store.MemberRoleAdmin}))
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: b.ID, UserID: ub.ID, Role: store.MemberRoleMember}))
	tw := &thrWorld{st: st, a: a.ID, b: b.ID, key: map[string]string{}, logs: &lockedBuffer{},
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, k := range []struct {
		who, ws, user string
		role          store.KeyRole
	}{
		{"member", a.ID, ua.ID, store.KeyRoleMember}, {"viewer", a.ID, ua.ID, store.KeyRoleViewer},
		{"admin", a.ID, uadm.ID, store.KeyRoleAdmin}, {"b", b.ID, ub.ID, store.KeyRoleMember},
	} {
		secretKey, prefix, hash := platform.NewAPIKey()
		must(st.CreateAPIKey(ctx, &store.APIKey{WorkspaceID: k.ws, UserID: k.user, Name: k.who, Role: k.role, Prefix: prefix, Hash: hash}))
		tw.key[k.who] = secretKey
	}
	k, _, err := secret.GenerateKey()
	must(err)
	tw.keys = secret.NewKeyring(k)

	type transfer struct {
		Amount   int    `json:"amount" minimum:"1" maximum:"1000" description:"In cents."`
		To       string `json:"to" description:"Who receives it."`
		Currency string `json:"currency,omitempty" enum:"EUR,USD" default:"EUR"`
		Lines    []struct {
			Label string `json:"label"`
		} `json:"lines,omitempty"`
	}
	reg := &quiver.Registry{}
	must(reg.Register(
		quiver.Func("transfer", "Moves money to someone.", func(_ context.Context, in transfer) (string, error) {
			return fmt.Sprintf("sent %d %s to %s", in.Amount, in.Currency, in.To), nil
		}, quiver.WithConfirmation(), quiver.WithVariables(quiver.Variable{Name: "BANK_TOKEN", Type: quiver.VarSecret, Required: true}),
			quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{"amount":5,"to":"ann"}`)})),
		quiver.Func("ext.lookup", "Looks a word up.", func(_ context.Context, in struct {
			Word string `json:"word"`
		}) (string, error) {
			return in.Word, nil
		}),
	))
	open, err := quiver.NewTool(quiver.Spec{Name: "open_file", Description: "Opens a file on the user's machine.", Target: quiver.TargetClient,
		InputSchema: &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"path": {Type: "string"}}, Required: []string{"path"}}}, nil)
	must(err)
	guess, err := quiver.NewTool(quiver.Spec{Name: "guess", Description: "The model guesses a number.",
		OutputSchema: &schema.Schema{Type: "object", Properties: map[string]*schema.Schema{"n": {Type: "integer"}}}}, nil)
	must(err)
	must(reg.Register(open, guess))

	// The server runs helper, and secret-agent, which no answer about another agent names.
	catalog := &agent.Catalog{Agents: map[string]*agent.Agent{
		"helper":       {Name: "helper", Prompt: &agent.Prompt{Name: "helper"}},
		"secret-agent": {Name: "secret-agent", Prompt: &agent.Prompt{Name: "secret-agent"}},
	}}
	logger := slog.New(slog.NewTextHandler(tw.logs, nil))
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Resolver: vars.New(st, tw.keys), Catalog: catalog, Logger: logger})
	must(err)
	srv, err := server.New(ctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: st}, Logger: logger})
	must(err)
	ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close() })
	tw.url = ts.URL
	return &conWorld{thrWorld: tw, member: ua.ID, admin: uadm.ID, other: ub.ID}
}

type servedTool struct {
	Name                 string            `json:"name"`
	Description          string            `json:"description"`
	Target               string            `json:"target"`
	RequiresConfirmation bool              `json:"requires_confirmation"`
	Latent               bool              `json:"latent"`
	InputSchema          *schema.Schema    `json:"input_schema"`
	OutputSchema         *schema.Schema    `json:"output_schema"`
	Examples             []quiver.Example  `json:"examples"`
	Variables            []quiver.Variable `json:"variables"`
	Dialects             []struct {
		Dialect        string          `json:"dialect"`
		Name           string          `json:"name"`
		Strict         bool            `json:"strict"`
		StrictFallback string          `json:"strict_fallback"`
		Tools          json.RawMessage `json:"tools"`
		Error          string          `json:"error"`
	} `json:"dialects"`
}

// TestConsoleServedTool: a served tool as a person reads it, with what each provider is
// offered; another workspace's stored tool is not found, as a name no tool has.
func TestConsoleServedTool(t *testing.T) {
	conEach(t, func(t *testing.T, w *conWorld) {
		var tl servedTool
		w.ok(t, "viewer", "GET", "/v1/tools/served/transfer", nil, 200, &tl)
		if tl.Name != "transfer" || tl.Description != "Moves money to someone." || tl.Target != "server" || !tl.RequiresConfirmation || tl.Latent {
			t.Errorf("transfer: %+v", tl)
		}
		if tl.InputSchema == nil || tl.InputSchema.Properties["amount"] == nil || len(tl.Examples) != 1 ||
			len(tl.Variables) != 1 || tl.Variables[0].Name != "BANK_TOKEN" || tl.Variables[0].Type != quiver.VarSecret {
			t.Errorf("transfer's schema, examples and variables: %+v", tl)
		}
		var dialects []string
		for _, d := range tl.Dialects {
			dialects = append(dialects, d.Dialect)
			if d.Error != "" || d.Name != "transfer" || !json.Valid(d.Tools) {
				t.Errorf("transfer in %s: %+v", d.Dialect, d)
			}
			var wire []map[string]any
			if err := json.Unmarshal(d.Tools, &wire); err != nil || len(wire) != 1 {
				t.Errorf("transfer in %s: tools %s", d.Dialect, d.Tools)
				continue
			}
			var name any
			switch d.Dialect {
			case "openai", "openai-strict":
				fn, _ := wire[0]["function"].(map[string]any)
				name = fn["name"]
				if d.Dialect == "openai-strict" && (!d.Strict || fn["strict"] != true) {
					t.Errorf("transfer in openai-strict is not strict: %+v %s", d, d.Tools)
				}
			case "anthropic":
				name = wire[0]["name"]
				if wire[0]["input_schema"] == nil {
					t.Errorf("transfer for anthropic has no input_schema: %s", d.Tools)
				}
			case "gemini":
				decls, _ := wire[0]["functionDeclarations"].([]any)
				if len(decls) == 1 {
					name = decls[0].(map[string]any)["name"]
				}
			case "mcp":
				name = wire[0]["name"]
				if wire[0]["inputSchema"] == nil {
					t.Errorf("transfer for MCP has no inputSchema: %s", d.Tools)
				}
			}
			if name != "transfer" {
				t.Errorf("transfer in %s is named %v: %s", d.Dialect, name, d.Tools)
			}
		}
		if want := []string{"openai", "openai-strict", "anthropic", "gemini", "mcp"}; !slices.Equal(dialects, want) {
			t.Errorf("dialects %v, want %v", dialects, want)
		}

		// A name a provider refuses is mapped for it, and kept where it is allowed.
		w.ok(t, "viewer", "GET", "/v1/tools/served/ext.lookup", nil, 200, &tl)
		for _, d := range tl.Dialects {
			mapped := d.Dialect != "mcp" && d.Dialect != "gemini"
			if mapped == (d.Name == "ext.lookup") || d.Name == "" || !strings.Contains(string(d.Tools), `"`+d.Name+`"`) {
				t.Errorf("ext.lookup in %s is named %q: %s", d.Dialect, d.Name, d.Tools)
			}
		}

		tl = servedTool{}
		w.ok(t, "viewer", "GET", "/v1/tools/served/open_file", nil, 200, &tl)
		if tl.Target != "client" || tl.RequiresConfirmation {
			t.Errorf("open_file: %+v", tl)
		}
		tl = servedTool{}
		w.ok(t, "viewer", "GET", "/v1/tools/served/guess", nil, 200, &tl)
		if !tl.Latent || tl.OutputSchema == nil {
			t.Errorf("guess: %+v", tl)
		}

		// B's stored tool is B's: A is told no more than for a name no tool has.
		w.ok(t, "b", "POST", "/v1/tools", map[string]any{"name": "globex_only", "description": "Globex's.", "target": "client",
			"input_schema": map[string]any{"type": "object"}}, 201, nil)
		w.ok(t, "b", "GET", "/v1/tools/served/globex_only", nil, 200, &tl)
		theirs := w.do(t, "member", "GET", "/v1/tools/served/globex_only", nil)
		none := w.do(t, "member", "GET", "/v1/tools/served/globex_none", nil)
		problem(t, "B's tool", theirs, 404, server.CodeNotFound, "path.name")
		if strings.ReplaceAll(string(none.body), "globex_none", "globex_only") != string(theirs.body) {
			t.Errorf("B's tool answers %s, a tool that does not exist %s", theirs.body, none.body)
		}
		problem(t, "B's tool checked", w.do(t, "member", "POST", "/v1/tools/served/globex_only/validate", map[string]any{"args": map[string]any{}}),
			404, server.CodeNotFound, "path.name")
	})
}

// TestConsoleCheckArgs: arguments are checked as the dispatcher checks them, each problem
// naming its field; good ones come back with the defaults applied.
func TestConsoleCheckArgs(t *testing.T) {
	conEach(t, func(t *testing.T, w *conWorld) {
		const path = "/v1/tools/served/transfer/validate"
		var out struct {
			Args map[string]any `json:"args"`
		}
		w.ok(t, "viewer", "POST", path, map[string]any{"args": map[string]any{"amount": 5, "to": "ann"}}, 200, &out)
		if out.Args["currency"] != "EUR" || out.Args["amount"] != float64(5) {
			t.Errorf("checked arguments: %v", out.Args)
		}
		w.ok(t, "viewer", "POST", path, map[string]any{"args": map[string]any{"amount": 5, "to": "ann", "_reasoningForCall": "why"}}, 200, &out)
		if _, has := out.Args["_reasoningForCall"]; has {
			t.Errorf("a meta-field is kept: %v", out.Args)
		}
		for _, c := range []struct {
			what string
			body any
			locs []string
		}{
			{"under the minimum, without to", `{"args":{"amount":0}}`, []string{"body.args.amount", "body.args.to"}},
			{"a string for a number, a currency not listed", `{"args":{"amount":"5","to":"ann","currency":"GBP"}}`, []string{"body.args.amount", "body.args.currency"}},
			{"an item without its label", `{"args":{"amount":5,"to":"ann","lines":[{"label":"a"},{"label":7}]}}`, []string{"body.args.lines[1].label"}},
			{"not an object", `{"args":[1,2]}`, []string{"body.args"}},
			{"not JSON", `{"args":"{"}`, []string{"body.args"}},
		} {
			r := w.do(t, "member", "POST", path, c.body)
			for _, loc := range c.locs {
				problem(t, c.what, r, 400, server.CodeInvalidRequest, loc)
			}
		}
		r := w.do(t, "member", "POST", "/v1/tools/served/guess/validate", `{"args":{"n":1}}`)
		problem(t, "arguments to a tool that takes none", r, 400, server.CodeInvalidRequest, "body.args.n")
		w.ok(t, "member", "POST", "/v1/tools/served/guess/validate", `{}`, 200, nil)
	})
}

// TestConsoleAgentVariables: an agent's variables are set by members, read by any key of the
// workspace, secrets sealed and never shown; an agent the server does not run is not found.
func TestConsoleAgentVariables(t *testing.T) {
	conEach(t, func(t *testing.T, w *conWorld) {
		ctx := context.Background()
		const token = "agent-t0ken-5e4d3c2b"
		base := "/v1/agents/helper/variables"
		got := map[string]any{}
		w.ok(t, "member", "PUT", base+"/REGION", map[string]any{"value": "eu-west"}, 200, &got)
		if got["name"] != "REGION" || got["value"] != "eu-west" || got["secret"] != false || got["set"] != true {
			t.Errorf("a text variable set: %v", got)
		}
		got = map[string]any{}
		w.ok(t, "member", "PUT", base+"/API_TOKEN", map[string]any{"value": token, "secret": true}, 200, &got)
		if _, has := got["value"]; has || got["secret"] != true {
			t.Errorf("a secret set: %v", got)
		}
		var page variablesPage
		w.ok(t, "viewer", "GET", base, nil, 200, &page)
		if len(page.Variables) != 2 || page.Variables[0]["name"] != "API_TOKEN" || page.Variables[1]["value"] != "eu-west" {
			t.Errorf("listed: %v", page.Variables)
		}
		if _, has := page.Variables[0]["value"]; has {
			t.Errorf("the secret is listed with a value: %v", page.Variables[0])
		}
		// B's workspace has its own values for the same agent.
		w.ok(t, "b", "GET", base, nil, 200, &page)
		if len(page.Variables) != 0 {
			t.Errorf("B lists A's values: %v", page.Variables)
		}

		stored, err := w.st.Variables(ctx, w.a, store.LayerAgent, "helper")
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range stored {
			if v.Name == "API_TOKEN" && (!v.Secret || strings.Contains(v.Value, token)) {
				t.Errorf("the secret is stored as %+v", v)
			}
		}
		values, err := vars.New(w.st, w.keys).Resolve(ctx, quiver.Scope{WorkspaceID: w.a, AgentID: "helper"},
			[]quiver.Variable{{Name: "API_TOKEN", Type: quiver.VarSecret, Required: true}, {Name: "REGION", Required: true}})
		if err != nil || values["API_TOKEN"] != token || values["REGION"] != "eu-west" {
			t.Errorf("resolved: %v, %v", values, err)
		}

		problem(t, "a viewer setting", w.do(t, "viewer", "PUT", base+"/REGION", map[string]any{"value": "mars"}), 403, server.CodeForbidden, "")
		problem(t, "a viewer removing", w.do(t, "viewer", "DELETE", base+"/REGION", nil), 403, server.CodeForbidden, "")
		problem(t, "a scoped value", w.do(t, "member", "PUT", base+"/REGION", `{"value":"x","scoped":true}`), 400, server.CodeInvalidRequest, "body.scoped")
		problem(t, "an unknown field", w.do(t, "member", "PUT", base+"/REGION", `{"value":"`+token+`","colour":1}`), 400, server.CodeInvalidRequest, "body.colour")
		problem(t, "a bad name", w.do(t, "member", "PUT", base+"/a%20b", `{"value":"`+token+`"}`), 0, server.CodeInvalidRequest, "path.name")
		for _, method := range []string{"GET", "PUT", "DELETE"} {
			p := "/v1/agents/nobody/variables"
			if method != "GET" {
				p += "/REGION"
			}
			r := w.do(t, "member", method, p, `{"value":"x"}`)
			problem(t, method+" an unknown agent", r, 404, server.CodeNotFound, "path.agent")
			if strings.Contains(string(r.body), "secret-agent") {
				t.Errorf("the answer lists the server's agents: %s", r.body)
			}
		}

		w.ok(t, "member", "DELETE", base+"/REGION", nil, 204, nil)
		problem(t, "removing it again", w.do(t, "member", "DELETE", base+"/REGION", nil), 404, server.CodeNotFound, "path.name")
		w.neverSaid(t, token)

		// A server without agents has no agent variables to offer.
		srv, err := server.New(ctx, server.Config{Platform: newPlatform(t, w.st, nil), Auth: &server.Authenticator{Keys: w.st}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
		defer func() { ts.Close(); srv.Close() }()
		res, body := sendAPI(t, w.client, "GET", ts.URL+base, w.key["member"], nil)
		problem(t, "no agents", thrResp{status: res.StatusCode, header: res.Header, body: body}, 503, server.CodeUnavailable, "")
	})
}

// TestConsoleUserVariables: a key reads and sets its own user's variables, an admin's any
// member's; a user of another workspace is not found.
func TestConsoleUserVariables(t *testing.T) {
	conEach(t, func(t *testing.T, w *conWorld) {
		ctx := context.Background()
		const token = "user-t0ken-1a2b3c4d"
		own := "/v1/users/" + w.member + "/variables"
		got := map[string]any{}
		w.ok(t, "member", "PUT", own+"/GH_TOKEN", map[string]any{"value": token, "secret": true}, 200, &got)
		if _, has := got["value"]; has || got["secret"] != true || got["name"] != "GH_TOKEN" {
			t.Errorf("a secret set: %v", got)
		}
		w.ok(t, "admin", "PUT", own+"/EDITOR", map[string]any{"value": "vim"}, 200, nil)
		var page variablesPage
		for _, who := range []string{"member", "viewer", "admin"} {
			w.ok(t, who, "GET", own, nil, 200, &page)
			if len(page.Variables) != 2 || page.Variables[0]["name"] != "EDITOR" || page.Variables[0]["value"] != "vim" || page.Variables[1]["name"] != "GH_TOKEN" {
				t.Errorf("%s lists %v", who, page.Variables)
			}
		}
		values, err := vars.New(w.st, w.keys).Resolve(ctx, quiver.Scope{WorkspaceID: w.a, UserID: w.member},
			[]quiver.Variable{{Name: "GH_TOKEN", Type: quiver.VarSecret, Required: true}})
		if err != nil || values["GH_TOKEN"] != token {
			t.Errorf("resolved: %v, %v", values, err)
		}

		// Another member's are the admin's business only.
		adm := "/v1/users/" + w.admin + "/variables"
		problem(t, "a member reading another's", w.do(t, "member", "GET", adm, nil), 403, server.CodeForbidden, "")
		problem(t, "a member setting another's", w.do(t, "member", "PUT", adm+"/X", map[string]any{"value": "x"}), 403, server.CodeForbidden, "")
		problem(t, "a member removing another's", w.do(t, "member", "DELETE", adm+"/X", nil), 403, server.CodeForbidden, "")
		problem(t, "a viewer setting its own", w.do(t, "viewer", "PUT", own+"/X", map[string]any{"value": "x"}), 403, server.CodeForbidden, "")
		problem(t, "a viewer removing its own", w.do(t, "viewer", "DELETE", own+"/EDITOR", nil), 403, server.CodeForbidden, "")
		w.ok(t, "admin", "GET", adm, nil, 200, &page)

		// B's user, and a user who does not exist, are not A's members: the same answer.
		theirs := w.do(t, "admin", "GET", "/v1/users/"+w.other+"/variables", nil)
		missing := store.NewID(store.PrefixUser)
		none := w.do(t, "admin", "GET", "/v1/users/"+missing+"/variables", nil)
		problem(t, "B's user", theirs, 404, server.CodeNotFound, "path.id")
		if strings.ReplaceAll(string(none.body), missing, w.other) != string(theirs.body) {
			t.Errorf("B's user answers %s, one who does not exist %s", theirs.body, none.body)
		}
		problem(t, "setting B's user's", w.do(t, "admin", "PUT", "/v1/users/"+w.other+"/variables/X", map[string]any{"value": "x"}), 404, server.CodeNotFound, "path.id")
		problem(t, "a thread's id", w.do(t, "admin", "GET", "/v1/users/thr_"+strings.TrimPrefix(w.member, "usr_")+"/variables", nil), 400, server.CodeInvalidRequest, "path.id")
		problem(t, "a scoped value", w.do(t, "member", "PUT", own+"/X", `{"value":"x","scoped":true}`), 400, server.CodeInvalidRequest, "body.scoped")
		// A body read by its handler is held to the same keys as any other (strictjson.go).
		problem(t, "a value given twice", w.do(t, "member", "PUT", own+"/X", `{"value":"x","value":"y"}`), 400, server.CodeInvalidRequest, "body.value")
		problem(t, "a value in another case", w.do(t, "member", "PUT", own+"/X", `{"value":"x","Value":"y"}`), 400, server.CodeInvalidRequest, "body.Value")
		if vs, err := w.st.Variables(ctx, w.b, store.LayerUser, w.other); err != nil || len(vs) != 0 {
			t.Errorf("B's user's variables: %v, %v", vs, err)
		}

		w.ok(t, "member", "DELETE", own+"/GH_TOKEN", nil, 204, nil)
		problem(t, "removing it again", w.do(t, "admin", "DELETE", own+"/GH_TOKEN", nil), 404, server.CodeNotFound, "path.name")
		w.neverSaid(t, token)
	})
}

// TestConsoleExtraDocument: the endpoints are in the OpenAPI document, the variable bodies
// described.
func TestConsoleExtraDocument(t *testing.T) {
	paths := documentPaths(t, map[string][]string{
		"/v1/tools/served/{name}":             {"get"},
		"/v1/tools/served/{name}/validate":    {"post"},
		"/v1/agents/{agent}/variables":        {"get"},
		"/v1/agents/{agent}/variables/{name}": {"put", "delete"},
		"/v1/users/{id}/variables":            {"get"},
		"/v1/users/{id}/variables/{name}":     {"put", "delete"},
	})
	for _, p := range []string{"/v1/agents/{agent}/variables/{name}", "/v1/users/{id}/variables/{name}"} {
		if !strings.Contains(string(paths[p]["put"]), `"maxLength": 65536`) {
			t.Errorf("PUT %s: the body is not described: %s", p, paths[p]["put"])
		}
	}
}
