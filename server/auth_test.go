package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
	"github.com/quiverhq/quiver/store/sqlite"
)

// keyWorld is a workspace with an admin, a member and a viewer key, on a store held in memory,
// and a clock the test moves.
type keyWorld struct {
	st                  *memstore.Store
	ws                  *store.Workspace
	admin, member       *store.User
	adminKey, memberKey string
	viewerKey           string
	adminRec            *store.APIKey
	auth                *server.Authenticator
	mu                  sync.Mutex
	now                 time.Time
}

func (w *keyWorld) tick(d time.Duration) { w.mu.Lock(); w.now = w.now.Add(d); w.mu.Unlock() }

func newKeyWorld(t *testing.T) *keyWorld {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	w := &keyWorld{st: st, ws: &store.Workspace{Name: "acme"}, admin: &store.User{Email: "ada@acme.test"}, member: &store.User{Email: "bob@acme.test"},
		now: time.Now()}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateWorkspace(ctx, w.ws))
	must(st.CreateUser(ctx, w.admin))
	must(st.CreateUser(ctx, w.member))
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: w.ws.ID, UserID: w.admin.ID, Role: store.MemberRoleAdmin}))
	must(st.AddMember(ctx, &store.Membership{WorkspaceID: w.ws.ID, UserID: w.member.ID, Role: store.MemberRoleMember}))
	mk := func(user string, role store.KeyRole) (string, *store.APIKey) {
		secret, prefix, hash := platform.NewAPIKey()
		k := &store.APIKey{WorkspaceID: w.ws.ID, UserID: user, Name: string(role), Role: role, Prefix: prefix, Hash: hash}
		must(st.CreateAPIKey(ctx, k))
		return secret, k
	}
	w.adminKey, w.adminRec = mk(w.admin.ID, store.KeyRoleAdmin)
	w.memberKey, _ = mk(w.member.ID, store.KeyRoleMember)
	w.viewerKey, _ = mk(w.member.ID, store.KeyRoleViewer)
	w.auth = &server.Authenticator{Keys: st, Now: func() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now }}
	return w
}

// do sends a request with authorization to a handler that needs role, and returns the status
// and the problem's code (or the principal's key id on success).
func (w *keyWorld) do(t *testing.T, role store.KeyRole, authorization string) (int, string) {
	t.Helper()
	h := w.auth.Require(role, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		p, _ := server.PrincipalFrom(r.Context())
		rw.Write([]byte(p.KeyID + " " + string(p.Role)))
	}))
	req := httptest.NewRequest("GET", "/v1/anything", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		var p struct{ Code, Detail string }
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("a %d answer that is not a problem: %q", rec.Code, rec.Body.String())
		}
		if strings.Contains(rec.Body.String(), strings.TrimPrefix(authorization, "Bearer ")) && authorization != "" {
			t.Fatalf("the answer repeats the key: %s", rec.Body.String())
		}
		return rec.Code, p.Code + ": " + p.Detail
	}
	return rec.Code, rec.Body.String()
}

func TestAPIKeysAuthenticate(t *testing.T) {
	w := newKeyWorld(t)
	tests := []struct {
		name, authorization string
		need                store.KeyRole
		status              int
		says                string
	}{
		{"an admin key where an admin is needed", "Bearer " + w.adminKey, store.KeyRoleAdmin, 200, w.adminRec.ID + " admin"},
		{"a member key where a viewer is needed", "Bearer " + w.memberKey, store.KeyRoleViewer, 200, " member"},
		{"the scheme in lower case", "bearer " + w.memberKey, store.KeyRoleViewer, 200, " member"},
		{"a viewer key where a member is needed", "Bearer " + w.viewerKey, store.KeyRoleMember, 403, "has the role viewer"},
		{"a member key where an admin is needed", "Bearer " + w.memberKey, store.KeyRoleAdmin, 403, "this needs admin"},
		{"no key", "", store.KeyRoleViewer, 401, "no API key"},
		{"basic authentication", "Basic dXNlcjpwYXNz", store.KeyRoleViewer, 401, "not Bearer followed by a Quiver API key"},
		{"a key of the wrong form", "Bearer sk-live-1234", store.KeyRoleViewer, 401, "not Bearer followed by a Quiver API key"},
		{"an unknown key", "Bearer " + func() string { s, _, _ := platform.NewAPIKey(); return s }(), store.KeyRoleViewer, 401, "unknown API key"},
		{"a key one character off", "Bearer " + w.adminKey[:len(w.adminKey)-1] + "x", store.KeyRoleViewer, 401, "unknown API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, says := w.do(t, tt.need, tt.authorization)
			if status != tt.status || !strings.Contains(says, tt.says) {
				t.Errorf("%d %q, want %d saying %q", status, says, tt.status, tt.says)
			}
		})
	}
}

