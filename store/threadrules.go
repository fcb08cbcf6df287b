package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/quiverhq/quiver/internal/stamp"
)

// MaxThreadStateBytes caps Thread.State.
const MaxThreadStateBytes = 1 << 20

// MaxTagBytes caps one tag of a thread. Tags are indexed, so that threads are listed by tag
// (ThreadFilter.Tag) a page at a time, and an index entry has a bounded size (PostgreSQL's
// B-trees refuse one over about 2.7 KB).
const MaxTagBytes = 1024

// CheckThreadUpdate reports, wrapping ErrInvalid (or ErrTooLarge), what a backend must refuse
// when a thread changes from before to after: a field other than Tags, the execution state,
// Status and State changing, a negative step count, an unknown status, a terminated thread
// coming back, or a State that is not JSON. Called with the same thread twice, it checks a
// new thread's own fields.
func CheckThreadUpdate(before, after *Thread) error {
	switch {
	case after.ID != before.ID || after.WorkspaceID != before.WorkspaceID || after.AgentID != before.AgentID ||
		after.UserID != before.UserID || after.ParentID != before.ParentID || !after.CreatedAt.Equal(before.CreatedAt) ||
		after.Blocking != before.Blocking || after.Resumable != before.Resumable:
		return fmt.Errorf("only tags, execution state, status and state may change: %w", ErrInvalid)
	case after.StepCount < 0:
		return fmt.Errorf("negative step count: %w", ErrInvalid)
	case !after.Status.Valid():
		return fmt.Errorf("status %q: want idle, running or terminated: %w", after.Status, ErrInvalid)
	case before.Status == StatusTerminated && after.Status != StatusTerminated:
		return fmt.Errorf("a terminated thread stays terminated: %w", ErrInvalid)
	case len(after.State) > MaxThreadStateBytes:
		return fmt.Errorf("state over %d bytes: %w", MaxThreadStateBytes, ErrTooLarge)
	case len(after.State) > 0 && !json.Valid(after.State):
		return fmt.Errorf("state is not JSON: %w", ErrInvalid)
	case slices.Contains(after.Tags, ""):
		return fmt.Errorf("empty tag: %w", ErrInvalid)
	case slices.ContainsFunc(after.Tags, func(tag string) bool { return len(tag) > MaxTagBytes }):
		return fmt.Errorf("a tag is over %d bytes: %w", MaxTagBytes, ErrInvalid)
	}
	return nil
}

// CheckMessageUpdate reports, wrapping ErrInvalid, a change to a message other than its
// Content, or any change to a tool message. before is the message's JSON before the change.
func CheckMessageUpdate(before []byte, after *Message) error {
	var was Message
	if err := json.Unmarshal(before, &was); err != nil {
		return err
	}
	if was.Role == RoleTool {
		return fmt.Errorf("a tool message's result is written once and cannot be updated: %w", ErrInvalid)
	}
	content := after.Content
	after.Content = was.Content
	now, err := json.Marshal(after)
	after.Content = content
	if err != nil {
		return err
	}
	if string(now) != string(before) {
		return fmt.Errorf("only a message's content may change: %w", ErrInvalid)
	}
	return nil
}

// CheckQueued reports, wrapping ErrInvalid, a message that cannot be queued: only system, user
// and assistant messages without tool calls wait for the next step.
func CheckQueued(m *Message) error {
	switch {
	case m == nil:
		return fmt.Errorf("nil message: %w", ErrInvalid)
	case m.Role != RoleSystem && m.Role != RoleUser && m.Role != RoleAssistant:
		return fmt.Errorf("a %q message cannot be queued (system, user or assistant): %w", m.Role, ErrInvalid)
	case len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.Result != nil:
		return fmt.Errorf("a queued message carries no tool calls or results: %w", ErrInvalid)
	}
	return nil
}

// The sides of a two-sided dual-AI agent, as Message.Side and Thread.CurrentSide name them.
const (
	SideA = "side_a"
	SideB = "side_b"
)

