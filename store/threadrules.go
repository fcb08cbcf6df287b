package store

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// MaxThreadStateBytes caps Thread.State.
const MaxThreadStateBytes = 1 << 20

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
