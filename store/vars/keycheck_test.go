package vars_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

func recorded(t *testing.T, s store.SecretKeys) string {
	t.Helper()
	id, err := s.SecretKeyID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// keyError returns err as a *vars.KeyError, failing the test when it is none.
func keyError(t *testing.T, err error) *vars.KeyError {
	t.Helper()
	var ke *vars.KeyError
	if !errors.As(err, &ke) {
		t.Fatalf("got %v, want a *vars.KeyError", err)
	}
	return ke
}

// TestOpenKeyring has nodes of one database open their keyrings: the first records its key,
// and a node with another key, or none, is refused without a key being made.
func TestOpenKeyring(t *testing.T) {
	noKeyEnv(t)
	s, path := openSQLite(t)
	keyPath := filepath.Join(filepath.Dir(path), "secret.key")
	first, err := vars.OpenKeyring(ctx, s, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if id := recorded(t, s); id != first.Current().ID() {
		t.Fatalf("recorded %q, want the first node's key %s", id, first.Current().ID())
	}
	if again, err := vars.OpenKeyring(ctx, s, keyPath); err != nil || again.Current().ID() != first.Current().ID() {
		t.Fatalf("the same node again: %v", err)
	}

	// A node without a key is refused, and makes none.
	bare := filepath.Join(t.TempDir(), "secret.key")
	ke := keyError(t, ignoreRing(vars.OpenKeyring(ctx, s, bare)))
	if ke.Want != first.Current().ID() || ke.Have != "" || ke.KeyPath != bare || ke.FromEnv {
		t.Errorf("a node without a key: %+v", ke)
	}
	if _, err := os.Stat(bare); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key file was made for the node without a key: %v", err)
	}

	testOtherKeys(t, s, keyPath, first.Current().ID())
}

// testOtherKeys goes on from TestOpenKeyring: the database s records want, the key in keyPath.
func testOtherKeys(t *testing.T, s store.SecretKeys, keyPath, want string) {
	// A node with another key, in a file or in the environment, is refused.
	bare := filepath.Join(t.TempDir(), "secret.key")
	other := writeKey(t, bare)
	ke := keyError(t, ignoreRing(vars.OpenKeyring(ctx, s, bare)))
	if ke.Want != want || ke.Have != other.ID() || ke.FromEnv || ke.Unfinished {
		t.Errorf("a node with another key file: %+v", ke)
	}
	_, text, _ := secret.GenerateKey()
	t.Setenv(secret.EnvKey, text)
	if ke = keyError(t, ignoreRing(vars.OpenKeyring(ctx, s, keyPath))); !ke.FromEnv || ke.Want != want {
		t.Errorf("a node with another key in %s: %+v", secret.EnvKey, ke)
	}
	// The database's key in the environment opens it, wherever the key file is.
	b, _ := os.ReadFile(keyPath)
	t.Setenv(secret.EnvKey, strings.TrimSpace(string(b)))
	if _, err := vars.OpenKeyring(ctx, s, filepath.Join(t.TempDir(), "none")); err != nil {
		t.Errorf("the right key in %s: %v", secret.EnvKey, err)
	}
	if id := recorded(t, s); id != want {
		t.Errorf("the record changed to %s", id)
	}
}

func ignoreRing(_ *secret.Keyring, err error) error { return err }

// TestOpenKeyringUnrecorded opens a database whose secrets were sealed before keys were
// recorded: a node that holds their key records its own, another is refused naming theirs.
func TestOpenKeyringUnrecorded(t *testing.T) {
	f := newRotationFixture(t)
	if id := recorded(t, f.s.(store.SecretKeys)); id != "" {
		t.Fatalf("the fixture records %q", id)
	}
	otherPath := filepath.Join(t.TempDir(), "secret.key")
	other := writeKey(t, otherPath)
	ke := keyError(t, ignoreRing(vars.OpenKeyring(ctx, f.s.(store.SecretKeys), otherPath)))
	if ke.Want != f.oldKey.ID() || ke.Have != other.ID() {
		t.Errorf("a node with another key: %+v, want %s", ke, f.oldKey.ID())
	}
	if id := recorded(t, f.s.(store.SecretKeys)); id != "" {
		t.Fatalf("the refused node recorded %q", id)
	}
	// A node whose keyring holds the sealing key only as an old one (key.old, after a
	// rotation) records its current key: the values open.
	writeFile(t, otherPath+vars.OldKeySuffix, f.keyPath)
	if _, err := vars.OpenKeyring(ctx, f.s.(store.SecretKeys), otherPath); err != nil {
		t.Fatal(err)
	}
	if id := recorded(t, f.s.(store.SecretKeys)); id != other.ID() {
		t.Errorf("recorded %q, want %s", id, other.ID())
	}
}

// writeFile copies the file from to path, mode 0600.
func writeFile(t *testing.T, path, from string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRotationRecordsTheKey rotates the key of a database that records it: the record follows
// the values, an interrupted rotation refuses nodes until it is finished, and a node that
// does not hold the recorded key may not rotate.
func TestRotationRecordsTheKey(t *testing.T) {
	f := newRotationFixture(t)
	sk := f.s.(store.SecretKeys)
	if _, err := vars.OpenKeyring(ctx, sk, f.keyPath); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(t.TempDir(), "secret.key")
	writeFile(t, stale, f.keyPath) // another node's copy of the key
	rot, err := vars.RotateKeyFile(ctx, f.s, f.keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if id := recorded(t, sk); id != rot.NewKeyID {
		t.Fatalf("after the rotation the record is %s, want %s", id, rot.NewKeyID)
	}
	if _, err := vars.OpenKeyring(ctx, sk, f.keyPath); err != nil {
		t.Errorf("the rotating node: %v", err)
	}
	if ke := keyError(t, ignoreRing(vars.OpenKeyring(ctx, sk, stale))); ke.Want != rot.NewKeyID || ke.Have != rot.OldKeyID {
		t.Errorf("a node with the old key: %+v", ke)
	}

	testInterruptedRotation(t, f, sk, stale, rot.NewKeyID)
}

// testInterruptedRotation goes on from TestRotationRecordsTheKey, current recorded, stale
// holding the key before it: a rotation interrupted after the commit refuses nodes until it
// is run again, and a node without the database's key may not rotate.
func testInterruptedRotation(t *testing.T, f *rotationFixture, sk store.SecretKeys, stale, current string) {
	next := writeKey(t, f.keyPath+vars.NewKeySuffix)
	ring := secret.NewKeyring(next, readKey(t, f.keyPath))
	if err := sk.RekeySecrets(ctx, []string{current}, next.ID(), func(v *store.Variable) (string, error) {
		where := vars.Where(v.WorkspaceID, v.Layer, v.OwnerID, v.Name)
		plain, err := ring.Open(v.Value, where)
		if err != nil {
			return "", err
		}
		return ring.Seal(plain, where)
	}); err != nil {
		t.Fatal(err)
	}
	if ke := keyError(t, ignoreRing(vars.OpenKeyring(ctx, sk, f.keyPath))); !ke.Unfinished || ke.Want != next.ID() {
		t.Errorf("during the interrupted rotation: %+v, want Unfinished", ke)
	}
	if _, err := vars.RotateKeyFile(ctx, f.s, f.keyPath); err != nil {
		t.Fatal(err)
	}
	if _, err := vars.OpenKeyring(ctx, sk, f.keyPath); err != nil || recorded(t, sk) != next.ID() {
		t.Errorf("after finishing the rotation: %v, record %s", err, recorded(t, sk))
	}

	// A node holding neither the recorded key nor its successor may not rotate, even where no
	// value would show it: its new key would be recorded, and lock every other node out.
	for _, d := range []struct {
		workspace string
		layer     store.VariableLayer
		owner     string
		name      string
	}{{ws, store.LayerThread, f.th.ID, "API_KEY"}, {"wsp_other", store.LayerInstance, "", "PASSWORD"}} {
		if err := f.s.DeleteVariable(ctx, d.workspace, d.layer, d.owner, d.name); err != nil {
			t.Fatal(err)
		}
	}
	_, err := vars.RotateKeyFile(ctx, f.s, stale)
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), next.ID()) {
		t.Errorf("a rotation by a node without the database's key: %v, want ErrConflict naming %s", err, next.ID())
	}
	if _, err := os.Stat(stale + vars.NewKeySuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused rotation left %s: %v", stale+vars.NewKeySuffix, err)
	}
	if id := recorded(t, sk); id != next.ID() {
		t.Errorf("the refused rotation recorded %s", id)
	}
}
