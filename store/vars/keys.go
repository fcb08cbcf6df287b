package vars

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
)

// Key files. The key file (say secret.key) holds the current key. A rotation ([RotateKeyFile])
// also uses two files beside it:
//
//   - secret.key.new holds the next key from before any value is sealed with it until it
//     replaces secret.key. It exists only while a rotation runs or after one was interrupted.
//   - secret.key.old holds the previous key after a rotation, so that values sealed meanwhile
//     by processes still running with it remain readable. Delete it once every process has
//     restarted with the new key (and run another rotation if some did write with it).
//
// [LoadKeyring] seals with secret.key and also opens with the keys in the other two, so a
// process started at any moment of a rotation, even an interrupted one, reads every value.
const (
	NewKeySuffix = ".new"
	OldKeySuffix = ".old"
)

// LoadKeyring returns the keyring for the key file keyPath: secret.Load (the key in
// QUIVER_SECRET_KEY when set; otherwise the key file, created with a new key and mode 0600 on
// first start), plus, when the key comes from the file, the keys of keyPath.new and
// keyPath.old, for opening only.
func LoadKeyring(keyPath string) (*secret.Keyring, error) {
	ring, err := secret.Load(keyPath)
	if err != nil {
		return nil, err
	}
	if _, ok := os.LookupEnv(secret.EnvKey); ok {
		return ring, nil
	}
	var others []*secret.Key
	for _, p := range []string{keyPath + NewKeySuffix, keyPath + OldKeySuffix} {
		k, _, err := readKeyFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		others = append(others, k)
	}
	return secret.NewKeyring(ring.Current(), others...), nil
}

// Rotation reports a finished key rotation.
type Rotation struct {
	// OldKeyID and NewKeyID identify the keys (secret.Key.ID).
	OldKeyID, NewKeyID string
	// Values is the number of secret values re-encrypted.
	Values int
	// Resumed is true when the rotation finished one that had been interrupted, with the key
	// that one had chosen.
	Resumed bool
	// OldKeyPath is where the previous key was kept (key-file rotations only).
	OldKeyPath string
}

// Rewrap re-encrypts every secret value of every workspace under ring's current key, in one
// transaction: each value is opened with any key of ring, at its place, and sealed again there.
// If one value does not open, nothing is changed and the error names it. It returns the number
// of values re-encrypted.
func Rewrap(ctx context.Context, vs store.Variables, ring *secret.Keyring) (int, error) {
	n := 0
	if err := vs.RewriteSecrets(ctx, reseal(ring, &n)); err != nil {
		return 0, err
	}
	return n, nil
}

