// Package store defines how Quiver persists threads and their messages, and the errors every
// backend reports. Two backends implement it: store/sqlite (embedded, the default) and
// store/postgres (shared by several nodes). store/storetest holds the conformance suite both
// must pass.
//
// Every read and write names the workspace it acts in, and a backend never returns or changes
// anything of another workspace: an id from one workspace is "not found" in every other.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Errors every backend returns, to be tested with errors.Is.
var (
	// ErrNotFound: no such record in this workspace.
	ErrNotFound = errors.New("store: not found")
	// ErrResultExists: the tool call already has a result. Appending results is exactly-once
	// per call id, which is what lets a resumed run skip calls that completed.
	ErrResultExists = errors.New("store: the tool call already has a result")
	// ErrInvalid: the record breaks a rule the store enforces (a missing id, an unknown call).
	ErrInvalid = errors.New("store: invalid record")
)

// Role is who a message is from.
type Role string

// Message roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Thread is a persisted conversation (with its place in a tree of threads) and the state of
// the run on it.
type Thread struct {
	ID          string    `json:"id"` // thr_...
	WorkspaceID string    `json:"workspace_id"`
	AgentID     string    `json:"agent_id,omitempty"`
	UserID      string    `json:"user_id,omitempty"`
	ParentID    string    `json:"parent_id,omitempty"`
	Tags        []string  `json:"tags,omitempty"` // "name:<value>" names a child thread
	StepCount   int       `json:"step_count"`
	CurrentSide string    `json:"current_side,omitempty"`
	Stopped     bool      `json:"stopped"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// ToolCall is a call an assistant message asks for.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args,omitempty"`
	Reasoning string          `json:"reasoning,omitempty"`
}

// ToolResult is the outcome of a call, as stored with its tool message. It mirrors
// quiver.Result without importing it: the store knows nothing of execution.
type ToolResult struct {
	Status      string          `json:"status"`
	Text        string          `json:"result,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
	Error       string          `json:"error,omitempty"`
	Code        string          `json:"code,omitempty"`
	Stack       string          `json:"stack,omitempty"`
	Attachments json.RawMessage `json:"attachments,omitempty"`
}

// Message is one entry of a thread's history.
type Message struct {
	ID       string `json:"id"` // msg_...
	ThreadID string `json:"thread_id"`
	// Seq orders a thread's messages; the store assigns it, increasing without gaps.
	Seq     int64  `json:"seq"`
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls of an assistant message.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Result belong to a tool message: the call it answers and its outcome.
	ToolCallID string      `json:"tool_call_id,omitempty"`
	ToolName   string      `json:"tool_name,omitempty"`
	Result     *ToolResult `json:"result,omitempty"`
	CreatedAt  time.Time   `json:"created_at"`
}

// Page bounds a listing of messages: the Limit newest with Seq below Before (0: from the end),
// returned oldest first.
type Page struct {
	Before int64
	Limit  int // 1 to 1000; 0 means 100
}

// Store is the persistence every backend provides.
type Store interface {
	// CreateThread stores a new thread; the store sets ID (when empty), CreatedAt and
	// UpdatedAt. A ParentID must name a thread of the same workspace.
	CreateThread(ctx context.Context, t *Thread) error
	// Thread returns the thread, or ErrNotFound.
	Thread(ctx context.Context, workspaceID, threadID string) (*Thread, error)
	// UpdateThread applies fn to the thread inside one transaction and stores the result;
	// only tags and execution state (StepCount, CurrentSide, Stopped) may change.
	UpdateThread(ctx context.Context, workspaceID, threadID string, fn func(*Thread) error) (*Thread, error)
	// Children lists the threads whose parent is threadID, oldest first.
	Children(ctx context.Context, workspaceID, threadID string) ([]*Thread, error)

	// Append adds messages to the end of a thread in one transaction, assigning ID, Seq and
	// CreatedAt. A tool message must answer a call of an earlier assistant message of the
	// thread (ErrInvalid otherwise), and a call is answered once: a second result for the same
	// call id fails with ErrResultExists and nothing of the batch is stored.
	Append(ctx context.Context, workspaceID, threadID string, msgs ...*Message) error
	// Messages returns a page of the thread's messages, oldest first.
	Messages(ctx context.Context, workspaceID, threadID string, page Page) ([]*Message, error)
	// PendingCalls returns the calls of the thread's assistant messages that have no result
	// yet, in the order they were asked for: what a resumed run still has to execute.
	PendingCalls(ctx context.Context, workspaceID, threadID string) ([]ToolCall, error)

	// Close releases the store's resources.
	Close() error
}
