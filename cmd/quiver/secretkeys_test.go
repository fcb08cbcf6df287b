package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/store/vars"
)

// The key of the secrets (issue 46): the database records the id of the key its secrets are
// sealed with, and a node with another key, or none where the database has one, refuses to
// start instead of sealing secrets the other nodes cannot open.

// serveRefused runs quiver serve on dbArgs, which must refuse to start: it returns the exit
// code and standard error. A server that starts anyway is stopped, and the test fails.
func serveRefused(t *testing.T, dbArgs []string) (int, string) {
	t.Helper()
	t.Setenv(configEnv, "")
	t.Setenv(addrEnv, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--insecure-local"}, dbArgs...)
	go func() { done <- run(ctx, args, strings.NewReader(""), &syncBuffer{}, stderr) }()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case code := <-done:
			return code, stderr.String()
		default:
		}
		if servingRE.MatchString(stderr.String()) {
			cancel()
			<-done
			t.Fatalf("quiver serve started:\n%s", stderr.String())
		}
	}
	cancel()
	<-done
	t.Fatalf("quiver serve neither served nor refused:\n%s", stderr.String())
	return 0, ""
}

// wantRefusal checks a refusal: exit 1, and stderr holds every one of want.
func wantRefusal(t *testing.T, what string, code int, stderr string, want ...string) {
	t.Helper()
	if code != exitError {
		t.Errorf("%s: exit %d, want %d\n%s", what, code, exitError, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s: stderr does not say %q:\n%s", what, w, stderr)
		}
	}
	if !strings.HasPrefix(stderr, "quiver: ") {
		t.Errorf("%s: stderr is not one of quiver's errors:\n%s", what, stderr)
	}
}

// keyText returns a key file's key as QUIVER_SECRET_KEY takes it.
func keyText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// newKeyFile writes a new key to path, replacing what is there, and returns it.
func newKeyFile(t *testing.T, path string) *secret.Key {
	t.Helper()
	k, text, err := secret.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

func noFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s was made: %v", path, err)
	}
}

