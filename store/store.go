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
	"fmt"
	"strings"
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
	// ErrIDTaken: a message given an id that an existing message already has. Append reports
	// it together with ErrInvalid (both match errors.Is); a writer replaying appends that may
	// already be stored, such as store/journal, tells "already done" from "refused" by it.
	ErrIDTaken = errors.New("store: the message id is already taken")
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
	ID          string   `json:"id"` // thr_...
	WorkspaceID string   `json:"workspace_id"`
	AgentID     string   `json:"agent_id,omitempty"`
	UserID      string   `json:"user_id,omitempty"`
	ParentID    string   `json:"parent_id,omitempty"`
	Tags        []string `json:"tags,omitempty"` // "name:<value>" names a child thread
	StepCount   int      `json:"step_count"`
	CurrentSide string   `json:"current_side,omitempty"`
	Stopped     bool     `json:"stopped"`
	// Status, Blocking and Resumable are the thread's entry in its parent's children registry:
	// whether a run is going on it, whether the parent waits for it, and whether it
	// keeps its thread to be messaged again.
	Status    ThreadStatus `json:"status"`
	Blocking  bool         `json:"blocking"`
	Resumable bool         `json:"resumable"`
	// State is the runtime's own record of the run on the thread (the agent package keeps
	// what it needs to resume here); the store keeps it as given. Empty means none.
	State     json.RawMessage `json:"state,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// ThreadStatus is whether a run is going on a thread.
type ThreadStatus string

// Thread statuses. A terminated thread stays terminated.
const (
	StatusIdle       ThreadStatus = "idle" // the default: no run going on
	StatusRunning    ThreadStatus = "running"
	StatusTerminated ThreadStatus = "terminated"
)

// Valid reports whether s is one of the statuses ("" counts as idle).
func (s ThreadStatus) Valid() bool {
	switch s {
	case "", StatusIdle, StatusRunning, StatusTerminated:
		return true
	}
	return false
}

// Name is the value of the thread's "name:<value>" tag, or "".
func (t *Thread) Name() string {
	for _, tag := range t.Tags {
		if v, ok := strings.CutPrefix(tag, "name:"); ok {
			return v
		}
	}
	return ""
}

// ToolCall is a call an assistant message asks for.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args,omitempty"`
	Reasoning string          `json:"reasoning,omitempty"`
	// Signature is opaque provider state sent back with the call in later requests (Gemini's
	// thought signature); most calls have none.
	Signature []byte `json:"signature,omitempty"`
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
	// Content and Problems are quiver.Result's, as JSON.
	Content  json.RawMessage `json:"content,omitempty"`
	Problems json.RawMessage `json:"problems,omitempty"`
	// Meta is quiver.Result's: a JSON object of facts about how the call ran.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// Message is one entry of a thread's history.
