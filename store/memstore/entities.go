package memstore

import (
	"context"
	"time"

	"github.com/quiverhq/quiver/store"
)

// entityData holds the workspaces and what they own outside threads.
type entityData struct{}

func (d *entityData) init() {}

// Directory

func (s *Store) CreateWorkspace(ctx context.Context, w *store.Workspace) error {
	panic("not implemented")
}

func (s *Store) Workspace(ctx context.Context, id string) (*store.Workspace, error) {
	panic("not implemented")
}

func (s *Store) UpdateWorkspace(ctx context.Context, id, callerUserID string, fn func(*store.Workspace) error) (*store.Workspace, error) {
	panic("not implemented")
}

func (s *Store) CreateUser(ctx context.Context, u *store.User) error {
	panic("not implemented")
}

func (s *Store) User(ctx context.Context, id string) (*store.User, error) {
	panic("not implemented")
}

func (s *Store) UserByEmail(ctx context.Context, email string) (*store.User, error) {
	panic("not implemented")
}

func (s *Store) AddMember(ctx context.Context, m *store.Membership) error {
	panic("not implemented")
}

func (s *Store) Member(ctx context.Context, workspaceID, userID string) (*store.Membership, error) {
	panic("not implemented")
}

func (s *Store) Members(ctx context.Context, workspaceID string) ([]*store.Membership, error) {
	panic("not implemented")
}

func (s *Store) SetMemberRole(ctx context.Context, workspaceID, userID string, role store.MemberRole) error {
	panic("not implemented")
}

func (s *Store) RemoveMember(ctx context.Context, workspaceID, userID string) error {
	panic("not implemented")
}

// FunctionStore

func (s *Store) CreateSchema(ctx context.Context, sc *store.Schema) error {
	panic("not implemented")
}

func (s *Store) Schema(ctx context.Context, workspaceID, id string) (*store.Schema, error) {
	panic("not implemented")
}

func (s *Store) CreateFunction(ctx context.Context, f *store.Function) error {
	panic("not implemented")
}

func (s *Store) Function(ctx context.Context, workspaceID, id string) (*store.Function, error) {
	panic("not implemented")
}

func (s *Store) Functions(ctx context.Context, workspaceID string) ([]*store.Function, error) {
	panic("not implemented")
}

func (s *Store) CreateFunctionVersion(ctx context.Context, v *store.FunctionVersion) error {
	panic("not implemented")
}

func (s *Store) FunctionVersion(ctx context.Context, workspaceID, id string) (*store.FunctionVersion, error) {
	panic("not implemented")
}

func (s *Store) FunctionVersions(ctx context.Context, workspaceID, functionID string) ([]*store.FunctionVersion, error) {
	panic("not implemented")
}

func (s *Store) SetDefaultVersion(ctx context.Context, workspaceID, functionID, versionID string) (*store.Function, error) {
	panic("not implemented")
}

// ToolStore

func (s *Store) CreateTool(ctx context.Context, t *store.Tool) error {
	panic("not implemented")
}

func (s *Store) Tool(ctx context.Context, workspaceID, id string) (*store.Tool, error) {
	panic("not implemented")
}

func (s *Store) UpdateTool(ctx context.Context, workspaceID, toolID, callerUserID string, fn func(*store.Tool) error) (*store.Tool, error) {
	panic("not implemented")
}

func (s *Store) DeleteTool(ctx context.Context, workspaceID, toolID string, tier store.RetentionTier) (*store.Tool, error) {
	panic("not implemented")
}

func (s *Store) ListTools(ctx context.Context, f store.ToolFilter) (*store.ToolPage, error) {
	panic("not implemented")
}

func (s *Store) ResolveToolVersion(ctx context.Context, workspaceID, toolID string) (*store.FunctionVersion, error) {
	panic("not implemented")
}

func (s *Store) PurgeExpired(ctx context.Context, now time.Time) ([]*store.Tool, error) {
	panic("not implemented")
}

func (s *Store) ToolsStamp(ctx context.Context, workspaceID string) (string, error) {
	panic("not implemented")
}

// APIKeys

func (s *Store) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	panic("not implemented")
}

func (s *Store) APIKeyByHash(ctx context.Context, hash []byte) (*store.APIKey, store.MemberRole, error) {
	panic("not implemented")
}

func (s *Store) APIKeys(ctx context.Context, workspaceID string) ([]*store.APIKey, error) {
	panic("not implemented")
}

func (s *Store) RevokeAPIKey(ctx context.Context, workspaceID, id string) (*store.APIKey, error) {
	panic("not implemented")
}

func (s *Store) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	panic("not implemented")
}
