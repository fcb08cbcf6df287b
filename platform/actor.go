package platform

import (
	"github.com/quiverhq/quiver/store"
)

// Actor is who asks for an operation: the key's workspace, user and role. Operations act in
// the actor's workspace only.
type Actor struct {
	WorkspaceID string
	UserID      string
	// KeyID names the key in refusals ("API key key_1 is a viewer's").
	KeyID string
	// Who names the actor in refusals when it is not a key (an access token's user); empty
	// means its key.
	Who  string
	Role store.KeyRole
	// Operator says the actor administers the server itself (an admin of its own workspace),
	// and so may create workspaces.
	Operator bool

	// What the workspace's entitlements decide by, besides the key, user and role (see
	// entitle.Subject): an access token's claims, the toolsets the key is bound to, the
	// toolset whose address the request came through, the agents whose run calls.
	Claims   map[string]any
	Toolsets []string
	Toolset  string
	Agents   []string
}

// Operator is an actor whom no role limits, for doors that authenticate no one (a server
// without keys, the CLI on its own database).
func Operator(workspaceID, userID string) Actor {
	return Actor{WorkspaceID: workspaceID, UserID: userID, Role: store.KeyRoleAdmin, Operator: true}
}

// mayChange refuses a viewer: may says what its key may do instead.
func (a Actor) mayChange(may string) error {
	if a.Role.Allows(store.KeyRoleMember) {
		return nil
	}
	return &Error{Kind: Forbidden, Message: a.who() + " is a viewer's: it may " + may}
}

// mayAdminister refuses anyone but an admin: may says what the key may do instead.
func (a Actor) mayAdminister(may string) error {
	if a.Role.Allows(store.KeyRoleAdmin) {
		return nil
	}
	return &Error{Kind: Forbidden, Message: a.who() + " is a " + string(a.Role) + "'s: it may " + may}
}

func (a Actor) who() string {
	if a.Who != "" {
		return a.Who
	}
	return "API key " + a.KeyID
}

// token reports whether the actor is an access token's user rather than a key: a door that
// authenticates names its actor by Who and gives a key's id, so an actor it names without a
// key came with a token. What a person decided records which of the two they used.
func (a Actor) token() bool { return a.KeyID == "" && a.Who != "" }
