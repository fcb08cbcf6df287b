// Package secret encrypts secret values at rest with AES-256-GCM.
//
// The key comes from the environment variable QUIVER_SECRET_KEY (32 bytes, base64 or hex) or
// from a key file that is created with mode 0600 on first start. Every sealed value names the
// key that sealed it, so a keyring can hold the previous key while values are re-encrypted
// under a new one (quiver secrets rotate-key), and every value is bound to the place it
// belongs to (additional data such as "variable:wsp_1:thread:thr_2:API_KEY"): a ciphertext
// copied to another row does not decrypt.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// EnvKey is the environment variable that holds the key.
const EnvKey = "QUIVER_SECRET_KEY"

// KeySize is the size of a key in bytes (AES-256).
const KeySize = 32

const prefix = "qv1."

// ErrDecrypt means a sealed value could not be opened: wrong key, wrong place, or tampered.
var ErrDecrypt = errors.New("secret: cannot decrypt (wrong key, wrong place or tampered value)")

// Key is one AES-256 key with its id.
type Key struct {
	id   string
	aead cipher.AEAD
}

// ID identifies the key without revealing it: the first 8 hex digits of its SHA-256.
func (k *Key) ID() string { return k.id }

// NewKey wraps 32 bytes of key material.
func NewKey(material []byte) (*Key, error) {
	if len(material) != KeySize {
		return nil, fmt.Errorf("secret: a key is %d bytes, got %d", KeySize, len(material))
	}
	block, err := aes.NewCipher(material)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(material)
	return &Key{id: hex.EncodeToString(sum[:4]), aead: aead}, nil
}

// GenerateKey returns a new random key and its text form (base64), as stored in a key file or
// given in QUIVER_SECRET_KEY.
func GenerateKey() (*Key, string, error) {
	material := make([]byte, KeySize)
	if _, err := rand.Read(material); err != nil {
		return nil, "", err
	}
	k, err := NewKey(material)
	return k, base64.StdEncoding.EncodeToString(material), err
}

// ParseKey reads a key written as base64 (standard or URL alphabet, padded or not) or as 64 hex
// digits.
func ParseKey(text string) (*Key, error) {
	text = strings.TrimSpace(text)
	if len(text) == 2*KeySize {
		if b, err := hex.DecodeString(text); err == nil {
			return NewKey(b)
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(text); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("secret: the key decodes to %d bytes, want %d (generate one with: head -c 32 /dev/urandom | base64)", len(b), KeySize)
			}
			return NewKey(b)
		}
	}
	return nil, fmt.Errorf("secret: the key is neither base64 nor 64 hex digits (generate one with: head -c 32 /dev/urandom | base64)")
}

// Keyring seals with its current key and opens with any key it holds.
type Keyring struct {
	current *Key
	byID    map[string]*Key
}

// NewKeyring returns a keyring that seals with current and also opens values sealed with old.
func NewKeyring(current *Key, old ...*Key) *Keyring {
	r := &Keyring{current: current, byID: map[string]*Key{current.id: current}}
	for _, k := range old {
		if _, ok := r.byID[k.id]; !ok {
			r.byID[k.id] = k
		}
	}
	return r
}

// Current returns the key new values are sealed with.
func (r *Keyring) Current() *Key { return r.current }

// Holds reports whether the keyring opens values sealed with the key of that id (as KeyID
// reads it from a sealed value): its current key or one of the old ones.
func (r *Keyring) Holds(id string) bool { return r.byID[id] != nil }

// IDs returns the ids of the keys the keyring holds: the current key's, then the others'
// sorted.
func (r *Keyring) IDs() []string {
	var old []string
	for id := range r.byID {
		if id != r.current.id {
			old = append(old, id)
		}
	}
	slices.Sort(old)
	return append([]string{r.current.id}, old...)
}

// Load returns the keyring for a data directory: the key in QUIVER_SECRET_KEY when set,
// otherwise the key file keyPath, created with a new random key and mode 0600 when it does not
// exist yet. A key file that others can read is refused.
func Load(keyPath string) (*Keyring, error) {
	if text, ok := os.LookupEnv(EnvKey); ok {
		k, err := ParseKey(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKey, err)
		}
		return NewKeyring(k), nil
	}
	k, err := loadOrCreateFile(keyPath)
	if err != nil {
		return nil, err
	}
	return NewKeyring(k), nil
}

func loadOrCreateFile(path string) (*Key, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("secret: key file directory: %w", err)
	}
	k, text, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	// The key is written to a temporary file and linked into place: a process that finds the
	// key file finds it complete, and when two processes start at once one link wins and both
	// use its key. The directory is synced so the file survives a power loss, as the values
	// sealed with it will.
	created, err := publishKey(path, text)
	if err != nil {
		return nil, err
	}
	if created {
		return k, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secret: key file %s: %w", path, err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secret: key file %s is readable by others (mode %04o); run: chmod 600 %s", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secret: reading key file %s: %w", path, err)
	}
	key, err := ParseKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("secret: key file %s: %w", path, err)
	}
	return key, nil
}

// Seal encrypts plaintext for the place named by where, with the current key.
func (r *Keyring) Seal(plaintext []byte, where string) (string, error) {
	k := r.current
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	sealed := k.aead.Seal(nonce, nonce, plaintext, []byte(where))
	return prefix + k.id + "." + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// Open decrypts a value sealed for where by any key of the keyring.
func (r *Keyring) Open(sealed, where string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return nil, fmt.Errorf("secret: not a sealed value")
	}
	id, body, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, fmt.Errorf("secret: malformed sealed value")
	}
	k := r.byID[id]
	if k == nil {
		return nil, fmt.Errorf("secret: sealed with key %s, which this keyring does not hold: %w", id, ErrDecrypt)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, fmt.Errorf("secret: malformed sealed value")
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, raw[:n], raw[n:], []byte(where))
	if err != nil {
		return nil, ErrDecrypt
	}
	return plain, nil
}

// KeyID returns the id of the key a value was sealed with.
func KeyID(sealed string) (string, bool) {
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, ".")
	return id, ok
}

// publishKey atomically creates path holding text, and reports false if path already existed.
func publishKey(path, text string) (bool, error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".secret-key-*")
	if err != nil {
		return false, fmt.Errorf("secret: creating key file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(text + "\n")
	if err := tmp.Chmod(0o600); werr == nil {
		werr = err
	}
	if err := tmp.Sync(); werr == nil {
		werr = err
	}
	if err := tmp.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return false, fmt.Errorf("secret: writing key file %s: %w", path, werr)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("secret: creating key file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return true, nil
}

// WriteFile replaces path with data atomically and privately: a temporary file of mode 0600
// in the same directory, synced, renamed over path, and the directory synced. A reader sees
// the old content or the new, and a crash leaves one of them.
func WriteFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("secret: writing %s: %w", path, err)
	}
	tmp := f.Name()
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("secret: writing %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir makes a rename in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("secret: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("secret: sync %s: %w", dir, err)
	}
	return nil
}
