package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Errors of the entity store (besides ErrNotFound and ErrInvalid), to be tested with errors.Is.
var (
	// ErrForbidden: the caller may not do this: edit or delete a system tool, or set a runtime
	// user without being an admin of the workspace.
	ErrForbidden = errors.New("store: forbidden")
	// ErrConflict: the record clashes with another one, such as a second active tool of the same
	// name in a workspace, or a second user with the same email.
	ErrConflict = errors.New("store: conflicts with an existing record")
)

// Id prefixes of the entities.
const (
	PrefixWorkspace       = "wsp"
	PrefixUser            = "usr"
	PrefixTool            = "tol"
	PrefixFunction        = "fun"
	PrefixFunctionVersion = "fnv"
	PrefixSchema          = "sch"
)

// MemberRole is what a member may do in a workspace.
type MemberRole string

// Member roles.
const (
	// MemberRoleAdmin administers the workspace: among other things, only an admin sets the user a
	// tool's function runs as.
	MemberRoleAdmin MemberRole = "admin"
	// MemberRoleMember is an ordinary member.
	MemberRoleMember MemberRole = "member"
)

// Valid reports whether r is a known role.
func (r MemberRole) Valid() bool { return r == MemberRoleAdmin || r == MemberRoleMember }

// RetentionTier is how long a soft-deleted tool is kept before the cleanup worker deletes it
// for good.
type RetentionTier string

// Retention tiers.
const (
	RetentionShort  RetentionTier = "short"  // 7 days
	RetentionMedium RetentionTier = "medium" // 30 days
	RetentionLong   RetentionTier = "long"   // 90 days
	RetentionNone   RetentionTier = "none"   // kept forever
)

// DefaultRetentionTier is the tier of a workspace created without one.
const DefaultRetentionTier = RetentionMedium

// Keep returns how long the tier keeps a deleted record, and false for RetentionNone (forever)
// or an unknown tier. A day is 24 hours.
func (r RetentionTier) Keep() (time.Duration, bool) {
	switch r {
	case RetentionShort:
		return 7 * 24 * time.Hour, true
	case RetentionMedium:
		return 30 * 24 * time.Hour, true
	case RetentionLong:
		return 90 * 24 * time.Hour, true
	}
	return 0, false
}

// Valid reports whether r is one of the four tiers.
func (r RetentionTier) Valid() bool {
	switch r {
	case RetentionShort, RetentionMedium, RetentionLong, RetentionNone:
		return true
	}
	return false
}

// ToolTarget is where a tool runs.
type ToolTarget string

// Tool targets.
const (
	// TargetServer tools run a workspace function on the server.
	TargetServer ToolTarget = "server"
	// TargetClient tools are run by the client; they have no function.
	TargetClient ToolTarget = "client"
)

// Workspace is a tenant: every tool, function and schema belongs to one (or, for the built-in
// system ones, to none), and nothing of one workspace is visible from another.
type Workspace struct {
	ID   string `json:"id"` // wsp_...
	Name string `json:"name"`
	// DefaultRuntimeUserID is the user tools' functions run as when a tool sets no runtime user
	// ("" for none: the caller). Only an admin sets it, and it must be a member then; once
	// removed from the workspace, the tools that run as them refuse to run.
	DefaultRuntimeUserID string `json:"default_runtime_user_id,omitempty"`
	// RetentionTier is snapshotted onto what is deleted in the workspace, unless the delete
	// names another tier. Empty when creating means DefaultRetentionTier.
	RetentionTier RetentionTier `json:"retention_tier"`
	CreatedAt     time.Time     `json:"created_at"`
	UpdatedAt     time.Time     `json:"updated_at"`
}

