package platform

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/store"
)

// APIKeyPrefix begins every API key, so that a key is recognisable (in a leaked file, by a
// secret scanner) and cannot be mistaken for another credential.
const APIKeyPrefix = "qvk_"

// APIKeyLength is the length of every API key: the prefix and 256 random bits, so that a fast
// hash (SHA-256) is enough to store it (there is nothing to guess, unlike a password).
const APIKeyLength = len(APIKeyPrefix) + 43

const apiKeyRandomBytes = 32

// shownPrefix is how much of a key its record keeps, to recognise it in a list: "qvk_" and 8
// characters, 48 bits, far too few to guess the rest from.
const shownPrefix = len(APIKeyPrefix) + 8

// NewAPIKey makes a new key: the secret, shown once to whoever asked for it and never stored,
// and the Prefix and Hash its record keeps (see store.APIKey).
func NewAPIKey() (secret, prefix string, hash []byte) {
	b := make([]byte, apiKeyRandomBytes)
	rand.Read(b) // never fails (crypto/rand)
	secret = APIKeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, secret[:shownPrefix], HashAPIKey(secret)
}

// HashAPIKey is the form of a key the store keeps and finds it by: its SHA-256.
func HashAPIKey(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// IssueAPIKey makes a new API key for k's workspace, user, name, role and expiry, stores its
// record (setting k's Prefix, Hash, ID and CreatedAt) and returns the key itself, to be shown
// once: the store keeps only its hash. The store refuses a user who is not a member, or a role
// above what the member may give a key (see store.APIKeys).
func IssueAPIKey(ctx context.Context, keys store.APIKeys, k *store.APIKey) (string, error) {
	secret, prefix, hash := NewAPIKey()
	k.Prefix, k.Hash = prefix, hash
	if err := keys.CreateAPIKey(ctx, k); err != nil {
		return "", err
	}
	return secret, nil
}

// MaxKeysPerWorkspace is the most API keys a workspace may have working at once: its caps on
// sessions and streams hold whatever keys it makes, and this bounds what one admin can make.
const MaxKeysPerWorkspace = 100

// NewKey is an API key to make.
type NewKey struct {
	UserID    string // the member it acts as; the actor's user when empty
	Role      store.KeyRole
	Name      string
	ExpiresAt *time.Time // nil: never
	// Toolsets bind the key to toolsets of the workspace's entitlements: it may see and call
	// only their tools. A name the workspace does not define (yet) is kept: the key then
	// reaches none of its tools until it does.
	Toolsets []string
}

// Keys lists the workspace's API keys, newest first (their records, never the keys); admins
// only.
func (p *Platform) Keys(ctx context.Context, a Actor) ([]*store.APIKey, error) {
	if err := a.mayAdminister("use the workspace but not list its keys"); err != nil {
		return nil, err
	}
	ks, err := p.cfg.Store.APIKeys(ctx, a.WorkspaceID)
	if err != nil {
		return nil, storeError(err, "the keys", "")
	}
	return ks, nil
}

// CreateKey makes an API key for a member of the workspace, with no more than the member's
// role allows, and returns its record and the key itself, to be shown once; admins only.
func (p *Platform) CreateKey(ctx context.Context, a Actor, in NewKey) (*store.APIKey, string, error) {
	if err := a.mayAdminister("use the workspace but not make keys"); err != nil {
		return nil, "", err
	}
	userID := cmp.Or(in.UserID, a.UserID)
	if err := checkID("user_id", store.PrefixUser, userID); err != nil {
		return nil, "", err
	}
	ws := a.WorkspaceID
	// The store holds the same rules; checked here first to name the input at fault.
	m, err := p.cfg.Store.Member(ctx, ws, userID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", invalid("user_id", "user "+userID+" is not a member of this workspace")
	}
	if err != nil {
		return nil, "", storeError(err, "member "+userID, "")
	}
	if most := store.MemberKeyRole(m.Role); !most.Allows(in.Role) {
		return nil, "", invalid("role", "user "+userID+" is a "+string(m.Role)+" of the workspace: their keys may be at most "+string(most))
	}
	if in.ExpiresAt != nil && !in.ExpiresAt.After(time.Now()) {
		return nil, "", invalid("expires_at", "the key would expire before it is made: want a time in the future")
	}
	if err := checkKeyToolsets(in.Toolsets); err != nil {
		return nil, "", err
	}
	if err := roomForKey(ctx, p.cfg.Store, ws); err != nil {
		return nil, "", err
	}
	k := &store.APIKey{WorkspaceID: ws, UserID: userID, Name: in.Name, Role: in.Role, ExpiresAt: in.ExpiresAt, Toolsets: in.Toolsets}
	secret, err := IssueAPIKey(ctx, p.cfg.Store, k)
	if err != nil {
		return nil, "", storeError(err, "a key", "")
	}
	return k, secret, nil
}

// roomForKey refuses a key beyond MaxKeysPerWorkspace working ones. Two keys made at the same
// instant can both pass: the bound may be crossed by the few requests that race it, never
// more.
func roomForKey(ctx context.Context, keys store.APIKeys, ws string) error {
	all, err := keys.APIKeys(ctx, ws)
	if err != nil {
		return storeError(err, "the workspace's keys", "")
	}
	now, working := time.Now(), 0
	for _, k := range all {
		if k.Usable(now) {
			working++
		}
	}
	if working >= MaxKeysPerWorkspace {
		return &Error{Kind: Conflict, Message: fmt.Sprintf(
			"the workspace has %d working API keys, the most it may: revoke one first", working)}
	}
	return nil
}

// RevokeKey revokes an API key of the workspace for good; admins only.
func (p *Platform) RevokeKey(ctx context.Context, a Actor, id string) (*store.APIKey, error) {
	if err := a.mayAdminister("use the workspace but not revoke keys"); err != nil {
		return nil, err
	}
	if err := checkID("id", store.PrefixAPIKey, id); err != nil {
		return nil, err
	}
	k, err := p.cfg.Store.RevokeAPIKey(ctx, a.WorkspaceID, id)
	if err != nil {
		return nil, storeError(err, "API key "+id, "")
	}
	return k, nil
}

// checkKeyToolsets refuses a key's toolsets that no toolset could be named, naming the one at
// fault (toolsets[1]); the store holds the same rules.
func checkKeyToolsets(names []string) error {
	if len(names) > store.MaxKeyToolsets {
		return invalid("toolsets", fmt.Sprintf("%d toolsets: a key is bound to at most %d", len(names), store.MaxKeyToolsets))
	}
	for i, name := range names {
		if err := entitle.CheckToolsetName(name); err != nil {
			return invalid(fmt.Sprintf("toolsets[%d]", i), err.Error())
		}
		if slices.Index(names, name) < i {
			return invalid(fmt.Sprintf("toolsets[%d]", i), "the toolset "+quoteShort(name)+" is named twice")
		}
	}
	return nil
}
