package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/postgres"
	"github.com/quiverhq/quiver/store/postgres/pgtest"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/store/vars"
)

const testWS = "wsp_cli"

var testSecrets = map[string]string{"API_KEY": "sk-cli-123", "DB_PASSWORD": "correct horse"}

// unsetKeyEnv makes sure QUIVER_SECRET_KEY is unset for the test.
func unsetKeyEnv(t testing.TB) {
	t.Helper()
	t.Setenv(secret.EnvKey, "")
	os.Unsetenv(secret.EnvKey)
}

type secretStore interface {
	store.Store
	store.Variables
}

// seedSecrets stores testSecrets sealed with ring: one on a thread, one on the instance layer.
func seedSecrets(t testing.TB, s secretStore, ring *secret.Keyring) quiver.Scope {
	t.Helper()
	ctx := context.Background()
	r := vars.New(s, ring)
	th := &store.Thread{WorkspaceID: testWS, AgentID: "agent_1"}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, testWS, quiver.LayerThread, th.ID, vars.Value{Name: "API_KEY", Value: testSecrets["API_KEY"], Secret: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, testWS, quiver.LayerInstance, "", vars.Value{Name: "DB_PASSWORD", Value: testSecrets["DB_PASSWORD"], Secret: true}); err != nil {
		t.Fatal(err)
	}
	return quiver.Scope{WorkspaceID: testWS, ThreadID: th.ID}
}

// resolveSecrets resolves testSecrets with ring; it fails the test on a wrong value.
func resolveSecrets(t testing.TB, s secretStore, ring *secret.Keyring, scope quiver.Scope) error {
	t.Helper()
	r := vars.New(s, ring)
	for name, want := range testSecrets {
		got, ok, err := r.ResolveVariable(context.Background(), scope, quiver.Variable{Name: name, Type: quiver.VarSecret})
		if err != nil {
			return err
		}
		if !ok || got != want {
			t.Fatalf("%s = %q, %v", name, got, ok)
		}
	}
	return nil
}

func keyFromFile(t testing.TB, path string) *secret.Key {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := secret.ParseKey(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSecretsRotateKey(t *testing.T) {
	unsetKeyEnv(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "quiver.db")
	keyPath := filepath.Join(dir, keyFileName)
	s, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := vars.LoadKeyring(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	oldKey := ring.Current()
	scope := seedSecrets(t, s, ring)
	s.Close()
	// An OAuth grant of a remote MCP server, sealed with the same key.
	grants := &mcp.GrantFiles{Dir: filepath.Join(dir, grantsDirName), Keys: ring}
	if err := grants.SaveToken(context.Background(), "tracker", &mcp.Grant{ServerURL: "https://t.example/mcp", Token: &oauth2.Token{AccessToken: "at-1", RefreshToken: "rt-1"}}); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := runCLI(t, "", "secrets", "rotate-key", "--db", dbPath)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "Re-encrypted 1 OAuth grant of remote MCP servers") {
		t.Errorf("stdout does not report the grant: %s", stdout)
	}
	// Readable with the new key alone: the old one can be deleted.
	newOnly := &mcp.GrantFiles{Dir: grants.Dir, Keys: secret.NewKeyring(keyFromFile(t, keyPath))}
	if g, err := newOnly.LoadToken(context.Background(), "tracker"); err != nil || g == nil || g.Token.RefreshToken != "rt-1" {
		t.Errorf("the grant with the new key only: %+v, %v", g, err)
	}
	t.Logf("%s", stdout)
	newKey := keyFromFile(t, keyPath)
	if newKey.ID() == oldKey.ID() {
		t.Fatal("the key file still holds the old key")
	}
	if !strings.Contains(stdout, "Re-encrypted 2 secret values") || !strings.Contains(stdout, newKey.ID()) || strings.Contains(stdout, testSecrets["API_KEY"]) {
		t.Errorf("stdout: %s", stdout)
	}
	if info, err := os.Stat(keyPath); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, %v", info, err)
	}
	if k := keyFromFile(t, keyPath+vars.OldKeySuffix); k.ID() != oldKey.ID() {
		t.Errorf("%s holds %s, want the old key %s", keyPath+vars.OldKeySuffix, k.ID(), oldKey.ID())
	}

	s, err = sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := resolveSecrets(t, s, secret.NewKeyring(newKey), scope); err != nil {
		t.Errorf("with the new key: %v", err)
	}
	if err := resolveSecrets(t, s, secret.NewKeyring(oldKey), scope); !errors.Is(err, secret.ErrDecrypt) {
		t.Errorf("with the old key: %v, want secret.ErrDecrypt", err)
	}
	loaded, err := vars.LoadKeyring(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Current().ID() != newKey.ID() {
		t.Errorf("LoadKeyring seals with %s", loaded.Current().ID())
	}
	if err := resolveSecrets(t, s, loaded, scope); err != nil {
		t.Errorf("with the loaded keyring: %v", err)
	}
}

func TestSecretsRotateKeyFromEnvironment(t *testing.T) {
	oldKey, oldText, err := secret.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(secret.EnvKey, oldText)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "quiver.db")
	s, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	scope := seedSecrets(t, s, secret.NewKeyring(oldKey))
	s.Close()

	code, stdout, stderr := runCLI(t, "", "secrets", "rotate-key", "--db", dbPath)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	lines := strings.Split(stdout, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "New key") {
		t.Fatalf("stdout: %s", stdout)
	}
	newKey, err := secret.ParseKey(lines[1])
	if err != nil {
		t.Fatalf("the printed key %q: %v", lines[1], err)
	}
	if !strings.Contains(stdout, "Set "+secret.EnvKey) {
		t.Errorf("stdout: %s", stdout)
	}
	if entries, _ := os.ReadDir(dir); !onlyDatabase(entries) {
		t.Errorf("files written beside the database: %v", entries)
	}
	s, err = sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := resolveSecrets(t, s, secret.NewKeyring(newKey), scope); err != nil {
		t.Errorf("with the new key: %v", err)
	}
	if err := resolveSecrets(t, s, secret.NewKeyring(oldKey), scope); !errors.Is(err, secret.ErrDecrypt) {
		t.Errorf("with the old key: %v, want secret.ErrDecrypt", err)
	}
}

// onlyDatabase reports whether entries are the database's own files.
func onlyDatabase(entries []os.DirEntry) bool {
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "quiver.db") {
			return false
		}
	}
	return true
}

