package secret

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestSealOpen(t *testing.T) {
	k, _, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	r := NewKeyring(k)
	sealed, err := r.Seal([]byte("sk-live-123"), "variable:wsp_1:thread:thr_1:API_KEY")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "sk-live-123") || !strings.HasPrefix(sealed, "qv1."+k.ID()+".") {
		t.Fatalf("sealed = %q", sealed)
	}
	again, _ := r.Seal([]byte("sk-live-123"), "variable:wsp_1:thread:thr_1:API_KEY")
	if again == sealed {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
	got, err := r.Open(sealed, "variable:wsp_1:thread:thr_1:API_KEY")
	if err != nil || string(got) != "sk-live-123" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	tests := []struct {
		name, sealed, where string
	}{
		{"another place", sealed, "variable:wsp_2:thread:thr_1:API_KEY"},
		{"tampered", sealed[:len(sealed)-2] + "AA", "variable:wsp_1:thread:thr_1:API_KEY"},
		{"truncated", sealed[:20], "variable:wsp_1:thread:thr_1:API_KEY"},
		{"not sealed", "plain", "x"},
		{"unknown key", "qv1.deadbeef." + strings.SplitN(sealed, ".", 3)[2], "variable:wsp_1:thread:thr_1:API_KEY"},
	}
	for _, tt := range tests {
		if _, err := r.Open(tt.sealed, tt.where); err == nil {
			t.Errorf("%s: opened", tt.name)
		}
	}
	if _, err := r.Open(sealed, "elsewhere"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("wrong place: %v, want ErrDecrypt", err)
	}
}

func TestRotation(t *testing.T) {
	old, _, _ := GenerateKey()
	sealed, _ := NewKeyring(old).Seal([]byte("v"), "w")
	cur, _, _ := GenerateKey()
	r := NewKeyring(cur, old)
	if got, err := r.Open(sealed, "w"); err != nil || string(got) != "v" {
		t.Fatalf("old value under the new keyring: %q %v", got, err)
	}
	resealed, _ := r.Seal([]byte("v"), "w")
	if id, _ := KeyID(resealed); id != cur.ID() {
		t.Fatalf("resealed with %s, want the current key %s", id, cur.ID())
	}
	if _, err := NewKeyring(cur).Open(sealed, "w"); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("a value under a dropped key: %v", err)
	}
	// What a node checks the database's key against: the ids it holds, the current one first.
	id, _ := KeyID(sealed)
	if !r.Holds(id) || !r.Holds(cur.ID()) || NewKeyring(cur).Holds(id) || r.Holds("deadbeef") {
		t.Errorf("Holds: the keyring holds %v, asked for %s", r.IDs(), id)
	}
	if ids := r.IDs(); len(ids) != 2 || ids[0] != cur.ID() || ids[1] != old.ID() {
		t.Errorf("IDs = %v, want [%s %s]", ids, cur.ID(), old.ID())
	}
}

func TestParseKey(t *testing.T) {
	_, text, _ := GenerateKey()
	for _, good := range []string{text, " " + text + "\n", strings.TrimRight(text, "="), "0707070707070707070707070707070707070707070707070707070707070707"} {
		if _, err := ParseKey(good); err != nil {
			t.Errorf("ParseKey(%q): %v", good, err)
		}
	}
	for _, bad := range []string{"", "short", "aGVsbG8=", strings.Repeat("zz", 32)} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}

func TestLoadFromEnvAndFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "secret.key")
	t.Setenv(EnvKey, "")
	os.Unsetenv(EnvKey)
	// Created once, 0600, then reused, even by processes starting together.
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			r, err := Load(path)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = r.Current().ID()
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent first starts made different keys: %v", ids)
		}
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v", info.Mode(), err)
	}
	os.Chmod(path, 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable key file: %v", err)
	}
	_, text, _ := GenerateKey()
	t.Setenv(EnvKey, text)
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ParseKey(text)
	if r.Current().ID() != want.ID() {
		t.Fatal("QUIVER_SECRET_KEY did not take precedence over the key file")
	}
	t.Setenv(EnvKey, "nope")
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), EnvKey) {
		t.Fatalf("a bad QUIVER_SECRET_KEY: %v", err)
	}
}
