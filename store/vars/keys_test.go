package vars_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

// noKeyEnv makes sure QUIVER_SECRET_KEY is unset for the test.
func noKeyEnv(t *testing.T) {
	t.Helper()
	t.Setenv(secret.EnvKey, "") // restores the old value at the end
	os.Unsetenv(secret.EnvKey)
}

// rotationFixture is a SQLite store with secrets in two workspaces, sealed with the key of a
// key file.
type rotationFixture struct {
	s       fullStore
	keyPath string
	oldKey  *secret.Key
	th      *store.Thread
}

var rotationSecrets = map[string]string{"API_KEY": "sk-one", "PASSWORD": "pw-two"}

func newRotationFixture(t *testing.T) *rotationFixture {
	t.Helper()
	noKeyEnv(t)
	s, path := openSQLite(t)
	keyPath := filepath.Join(filepath.Dir(path), "secret.key")
	ring, err := vars.LoadKeyring(keyPath) // creates the key file
	if err != nil {
		t.Fatal(err)
	}
	r := vars.New(s, ring)
	th := &store.Thread{WorkspaceID: ws}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	set(t, r, quiver.LayerThread, th.ID, vars.Value{Name: "API_KEY", Value: rotationSecrets["API_KEY"], Secret: true},
		vars.Value{Name: "TEXT", Value: "plain"})
	if err := r.Set(ctx, "wsp_other", quiver.LayerInstance, "", vars.Value{Name: "PASSWORD", Value: rotationSecrets["PASSWORD"], Secret: true}); err != nil {
		t.Fatal(err)
	}
	return &rotationFixture{s: s, keyPath: keyPath, oldKey: ring.Current(), th: th}
}

// check resolves every secret with ring and reports whether all opened with the right values.
func (f *rotationFixture) check(t *testing.T, ring *secret.Keyring) error {
	t.Helper()
	r := vars.New(f.s, ring)
	for _, c := range []struct {
		scope quiver.Scope
		name  string
	}{{scopeOf(f.th), "API_KEY"}, {quiver.Scope{WorkspaceID: "wsp_other"}, "PASSWORD"}} {
		v, ok, err := r.ResolveVariable(ctx, c.scope, quiver.Variable{Name: c.name, Type: quiver.VarSecret})
		if err != nil {
			return err
		}
		if !ok || v != rotationSecrets[c.name] {
			t.Fatalf("%s = %q, %v", c.name, v, ok)
		}
	}
	return nil
}

