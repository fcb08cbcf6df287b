package platform_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/oauthtest"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/connect"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

// A run whose call acts as its person at a provider they have not connected pauses,
// waiting_for_authorization, listed among the waiting calls with where to connect; once the
// person connects, the run goes on by itself and runs the call once, with their token. On
// both backends, with background runs.
func TestRunWaitsForAuthorization(t *testing.T) {
	budgetBackends(t, func(t *testing.T, w budgetWorld) {
		ctx := context.Background()
		as := oauthtest.NewAuthServer(t)
		ws := &store.Workspace{Name: "acme"}
		must(t, w.st.CreateWorkspace(ctx, ws))
		dir := t.TempDir()
		model := filepath.Join(dir, "mailer.yaml")
		must(t, os.WriteFile(model, []byte(`turns:
  - calls: [{name: read_mail, args: {}}]
  - expect: {result_is_error: false, result_contains: "3 new"}
    text: You have 3 new mails.
`), 0o600))
		var ran atomic.Int64
		reg := &quiver.Registry{}
		must(t, reg.Register(quiver.Func("read_mail", "Reads the caller's mailbox.", func(ctx context.Context, _ struct{}) (string, error) {
			tok, err := quiver.UserToken(ctx, "acme", "read")
			if err != nil {
				return "", err
			}
			if _, ok := as.Valid(tok); !ok {
				return "", quiver.Fail(quiver.CodeToolError, "acme does not know the token")
			}
			ran.Add(1)
			return "3 new mails", nil
		}, quiver.WithConnection("acme", "read"))))
		key, _, err := secret.GenerateKey()
		must(t, err)
		host, _ := url.Parse(as.URL)
		agents := map[string]*agent.Agent{"mailer": {Name: "mailer", Prompt: &agent.Prompt{Name: "mailer", Model: "scripted:" + model, Tools: []string{"read_mail"}}}}
		p, err := platform.New(platform.Config{Store: w.st, Registry: reg, Resolver: vars.New(w.st, secret.NewKeyring(key)),
			Logger: slog.New(slog.DiscardHandler), OpenAPIInternal: []string{host.Host}, Catalog: &agent.Catalog{Agents: agents}})
		must(t, err)
		t.Cleanup(func() { p.Close() })
		p.SetConnectLink(func(provider string, _ []string) string {
			return "https://quiver.example/console/#/connections?connect=" + provider
		})
		must(t, p.StartJobs(ctx, w.startJobs))
		t.Cleanup(func() { _ = p.Stop(context.Background()) })
		admin := platform.Actor{WorkspaceID: ws.ID, Role: store.KeyRoleAdmin, KeyID: "key_admin", UserID: "usr_admin"}
		ada := platform.Actor{WorkspaceID: ws.ID, Role: store.KeyRoleMember, KeyID: "key_ada", UserID: "usr_ada"}
		_, err = p.SetConnectionProviders(ctx, admin, connect.Document{Providers: []connect.Provider{{Name: "acme", AuthorizationURL: as.URL + "/authorize",
			TokenURL: as.URL + "/token", ClientID: as.Register(callbackURI), Scopes: []string{"read"}}}}, 0)
		must(t, err)

		th, err := p.OpenThread(ctx, ada, platform.NewThread{Agent: "mailer"})
		must(t, err)
		_, err = p.StartRun(ctx, ada, th.ID, "mailer", "Any new mail?")
		must(t, err)
		out := waitRun(t, w.st, ws.ID, th.ID, func(o *agent.Outcome) bool { return o.Status == agent.RunPaused })
		if out.Reason != agent.ReasonAuthorization || out.Pending == nil || out.Pending.Call.Name != "read_mail" || out.Pending.Authorization == nil ||
			out.Pending.Authorization.Provider != "acme" || !strings.HasSuffix(out.Pending.Authorization.URL, "connect=acme") {
			t.Fatalf("the run paused with %+v %+v", out, out.Pending)
		}
		if ran.Load() != 0 {
			t.Fatal("the call ran before ada connected")
		}
		info, err := w.st.Thread(ctx, ws.ID, th.ID)
		must(t, err)
		if !slices.Contains(info.Tags, agent.AuthorizationTag) || !slices.Contains(info.Tags, agent.WaitingTag) {
			t.Fatalf("tags %v", info.Tags)
		}
		waiting, _, err := p.WaitingCalls(ctx, ada, 10, "")
		must(t, err)
		if len(waiting) != 1 || waiting[0].Pending.Reason != agent.ReasonAuthorization {
			t.Fatalf("the waiting calls: %+v", waiting)
		}

		// Ada connects: the run goes on by itself, runs the call once, and answers.
		started, err := p.StartConnection(ctx, ada, platform.NewConnection{Provider: "acme", RedirectURI: callbackURI})
		must(t, err)
		cb := followAuthorization(t, started.URL)
		_, err = p.FinishConnection(ctx, cb)
		must(t, err)
		if done := waitRun(t, w.st, ws.ID, th.ID, finished); done.Text != "You have 3 new mails." {
			t.Fatalf("the run ended with %+v", done)
		}
		if ran.Load() != 1 {
			t.Fatalf("read_mail ran %d times, want once", ran.Load())
		}
	})
}

// followAuthorization goes through the provider's page as a browser would, and returns the
// callback's parameters.
func followAuthorization(t *testing.T, authURL string) platform.ConnectionCallback {
	t.Helper()
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirects.Get(authURL)
	must(t, err)
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	must(t, err)
	q := back.Query()
	return platform.ConnectionCallback{State: q.Get("state"), Code: q.Get("code"), RedirectURI: callbackURI}
}