// rekey is Rewrap that, on a store recording the key of its secrets (store.SecretKeys), also
// records ring's current key in the same transaction, so that the record names the key the
// values are sealed with at every moment, a crash included. from are the keys the rotating
// node may find recorded (the keys it holds): another means the node does not hold the
// database's key, which a database without secrets (Rewrap then opens nothing) would not
// show, and rotating would lock every other node out.
func rekey(ctx context.Context, vs store.Variables, ring *secret.Keyring, from []string) (int, error) {
	sk, ok := vs.(store.SecretKeys)
	if !ok {
		return Rewrap(ctx, vs, ring)
	}
	n := 0
	err := sk.RekeySecrets(ctx, from, ring.Current().ID(), reseal(ring, &n))
	if errors.Is(err, store.ErrConflict) {
		return 0, fmt.Errorf("%w: this node does not hold the database's key; rotate on a node that has it", err)
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// reseal returns the function that re-encrypts one value under ring's current key, counting
// the values in *n.
func reseal(ring *secret.Keyring, n *int) func(v *store.Variable) (string, error) {
	return func(v *store.Variable) (string, error) {
		where := Where(v.WorkspaceID, v.Layer, v.OwnerID, v.Name)
		plain, err := ring.Open(v.Value, where)
		if err != nil {
			return "", fmt.Errorf("vars: secret %s of %s %s in workspace %s: %w", v.Name, v.Layer, ownerLabel(v), v.WorkspaceID, err)
		}
		sealed, err := ring.Seal(plain, where)
		clear(plain)
		if err != nil {
			return "", err
		}
		*n++
		return sealed, nil
	}
}

// RotateKeyFile replaces the key in the key file keyPath with a new one and re-encrypts every
// secret value under it. It never leaves a value sealed with a key that is not in a file:
//
//  1. The new key is written to keyPath.new (a temporary file, synced, renamed, the directory
//     synced), mode 0600, before anything is sealed with it. If keyPath.new already exists, a
//     rotation was interrupted: its key is taken as the new key (nothing else was ever sealed
//     with another new key), which makes the rotation resumable.
//  2. Every secret is re-encrypted in one transaction (Rewrap), opening with the current key,
//     keyPath.old and keyPath.new. Until it commits the database holds the old values only.
//     On a store that records the key of its secrets (store.SecretKeys) the same transaction
//     records the new key's id: the record changes exactly when the values do. A crash after
//     the commit and before step 3 leaves the record naming the key in keyPath.new while
//     keyPath holds the old one; a node starting then is refused (its key is not the
//     recorded one) until the rotation is run again, which resumes (it holds both keys, so
//     the record's check passes) and finishes. Recording after step 3 instead would, after
//     a crash between, leave a record naming a key no value is sealed with, and refuse the
//     nodes that hold the right one.
//  3. After the commit, the old key is written to keyPath.old (atomically, replacing an older
//     one), then keyPath.new is renamed over keyPath (atomic: keyPath always exists, holding
//     the old key or the new one), and the directory is synced.
//
// A crash at any point leaves every value readable by LoadKeyring, and running RotateKeyFile
// again finishes the rotation. It refuses to run when the key comes from QUIVER_SECRET_KEY (use
// RotateKeyEnv) or when keyPath does not exist (there is no key, hence nothing to rotate).
func RotateKeyFile(ctx context.Context, vs store.Variables, keyPath string) (*Rotation, error) {
	if _, ok := os.LookupEnv(secret.EnvKey); ok {
		return nil, fmt.Errorf("vars: the key comes from %s, not from the key file %s", secret.EnvKey, keyPath)
	}
	oldKey, oldText, err := readKeyFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("vars: no key file at %s: there is no key to rotate (one is created when a store with secrets first starts)", keyPath)
	}
	if err != nil {
		return nil, err
	}
	newPath, oldPath := keyPath+NewKeySuffix, keyPath+OldKeySuffix
	removeUnnamed(newPath, oldPath)
	opening, err := openingKeys(oldKey, oldPath)
	if err != nil {
		return nil, err
	}
	rot := &Rotation{OldKeyID: oldKey.ID(), OldKeyPath: oldPath}
	newKey, err := nextKey(newPath, rot)
	if err != nil {
		return nil, err
	}
	if rot.Values, err = rekeyFile(ctx, vs, secret.NewKeyring(newKey, opening...), newPath, rot.Resumed); err != nil {
		return nil, err
	}
	// A resumed rotation may find the swap done but key.new left.
	if err := swapKeyFiles(keyPath, newPath, oldPath, oldText, newKey.ID() != oldKey.ID()); err != nil {
		return nil, err
	}
	return rot, nil
}

// removeUnnamed removes the temporary files of paths never renamed: they hold keys nothing was
// sealed with.
func removeUnnamed(paths ...string) {
	for _, p := range paths {
		leftovers, _ := filepath.Glob(globEscape(p) + ".tmp-*")
		for _, f := range leftovers {
			os.Remove(f)
		}
	}
}

// openingKeys are the keys values may be sealed with before a rotation: the current one, and
// the one in oldPath when there is one.
func openingKeys(current *secret.Key, oldPath string) ([]*secret.Key, error) {
	k, _, err := readKeyFile(oldPath)
	switch {
	case err == nil:
		return []*secret.Key{current, k}, nil
	case errors.Is(err, fs.ErrNotExist):
		return []*secret.Key{current}, nil
	}
	return nil, err
}

// swapKeyFiles is step 3 of RotateKeyFile: the old key (oldText) kept in oldPath when keepOld,
// then the new key's file named keyPath.
func swapKeyFiles(keyPath, newPath, oldPath, oldText string, keepOld bool) error {
	if keepOld {
		if err := writeKeyFile(oldPath, oldText); err != nil {
			return fmt.Errorf("vars: the secrets are re-encrypted with the key in %s, but keeping the old key failed: %w (run the rotation again to finish)", newPath, err)
		}
	}
	if err := os.Rename(newPath, keyPath); err != nil {
		return fmt.Errorf("vars: the secrets are re-encrypted with the key in %s, but it could not replace %s: %w (run the rotation again to finish)", newPath, keyPath, err)
	}
	return secret.SyncDir(filepath.Dir(keyPath))
}

// nextKey is step 1 of RotateKeyFile: the key in newPath when a rotation was interrupted
// (rot.Resumed), else a new one written there. It sets rot.NewKeyID.
func nextKey(newPath string, rot *Rotation) (*secret.Key, error) {
	k, _, err := readKeyFile(newPath)
	switch {
	case err == nil:
		rot.Resumed = true
	case errors.Is(err, fs.ErrNotExist):
		var text string
		if k, text, err = secret.GenerateKey(); err != nil {
			return nil, err
		}
		if err := writeKeyFile(newPath, text+"\n"); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	rot.NewKeyID = k.ID()
	return k, nil
}

// rekeyFile is step 2 of RotateKeyFile: rekey with ring, whose new key is in newPath (resumed:
// from an interrupted rotation).
func rekeyFile(ctx context.Context, vs store.Variables, ring *secret.Keyring, newPath string, resumed bool) (int, error) {
	n, err := rekey(ctx, vs, ring, ring.IDs())
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, store.ErrConflict) && !resumed:
		// Refused before anything was sealed with the new key, and never to be resumed on
		// this node: the key in newPath is nobody's.
		os.Remove(newPath)
		return 0, fmt.Errorf("%w (the key file is unchanged)", err)
	}
	return 0, fmt.Errorf("%w (the key file is unchanged; running the rotation again resumes it with the key in %s)", err, newPath)
}