// keyIDs returns the ids of the keys the stored secrets are sealed with.
func (f *rotationFixture) keyIDs(t *testing.T) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	err := f.s.RewriteSecrets(ctx, func(v *store.Variable) (string, error) {
		id, _ := secret.KeyID(v.Value)
		ids[id] = true
		return v.Value, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func readKey(t *testing.T, path string) *secret.Key {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", path, info.Mode().Perm())
	}
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

func writeKey(t *testing.T, path string) *secret.Key {
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

// finished checks the end state of a rotation to newID.
func (f *rotationFixture) finished(t *testing.T, rot *vars.Rotation, newID string) {
	t.Helper()
	if rot.NewKeyID != newID || rot.Values != 2 {
		t.Errorf("rotation %+v, want new key %s and 2 values", rot, newID)
	}
	if k := readKey(t, f.keyPath); k.ID() != newID {
		t.Errorf("the key file holds %s, want %s", k.ID(), newID)
	}
	if k := readKey(t, f.keyPath+vars.OldKeySuffix); k.ID() != f.oldKey.ID() {
		t.Errorf("the old key file holds %s, want %s", k.ID(), f.oldKey.ID())
	}
	if _, err := os.Stat(f.keyPath + vars.NewKeySuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is left: %v", f.keyPath+vars.NewKeySuffix, err)
	}
	if left, _ := filepath.Glob(f.keyPath + "*.tmp-*"); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if ids := f.keyIDs(t); len(ids) != 1 || !ids[newID] {
		t.Errorf("secrets sealed with %v, want only %s", ids, newID)
	}
	newKey := readKey(t, f.keyPath)
	if err := f.check(t, secret.NewKeyring(newKey)); err != nil {
		t.Errorf("the new key alone: %v", err)
	}
	if err := f.check(t, secret.NewKeyring(f.oldKey)); !errors.Is(err, secret.ErrDecrypt) {
		t.Errorf("the old key alone: %v, want secret.ErrDecrypt", err)
	}
	ring, err := vars.LoadKeyring(f.keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if ring.Current().ID() != newID {
		t.Errorf("LoadKeyring seals with %s, want %s", ring.Current().ID(), newID)
	}
	if err := f.check(t, ring); err != nil {
		t.Error(err)
	}
}

func TestRotateKeyFile(t *testing.T) {
	f := newRotationFixture(t)
	os.WriteFile(f.keyPath+vars.NewKeySuffix+".tmp-123", []byte("garbage"), 0o600) // a crash's leftover
	rot, err := vars.RotateKeyFile(ctx, f.s, f.keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if rot.Resumed || rot.OldKeyID != f.oldKey.ID() || rot.NewKeyID == f.oldKey.ID() {
		t.Errorf("rotation %+v", rot)
	}
	f.finished(t, rot, rot.NewKeyID)

	// A second rotation replaces key.old with the key of the first.
	first := readKey(t, f.keyPath)
	rot2, err := vars.RotateKeyFile(ctx, f.s, f.keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if rot2.OldKeyID != first.ID() || readKey(t, f.keyPath+vars.OldKeySuffix).ID() != first.ID() {
		t.Errorf("second rotation %+v", rot2)
	}
	if err := f.check(t, secret.NewKeyring(readKey(t, f.keyPath))); err != nil {
		t.Error(err)
	}
}

// TestRotateKeyFileResumes simulates a crash at each step of a rotation: every value stays
// readable by LoadKeyring, and running the rotation again finishes it with the key it chose.
func TestRotateKeyFileResumes(t *testing.T) {
	steps := []struct {
		name string
		// crash leaves the files and database as a crash at that step would, and returns the
		// key the interrupted rotation had chosen.
		crash func(t *testing.T, f *rotationFixture) *secret.Key
	}{
		{"after writing key.new", func(t *testing.T, f *rotationFixture) *secret.Key {
			return writeKey(t, f.keyPath+vars.NewKeySuffix)
		}},
		{"after the commit", func(t *testing.T, f *rotationFixture) *secret.Key {
			k := writeKey(t, f.keyPath+vars.NewKeySuffix)
			if _, err := vars.Rewrap(ctx, f.s, secret.NewKeyring(k, f.oldKey)); err != nil {
				t.Fatal(err)
			}
			return k
		}},
		{"after writing key.old", func(t *testing.T, f *rotationFixture) *secret.Key {
			k := writeKey(t, f.keyPath+vars.NewKeySuffix)
			if _, err := vars.Rewrap(ctx, f.s, secret.NewKeyring(k, f.oldKey)); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(f.keyPath)
			os.WriteFile(f.keyPath+vars.OldKeySuffix, b, 0o600)
			return k
		}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			f := newRotationFixture(t)
			chosen := step.crash(t, f)
			// A process starting now reads every value.
			ring, err := vars.LoadKeyring(f.keyPath)
			if err != nil {
				t.Fatal(err)
			}
			if ring.Current().ID() != f.oldKey.ID() {
				t.Errorf("after the crash LoadKeyring seals with %s, want the old key", ring.Current().ID())
			}
			if err := f.check(t, ring); err != nil {
				t.Fatalf("after the crash: %v", err)
			}
			rot, err := vars.RotateKeyFile(ctx, f.s, f.keyPath)
			if err != nil {
				t.Fatal(err)
			}
			if !rot.Resumed {
				t.Error("not reported as resumed")
			}
			f.finished(t, rot, chosen.ID())
		})
	}
}

func TestRotateKeyFileRefuses(t *testing.T) {
	noKeyEnv(t)
	s, path := openSQLite(t)
	keyPath := filepath.Join(filepath.Dir(path), "secret.key")
	if _, err := vars.RotateKeyFile(ctx, s, keyPath); err == nil || !strings.Contains(err.Error(), "no key file") {
		t.Errorf("without a key file: %v", err)
	}
	if _, err := os.Stat(keyPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key file was created: %v", err)
	}

	// A value that no key opens stops the rotation before anything changes.
	f := newRotationFixture(t)
	stranger := secret.NewKeyring(writeKey(t, filepath.Join(t.TempDir(), "k")))
	if err := vars.New(f.s, stranger).Set(ctx, ws, quiver.LayerUser, "usr_1", vars.Value{Name: "ALIEN", Value: "x", Secret: true}); err != nil {
		t.Fatal(err)
	}
	keyBefore, _ := os.ReadFile(f.keyPath)
	idsBefore := f.keyIDs(t)
	_, err := vars.RotateKeyFile(ctx, f.s, f.keyPath)
	if !errors.Is(err, secret.ErrDecrypt) || !strings.Contains(err.Error(), "ALIEN") {
		t.Errorf("with a value no key opens: %v", err)
	}
	if keyAfter, _ := os.ReadFile(f.keyPath); string(keyAfter) != string(keyBefore) {
		t.Error("the key file changed")
	}
	if ids := f.keyIDs(t); len(ids) != len(idsBefore) {
		t.Errorf("sealing keys %v -> %v", idsBefore, ids)
	}
	if err := f.check(t, secret.NewKeyring(f.oldKey)); err != nil {
		t.Errorf("after the refused rotation: %v", err)
	}

	// A key file others can read is refused.
	os.Chmod(f.keyPath+vars.NewKeySuffix, 0o644)
	if _, err := vars.LoadKeyring(f.keyPath); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("LoadKeyring with a readable key.new: %v", err)
	}

	// With the key in the environment, there is no file to rotate.
	_, text, _ := secret.GenerateKey()
	t.Setenv(secret.EnvKey, text)
	if _, err := vars.RotateKeyFile(ctx, f.s, f.keyPath); err == nil || !strings.Contains(err.Error(), secret.EnvKey) {
		t.Errorf("with %s set: %v", secret.EnvKey, err)
	}
}

func TestRotateKeyEnv(t *testing.T) {
	f := newRotationFixture(t)
	b, _ := os.ReadFile(f.keyPath)
	t.Setenv(secret.EnvKey, strings.TrimSpace(string(b)))

	// A failing publish changes nothing.
	if _, err := vars.RotateKeyEnv(ctx, f.s, func(string) error { return errors.New("no terminal") }); err == nil {
		t.Error("a failing publish: no error")
	}
	if err := f.check(t, secret.NewKeyring(f.oldKey)); err != nil {
		t.Fatal(err)
	}

	var published string
	rot, err := vars.RotateKeyEnv(ctx, f.s, func(k string) error {
		published = k
		if ids := f.keyIDs(t); len(ids) != 1 || !ids[f.oldKey.ID()] {
			t.Errorf("values were sealed with the new key before it was published: %v", ids)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := secret.ParseKey(published)
	if err != nil {
		t.Fatalf("published %q: %v", published, err)
	}
	if rot.NewKeyID != newKey.ID() || rot.OldKeyID != f.oldKey.ID() || rot.Values != 2 {
		t.Errorf("rotation %+v", rot)
	}
	if err := f.check(t, secret.NewKeyring(newKey)); err != nil {
		t.Errorf("the new key: %v", err)
	}
	if err := f.check(t, secret.NewKeyring(f.oldKey)); !errors.Is(err, secret.ErrDecrypt) {
		t.Errorf("the old key: %v, want secret.ErrDecrypt", err)
	}
	if _, err := os.Stat(f.keyPath + vars.NewKeySuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key file was written: %v", err)
	}
}
