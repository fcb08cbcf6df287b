package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/store"
)

// localAdminEmail is the user the command's keys belong to in the local workspace: the
// operator at this machine.
const localAdminEmail = "admin@localhost"

// localAdmin returns the local workspace's admin user, creating it (and its membership) the
// first time.
func localAdmin(ctx context.Context, st backend) (*store.User, error) {
	u, err := st.UserByEmail(ctx, localAdminEmail)
	if errors.Is(err, store.ErrNotFound) {
		u = &store.User{Email: localAdminEmail, Name: "local admin"}
		if err = st.CreateUser(ctx, u); errors.Is(err, store.ErrConflict) {
			u, err = st.UserByEmail(ctx, localAdminEmail) // another process made it first
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the local admin user: %w", err)
	}
	err = st.AddMember(ctx, &store.Membership{WorkspaceID: localWorkspaceID, UserID: u.ID, Role: store.MemberRoleAdmin})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return nil, fmt.Errorf("making %s an admin of the local workspace: %w", localAdminEmail, err)
	}
	return u, nil
}

// createKey makes a key for the local admin and stores its record; the secret is returned to
// be shown once.
func createKey(ctx context.Context, st backend, name string, role store.KeyRole, expires *time.Time) (string, *store.APIKey, error) {
	u, err := localAdmin(ctx, st)
	if err != nil {
		return "", nil, err
	}
	k := &store.APIKey{WorkspaceID: localWorkspaceID, UserID: u.ID, Name: name, Role: role, ExpiresAt: expires}
	secret, err := platform.IssueAPIKey(ctx, st, k)
	if err != nil {
		return "", nil, err
	}
	return secret, k, nil
}

// hasKeys reports whether the local workspace has any key at all, revoked ones included.
func hasKeys(ctx context.Context, st backend) (bool, error) {
	keys, err := st.APIKeys(ctx, localWorkspaceID)
	return len(keys) > 0, err
}

// makeFirstKey makes the local workspace's first key, an admin's, when it has none at all: the
// way into a server that authenticates every request. Its secret is returned to be shown once;
// nil when the workspace has keys already.
func makeFirstKey(ctx context.Context, st backend) (*firstKey, error) {
	if has, err := hasKeys(ctx, st); err != nil || has {
		return nil, err
	}
	secret, k, err := createKey(ctx, st, "first admin key", store.KeyRoleAdmin, nil)
	if err != nil {
		return nil, fmt.Errorf("creating the first API key: %w", err)
	}
	return &firstKey{secret: secret, record: k}, nil
}

// firstKey is the first key of a workspace, with its secret, which is shown this once.
type firstKey struct {
	secret string
	record *store.APIKey
}

func (a *app) keysCreate(ctx context.Context, inv *invocation) (int, error) {
	role := inv.fs.String("role", "member", "what the key may do: admin, member (call tools) or viewer (list them)")
	name := inv.fs.String("name", "", "what the key is for, to recognise it in quiver keys list (required)")
	expires := inv.fs.Duration("expires", 0, "how long the key works, like 720h (default: until revoked)")
	var toolsets []string
	inv.fs.Func("toolset", "bind the key to a toolset of the entitlements (repeatable): it may see and call only their tools (default: not bound)", func(s string) error {
		if err := entitle.CheckToolsetName(s); err != nil {
			return err
		}
		toolsets = append(toolsets, s)
		return nil
	})
	if err := inv.parseNone(" (the name goes in --name)"); err != nil {
		return exitUsage, err
	}
	r := store.KeyRole(*role)
	switch {
	case !r.Valid():
		return exitUsage, usagef("--role %q: want admin, member or viewer", *role)
	case strings.TrimSpace(*name) == "":
		return exitUsage, usagef("--name is required: say what the key is for (\"ci\", \"claude desktop\")")
	case *expires < 0:
		return exitUsage, usagef("--expires must not be negative")
	}
	var until *time.Time
	if *expires > 0 {
		t := time.Now().Add(*expires)
		until = &t
	}
	// Through the platform, as POST /v1/keys: its rules (the cap of working keys a workspace
	// may have, the roles a member's keys may take) hold at this door too.
	p, actor, st, err := a.localPlatform(ctx, inv)
	if err != nil {
		return exitError, err
	}
	k, secret, err := p.CreateKey(ctx, actor, platform.NewKey{Role: r, Name: strings.TrimSpace(*name), ExpiresAt: until, Toolsets: toolsets})
	if err != nil {
		return exitError, err
	}
	bound := ""
	if len(k.Toolsets) > 0 {
		bound = ", bound to the toolsets " + strings.Join(k.Toolsets, ", ")
	}
	fmt.Fprintf(a.stderr, "quiver: created API key %s (%s, %s%s) in %s; it is shown this once:\n", k.ID, k.Name, k.Role, bound, st.Where)
	fmt.Fprintln(a.stdout, secret)
	return exitOK, nil
}

func (a *app) keysList(ctx context.Context, inv *invocation) (int, error) {
	asJSON := inv.fs.Bool("json", false, "print the keys' records as JSON")
	if err := inv.parseNone(""); err != nil {
		return exitUsage, err
	}
	p, actor, st, err := a.localPlatform(ctx, inv)
	if err != nil {
		return exitError, err
	}
	keys, err := p.Keys(ctx, actor)
	if err != nil {
		return exitError, err
	}
	if *asJSON {
		if keys == nil {
			keys = []*store.APIKey{}
		}
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return exitOK, enc.Encode(keys)
	}
	if len(keys) == 0 {
		fmt.Fprintf(a.stderr, "quiver: no API keys in %s yet (quiver serve makes the first; quiver keys create makes more)\n", st.Where)
		return exitOK, nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKEY\tNAME\tROLE\tTOOLSETS\tCREATED\tLAST USED\tSTATE")
	now := time.Now()
	for _, k := range keys {
		state := "active"
		switch {
		case k.RevokedAt != nil:
			state = "revoked " + k.RevokedAt.UTC().Format("2006-01-02 15:04Z")
		case !k.Usable(now):
			state = "expired " + k.ExpiresAt.UTC().Format("2006-01-02 15:04Z")
		case k.ExpiresAt != nil:
			state = "expires " + k.ExpiresAt.UTC().Format("2006-01-02 15:04Z")
		}
		used := "never"
		if k.LastUsedAt != nil {
			used = k.LastUsedAt.UTC().Format("2006-01-02 15:04Z")
		}
		fmt.Fprintf(tw, "%s\t%s...\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Name, k.Role, orDash(strings.Join(k.Toolsets, ",")),
			k.CreatedAt.UTC().Format("2006-01-02 15:04Z"), used, state)
	}
	return exitOK, tw.Flush()
}

func (a *app) keysRevoke(ctx context.Context, inv *invocation) (int, error) {
	pos, err := inv.parse(1, 1, "keys revoke needs the key's id (key_..., as quiver keys list shows)")
	if err != nil {
		return exitUsage, err
	}
	p, actor, _, err := a.localPlatform(ctx, inv)
	if err != nil {
		return exitError, err
	}
	k, err := p.RevokeKey(ctx, actor, pos[0])
	if err != nil {
		return exitError, refusal(err, "quiver keys list shows them")
	}
	fmt.Fprintf(a.stderr, "quiver: revoked API key %s (%s); servers refuse it within a second\n", k.ID, k.Name)
	return exitOK, nil
}
