package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/quiverhq/quiver/store/secret"
)

// GrantFiles keeps the OAuth grants of remote MCP servers (access and refresh tokens, the
// client they were issued to) in a directory, one file per remote, sealed with AES-256-GCM
// under the secret key ([secret.Keyring]) and bound to the remote's name, written atomically
// with mode 0600. It is an [TokenStore].
//
// The files live beside the key in the data directory, so each Quiver node keeps its own
// grants: nodes sharing a PostgreSQL database each ask for authorization once.
type GrantFiles struct {
	Dir  string
	Keys *secret.Keyring
}

var _ TokenStore = (*GrantFiles)(nil)

func (g *GrantFiles) path(remote string) string {
	// Remote names are 1-32 characters of [a-zA-Z0-9_-] (Remote.Validate): safe file names.
	return filepath.Join(g.Dir, remote+".grant")
}

func grantPlace(remote string) string { return "mcp-oauth-grant:" + remote }

// LoadToken returns the grant saved for remote, or nil when there is none.
func (g *GrantFiles) LoadToken(_ context.Context, remote string) (*Grant, error) {
	sealed, err := os.ReadFile(g.path(remote))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the OAuth grant of %s: %w", remote, err)
	}
	plain, err := g.Keys.Open(string(sealed), grantPlace(remote))
	if err != nil {
		return nil, fmt.Errorf("the OAuth grant in %s cannot be opened with the current secret key (was the key replaced?): %w", g.path(remote), err)
	}
	var grant Grant
	if err := json.Unmarshal(plain, &grant); err != nil {
		return nil, fmt.Errorf("the OAuth grant in %s is damaged: %w", g.path(remote), err)
	}
	return &grant, nil
}

// SaveToken replaces the grant saved for remote.
func (g *GrantFiles) SaveToken(_ context.Context, remote string, grant *Grant) error {
	plain, err := json.Marshal(grant)
	if err != nil {
		return err
	}
	sealed, err := g.Keys.Seal(plain, grantPlace(remote))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(g.Dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", g.Dir, err)
	}
	return secret.WriteFile(g.path(remote), []byte(sealed))
}

// Reseal re-encrypts every grant under the keyring's current key (after a key rotation, while
// the previous key is still in the keyring) and returns how many it rewrote. A grant that does
// not open is left as it is and reported.
func (g *GrantFiles) Reseal(ctx context.Context) (int, error) {
	entries, err := os.ReadDir(g.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	var failed []error
	for _, e := range entries {
		remote, ok := strings.CutSuffix(e.Name(), ".grant")
		if !ok || e.IsDir() {
			continue
		}
		grant, err := g.LoadToken(ctx, remote)
		if err == nil && grant != nil {
			err = g.SaveToken(ctx, remote, grant)
		}
		if err != nil {
			failed = append(failed, err)
			continue
		}
		n++
	}
	return n, errors.Join(failed...)
}
