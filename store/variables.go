package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// VariableLayer is where a variable value is set: on a thread, an agent, a prompt, a user or
// the instance. The names match quiver.Layer.
type VariableLayer string

// Variable layers, in resolution order (the first that has a value wins; package store/vars
// resolves, the store only keeps the values).
const (
	// LayerThread values belong to a thread (owner: the thread id).
	LayerThread VariableLayer = "thread"
	// LayerAgent values belong to an agent (owner: the agent id).
	LayerAgent VariableLayer = "agent"
	// LayerPrompt values belong to a prompt (owner: the prompt name).
	LayerPrompt VariableLayer = "prompt"
	// LayerUser values belong to a user (owner: the user id).
	LayerUser VariableLayer = "user"
	// LayerInstance values belong to the deployment (owner: always ""), within a workspace.
	LayerInstance VariableLayer = "instance"
)

// Valid reports whether l is one of the five layers.
func (l VariableLayer) Valid() bool {
	switch l {
	case LayerThread, LayerAgent, LayerPrompt, LayerUser, LayerInstance:
		return true
	}
	return false
}

// Limits on stored variables.
const (
	// MaxVariableNameBytes is the longest variable name or owner id, in bytes.
	MaxVariableNameBytes = 256
	// MaxVariableValueBytes is the largest stored value, in bytes (a sealed secret is stored
	// base64-encoded with a header, about 4/3 of its plaintext plus 40 bytes).
	MaxVariableValueBytes = 256 << 10
)