// RotateKeyEnv rotates the key given in QUIVER_SECRET_KEY: it generates a new key, hands its
// text to publish (which shows it to the operator) before anything is sealed with it, and
// re-encrypts every secret under it in one transaction. The operator then sets
// QUIVER_SECRET_KEY to the new key everywhere. If publish fails, nothing is changed; if the
// re-encryption fails, nothing is changed and the published key must be discarded. Where the
// store records the key of its secrets, the re-encryption records the new key's id in its
// transaction: a crash leaves the old values and id, or the new values and id.
func RotateKeyEnv(ctx context.Context, vs store.Variables, publish func(newKey string) error) (*Rotation, error) {
	text, ok := os.LookupEnv(secret.EnvKey)
	if !ok {
		return nil, fmt.Errorf("vars: %s is not set", secret.EnvKey)
	}
	oldKey, err := secret.ParseKey(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", secret.EnvKey, err)
	}
	newKey, newText, err := secret.GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := publish(newText); err != nil {
		return nil, err
	}
	n, err := rekey(ctx, vs, secret.NewKeyring(newKey, oldKey), []string{oldKey.ID()})
	if err != nil {
		return nil, err
	}
	return &Rotation{OldKeyID: oldKey.ID(), NewKeyID: newKey.ID(), Values: n}, nil
}

// readKeyFile reads a key file, refusing one that others can read (as secret.Load does). It
// returns the key and the file's text.
func readKeyFile(path string) (*secret.Key, string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, "", err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, "", fmt.Errorf("vars: key file %s is readable by others (mode %04o); run: chmod 600 %s", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("vars: reading key file %s: %w", path, err)
	}
	k, err := secret.ParseKey(string(b))
	if err != nil {
		return nil, "", fmt.Errorf("vars: key file %s: %w", path, err)
	}
	return k, string(b), nil
}

// writeKeyFile replaces path with text atomically, with mode 0600.
func writeKeyFile(path, text string) error {
	if err := secret.WriteFile(path, []byte(text)); err != nil {
		return fmt.Errorf("vars: key file: %w", err)
	}
	return nil
}

// globEscape escapes the pattern characters of a path for filepath.Glob.
func globEscape(p string) string {
	out := make([]rune, 0, len(p))
	for _, r := range p {
		switch r {
		case '*', '?', '[', '\\':
			out = append(out, '\\')
		}
		out = append(out, r)
	}
	return string(out)
}
