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

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/apicontract"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

// reqServer is a server on a real store, on 127.0.0.1, running the agent clerk, whose prompt
// requires REGION and whose tools require LOOKUP_HOST and the secret VAULT_TOKEN.
type reqServer struct {
	url, key string
	answers  []string
}

const vaultToken = "vault-s3cret-5521"

func newReqServer(t *testing.T, be isoBackend) *reqServer {
	t.Helper()
	ctx := context.Background()
	st := be.st
	ws, u := &store.Workspace{Name: "req"}, &store.User{Email: "clerk@req.test"}
	mustDo(t, st.CreateWorkspace(ctx, ws))
	mustDo(t, st.CreateUser(ctx, u))
	mustDo(t, st.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: u.ID, Role: store.MemberRoleMember}))
	key, err := platform.IssueAPIKey(ctx, st, &store.APIKey{WorkspaceID: ws.ID, UserID: u.ID, Name: "member", Role: store.KeyRoleMember})
	mustDo(t, err)
	k, _, err := secret.GenerateKey()
	mustDo(t, err)
	reg := &quiver.Registry{}
	noop := func(context.Context, struct{}) (string, error) { return "", nil }
	mustDo(t, reg.Register(
		quiver.Func("lookup", "Looks things up.", noop, quiver.WithVariables(quiver.Variable{Name: "LOOKUP_HOST", Required: true})),
		quiver.Func("vault", "Opens the vault.", noop, quiver.WithVariables(quiver.Variable{Name: "VAULT_TOKEN", Type: quiver.VarSecret,
			Required: true, Description: "the vault's token"})),
	))
	clerk := &agent.Agent{Name: "clerk", Prompt: &agent.Prompt{Name: "clerk", Tools: []string{"lookup", "vault"},
		Variables: quiver.Variables{{Name: "REGION", Required: true}}}}
	p, err := platform.New(platform.Config{Store: st, Registry: reg, Resolver: vars.New(st, secret.NewKeyring(k)),
		Logger: slog.New(slog.DiscardHandler), Catalog: &agent.Catalog{Agents: map[string]*agent.Agent{"clerk": clerk}},
		Model: scripted.Turns(scripted.Turn{Text: "filed"})})
	mustDo(t, err)
	// The thread endpoints are served with background runs.
	mustDo(t, p.StartJobs(ctx, func(_ context.Context, c jobs.Config) (*jobs.Jobs, error) { return be.startJobs(t, c), nil }))
	srv, err := server.New(ctx, server.Config{Platform: p, Auth: &server.Authenticator{Keys: st}, WorkspaceID: ws.ID,
		Logger: slog.New(slog.DiscardHandler)})
	mustDo(t, err)
	ts := httptest.NewServer(apicontract.Handler(t, srv.Handler()))
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return &reqServer{url: ts.URL, key: key}
}

func (s *reqServer) send(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	res, data := sendAPI(t, http.DefaultClient, method, s.url+path, s.key, body)
	s.answers = append(s.answers, string(data))
	return res.StatusCode, data
}