func TestSecretsRotateKeyPostgres(t *testing.T) {
	dsn := pgtest.DSN(t) // skips without a server, fails under CI=true
	unsetKeyEnv(t)
	ctx := context.Background()
	schema := pgtest.Schema(t, dsn)
	s, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keyPath := filepath.Join(t.TempDir(), keyFileName)
	ring, err := vars.LoadKeyring(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	scope := seedSecrets(t, s, ring)

	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	code, stdout, stderr := runCLI(t, "", "secrets", "rotate-key", "--postgres", dsn+sep+"search_path="+schema, "--key", keyPath)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	newKey := keyFromFile(t, keyPath)
	if err := resolveSecrets(t, s, secret.NewKeyring(newKey), scope); err != nil {
		t.Errorf("with the new key: %v", err)
	}
	if err := resolveSecrets(t, s, ring, scope); !errors.Is(err, secret.ErrDecrypt) {
		t.Errorf("with the old key: %v, want secret.ErrDecrypt", err)
	}
}

func TestSecretsUsage(t *testing.T) {
	unsetKeyEnv(t)
	dir := t.TempDir()
	tests := []struct {
		name      string
		args      []string
		code      int
		stderrHas string
	}{
		{"no subcommand", []string{"secrets"}, exitUsage, "rotate-key"},
		{"unknown subcommand", []string{"secrets", "show"}, exitUsage, `"show"`},
		{"both stores", []string{"secrets", "rotate-key", "--db", "x.db", "--postgres", "postgres://x"}, exitUsage, "not both"},
		{"argument", []string{"secrets", "rotate-key", "extra"}, exitUsage, `"extra"`},
		{"bad flag", []string{"secrets", "rotate-key", "--force"}, exitUsage, "force"},
		{"no database", []string{"secrets", "rotate-key", "--db", filepath.Join(dir, "none.db")}, exitError, "no database at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "", tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.stderrHas) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.stderrHas)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a database was created")
	}
	// A database without a key file: nothing to rotate, and no key file is made.
	dbPath := filepath.Join(dir, "quiver.db")
	s, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	code, _, stderr := runCLI(t, "", "secrets", "rotate-key", "--db", dbPath)
	if code != exitError || !strings.Contains(stderr, "no key file") {
		t.Errorf("without a key file: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, keyFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Error("a key file was created")
	}
	// The default database lives in the data directory.
	t.Setenv("XDG_DATA_HOME", dir)
	code, _, stderr = runCLI(t, "", "secrets", "rotate-key")
	if code != exitError || !strings.Contains(stderr, filepath.Join(dir, "quiver", defaultDBName)) {
		t.Errorf("default database: exit %d, %s", code, stderr)
	}
}
