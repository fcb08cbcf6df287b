package store

import (
	"context"
	"fmt"
)

// SecretKeys records which key seals a database's secret values: the key's id (secret.Key.ID,
// a fingerprint that reveals nothing of the key), never the key itself. Every node of a fleet
// must seal with one key, or a value set through one node does not open on another; a node
// compares its key's id with the recorded one as it starts, and refuses to start on a
// mismatch rather than seal values the others cannot read.
//
// Every backend implements it next to Store (see Backend).
type SecretKeys interface {
	// SecretKeyID returns the recorded key id, "" when none is recorded yet.
	SecretKeyID(ctx context.Context) (string, error)
	// RecordSecretKeyID records id when no key id is recorded, and returns the id recorded
	// afterwards: id, or the one another node recorded first (the first wins, also when
	// nodes start at once). It never replaces a recorded id. An id breaking
	// CheckSecretKeyID is ErrInvalid.
	RecordSecretKeyID(ctx context.Context, id string) (string, error)
	// LatestSecret returns the stored (sealed) value of the secret of any workspace set most
	// recently, "" when there is none: which key sealed the secrets of a database that has
	// no key id recorded yet (one written before the record existed).
	LatestSecret(ctx context.Context) (string, error)
	// RekeySecrets is Variables.RewriteSecrets that also records id as the key's, in the same
	// transaction: a key rotation changes the values and the record together, or neither.
	// It refuses, with ErrConflict and changing nothing, when the recorded id is neither ""
	// nor one of from: the rotating node does not hold the database's key (which a
	// database without secrets would not otherwise show), or another rotation got there
	// first.
	RekeySecrets(ctx context.Context, from []string, id string, fn func(v *Variable) (string, error)) error
}

// MaxSecretKeyIDBytes is the longest key id a store records (secret.Key.ID is 8 hex digits).
const MaxSecretKeyIDBytes = 64

// CheckSecretKeyID reports, wrapping ErrInvalid, an id no store records: empty, too long, or
// other than letters, digits, '-' and '_'.
func CheckSecretKeyID(id string) error {
	if id == "" || len(id) > MaxSecretKeyIDBytes {
		return fmt.Errorf("a secret key id is 1 to %d bytes, got %d: %w", MaxSecretKeyIDBytes, len(id), ErrInvalid)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("secret key id %q: use letters, digits, '-' and '_': %w", id, ErrInvalid)
		}
	}
	return nil
}