// A revoked key stops working within a second (the cache's life); an expired one at its time;
// a key of a demoted user does what the user may now; and a busy key is read once a second.
func TestAPIKeysChangesTakeEffect(t *testing.T) {
	w := newKeyWorld(t)
	ctx := context.Background()
	if status, _ := w.do(t, store.KeyRoleAdmin, "Bearer "+w.adminKey); status != 200 {
		t.Fatalf("before: %d", status)
	}
	// A second admin, so that the first can be demoted.
	other := &store.User{Email: "cy@acme.test"}
	if err := w.st.CreateUser(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := w.st.AddMember(ctx, &store.Membership{WorkspaceID: w.ws.ID, UserID: other.ID, Role: store.MemberRoleAdmin}); err != nil {
		t.Fatal(err)
	}
	if err := w.st.SetMemberRole(ctx, w.ws.ID, w.admin.ID, store.MemberRoleMember); err != nil {
		t.Fatal(err)
	}
	if status, _ := w.do(t, store.KeyRoleAdmin, "Bearer "+w.adminKey); status != 200 {
		t.Errorf("within the second after the demotion: %d, want the check kept (200)", status)
	}
	w.tick(time.Second)
	if status, says := w.do(t, store.KeyRoleAdmin, "Bearer "+w.adminKey); status != 403 || !strings.Contains(says, "has the role member") {
		t.Errorf("a second after the demotion: %d %q, want 403 as a member", status, says)
	}
	if _, err := w.st.RevokeAPIKey(ctx, w.ws.ID, w.adminRec.ID); err != nil {
		t.Fatal(err)
	}
	w.tick(time.Second)
	if status, says := w.do(t, store.KeyRoleViewer, "Bearer "+w.adminKey); status != 401 || !strings.Contains(says, "was revoked") {
		t.Errorf("a second after the revocation: %d %q, want 401", status, says)
	}

	soon := w.now.Add(time.Hour)
	secret, prefix, hash := platform.NewAPIKey()
	if err := w.st.CreateAPIKey(ctx, &store.APIKey{WorkspaceID: w.ws.ID, UserID: w.member.ID, Name: "short-lived", Role: store.KeyRoleViewer,
		Prefix: prefix, Hash: hash, ExpiresAt: &soon}); err != nil {
		t.Fatal(err)
	}
	if status, _ := w.do(t, store.KeyRoleViewer, "Bearer "+secret); status != 200 {
		t.Errorf("before it expires: %d", status)
	}
	w.tick(time.Hour)
	if status, says := w.do(t, store.KeyRoleViewer, "Bearer "+secret); status != 401 || !strings.Contains(says, "expired") {
		t.Errorf("after it expired: %d %q, want 401", status, says)
	}
}

// A key's use is recorded, at most once a minute.
func TestAPIKeysLastUsed(t *testing.T) {
	w := newKeyWorld(t)
	lastUsed := func() *time.Time {
		t.Helper()
		k, _, err := w.st.APIKeyByHash(context.Background(), platform.HashAPIKey(w.memberKey))
		if err != nil {
			t.Fatal(err)
		}
		return k.LastUsedAt
	}
	waitFor := func(want time.Time) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; {
			if got := lastUsed(); got != nil && got.Sub(want).Abs() < time.Millisecond {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("last used %v, want %v", lastUsed(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	first := w.now
	w.do(t, store.KeyRoleViewer, "Bearer "+w.memberKey)
	waitFor(first)
	w.tick(30 * time.Second)
	w.do(t, store.KeyRoleViewer, "Bearer "+w.memberKey)
	time.Sleep(50 * time.Millisecond)
	if got := lastUsed(); got == nil || got.After(first.Add(time.Second)) {
		t.Errorf("last used %v half a minute later, want it left at %v", got, first)
	}
	w.tick(31 * time.Second)
	w.do(t, store.KeyRoleViewer, "Bearer "+w.memberKey)
	waitFor(w.now)
}

func TestNewAPIKey(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		secret, prefix, hash := platform.NewAPIKey()
		if !strings.HasPrefix(secret, "qvk_") || len(secret) != 47 || prefix != secret[:12] || len(hash) != store.APIKeyHashSize ||
			string(hash) != string(platform.HashAPIKey(secret)) || seen[secret] {
			t.Fatalf("NewAPIKey: %q %q %x", secret, prefix, hash)
		}
		seen[secret] = true
	}
}

// BenchmarkAuthenticate is the cost of a request's key check once the key is in the cache
// (every request but one a second per key): a SHA-256 and a map lookup.
func BenchmarkAuthenticate(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "q.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	ws, u := &store.Workspace{Name: "bench"}, &store.User{Email: "b@bench.test"}
	if err := errors.Join(st.CreateWorkspace(ctx, ws), st.CreateUser(ctx, u)); err != nil {
		b.Fatal(err)
	}
	if err := st.AddMember(ctx, &store.Membership{WorkspaceID: ws.ID, UserID: u.ID, Role: store.MemberRoleMember}); err != nil {
		b.Fatal(err)
	}
	secret, prefix, hash := platform.NewAPIKey()
	if err := st.CreateAPIKey(ctx, &store.APIKey{WorkspaceID: ws.ID, UserID: u.ID, Name: "bench", Role: store.KeyRoleMember, Prefix: prefix, Hash: hash}); err != nil {
		b.Fatal(err)
	}
	auth := &server.Authenticator{Keys: st}
	header := "Bearer " + secret
	b.ReportAllocs()
	for b.Loop() {
		if _, err := auth.Authenticate(ctx, header); err != nil {
			b.Fatal(err)
		}
	}
}
