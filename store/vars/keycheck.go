package vars

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
)

// KeyError is a node refused by the database it opened: the database's secrets are sealed
// with a key that is not the node's. Starting anyway would seal new values with the node's
// key, which the other nodes cannot open (and the node could not open theirs).
type KeyError struct {
	// Want is the id of the key the database's secrets are sealed with: the one it records
	// (store.SecretKeys) or, where it records none yet, the one that sealed its latest
	// secret.
	Want string
	// Have is the id of the node's current key; "" when the node has none (QUIVER_SECRET_KEY
	// unset and no key file), in which case it made none: a key of its own would be the
	// wrong one.
	Have string
	// FromEnv says the node's key comes from QUIVER_SECRET_KEY, not from its key file.
	FromEnv bool
	// KeyPath is the node's key file.
	KeyPath string
	// Unfinished says that a rotation of the key file was interrupted after the database took
	// its new key: KeyPath.new holds Want, and running the rotation again finishes it.
	Unfinished bool
}

func (e *KeyError) Error() string {
	if e.Have == "" {
		return fmt.Sprintf("vars: the database's secrets are sealed with key %s, and this node has no key", e.Want)
	}
	return fmt.Sprintf("vars: the database's secrets are sealed with key %s, and this node's key is %s", e.Want, e.Have)
}

// OpenKeyring returns the keyring of the key file keyPath (LoadKeyring) for a database whose
// secrets' key sk records, refusing with a *KeyError a node whose key is not the database's:
//
//   - When the database records a key and the node has none (QUIVER_SECRET_KEY unset, no
//     file at keyPath), no key is made: LoadKeyring would make one, and the wrong one.
//   - When the node's current key is not the recorded one.
//   - When the database records no key yet (a new one, or one written before keys were
//     recorded), the node's current key is recorded, the first node to do so winning, and
//     checked like any other. A database that already holds secrets must hold them sealed
//     with a key the node has: its latest secret's key is checked first.
func OpenKeyring(ctx context.Context, sk store.SecretKeys, keyPath string) (*secret.Keyring, error) {
	recorded, err := sk.SecretKeyID(ctx)
	if err != nil {
		return nil, err
	}
	_, fromEnv := os.LookupEnv(secret.EnvKey)
	if recorded != "" && !fromEnv {
		if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
			return nil, &KeyError{Want: recorded, KeyPath: keyPath}
		}
	}
	ring, err := LoadKeyring(keyPath)
	if err != nil {
		return nil, err
	}
	if recorded == "" {
		if recorded, err = recordKey(ctx, sk, ring, keyPath); err != nil {
			return nil, err
		}
	}
	if ring.Current().ID() != recorded {
		return nil, newKeyError(recorded, ring, keyPath)
	}
	return ring, nil
}

// recordKey records ring's current key as the key of the database's secrets, where sk records
// none, and returns the recorded id: this node's, or that of a node that recorded first.
func recordKey(ctx context.Context, sk store.SecretKeys, ring *secret.Keyring, keyPath string) (string, error) {
	latest, err := sk.LatestSecret(ctx)
	if err != nil {
		return "", err
	}
	if id, ok := secret.KeyID(latest); ok && !ring.Holds(id) {
		return "", newKeyError(id, ring, keyPath)
	}
	return sk.RecordSecretKeyID(ctx, ring.Current().ID())
}

// newKeyError is the KeyError of a node with keyring ring, for a database sealed with want.
func newKeyError(want string, ring *secret.Keyring, keyPath string) *KeyError {
	e := &KeyError{Want: want, Have: ring.Current().ID(), KeyPath: keyPath}
	_, e.FromEnv = os.LookupEnv(secret.EnvKey)
	if !e.FromEnv {
		k, _, err := readKeyFile(keyPath + NewKeySuffix)
		e.Unfinished = err == nil && k.ID() == want
	}
	return e
}