// SPEC V3 at the API's door: POST /v1/threads for an agent is a 422 missing_variables while a
// variable its prompt or one of its tools requires has no value, each named as a field of the
// body's variables with what requires it; values given with the thread, or set on the agent,
// count; a secret given is sealed and never shown again.
func TestCreateThreadOverTheAPIRequiresEveryVariable(t *testing.T) {
	isoEach(t, func(t *testing.T, be isoBackend) {
		s := newReqServer(t, be)
		for _, c := range []struct {
			name, body string
			status     int
			locations  []string // the problem's fields
			has        []string
		}{
			{name: "nothing given", body: `{"agent":"clerk"}`, status: 422,
				locations: []string{"body.variables.LOOKUP_HOST", "body.variables.REGION", "body.variables.VAULT_TOKEN"},
				has:       []string{"required by tool lookup", "required by prompt clerk", "required by tool vault (the vault's token)", "3 required variables are not set"}},
			{name: "the secret given, the prompt's missing", body: `{"agent":"clerk","variables":{"VAULT_TOKEN":"` + vaultToken + `","LOOKUP_HOST":"db"}}`,
				status: 422, locations: []string{"body.variables.REGION"}},
			{name: "values for a thread of no agent", body: `{"variables":{"REGION":"eu"}}`, status: 400, locations: []string{"body.variables"}},
			{name: "every one given", body: `{"agent":"clerk","variables":{"VAULT_TOKEN":"` + vaultToken + `","LOOKUP_HOST":"db","REGION":"eu"}}`, status: 201},
		} {
			t.Run(c.name, func(t *testing.T) {
				status, data := s.send(t, "POST", "/v1/threads", c.body)
				if status != c.status {
					t.Fatalf("%d %s, want %d", status, data, c.status)
				}
				if status == 201 {
					var th struct {
						ID string `json:"id"`
					}
					mustDo(t, json.Unmarshal(data, &th))
					status, data = s.send(t, "GET", "/v1/threads/"+th.ID+"/variables", "")
					if status != 200 || !strings.Contains(string(data), `"VAULT_TOKEN"`) || !strings.Contains(string(data), `"secret":true`) {
						t.Errorf("the thread's variables: %d %s", status, data)
					}
					return
				}
				var p thrProblem
				mustDo(t, json.Unmarshal(data, &p))
				var locs []string
				for _, e := range p.Errors {
					locs = append(locs, e.Location)
				}
				slices.Sort(locs)
				if !slices.Equal(locs, c.locations) {
					t.Errorf("fields %v, want %v: %s", locs, c.locations, data)
				}
				if want := map[int]string{422: server.CodeMissingVariables, 400: server.CodeInvalidRequest}[c.status]; p.Code != want {
					t.Errorf("code %q, want %q", p.Code, want)
				}
				for _, h := range c.has {
					if !strings.Contains(string(data), h) {
						t.Errorf("the answer lacks %q: %s", h, data)
					}
				}
			})
		}
		// A value on the agent's layer counts too.
		if status, data := s.send(t, "PUT", "/v1/agents/clerk/variables/LOOKUP_HOST", `{"value":"db"}`); status != 200 {
			t.Fatalf("setting the agent's value: %d %s", status, data)
		}
		if status, data := s.send(t, "POST", "/v1/threads", `{"agent":"clerk","variables":{"REGION":"eu","VAULT_TOKEN":"`+vaultToken+`"}}`); status != 201 {
			t.Errorf("with the agent's value: %d %s", status, data)
		}
		for _, a := range s.answers {
			if strings.Contains(a, vaultToken) {
				t.Errorf("an answer shows the secret: %s", a)
			}
		}
	})
}

// A run that would be a thread's first is refused at once, 422, when the agent's variables
// are missing: in the background no one would see why it did not start.
func TestFirstRunOverTheAPIRequiresEveryVariable(t *testing.T) {
	isoEach(t, func(t *testing.T, be isoBackend) { firstRunOverTheAPI(t, newReqServer(t, be)) })
}

func firstRunOverTheAPI(t *testing.T, s *reqServer) {
	status, data := s.send(t, "POST", "/v1/threads", `{}`)
	if status != 201 {
		t.Fatalf("a thread of no agent: %d %s", status, data)
	}
	var th struct {
		ID string `json:"id"`
	}
	mustDo(t, json.Unmarshal(data, &th))
	status, data = s.send(t, "POST", "/v1/threads/"+th.ID+"/runs", `{"agent":"clerk","message":"file it"}`)
	var p thrProblem
	mustDo(t, json.Unmarshal(data, &p))
	if status != 422 || p.Code != server.CodeMissingVariables {
		t.Fatalf("a first run without the variables: %d %s", status, data)
	}
	for _, name := range []string{"REGION (required by prompt clerk)", "LOOKUP_HOST (required by tool lookup)", "VAULT_TOKEN (the vault's token; required by tool vault)"} {
		if !strings.Contains(p.Detail, name) {
			t.Errorf("the answer lacks %q: %s", name, p.Detail)
		}
	}
	if status, data := s.send(t, "GET", "/v1/threads/"+th.ID+"/messages", ""); status != 200 || strings.Contains(string(data), "file it") {
		t.Errorf("the refused run's message was stored: %d %s", status, data)
	}
}
