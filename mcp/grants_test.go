package mcp_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/store/secret"
)

func newKeyring(t *testing.T) *secret.Keyring {
	t.Helper()
	k, _, err := secret.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return secret.NewKeyring(k)
}

func TestGrantFiles(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "grants")
	g := &mcp.GrantFiles{Dir: dir, Keys: newKeyring(t)}

	if got, err := g.LoadToken(ctx, "tracker"); got != nil || err != nil {
		t.Fatalf("nothing saved yet: got %+v, %v; want nil, nil", got, err)
	}
	want := &mcp.Grant{
		ServerURL: "https://tracker.example.com/mcp", ClientID: "quiver", ClientSecret: "client-secret-XYZ",
		AuthURL: "https://as.example.com/authorize", TokenURL: "https://as.example.com/token",
		AuthStyle: oauth2.AuthStyleInHeader, Scopes: []string{"read"},
		Token: &oauth2.Token{AccessToken: "access-token-ABC", RefreshToken: "refresh-token-DEF", TokenType: "Bearer", Expiry: time.Now().Add(time.Hour).Round(0)},
	}
	if err := g.SaveToken(ctx, "tracker", want); err != nil {
		t.Fatal(err)
	}
	got, err := g.LoadToken(ctx, "tracker")
	if err != nil {
		t.Fatal(err)
	}
	if got.ServerURL != want.ServerURL || got.ClientSecret != want.ClientSecret || got.Token.AccessToken != want.Token.AccessToken ||
		got.Token.RefreshToken != want.Token.RefreshToken || !got.Token.Expiry.Equal(want.Token.Expiry) || got.AuthStyle != want.AuthStyle {
		t.Errorf("loaded %+v (token %+v), want %+v (token %+v)", got, got.Token, want, want.Token)
	}

	// Private and sealed: no secret in the clear, mode 0600, no temporary file left behind.
	path := filepath.Join(dir, "tracker.grant")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("grant file mode %04o, want 0600", perm)
	}
	raw, _ := os.ReadFile(path)
	for _, s := range []string{"access-token-ABC", "refresh-token-DEF", "client-secret-XYZ"} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the grant file holds %q in the clear", s)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("grant directory holds %d entries, want 1", len(entries))
	}

	// A grant is bound to its remote: copied under another name it does not open.
	if err := os.WriteFile(filepath.Join(dir, "other.grant"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := g.LoadToken(ctx, "other"); err == nil || !strings.Contains(err.Error(), "cannot be opened") {
		t.Errorf("a grant copied to another remote: err = %v, want it refused", err)
	}
	// Under another key it does not open either, and says so.
	other := &mcp.GrantFiles{Dir: dir, Keys: newKeyring(t)}
	if _, err := other.LoadToken(ctx, "tracker"); err == nil || !strings.Contains(err.Error(), "current secret key") {
		t.Errorf("another key: err = %v, want a message about the key", err)
	}
	// Saving again replaces.
	want.Token.AccessToken = "access-token-2"
	if err := g.SaveToken(ctx, "tracker", want); err != nil {
		t.Fatal(err)
	}
	if got, _ := g.LoadToken(ctx, "tracker"); got == nil || got.Token.AccessToken != "access-token-2" {
		t.Errorf("after a second save: %+v", got)
	}
}