// PageBounds turns a Page into a row limit (100 for 0) and an exclusive upper bound on Seq
// (the largest int64 for 0), or an ErrInvalid for a limit outside 1 to 1000 or a negative
// Before.
func PageBounds(page Page) (limit int, before int64, err error) {
	limit = page.Limit
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > 1000 || page.Before < 0 {
		return 0, 0, fmt.Errorf("page %+v out of range (limit 1 to 1000, before not negative): %w", page, ErrInvalid)
	}
	before = page.Before
	if before == 0 {
		before = math.MaxInt64
	}
	return limit, before, nil
}

// CheckMessage reports, wrapping ErrInvalid, what Append refuses in a message for thread
// threadID by itself, whatever else the batch and the stored history hold: no message, an
// unknown role, a ThreadID of another thread, tool calls, a side or a model request's usage on
// a message other than an assistant's, a side other than side_a or side_b, a call without an id or a tool name or whose arguments are not JSON, and a
// tool message without a call id or another message with a call id, a tool name or a result.
// Every writer of messages checks this (both backends, store/journal), so that they refuse the
// same messages in the same words; what needs the batch or the history (a call answered
// twice, a result for a call never asked for) each backend checks its own way.
func CheckMessage(threadID string, m *Message) error {
	if m == nil {
		return fmt.Errorf("nil message: %w", ErrInvalid)
	}
	switch m.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
	default:
		return fmt.Errorf("unknown role %q (system, user, assistant or tool): %w", m.Role, ErrInvalid)
	}
	if m.ThreadID != "" && m.ThreadID != threadID {
		return fmt.Errorf("the message belongs to thread %s: %w", m.ThreadID, ErrInvalid)
	}
	if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
		return fmt.Errorf("a %s message has tool calls: %w", m.Role, ErrInvalid)
	}
	if m.Role == RoleTool && m.ToolCallID == "" {
		return fmt.Errorf("a tool message answers a call, and this one names none: %w", ErrInvalid)
	}
	if err := checkAssistantFields(m); err != nil {
		return err
	}
	if m.Role != RoleTool && (m.ToolCallID != "" || m.ToolName != "" || m.Result != nil) {
		return fmt.Errorf("only a tool message answers a call, and this %s message has a call id, tool name or result: %w", m.Role, ErrInvalid)
	}
	for j, c := range m.ToolCalls {
		switch {
		case c.ID == "" || c.Name == "":
			return fmt.Errorf("tool call %d has no id or no name: %w", j, ErrInvalid)
		case len(c.Args) > 0 && !json.Valid(c.Args):
			return fmt.Errorf("tool call %q: the arguments are not JSON: %w", c.ID, ErrInvalid)
		}
	}
	return nil
}

// checkAssistantFields refuses what only an assistant message may have, on any other: a side
// (side_a or side_b, nothing else) and the usage of a model request.
func checkAssistantFields(m *Message) error {
	if m.Side != "" && (m.Role != RoleAssistant || m.Side != SideA && m.Side != SideB) {
		return fmt.Errorf("side %q on a %s message: only an assistant message has a side, side_a or side_b: %w", m.Side, m.Role, ErrInvalid)
	}
	if m.Usage != nil && m.Role != RoleAssistant {
		return fmt.Errorf("usage on a %s message: only an assistant message records a model request: %w", m.Role, ErrInvalid)
	}
	return nil
}

// PrepareThread returns the id and status CreateThread stores t with (t.ID or a new id; t.Status
// or StatusIdle), after checking, wrapping ErrInvalid, what a backend must refuse in a new
// thread by itself: no thread, no workspace, a thread that is its own parent, and what
// CheckThreadUpdate refuses in its own fields. Whether the parent is a thread of the workspace
// (ErrNotFound otherwise) is the backend's to check.
func PrepareThread(ctx context.Context, t *Thread) (id string, status ThreadStatus, err error) {
	if t == nil || t.WorkspaceID == "" {
		return "", "", fmt.Errorf("a thread needs a workspace id: %w", ErrInvalid)
	}
	if err := CheckThreadUpdate(t, t); err != nil {
		return "", "", err
	}
	id, status = t.ID, t.Status
	if id == "" {
		id = stamp.ID(ctx, PrefixThread)
	}
	if t.ParentID == id {
		return "", "", fmt.Errorf("thread %s cannot be its own parent: %w", id, ErrInvalid)
	}
	if status == "" {
		status = StatusIdle
	}
	return id, status, nil
}
