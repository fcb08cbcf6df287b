package memstore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver/store"
)

// entityData holds the workspaces and what they own outside threads. The records are the
// Store's own copies: every method copies what it takes in and what it hands out, so no
// caller ever holds a pointer into them.
type entityData struct {
	workspaces map[string]*store.Workspace
	users      map[string]*store.User
	emails     map[string]string                       // normalized email to user id
	members    map[string]map[string]*store.Membership // workspace id to user id
	schemas    map[string]*store.Schema
	functions  map[string]*store.Function
	versions   map[string]*store.FunctionVersion
	fnVersions map[string][]*store.FunctionVersion // function id to its versions, in order
	tools      map[string]*store.Tool
	scopes     map[string]*scope // workspace id ("" for the system records) to what it owns
	keys       map[string]*store.APIKey
	keyHashes  map[string]string                          // string(hash) to key id
	sources    map[string]map[string]*store.OpenAPISource // workspace id to name to source
	docs       map[docKey]*workspaceDoc                   // governance rules and entitlements
}

// scope is what one workspace, or the system (""), owns in listing order, with the counter its
// ToolsStamp is made of: a counter, unlike the SQL backends' latest UpdatedAt, changes even
// when the clock does not.
type scope struct {
	functions []*store.Function // by (CreatedAt, ID)
	tools     []*store.Tool     // by (CreatedAt, ID), deleted ones too
	rev       uint64            // counts the changes to the tools and functions, to who they run as and to what governs them
}

func (d *entityData) init() {
	*d = entityData{
		workspaces: map[string]*store.Workspace{},
		users:      map[string]*store.User{},
		emails:     map[string]string{},
		members:    map[string]map[string]*store.Membership{},
		schemas:    map[string]*store.Schema{},
		functions:  map[string]*store.Function{},
		versions:   map[string]*store.FunctionVersion{},
		fnVersions: map[string][]*store.FunctionVersion{},
		tools:      map[string]*store.Tool{},
		scopes:     map[string]*scope{"": {}},
		keys:       map[string]*store.APIKey{},
		keyHashes:  map[string]string{},
	}
}

// entityOp names an operation of the entity half in its errors, worded as sqlstore words them.
type entityOp string

// fail wraps err, from a rule that package store checks, with the operation.
func (op entityOp) fail(err error) error { return fmt.Errorf("memstore: %s: %w", string(op), err) }

// failf reports a broken rule: kind is the store error it wraps.
func (op entityOp) failf(kind error, format string, args ...any) error {
	return fmt.Errorf("memstore: %s: %s: %w", string(op), fmt.Sprintf(format, args...), kind)
}

// readableFrom reports whether a record owned by owner may be read through workspace: its
// own records, and the system's.
func readableFrom(owner, workspace string) bool { return owner == "" || owner == workspace }

// role is the user's role in the workspace, "" when not a member.
func (d *entityData) role(workspaceID, userID string) store.MemberRole {
	if m := d.members[workspaceID][userID]; m != nil {
		return m.Role
	}
	return ""
}

// checkRuntimeUser enforces the runtime-user rule for setting one (what names the setting):
// the caller must be an admin of the workspace and the new user ("" clears it) a member.
func (d *entityData) checkRuntimeUser(op entityOp, workspaceID, callerUserID, newUserID, what string) error {
	if d.role(workspaceID, callerUserID) != store.MemberRoleAdmin {
		who := "no caller was named"
		if callerUserID != "" {
			who = fmt.Sprintf("user %s is not an admin of workspace %s", callerUserID, workspaceID)
		}
		return op.failf(store.ErrForbidden, "only a workspace admin may set %s: %s", what, who)
	}
	if newUserID != "" && d.role(workspaceID, newUserID) == "" {
		return op.failf(store.ErrInvalid, "%s must be a member of workspace %s, and user %s is not", what, workspaceID, newUserID)
	}
	return nil
}

// notEarlier keeps an UpdatedAt from going back when the clock does.
func notEarlier(now, prev time.Time) time.Time {
	if now.Before(prev) {
		return prev
	}
	return now
}

// creationOrder orders records oldest first by (CreatedAt, ID), as the listings do.
func creationOrder(at time.Time, id string, otherAt time.Time, otherID string) int {
	if c := at.Compare(otherAt); c != 0 {
		return c
	}
	return strings.Compare(id, otherID)
}

func toolOrder(a, b *store.Tool) int { return creationOrder(a.CreatedAt, a.ID, b.CreatedAt, b.ID) }

func functionOrder(a, b *store.Function) int {
	return creationOrder(a.CreatedAt, a.ID, b.CreatedAt, b.ID)
}

// insertOrdered inserts r into s, kept in order by cmp. It is mostly an append; a clock that
// goes back (an injected one) makes it an insert.
func insertOrdered[T any](s []T, r T, cmp func(a, b T) int) []T {
	i, _ := slices.BinarySearchFunc(s, r, cmp)
	return slices.Insert(s, i, r)
}

// copyTimePtr returns a copy of *t that shares nothing with it (nil for nil).
func copyTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}