// TestSecretKeyChecksOnSQLite: the first start makes a key beside the database, which records
// it; a node with another key file, another key in QUIVER_SECRET_KEY or no key is refused
// (and makes none), and the right key starts.
func TestSecretKeyChecksOnSQLite(t *testing.T) {
	unsetKeyEnv(t)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, keyFileName)
	dbArgs := []string{"--db", filepath.Join(dir, "quiver.db")}
	if code, _, stderr := runCLI(t, "s3cret", append([]string{"vars", "set", "API_KEY", "--secret"}, dbArgs...)...); code != exitOK {
		t.Fatalf("vars set: exit %d\n%s", code, stderr)
	}
	key := keyFromFile(t, keyPath)
	good := keyText(t, keyPath)
	_, stop, _ := startServe(t, dbArgs...)
	stop()

	other := newKeyFile(t, keyPath)
	code, stderr := serveRefused(t, dbArgs)
	wantRefusal(t, "another key file", code, stderr, "sealed with key "+key.ID(), "this node's key is "+other.ID(), keyPath, secret.EnvKey)
	// Every command that works on secrets checks: vars too.
	code, _, stderr = runCLI(t, "", append([]string{"vars", "list"}, dbArgs...)...)
	wantRefusal(t, "vars list with another key file", code, stderr, "sealed with key "+key.ID())

	if err := os.WriteFile(keyPath, []byte(good+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, wrong, _ := secret.GenerateKey()
	t.Setenv(secret.EnvKey, wrong)
	code, stderr = serveRefused(t, dbArgs)
	wantRefusal(t, "another key in "+secret.EnvKey, code, stderr, "sealed with key "+key.ID(), "(from "+secret.EnvKey+")")
	unsetKeyEnv(t)

	os.Remove(keyPath)
	code, stderr = serveRefused(t, dbArgs)
	wantRefusal(t, "no key", code, stderr, "sealed with key "+key.ID(), "this node has no key", keyPath)
	noFile(t, keyPath)

	// The database's key in QUIVER_SECRET_KEY, with no key file: it starts, and makes none.
	t.Setenv(secret.EnvKey, good)
	_, stop, _ = startServe(t, dbArgs...)
	stop()
	noFile(t, keyPath)
	code, stdout, stderr := runCLI(t, "", append([]string{"vars", "list"}, dbArgs...)...)
	if code != exitOK || !strings.Contains(stdout, "API_KEY") {
		t.Errorf("vars list with the right key: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestSecretKeyRotationKeepsTheRecord rotates the key of a SQLite database: the record
// follows, a node with the old key is refused, and one interrupted after the database took the
// new key refuses nodes, saying to finish it, until rotate-key is run again.
func TestSecretKeyRotationKeepsTheRecord(t *testing.T) {
	unsetKeyEnv(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "quiver.db")
	keyPath := filepath.Join(dir, keyFileName)
	dbArgs := []string{"--db", dbPath}
	if code, _, stderr := runCLI(t, "s3cret", append([]string{"vars", "set", "API_KEY", "--secret"}, dbArgs...)...); code != exitOK {
		t.Fatalf("vars set: exit %d\n%s", code, stderr)
	}
	oldKey := keyFromFile(t, keyPath)
	oldText := keyText(t, keyPath)
	if code, stdout, stderr := runCLI(t, "", "secrets", "rotate-key", "--db", dbPath); code != exitOK {
		t.Fatalf("rotate-key: exit %d\n%s%s", code, stdout, stderr)
	}
	newKey := keyFromFile(t, keyPath)
	if got := recordedKeyID(t, dbPath); got != newKey.ID() {
		t.Fatalf("after the rotation the database records %q, want %s", got, newKey.ID())
	}
	_, stop, _ := startServe(t, dbArgs...)
	stop()
	t.Setenv(secret.EnvKey, oldText)
	code, stderr := serveRefused(t, dbArgs)
	wantRefusal(t, "the old key", code, stderr, "sealed with key "+newKey.ID(), "this node's key is "+oldKey.ID())
	unsetKeyEnv(t)

	// A crash after the commit: the database has the next key, the key file the current one.
	next := newKeyFile(t, keyPath+vars.NewKeySuffix)
	s, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	ring := secret.NewKeyring(next, newKey)
	err = s.RekeySecrets(context.Background(), []string{newKey.ID()}, next.ID(), reseal(ring))
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, stderr = serveRefused(t, dbArgs)
	wantRefusal(t, "an interrupted rotation", code, stderr, "sealed with key "+next.ID(), "interrupted", "quiver secrets rotate-key")
	if code, stdout, stderr := runCLI(t, "", "secrets", "rotate-key", "--db", dbPath); code != exitOK || !strings.Contains(stdout, "Finished an interrupted rotation") {
		t.Fatalf("rotate-key again: exit %d\n%s%s", code, stdout, stderr)
	}
	_, stop, _ = startServe(t, dbArgs...)
	stop()
	if got := recordedKeyID(t, dbPath); got != next.ID() || keyFromFile(t, keyPath).ID() != next.ID() {
		t.Errorf("after finishing: the database records %q, the key file holds %s; want %s", got, keyFromFile(t, keyPath).ID(), next.ID())
	}
}

// reseal re-encrypts a secret under ring's current key, as a rotation does.
func reseal(ring *secret.Keyring) func(v *store.Variable) (string, error) {
	return func(v *store.Variable) (string, error) {
		where := vars.Where(v.WorkspaceID, v.Layer, v.OwnerID, v.Name)
		plain, err := ring.Open(v.Value, where)
		if err != nil {
			return "", err
		}
		return ring.Seal(plain, where)
	}
}

// recordedKeyID reads the key id the SQLite database at path records.
func recordedKeyID(t *testing.T, path string) string {
	t.Helper()
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, err := s.SecretKeyID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSecretKeyOfAnUnrecordedDatabase opens a database whose secrets were sealed before the
// key was recorded: a node with another key is refused, naming the key that sealed them; one
// with that key records it.
func TestSecretKeyOfAnUnrecordedDatabase(t *testing.T) {
	unsetKeyEnv(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "quiver.db")
	s, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	sealing, sealingText, err := secret.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	seedSecrets(t, s, secret.NewKeyring(sealing))
	s.Close()
	if got := recordedKeyID(t, dbPath); got != "" {
		t.Fatalf("the seeded database records %q", got)
	}
	other := newKeyFile(t, filepath.Join(dir, keyFileName))
	code, _, stderr := runCLI(t, "", "vars", "list", "--db", dbPath)
	wantRefusal(t, "another key", code, stderr, "sealed with key "+sealing.ID(), "this node's key is "+other.ID())
	if got := recordedKeyID(t, dbPath); got != "" {
		t.Fatalf("the refused node recorded %q", got)
	}
	t.Setenv(secret.EnvKey, sealingText)
	if code, stdout, stderr := runCLI(t, "", "vars", "list", "--db", dbPath); code != exitOK {
		t.Fatalf("with the sealing key: exit %d\n%s%s", code, stdout, stderr)
	}
	if got := recordedKeyID(t, dbPath); got != sealing.ID() {
		t.Errorf("the database records %q, want %s", got, sealing.ID())
	}
}

// TestSecretKeyFleetOnPostgres has nodes of one PostgreSQL database, each with a data directory
// of its own: the first makes the key; a second without a key is refused, saying how to give
// it the fleet's key, and makes none; one with another key is refused; one with the fleet's
// key starts; after a rotation the nodes need the new key.
func TestSecretKeyFleetOnPostgres(t *testing.T) {
	var dbArgs []string
	for _, b := range serveBackends(t) {
		if b.name == "postgres" {
			dbArgs = b.args(t)
		}
	}
	if dbArgs == nil {
		t.Skip("no PostgreSQL server")
	}
	unsetKeyEnv(t) // the backend gives its nodes a shared key: this test's first node makes its own

	// Node 1, the fleet's first: makes its key in its data directory.
	_, stop, _ := startServe(t, dbArgs...)
	stop()
	node1Key := filepath.Join(os.Getenv("XDG_DATA_HOME"), "quiver", keyFileName)
	fleetKey := keyFromFile(t, node1Key)
	fleetText := keyText(t, node1Key)
	if code, _, stderr := runCLI(t, "s3cret", append([]string{"vars", "set", "API_KEY", "--secret"}, dbArgs...)...); code != exitOK {
		t.Fatalf("vars set on node 1: exit %d\n%s", code, stderr)
	}

	// Node 2, without a key: refused, and makes none.
	node2 := t.TempDir()
	t.Setenv("XDG_DATA_HOME", node2)
	node2Key := filepath.Join(node2, "quiver", keyFileName)
	code, stderr := serveRefused(t, dbArgs)
	wantRefusal(t, "a node without a key", code, stderr, "sealed with key "+fleetKey.ID(), "this node has no key",
		"the fleet's key", "set "+secret.EnvKey, node2Key)
	noFile(t, node2Key)

	// Node 2 with another key: refused, naming both.
	_, wrong, _ := secret.GenerateKey()
	t.Setenv(secret.EnvKey, wrong)
	code, stderr = serveRefused(t, dbArgs)
	wrongKey, _ := secret.ParseKey(wrong)
	wantRefusal(t, "a node with another key", code, stderr, "sealed with key "+fleetKey.ID(), "this node's key is "+wrongKey.ID(), "the fleet's key")

	// Node 2 with the fleet's key: starts, and reads what node 1 set.
	t.Setenv(secret.EnvKey, fleetText)
	_, stop, _ = startServe(t, dbArgs...)
	stop()
	if code, stdout, stderr := runCLI(t, "", append([]string{"vars", "list"}, dbArgs...)...); code != exitOK || !strings.Contains(stdout, "API_KEY") {
		t.Errorf("vars list on node 2: exit %d\n%s%s", code, stdout, stderr)
	}

	// Node 1 rotates its key file: the database expects the new key, which node 2 lacks.
	unsetKeyEnv(t)
	code, stdout, stderr := runCLI(t, "", append([]string{"secrets", "rotate-key", "--key", node1Key}, dbArgs...)...)
	if code != exitOK {
		t.Fatalf("rotate-key: exit %d\n%s%s", code, stdout, stderr)
	}
	rotated := keyFromFile(t, node1Key)
	t.Setenv(secret.EnvKey, fleetText)
	code, stderr = serveRefused(t, dbArgs)
	wantRefusal(t, "node 2 after the rotation", code, stderr, "sealed with key "+rotated.ID(), "this node's key is "+fleetKey.ID())
	t.Setenv(secret.EnvKey, keyText(t, node1Key))
	_, stop, _ = startServe(t, dbArgs...)
	stop()

	// A rotation on a node without the database's key is refused, and changes nothing.
	unsetKeyEnv(t)
	stray := filepath.Join(t.TempDir(), keyFileName)
	newKeyFile(t, stray)
	code, _, stderr = runCLI(t, "", append([]string{"secrets", "rotate-key", "--key", stray}, dbArgs...)...)
	wantRefusal(t, "a rotation with another key", code, stderr, rotated.ID())
	t.Setenv(secret.EnvKey, keyText(t, node1Key))
	_, stop, _ = startServe(t, dbArgs...)
	stop()
}
