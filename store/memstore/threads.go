package memstore

import (
	"context"
	"encoding/json"

	"github.com/quiverhq/quiver/store"
)

// threadData holds the threads and everything kept per thread.
type threadData struct{}

func (d *threadData) init() {}

// Threads

func (s *Store) CreateThread(ctx context.Context, t *store.Thread) error {
	panic("not implemented")
}

func (s *Store) Thread(ctx context.Context, workspaceID, threadID string) (*store.Thread, error) {
	panic("not implemented")
}

func (s *Store) UpdateThread(ctx context.Context, workspaceID, threadID string, fn func(*store.Thread) error) (*store.Thread, error) {
	panic("not implemented")
}

func (s *Store) Children(ctx context.Context, workspaceID, threadID string) ([]*store.Thread, error) {
	panic("not implemented")
}

func (s *Store) Threads(ctx context.Context, workspaceID string, f store.ThreadFilter) (threads []*store.Thread, next string, err error) {
	panic("not implemented")
}

// MessageLog

func (s *Store) Append(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	panic("not implemented")
}

func (s *Store) Messages(ctx context.Context, workspaceID, threadID string, page store.Page) ([]*store.Message, error) {
	panic("not implemented")
}

func (s *Store) PendingCalls(ctx context.Context, workspaceID, threadID string) ([]store.ToolCall, error) {
	panic("not implemented")
}

func (s *Store) UpdateMessage(ctx context.Context, workspaceID, threadID, messageID string, fn func(*store.Message) error) (*store.Message, error) {
	panic("not implemented")
}

// Queue

func (s *Store) Enqueue(ctx context.Context, workspaceID, threadID string, msgs ...*store.Message) error {
	panic("not implemented")
}

func (s *Store) Queued(ctx context.Context, workspaceID, threadID string) ([]*store.Message, error) {
	panic("not implemented")
}

func (s *Store) AppendQueued(ctx context.Context, workspaceID, threadID string) ([]*store.Message, error) {
	panic("not implemented")
}

// ThreadState

func (s *Store) AppendState(ctx context.Context, workspaceID, threadID string, w *store.StateWrite, msgs ...*store.Message) error {
	panic("not implemented")
}

func (s *Store) State(ctx context.Context, workspaceID, threadID, instance string) (json.RawMessage, error) {
	panic("not implemented")
}

func (s *Store) Instances(ctx context.Context, workspaceID, threadID string) ([]string, error) {
	panic("not implemented")
}

func (s *Store) AddInstances(ctx context.Context, workspaceID, threadID string, names ...string) error {
	panic("not implemented")
}

// Decisions

func (s *Store) Decide(ctx context.Context, workspaceID, threadID string, d *store.Decision) error {
	panic("not implemented")
}

func (s *Store) Decisions(ctx context.Context, workspaceID, threadID string) ([]*store.Decision, error) {
	panic("not implemented")
}

// RunLog

func (s *Store) Log(ctx context.Context, workspaceID, threadID string, e *store.LogEntry) error {
	panic("not implemented")
}

func (s *Store) Logs(ctx context.Context, workspaceID, threadID string, page store.Page) ([]*store.LogEntry, error) {
	panic("not implemented")
}

// Files

func (s *Store) WriteFile(ctx context.Context, workspaceID, threadID, path string, data []byte, meta store.FileMeta) (*store.FileInfo, error) {
	panic("not implemented")
}

func (s *Store) ReadFile(ctx context.Context, workspaceID, threadID, path string) ([]byte, *store.FileInfo, error) {
	panic("not implemented")
}

func (s *Store) Stat(ctx context.Context, workspaceID, threadID, path string) (*store.FileInfo, error) {
	panic("not implemented")
}

func (s *Store) ReadDir(ctx context.Context, workspaceID, threadID, path string) ([]*store.FileInfo, error) {
	panic("not implemented")
}

func (s *Store) Remove(ctx context.Context, workspaceID, threadID, path string) error {
	panic("not implemented")
}

func (s *Store) Mkdir(ctx context.Context, workspaceID, threadID, path string) (*store.FileInfo, error) {
	panic("not implemented")
}

func (s *Store) Rmdir(ctx context.Context, workspaceID, threadID, path string) error {
	panic("not implemented")
}

func (s *Store) Grep(ctx context.Context, workspaceID, threadID, root, pattern string) (matches []store.GrepMatch, truncated bool, err error) {
	panic("not implemented")
}

func (s *Store) Find(ctx context.Context, workspaceID, threadID, root, pattern string) (paths []string, truncated bool, err error) {
	panic("not implemented")
}

func (s *Store) AddAttachment(ctx context.Context, workspaceID, threadID string, a store.NewAttachment) (*store.FileInfo, error) {
	panic("not implemented")
}

func (s *Store) CopyFiles(ctx context.Context, workspaceID, fromThreadID string, paths []string, toThreadID string) ([]*store.FileInfo, error) {
	panic("not implemented")
}

// Variables

func (s *Store) SetVariable(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID, name, value string, secret, scoped bool) error {
	panic("not implemented")
}

func (s *Store) SetVariables(ctx context.Context, values []*store.Variable) error {
	panic("not implemented")
}

func (s *Store) DeleteVariable(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID, name string) error {
	panic("not implemented")
}

func (s *Store) Variables(ctx context.Context, workspaceID string, layer store.VariableLayer, ownerID string) ([]*store.Variable, error) {
	panic("not implemented")
}

func (s *Store) LookupVariables(ctx context.Context, workspaceID string, q store.VariableQuery) (*store.VariableLookup, error) {
	panic("not implemented")
}

func (s *Store) RewriteSecrets(ctx context.Context, fn func(v *store.Variable) (string, error)) error {
	panic("not implemented")
}