// Variable is a variable's value as stored, in one layer, for one owner, in one workspace.
type Variable struct {
	// WorkspaceID is the workspace the value lives in.
	WorkspaceID string `json:"workspace_id"`
	// Layer is where the value is set.
	Layer VariableLayer `json:"layer"`
	// OwnerID is the thread id, agent id, prompt name or user id the value belongs to; "" for
	// the instance layer.
	OwnerID string `json:"owner_id,omitempty"`
	// Name is the variable's name.
	Name string `json:"name"`
	// Value is what the store was given. For a secret it is the sealed (encrypted) form: the
	// store never sees a secret's plaintext, and returns Value as it was stored.
	Value string `json:"value"`
	// Secret marks a value the caller sealed before storing it.
	Secret bool `json:"secret"`
	// Scoped marks a thread value provided as scoped: see package store/vars for what it means
	// to resolution. The store keeps the flag for any layer.
	Scoped bool `json:"scoped"`
	// CreatedAt is when the value was first set, UpdatedAt when it was last set; the store
	// sets both.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// CheckVariable reports, wrapping ErrInvalid, a value the store would refuse: no workspace, an
// unknown layer, an owner missing (or, for the instance layer, present), a name that is empty,
// too long, not UTF-8 or holds control characters, or a value that is too large, not UTF-8 or
// holds a NUL byte. Every backend calls it, so they refuse the same values.
func CheckVariable(v *Variable) error {
	if v == nil {
		return fmt.Errorf("variable is nil: %w", ErrInvalid)
	}
	if err := CheckVariableOwner(v.WorkspaceID, v.Layer, v.OwnerID); err != nil {
		return err
	}
	switch {
	case v.Name == "":
		return fmt.Errorf("a variable needs a name: %w", ErrInvalid)
	case len(v.Name) > MaxVariableNameBytes:
		return fmt.Errorf("variable name is longer than %d bytes: %w", MaxVariableNameBytes, ErrInvalid)
	case !utf8.ValidString(v.Name) || strings.ContainsFunc(v.Name, isControl):
		return fmt.Errorf("variable name %q is not UTF-8 text without control characters: %w", v.Name, ErrInvalid)
	case len(v.Value) > MaxVariableValueBytes:
		return fmt.Errorf("variable %s: the value is %d bytes, more than the %d allowed: %w", v.Name, len(v.Value), MaxVariableValueBytes, ErrInvalid)
	case !utf8.ValidString(v.Value) || strings.ContainsRune(v.Value, 0):
		return fmt.Errorf("variable %s: the value is not UTF-8 text without NUL bytes: %w", v.Name, ErrInvalid)
	}
	return nil
}

// CheckVariableOwner reports, wrapping ErrInvalid, a workspace, layer and owner that name no
// place a value can be set.
func CheckVariableOwner(workspaceID string, layer VariableLayer, ownerID string) error {
	switch {
	case workspaceID == "":
		return fmt.Errorf("a variable needs a workspace id: %w", ErrInvalid)
	case !layer.Valid():
		return fmt.Errorf("unknown variable layer %q (thread, agent, prompt, user or instance): %w", layer, ErrInvalid)
	case layer == LayerInstance && ownerID != "":
		return fmt.Errorf("instance variables have no owner, got %q: %w", ownerID, ErrInvalid)
	case layer != LayerInstance && ownerID == "":
		return fmt.Errorf("%s variables need an owner id: %w", layer, ErrInvalid)
	case len(ownerID) > MaxVariableNameBytes || len(workspaceID) > MaxVariableNameBytes:
		return fmt.Errorf("variable owner or workspace id longer than %d bytes: %w", MaxVariableNameBytes, ErrInvalid)
	case !utf8.ValidString(ownerID) || strings.ContainsFunc(ownerID, isControl) ||
		!utf8.ValidString(workspaceID) || strings.ContainsFunc(workspaceID, isControl):
		return fmt.Errorf("variable owner %q or workspace %q is not UTF-8 text without control characters: %w", ownerID, workspaceID, ErrInvalid)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// VariableQuery says whose values LookupVariables reads.
type VariableQuery struct {
	// ThreadID, when set, reads the values of the thread and of every ancestor up to the root.
	ThreadID string
	// AgentID, PromptName and UserID, when set, read the values of that agent, prompt and user.
	AgentID, PromptName, UserID string
	// Names limits the values read to these names; nil reads every name.
	Names []string
}

// VariableLookup is what LookupVariables read.
type VariableLookup struct {
	// Threads is the query's thread followed by its ancestors, nearest first (the parent, then
	// the grandparent...), up to the root. Empty when the query names no thread.
	Threads []string
	// Values are the stored values of the requested names: those of the threads in Threads,
	// of the agent, prompt and user asked for, and of the instance layer, in no particular
	// order.
	Values []*Variable
}

// Variables stores variable values per layer and owner, within a workspace. The
// store keeps what it is given: secret values arrive sealed (package store/vars seals and
// opens them, the same way for every backend) and are returned sealed. A value of one
// workspace is never read, changed or deleted through another workspace.
//
// Every backend implements it next to Store (see Backend).
type Variables interface {
	// SetVariable creates or replaces the value of name for the owner. A thread value needs a
	// thread of the workspace (ErrNotFound otherwise); values breaking CheckVariable are
	// ErrInvalid.
	SetVariable(ctx context.Context, workspaceID string, layer VariableLayer, ownerID, name, value string, secret, scoped bool) error
	// SetVariables sets several values, in one transaction: all are stored or none. Each
	// value names its workspace, layer and owner; CreatedAt and UpdatedAt are set by the store.
	SetVariables(ctx context.Context, values []*Variable) error
	// DeleteVariable removes a value; ErrNotFound when the owner has no value of that name.
	DeleteVariable(ctx context.Context, workspaceID string, layer VariableLayer, ownerID, name string) error
	// Variables lists the owner's values by name. Secret values are returned as stored
	// (sealed), never in plaintext. An owner without values (or an unknown one) has none.
	Variables(ctx context.Context, workspaceID string, layer VariableLayer, ownerID string) ([]*Variable, error)
	// LookupVariables reads, in one consistent read, every value resolution may need for a
	// thread (see VariableQuery). ErrNotFound when the query names a thread that the
	// workspace does not have.
	LookupVariables(ctx context.Context, workspaceID string, q VariableQuery) (*VariableLookup, error)
	// RewriteSecrets calls fn for every secret value of every workspace and stores the value
	// fn returns in its place (fn gets a copy; only its returned value is used), all in one
	// transaction that also keeps other writers from changing variables meanwhile. If fn
	// returns an error, nothing is changed and the error is returned. It is how a key
	// rotation re-encrypts every secret.
	RewriteSecrets(ctx context.Context, fn func(v *Variable) (string, error)) error
}