type Message struct {
	ID       string `json:"id"` // msg_...
	ThreadID string `json:"thread_id"`
	// Seq orders a thread's messages; the store assigns it, increasing without gaps.
	Seq     int64  `json:"seq"`
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// Side is which participant of a two-sided dual-AI agent wrote an assistant message
	// (side_a or side_b); empty everywhere else. A tool message belongs to the side of the
	// call it answers.
	Side string `json:"side,omitempty" enum:"side_a,side_b"`
	// ToolCalls are the calls of an assistant message.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Result belong to a tool message: the call it answers and its outcome.
	ToolCallID string      `json:"tool_call_id,omitempty"`
	ToolName   string      `json:"tool_name,omitempty"`
	Result     *ToolResult `json:"result,omitempty"`
	// Usage is what the model request that wrote an assistant message used: set by the agent
	// run that made the request, absent on every other message and where it was not recorded.
	Usage     *ModelUsage `json:"usage,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
}

// ModelUsage is what one model request used: the model, its tokens, and how long it took.
type ModelUsage struct {
	// Model is the model that answered, as "provider:model".
	Model string `json:"model"`
	// InputTokens and OutputTokens are the tokens the provider counted for the request (0 when
	// it reported none).
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// DurationMS is how long the request took, from sending it to the complete response, in
	// milliseconds.
	DurationMS float64 `json:"duration_ms"`
}

// Page bounds a listing of messages: the Limit newest with Seq below Before (0: from the end),
// returned oldest first.
type Page struct {
	Before int64
	Limit  int // 1 to 1000; 0 means 100
}

// Store is the persistence of threads every backend provides: each role below, which a
// component that needs only one takes by itself.
type Store interface {
	Threads
	MessageLog
	Queue
	ThreadState
	Decisions
	RunLog
	// Close releases the store's resources.
	Close() error
}

// Threads stores threads: their identity, tags, status and execution state.
type Threads interface {
	// CreateThread stores a new thread; the store sets ID (when empty), CreatedAt and
	// UpdatedAt. A ParentID must name a thread of the same workspace.
	CreateThread(ctx context.Context, t *Thread) error
	// Thread returns the thread, or ErrNotFound.
	Thread(ctx context.Context, workspaceID, threadID string) (*Thread, error)
	// UpdateThread applies fn to the thread inside one transaction and stores the result;
	// only Tags, the execution state (StepCount, CurrentSide, Stopped), Status and State may
	// change, and a terminated thread's Status stays terminated (ErrInvalid otherwise).
	UpdateThread(ctx context.Context, workspaceID, threadID string, fn func(*Thread) error) (*Thread, error)
	// Children lists the threads whose parent is threadID, oldest first.
	Children(ctx context.Context, workspaceID, threadID string) ([]*Thread, error)
	// Threads lists the workspace's threads that f keeps (its agent, a tag, a status; all
	// when f sets none), newest first, a page at a time: at most f.Limit (see
	// CheckThreadPage) after the place f.Cursor names ("" for the first page). next names the
	// place after this page, "" when it is the last. Each page costs the same however deep
	// in the list it is (an index read in order from the cursor, not an offset). A cursor
	// that this method did not return for the same workspace and filter, and a filter that
	// PrepareThreadList refuses, are ErrInvalid.
	Threads(ctx context.Context, workspaceID string, f ThreadFilter) (threads []*Thread, next string, err error)
}

// MessageLog is a thread's history: messages appended in order, each tool call answered once.
type MessageLog interface {
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

	// UpdateMessage applies fn to a message of the thread inside one transaction and stores
	// the result. Only Content may change, and only for system, user and assistant messages:
	// a tool message's result is written once (ErrInvalid otherwise).
	UpdateMessage(ctx context.Context, workspaceID, threadID, messageID string, fn func(*Message) error) (*Message, error)
}

// Queue holds messages for a thread's next step.
type Queue interface {
	// Enqueue queues messages for the thread's next step (a message sent while a run is in
	// its step, a non-blocking child's result), setting their ID (when empty) and CreatedAt.
	// Only system, user and assistant messages without tool calls may be queued (ErrInvalid).
	// A message given an id that is queued or in the history already is refused with
	// ErrIDTaken (and ErrInvalid), and nothing of the batch is queued: a writer that derives
	// the id from what it delivers queues it once however often it tries.
	Enqueue(ctx context.Context, workspaceID, threadID string, msgs ...*Message) error
	// Queued returns the thread's queued messages, oldest first.
	Queued(ctx context.Context, workspaceID, threadID string) ([]*Message, error)
	// AppendQueued moves the thread's queued messages to the end of its history in one
	// transaction, in the order they were queued, and returns them as appended (none: an
	// empty slice). A queued message is appended exactly once.
	AppendQueued(ctx context.Context, workspaceID, threadID string) ([]*Message, error)
}

// ThreadState is a thread's state object and its instances, written with the messages that
// change them.
type ThreadState interface {
	// AppendState appends msgs as Append does and applies w to the thread's state (see
	// StateWrite) in the same transaction: both are stored or neither. A write the state
	// cannot take (a path already written, a path through a value that is not an object, an
	// instance the thread does not have, a state over MaxStateBytes) fails with a *StateError
	// and stores nothing of the messages either. On success w.Written holds the paths written.
	AppendState(ctx context.Context, workspaceID, threadID string, w *StateWrite, msgs ...*Message) error
	// State returns the thread's state object ("{}" before anything is written), or, with a
	// non-empty instance, that instance's (ErrNotFound for an instance the thread does not
	// have).
	State(ctx context.Context, workspaceID, threadID, instance string) (json.RawMessage, error)
	// Instances returns the names of the thread's instances, sorted.
	Instances(ctx context.Context, workspaceID, threadID string) ([]string, error)
	// AddInstances gives the thread instances with empty state objects; instances it has
	// already are kept as they are. A name CheckInstance refuses is ErrInvalid, and more than
	// MaxInstances in all ErrTooLarge; nothing is added then.
	AddInstances(ctx context.Context, workspaceID, threadID string, names ...string) error
}

// Decisions are people's answers to calls that require confirmation.
type Decisions interface {
	// Decide records a person's decision on a pending call that requires confirmation,
	// setting DecidedAt. The call must be one the thread asked for that has no result
	// (ErrInvalid), and it is decided once: a second decision fails with ErrDecided.
	Decide(ctx context.Context, workspaceID, threadID string, d *Decision) error
	// Decisions returns the decisions on the thread's calls, in the order they were made.
	Decisions(ctx context.Context, workspaceID, threadID string) ([]*Decision, error)
}

// RunLog is a thread's log: what the runtime or a tool keeps beside the conversation.
type RunLog interface {
	// Log appends an entry to the thread's log, setting Seq and Time (when zero).
	Log(ctx context.Context, workspaceID, threadID string, e *LogEntry) error
	// Logs returns a page of the thread's log, oldest first, paged like Messages.
	Logs(ctx context.Context, workspaceID, threadID string, page Page) ([]*LogEntry, error)
}

// Backend is everything a database backend provides (store/sqlite, store/postgres,
// store/memstore): what an application that serves every door is assembled on. It includes
// BatchAppender, so that a writer handed a Backend (or a type that embeds one) batches its
// appends: when it was left out, the journal of `quiver serve` found no AppendBatch on the
// store it was given and wrote every call's record in a transaction of its own.
type Backend interface {
	Store
	BatchAppender
	QueuePeeker
	FinalAppender
	Files
	Entities
	APIKeys
	Variables
	SecretKeys
	Leases
	FleetConfigs
}

// AppendOp is one append of a batch: messages for the end of a thread, as Store.Append takes
// them.
type AppendOp struct {
	WorkspaceID string
	ThreadID    string
	Messages    []*Message
	// At is when the messages were written, their CreatedAt; zero means the time of the batch.
	// A writer that stores appends later than they were made (store/journal) keeps their time.
	At time.Time
}

// BatchAppender is implemented by stores that can apply several appends in one transaction,
// which costs little more than one: what a writer with many small appends to make (store/journal)
// uses to keep up.
type BatchAppender interface {
	// AppendBatch applies ops in order in one transaction, each with Append's rules. It stores
	// all of them or, when one fails, none; the error is then a *BatchError naming that one.
	AppendBatch(ctx context.Context, ops []AppendOp) error
}

// QueuePeeker is implemented by stores whose append can also say whether the thread has
// queued messages, read in the append's own transaction. The agent loop looks for queued
// messages before every step, right after the append that ends the step before; asking that
// append spares a read transaction of its own, which on SQLite costs about half an append.
type QueuePeeker interface {
	// AppendPeek is Append that also reports whether the thread has queued messages (see
	// Queue) once msgs are stored, as the append's transaction saw them. On error it reports
	// false and stores nothing, as Append.
	AppendPeek(ctx context.Context, workspaceID, threadID string, msgs ...*Message) (queued bool, err error)
}

// FinalAppender is implemented by stores that can append a run's last message and record the
// run's end on its thread in one transaction. A one-step run wrote its answer and then its end,
// two commits that each wait for the disk; written together they wait once, and a crash keeps
// both or neither (the run is tried again and asks its model again, as after a crash before
// the answer was stored).
type FinalAppender interface {
	// AppendFinal appends msgs by Append's rules and, when the thread has no queued messages
	// once they are stored (a message sent meanwhile calls for another step), applies fn to
	// the thread by UpdateThread's rules, in the same transaction. It returns the thread as
	// fn left it, or, when messages were queued, nil and queued true: msgs are stored then,
	// fn is not applied. On any error (of the append, of fn, of the update) nothing is stored.
	AppendFinal(ctx context.Context, workspaceID, threadID string, fn func(*Thread) error, msgs ...*Message) (t *Thread, queued bool, err error)
}

// BatchError is the error of an AppendBatch that stored nothing because of one of its ops.
type BatchError struct {
	Index int   // of the op that failed
	Err   error // why: what Append would have returned for it alone
}

func (e *BatchError) Error() string { return fmt.Sprintf("append %d of the batch: %v", e.Index, e.Err) }

// Unwrap returns Err, so errors.Is sees ErrInvalid, ErrNotFound and the others through it.
func (e *BatchError) Unwrap() error { return e.Err }

// ErrDecided: the call already has a decision.
var ErrDecided = errors.New("store: the call already has a decision")

// DecisionAction is what a person decided about a call.
type DecisionAction string

// Decision actions.
const (
	Approve DecisionAction = "approve"
	Edit    DecisionAction = "edit" // approve with other arguments
	Deny    DecisionAction = "deny"
)

// Decision is a person's answer to a call that requires confirmation.
type Decision struct {
	CallID string         `json:"call_id"`
	Action DecisionAction `json:"action"`
	// Args are the edited arguments (Edit only: a JSON object).
	Args json.RawMessage `json:"args,omitempty"`
	// Message is an optional word for the model (Deny).
	Message string `json:"message,omitempty"`
	// UserID is who decided; KeyID the API key they decided with, or AccessToken that they
	// used an access token of theirs (neither: a door that authenticates no one). The call's
	// result keeps them (quiver.DecisionRecord), as the record of who let it run.
	UserID      string    `json:"user_id,omitempty"`
	KeyID       string    `json:"key_id,omitempty"`
	AccessToken bool      `json:"access_token,omitempty"`
	DecidedAt   time.Time `json:"decided_at"`
}

// Check reports, wrapping ErrInvalid, a decision that is not well formed.
func (d *Decision) Check() error {
	switch {
	case d == nil || d.CallID == "":
		return fmt.Errorf("a decision needs a call id: %w", ErrInvalid)
	case d.Action != Approve && d.Action != Edit && d.Action != Deny:
		return fmt.Errorf("decision on call %q: unknown action %q (approve, edit or deny): %w", d.CallID, d.Action, ErrInvalid)
	case d.Action == Edit && !isJSONObject(d.Args):
		return fmt.Errorf("decision on call %q: edited arguments must be a JSON object: %w", d.CallID, ErrInvalid)
	case d.Action != Edit && len(d.Args) > 0:
		return fmt.Errorf("decision on call %q: only an edit carries arguments: %w", d.CallID, ErrInvalid)
	}
	return nil
}

func isJSONObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// LogLevel is how much a log entry matters.
type LogLevel string

// Log levels.
const (
	LevelDebug LogLevel = "debug"
	LevelInfo  LogLevel = "info"
	LevelWarn  LogLevel = "warn"
	LevelError LogLevel = "error"
)

// LogEntry is one line of a thread's log: what the runtime or a tool wants kept beside the
// conversation without the model seeing it.
type LogEntry struct {
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"` // kept to the microsecond at least
	Level   LogLevel        `json:"level"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"` // a JSON value
}

// MaxLogMessageBytes caps a log entry's message and data each.
const MaxLogMessageBytes = 64 << 10

// Check reports, wrapping ErrInvalid, an entry that is not well formed.
func (e *LogEntry) Check() error {
	switch {
	case e == nil:
		return fmt.Errorf("nil log entry: %w", ErrInvalid)
	case e.Level != LevelDebug && e.Level != LevelInfo && e.Level != LevelWarn && e.Level != LevelError:
		return fmt.Errorf("log level %q: want debug, info, warn or error: %w", e.Level, ErrInvalid)
	case len(e.Message) > MaxLogMessageBytes || len(e.Data) > MaxLogMessageBytes:
		return fmt.Errorf("log entry over %d bytes: %w", MaxLogMessageBytes, ErrTooLarge)
	case len(e.Data) > 0 && !json.Valid(e.Data):
		return fmt.Errorf("log entry data is not JSON: %w", ErrInvalid)
	}
	return nil
}