// User is a person (or service account) who may be a member of several workspaces.
type User struct {
	ID string `json:"id"` // usr_...
	// Email is unique among users, ignoring case.
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Membership makes a user a member of a workspace with a role.
type Membership struct {
	WorkspaceID string     `json:"workspace_id"`
	UserID      string     `json:"user_id"`
	Role        MemberRole `json:"role"`
	CreatedAt   time.Time  `json:"created_at"`
}

// Schema is a JSON Schema document that tools and function versions refer to by id. Schemas
// are immutable: a new contract is a new schema.
type Schema struct {
	ID string `json:"id"` // sch_...
	// WorkspaceID is "" for a system schema, which every workspace may refer to.
	WorkspaceID string          `json:"workspace_id,omitempty"`
	Content     json.RawMessage `json:"content"` // a JSON object or boolean
	CreatedAt   time.Time       `json:"created_at"`
}

// Function is a workspace function: named code with numbered versions, one of them the
// default, that server tools wrap.
type Function struct {
	ID          string `json:"id"` // fun_...
	WorkspaceID string `json:"workspace_id,omitempty"`
	// Name is unique among the functions of a workspace.
	Name string `json:"name"`
	// DefaultVersionID is the version a tool without a pinned version runs ("" until the
	// first version is created, which becomes the default).
	DefaultVersionID string    `json:"default_version_id,omitempty"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// FunctionVersion is one immutable version of a function's code.
type FunctionVersion struct {
	ID          string `json:"id"` // fnv_...
	WorkspaceID string `json:"workspace_id,omitempty"`
	FunctionID  string `json:"function_id"`
	// Version numbers a function's versions 1, 2, 3...; the store assigns it.
	Version int    `json:"version"`
	Code    string `json:"code"`
	// InputSchemaID and OutputSchemaID are optional ("" for none).
	InputSchemaID  string    `json:"input_schema_id,omitempty"`
	OutputSchemaID string    `json:"output_schema_id,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// ToolExample is a few-shot example of a call: arguments (a JSON object) and an optional
// result.
type ToolExample struct {
	Args   json.RawMessage `json:"args"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Tool is the stored tool entity, with every field the tool entity has. Optional ids and strings are
// "" for null; its JSON form (MarshalJSON) writes them as null, as the entity's JSON form has them.
type Tool struct {
	ID string // tol_...
	// WorkspaceID is "" (null) for a system tool, and only for one.
	WorkspaceID string
	// Name is what the model sees; unique among the tools of a workspace that are not deleted.
	Name string
	// Description tells the model when to use the tool ("" for null).
	Description string
	// Target is where the tool runs: server (a function) or client.
	Target ToolTarget
	// FunctionID is the function a server tool wraps; a client tool has none.
	FunctionID string
	// FunctionVersionID pins a version of the function; "" follows its default version.
	FunctionVersionID string
	// InputSchemaID and OutputSchemaID name the schemas of the tool's input and output
	// contracts: schemas of its workspace, or system schemas.
	InputSchemaID  string
	OutputSchemaID string
	// Examples are few-shot (args, result) pairs; nil is null.
	Examples []ToolExample
	// RequiresConfirmation pauses the agent loop for a person's approval before each call.
	RequiresConfirmation bool
	// Enabled false hides the tool from the model even when an agent has it.
	Enabled bool
	// System marks a built-in tool: no workspace, and it cannot be edited or deleted.
	System bool
	// CreatedBy is the user who created the tool ("" for system tools); when set, a member of
	// the workspace.
	CreatedBy string
	// RuntimeUserID overrides the workspace's default runtime user: the user the tool's
	// function runs as. Only a workspace admin sets it, and it must be a member then; once
	// removed from the workspace, the tool refuses to run.
	RuntimeUserID string
	// DeletedAt is set by a soft delete, with the RetentionTier snapshotted then; both are
	// null (nil, "") while the tool is active.
	DeletedAt     *time.Time
	RetentionTier RetentionTier
	// CreatedAt and UpdatedAt are set by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// toolJSON is Tool's JSON form, with its documented field names and nulls.
type toolJSON struct {
	ID                   string         `json:"id"`
	WorkspaceID          *string        `json:"workspace_id"`
	Name                 string         `json:"name"`
	Description          *string        `json:"description"`
	Target               ToolTarget     `json:"target"`
	FunctionID           *string        `json:"function_id"`
	FunctionVersionID    *string        `json:"function_version_id"`
	InputSchemaID        string         `json:"input_schema_id"`
	OutputSchemaID       string         `json:"output_schema_id"`
	Examples             []ToolExample  `json:"examples"`
	RequiresConfirmation bool           `json:"requires_confirmation"`
	Enabled              bool           `json:"enabled"`
	System               bool           `json:"system"`
	CreatedBy            *string        `json:"created_by"`
	RuntimeUserID        *string        `json:"runtime_user_id"`
	DeletedAt            *time.Time     `json:"deleted_at"`
	RetentionTier        *RetentionTier `json:"retention_tier"`
	CreatedAt            time.Time      `json:"created_at"`
	UpdatedAt            time.Time      `json:"updated_at"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// MarshalJSON writes the tool in its documented form: camelCase names, null for what is unset.
func (t Tool) MarshalJSON() ([]byte, error) {
	j := toolJSON{
		ID: t.ID, WorkspaceID: nullable(t.WorkspaceID), Name: t.Name, Description: nullable(t.Description),
		Target: t.Target, FunctionID: nullable(t.FunctionID), FunctionVersionID: nullable(t.FunctionVersionID),
		InputSchemaID: t.InputSchemaID, OutputSchemaID: t.OutputSchemaID, Examples: t.Examples,
		RequiresConfirmation: t.RequiresConfirmation, Enabled: t.Enabled, System: t.System,
		CreatedBy: nullable(t.CreatedBy), RuntimeUserID: nullable(t.RuntimeUserID), DeletedAt: t.DeletedAt,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
	if t.RetentionTier != "" {
		tier := t.RetentionTier
		j.RetentionTier = &tier
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (t *Tool) UnmarshalJSON(b []byte) error {
	var j toolJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*t = Tool{
		ID: j.ID, WorkspaceID: deref(j.WorkspaceID), Name: j.Name, Description: deref(j.Description),
		Target: j.Target, FunctionID: deref(j.FunctionID), FunctionVersionID: deref(j.FunctionVersionID),
		InputSchemaID: j.InputSchemaID, OutputSchemaID: j.OutputSchemaID, Examples: j.Examples,
		RequiresConfirmation: j.RequiresConfirmation, Enabled: j.Enabled, System: j.System,
		CreatedBy: deref(j.CreatedBy), RuntimeUserID: deref(j.RuntimeUserID), DeletedAt: j.DeletedAt,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt,
	}
	if j.RetentionTier != nil {
		t.RetentionTier = *j.RetentionTier
	}
	return nil
}

// Clone returns a deep copy of the tool.
func (t *Tool) Clone() *Tool {
	c := *t
	if t.Examples != nil {
		c.Examples = make([]ToolExample, len(t.Examples))
		for i, e := range t.Examples {
			c.Examples[i] = ToolExample{Args: bytes.Clone(e.Args), Result: bytes.Clone(e.Result)}
		}
	}
	if t.DeletedAt != nil {
		d := *t.DeletedAt
		c.DeletedAt = &d
	}
	return &c
}

// CheckSchemaContent reports, wrapping ErrInvalid, content that is not a JSON object or
// boolean (what a JSON Schema is).
func CheckSchemaContent(content json.RawMessage) error {
	var v any
	if err := json.Unmarshal(content, &v); err != nil {
		return fmt.Errorf("schema content is not JSON: %v: %w", err, ErrInvalid)
	}
	switch v.(type) {
	case map[string]any, bool:
		return nil
	}
	return fmt.Errorf("schema content is neither an object nor a boolean: %w", ErrInvalid)
}

// Check reports, wrapping ErrInvalid, a tool that breaks a rule the store enforces by itself,
// without looking at other records: a name, a known target, a function for a server tool and
// none for a client tool, a pinned version only with a function, both schema ids, examples
// whose args are JSON objects, a system tool without a workspace or creator and a workspace
// tool with one, and a deletion time and retention tier set together.
func (t *Tool) Check() error {
	if err := CheckName("tool", t.Name); err != nil {
		return err
	}
	switch t.Target {
	case TargetServer:
		if t.FunctionID == "" {
			return fmt.Errorf("tool %q: a server tool needs a function: %w", t.Name, ErrInvalid)
		}
	case TargetClient:
		if t.FunctionID != "" || t.FunctionVersionID != "" {
			return fmt.Errorf("tool %q: a client tool has no function: %w", t.Name, ErrInvalid)
		}
	default:
		return fmt.Errorf("tool %q: target %q is neither server nor client: %w", t.Name, t.Target, ErrInvalid)
	}
	if t.InputSchemaID == "" || t.OutputSchemaID == "" {
		return fmt.Errorf("tool %q: a tool needs an input and an output schema: %w", t.Name, ErrInvalid)
	}
	for i, e := range t.Examples {
		var args map[string]any
		if err := json.Unmarshal(e.Args, &args); err != nil || args == nil {
			return fmt.Errorf("tool %q: example %d: args are not a JSON object: %w", t.Name, i, ErrInvalid)
		}
		if len(e.Result) > 0 && !json.Valid(e.Result) {
			return fmt.Errorf("tool %q: example %d: result is not JSON: %w", t.Name, i, ErrInvalid)
		}
	}
	if t.System {
		if t.WorkspaceID != "" || t.CreatedBy != "" || t.RuntimeUserID != "" {
			return fmt.Errorf("tool %q: a system tool has no workspace, creator or runtime user: %w", t.Name, ErrInvalid)
		}
	} else if t.WorkspaceID == "" {
		return fmt.Errorf("tool %q: a tool that is not a system tool needs a workspace: %w", t.Name, ErrInvalid)
	}
	if (t.DeletedAt == nil) != (t.RetentionTier == "") {
		return fmt.Errorf("tool %q: deletion time and retention tier go together: %w", t.Name, ErrInvalid)
	}
	if t.RetentionTier != "" && !t.RetentionTier.Valid() {
		return fmt.Errorf("tool %q: unknown retention tier %q: %w", t.Name, t.RetentionTier, ErrInvalid)
	}
	return nil
}

// Check reports, wrapping ErrInvalid, a workspace whose name is empty, longer than MaxNameLen
// bytes, not UTF-8 or holding control characters (spaces are fine), or whose retention tier is
// not one of the four.
func (w *Workspace) Check() error {
	switch {
	case strings.TrimSpace(w.Name) == "":
		return fmt.Errorf("a workspace needs a name: %w", ErrInvalid)
	case len(w.Name) > MaxNameLen:
		return fmt.Errorf("workspace name is longer than %d bytes: %w", MaxNameLen, ErrInvalid)
	case !utf8.ValidString(w.Name) || strings.IndexFunc(w.Name, unicode.IsControl) >= 0:
		return fmt.Errorf("workspace name %q is not UTF-8 text: %w", w.Name, ErrInvalid)
	case !w.RetentionTier.Valid():
		return fmt.Errorf("workspace %q: unknown retention tier %q: %w", w.Name, w.RetentionTier, ErrInvalid)
	}
	return nil
}

// Check reports, wrapping ErrInvalid, a function whose name CheckName refuses.
func (f *Function) Check() error { return CheckName("function", f.Name) }

// NormalizeEmail returns the form of an email address that must be unique among users: trimmed
// and lower-cased. It fails, wrapping ErrInvalid, for an address without a local part and a
// domain.
func NormalizeEmail(email string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(email))
	local, domain, ok := strings.Cut(e, "@")
	if !ok || local == "" || domain == "" || strings.ContainsAny(e, " \t\r\n\x00") || strings.Contains(domain, "@") {
		return "", fmt.Errorf("email %q is not an address: %w", email, ErrInvalid)
	}
	return e, nil
}

// DeletedFilter says whether a listing includes soft-deleted tools.
type DeletedFilter string

// Deleted filters.
const (
	// DeletedExclude lists only active tools (the default, also "").
	DeletedExclude DeletedFilter = "false"
	// DeletedInclude lists active and deleted tools.
	DeletedInclude DeletedFilter = "true"
	// DeletedOnly lists only deleted tools.
	DeletedOnly DeletedFilter = "only"
)

// Listing limits.
const (
	MinListLimit = 1
	MaxListLimit = 100
	// MaxFilterNames is the most names ToolFilter.Names holds.
	MaxFilterNames = 1000
)

// ToolFilter selects and pages the tools ListTools returns. Agents are not stored: a caller
// that knows an agent's tool set filters by it with Names.
type ToolFilter struct {
	// WorkspaceID is the workspace whose tools are listed; "" lists the system tools.
	WorkspaceID string
	// IncludeSystem also lists the system tools, with the workspace's.
	IncludeSystem bool
	// FunctionID keeps the tools wrapping that function.
	FunctionID string
	// Target keeps the tools of that target.
	Target ToolTarget
	// Name keeps the tools whose name is Name, or starts with it when NamePrefix is set. The
	// comparison is exact and case-sensitive.
	Name       string
	NamePrefix bool
	// Names, when not nil, keeps the tools whose name is one of them (an agent's tools); at
	// most MaxFilterNames. An empty, non-nil Names keeps none.
	Names []string
	// RequiresConfirmation keeps the tools whose flag has that value.
	RequiresConfirmation *bool
	// Deleted includes soft-deleted tools or lists only them.
	Deleted DeletedFilter
	// Limit is the page size, 1 to 100 (ErrInvalid otherwise).
	Limit int
	// Cursor continues a listing: the NextCursor of the previous page, used with the same
	// filter (ErrInvalid otherwise). "" starts from the first tool.
	Cursor string
}

// ToolPage is a page of tools, oldest first (by creation time, then id).
type ToolPage struct {
	Tools []*Tool
	// NextCursor continues the listing, "" after the last page.
	NextCursor string
}

// Check reports, wrapping ErrInvalid, a filter with a limit out of range, an unknown target or
// deleted filter, or an empty name prefix.
func (f *ToolFilter) Check() error {
	if f.Limit < MinListLimit || f.Limit > MaxListLimit {
		return fmt.Errorf("limit %d is not between %d and %d: %w", f.Limit, MinListLimit, MaxListLimit, ErrInvalid)
	}
	switch f.Target {
	case "", TargetServer, TargetClient:
	default:
		return fmt.Errorf("target %q is neither server nor client: %w", f.Target, ErrInvalid)
	}
	switch f.Deleted {
	case "", DeletedExclude, DeletedInclude, DeletedOnly:
	default:
		return fmt.Errorf("deleted filter %q: want false, true or only: %w", f.Deleted, ErrInvalid)
	}
	if f.NamePrefix && f.Name == "" {
		return fmt.Errorf("an empty name prefix: %w", ErrInvalid)
	}
	if len(f.Names) > MaxFilterNames {
		return fmt.Errorf("%d names to filter by, at most %d: %w", len(f.Names), MaxFilterNames, ErrInvalid)
	}
	return nil
}

// fingerprint identifies what the filter selects (not the page size or cursor), so that a
// cursor is only used with the filter that made it.
func (f *ToolFilter) fingerprint() []byte {
	h := sha256.New()
	rc := "-"
	if f.RequiresConfirmation != nil {
		rc = strconv.FormatBool(*f.RequiresConfirmation)
	}
	deleted := f.Deleted
	if deleted == "" {
		deleted = DeletedExclude
	}
	for _, s := range []string{f.WorkspaceID, strconv.FormatBool(f.IncludeSystem), f.FunctionID, string(f.Target),
		f.Name, strconv.FormatBool(f.NamePrefix), rc, string(deleted)} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	if f.Names != nil {
		names := slices.Clone(f.Names)
		slices.Sort(names)
		fmt.Fprintf(h, "names%d", len(names))
		for _, n := range slices.Compact(names) {
			fmt.Fprintf(h, "%d:%s", len(n), n)
		}
	}
	return h.Sum(nil)[:8]
}

// ToolCursor is the position a listing continues from: after the tool created at CreatedAt
// with id ID.
type ToolCursor struct {
	CreatedAt time.Time
	ID        string
}

// EncodeCursor returns the opaque cursor continuing f's listing after c.
func (f *ToolFilter) EncodeCursor(c ToolCursor) string {
	b := append([]byte{1}, f.fingerprint()...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.CreatedAt.UnixNano()))
	b = append(b, c.ID...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads f.Cursor: ok is false for "" (start at the beginning); a cursor that is
// malformed or was made by another filter fails with ErrInvalid.
func (f *ToolFilter) DecodeCursor() (c ToolCursor, ok bool, err error) {
	if f.Cursor == "" {
		return ToolCursor{}, false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(f.Cursor)
	if err != nil || len(b) < 1+8+8+1 || b[0] != 1 {
		return ToolCursor{}, false, fmt.Errorf("malformed cursor: %w", ErrInvalid)
	}
	if !bytes.Equal(b[1:9], f.fingerprint()) {
		return ToolCursor{}, false, fmt.Errorf("the cursor belongs to a listing with other filters: %w", ErrInvalid)
	}
	at := time.Unix(0, int64(binary.BigEndian.Uint64(b[9:17]))).UTC()
	return ToolCursor{CreatedAt: at, ID: string(b[17:])}, true, nil
}

// Entities is the storage of workspaces, users, memberships, schemas, functions and tools.
// Every backend implements it beside Store. Every read and write of a workspace's
// records names the workspace, and a record of another workspace is ErrNotFound. System
// records (tools, functions, schemas without a workspace) are read with workspace "" and can
// also be read (never written) through any workspace.
//
// Authorisation in general belongs to the API layer; the store itself enforces the tools'
// rules: system tools are never edited or deleted, and only an admin sets a runtime user, who
// must be a member.
type Entities interface {
	Directory
	FunctionStore
	ToolStore
	OpenAPISources
	Governances
	Entitlements
	Limits
}

// Directory stores workspaces, users and who is a member of which workspace with what role.
type Directory interface {
	// CreateWorkspace stores a new workspace, setting ID (when empty), RetentionTier (when
	// empty) and the times. DefaultRuntimeUserID must be empty: add members first, then set it
	// with UpdateWorkspace.
	CreateWorkspace(ctx context.Context, w *Workspace) error
	// Workspace returns the workspace, or ErrNotFound.
	Workspace(ctx context.Context, id string) (*Workspace, error)
	// UpdateWorkspace applies fn to the workspace in one transaction and stores Name,
	// DefaultRuntimeUserID and RetentionTier. Changing DefaultRuntimeUserID needs callerUserID
	// to be an admin of the workspace (ErrForbidden) and the new user to be a member
	// (ErrInvalid).
	UpdateWorkspace(ctx context.Context, id, callerUserID string, fn func(*Workspace) error) (*Workspace, error)

	// CreateUser stores a new user, setting ID (when empty) and CreatedAt; an email already
	// used, in any case, fails with ErrConflict.
	CreateUser(ctx context.Context, u *User) error
	// User returns the user, or ErrNotFound.
	User(ctx context.Context, id string) (*User, error)
	// UserByEmail returns the user with that email, ignoring case, or ErrNotFound.
	UserByEmail(ctx context.Context, email string) (*User, error)

	// AddMember makes a user a member of a workspace (ErrNotFound when either is missing,
	// ErrConflict when already a member), setting CreatedAt.
	AddMember(ctx context.Context, m *Membership) error
	// Member returns the user's membership of the workspace, or ErrNotFound.
	Member(ctx context.Context, workspaceID, userID string) (*Membership, error)
	// Members lists the members of the workspace, oldest first.
	Members(ctx context.Context, workspaceID string) ([]*Membership, error)
	// SetMemberRole changes a member's role. Demoting the last admin fails with ErrInvalid.
	SetMemberRole(ctx context.Context, workspaceID, userID string, role MemberRole) error
	// RemoveMember ends a membership. It fails with ErrInvalid for the last admin. A user
	// who is the workspace's default runtime user or a tool's runtime user is removed all the
	// same (a person's removal is not held up by tools that run as them): the runtime refuses
	// to run those tools as a user who is no longer a member, until an admin names another.
	RemoveMember(ctx context.Context, workspaceID, userID string) error
}

// FunctionStore stores schemas, functions and their versions.
type FunctionStore interface {
	// CreateSchema stores a schema (content: a JSON object or boolean), setting ID (when
	// empty) and CreatedAt.
	CreateSchema(ctx context.Context, s *Schema) error
	// Schema returns a schema of the workspace, or a system schema, or ErrNotFound.
	Schema(ctx context.Context, workspaceID, id string) (*Schema, error)

	// CreateFunction stores a function without versions, setting ID (when empty) and the
	// times; DefaultVersionID must be empty. Names are unique in a workspace (ErrConflict).
	CreateFunction(ctx context.Context, f *Function) error
	// Function returns a function of the workspace, or a system function, or ErrNotFound.
	Function(ctx context.Context, workspaceID, id string) (*Function, error)
	// Functions lists the functions of the workspace, oldest first.
	Functions(ctx context.Context, workspaceID string) ([]*Function, error)
	// CreateFunctionVersion adds a version to the function v.FunctionID of v.WorkspaceID,
	// setting ID (when empty), Version (the function's last plus one) and CreatedAt. The
	// function's first version becomes its default. Schema ids, when set, must name schemas
	// the workspace can use.
	CreateFunctionVersion(ctx context.Context, v *FunctionVersion) error
	// FunctionVersion returns a version of a function of the workspace (or of a system
	// function), or ErrNotFound.
	FunctionVersion(ctx context.Context, workspaceID, id string) (*FunctionVersion, error)
	// FunctionVersions lists the versions of a function, in order.
	FunctionVersions(ctx context.Context, workspaceID, functionID string) ([]*FunctionVersion, error)
	// SetDefaultVersion makes versionID, a version of the function, its default, and returns
	// the function.
	SetDefaultVersion(ctx context.Context, workspaceID, functionID, versionID string) (*Function, error)
}

// ToolStore stores workspaces' tools, their soft deletion and purge.
type ToolStore interface {
	// CreateTool stores a new tool, setting ID (when empty) and the times; it must be active
	// (no DeletedAt). See Tool.Check for the rules it must follow by itself; besides, its
	// function, pinned version and schemas must be ones the workspace can use (ErrNotFound),
	// its name must be free among the workspace's active tools (ErrConflict), CreatedBy (when
	// set) must be a member (ErrInvalid), and a RuntimeUserID needs CreatedBy to be an admin
	// (ErrForbidden) and the runtime user to be a member (ErrInvalid).
	CreateTool(ctx context.Context, t *Tool) error
	// Tool returns a tool of the workspace (active or deleted) or a system tool, or
	// ErrNotFound.
	Tool(ctx context.Context, workspaceID, id string) (*Tool, error)
	// UpdateTool applies fn to an active tool of the workspace in one transaction and stores
	// the result; callerUserID is the user asking. Name, Description, Target, FunctionID,
	// FunctionVersionID, the schema ids, Examples, RequiresConfirmation, Enabled and
	// RuntimeUserID may change; anything else is ErrInvalid. The rules of CreateTool apply to
	// the result; changing RuntimeUserID needs callerUserID to be an admin of the workspace
	// (ErrForbidden). A system tool is ErrForbidden, a deleted one ErrNotFound. An error from
	// fn is returned and nothing is stored.
	UpdateTool(ctx context.Context, workspaceID, toolID, callerUserID string, fn func(*Tool) error) (*Tool, error)
	// DeleteTool soft-deletes an active tool of the workspace: it sets DeletedAt and snapshots
	// the retention tier, tier when not "" and the workspace's otherwise. A system tool is
	// ErrForbidden; an already deleted one ErrNotFound.
	DeleteTool(ctx context.Context, workspaceID, toolID string, tier RetentionTier) (*Tool, error)
	// ListTools returns a page of tools, oldest first by (CreatedAt, ID).
	ListTools(ctx context.Context, f ToolFilter) (*ToolPage, error)
	// ResolveToolVersion returns the function version a tool of the workspace runs: its pinned
	// version, or else its function's default version (ErrNotFound when the function has
	// none). A client tool runs no function: ErrInvalid.
	ResolveToolVersion(ctx context.Context, workspaceID, toolID string) (*FunctionVersion, error)

	// PurgeExpired is the cleanup worker's step: it deletes for good, in every workspace, the
	// soft-deleted tools whose DeletedAt plus their retention tier's days is at or before now
	// (tier none: never), and returns them as they were, for the worker's log.
	PurgeExpired(ctx context.Context, now time.Time) ([]*Tool, error)
	// ToolsStamp identifies the state of a workspace's tools and functions: a different stamp
	// means one was added, changed, deleted or purged since, who they run as changed (the
	// workspace's default runtime user, or its members: one added or removed), or what governs
	// them did (its governance rules, its entitlements). It lets a server that keeps a
	// workspace's tools loaded notice another process's changes cheaply.
	ToolsStamp(ctx context.Context, workspaceID string) (string, error)
}
