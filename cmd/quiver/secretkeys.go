package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
)

// keyring returns the keyring db's secret values are sealed with: the node's key
// (QUIVER_SECRET_KEY, else the key file db.KeyPath, made on a first start), checked against
// the key the database records (vars.OpenKeyring). Every command that works on secrets gets
// its keyring here, so that none of them seals a value with a key the database's other nodes
// do not have: on PostgreSQL, a node started without the fleet's key used to make its own,
// and the secrets one node set did not open on another.
func keyring(ctx context.Context, db *opened) (*secret.Keyring, error) {
	ring, err := vars.OpenKeyring(ctx, db, db.KeyPath)
	var ke *vars.KeyError
	if errors.As(err, &ke) {
		return nil, keyRefusal(ke, db.DSN != "")
	}
	return ring, err
}

// keyRefusal is what a node whose key is not the database's says: the key expected and the
// node's, then how to give it the right one. shared says that the database is PostgreSQL,
// which other nodes may use, holding the key the node needs.
func keyRefusal(ke *vars.KeyError, shared bool) error {
	var b strings.Builder
	if ke.Have == "" {
		fmt.Fprintf(&b, "the secrets of this database are sealed with key %s, and this node has no key (%s is not set and there is no key file at %s); "+
			"it makes none of its own, which would not open them.\n", ke.Want, secret.EnvKey, ke.KeyPath)
	} else {
		from := "the key file " + ke.KeyPath
		if ke.FromEnv {
			from = secret.EnvKey
		}
		fmt.Fprintf(&b, "the secrets of this database are sealed with key %s, but this node's key is %s (from %s); "+
			"it would seal secrets that key %s does not open.\n", ke.Want, ke.Have, from, ke.Want)
	}
	switch {
	case ke.Unfinished:
		fmt.Fprintf(&b, "A rotation of the key was interrupted after the database took the new key (%s holds key %s): "+
			"run 'quiver secrets rotate-key' again, with the same --db or --postgres, to finish it.",
			ke.KeyPath+vars.NewKeySuffix, ke.Want)
	case shared:
		fmt.Fprintf(&b, "Give this node the fleet's key (key %s, the one the other nodes of this database use): set %s to it, the same on every node",
			ke.Want, secret.EnvKey)
		if !ke.FromEnv {
			fmt.Fprintf(&b, ", or copy their key file to %s (mode 0600)", ke.KeyPath)
		}
		b.WriteString(".")
	case ke.FromEnv:
		fmt.Fprintf(&b, "Give it key %s: set %s to it, or unset %s to use the key file %s.", ke.Want, secret.EnvKey, secret.EnvKey, ke.KeyPath)
	default:
		fmt.Fprintf(&b, "Give it key %s: put the key file that holds it back at %s (mode 0600), or set %s to it.", ke.Want, ke.KeyPath, secret.EnvKey)
	}
	return errors.New(b.String())
}
