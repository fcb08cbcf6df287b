package store

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Paging through a workspace's threads, newest first, optionally filtered. The rules live
// here, once; a backend only runs the query (store/sqlstore writes it for both): the threads
// the filter keeps that were created before the cursor's (or at the same instant with a
// smaller id), newest first, one more than the page holds, so that ThreadQuery.Page knows
// whether another page follows.

const (
	// DefaultThreadPage is the page size when a caller asks for none.
	DefaultThreadPage = 50
	// MaxThreadPage bounds one page.
	MaxThreadPage = 500
)

// ThreadFilter says which of a workspace's threads Store.Threads lists, and which page of
// them. The zero value is the first page of every thread, DefaultThreadPage of them.
type ThreadFilter struct {
	// AgentID, when set, keeps the threads of that agent.
	AgentID string
	// Tag, when set, keeps the threads that have that tag.
	Tag string
	// AlsoTag, when set, keeps the threads that have that tag too: a second tag, such as one
	// of the runtime's state tags with a tag of the caller's.
	AlsoTag string
	// Status, when set, keeps the threads in that status: idle, running or terminated.
	Status ThreadStatus
	// Name, when set, keeps the threads whose name (the tag name:<value>) contains it, in
	// any case (ASCII letters), at most MaxNameLen bytes. The other filters lead the search.
	Name string
	// Limit is the page size, 1 to MaxThreadPage; 0 means DefaultThreadPage.
	Limit int
	// Cursor is where the page starts: the next cursor of the page before, listed in the same
	// workspace with the same AgentID, Tag and Status; "" for the first page.
	Cursor string
}

// ThreadQuery is a ThreadFilter checked, in a workspace: what a backend runs.
type ThreadQuery struct {
	WorkspaceID string
	AgentID     string       // "" for any
	Tag         string       // "" for any
	AlsoTag     string       // "" for any
	Status      ThreadStatus // "" for any
	Name        string       // "" for any
	// Limit is the page size; a backend reads Limit+1 rows, so that Page can tell whether
	// another page follows.
	Limit int
	// After is the place the page starts after; the start of the list for the first page.
	After ThreadCursor
}

// PrepareThreadList checks f for a listing of workspaceID's threads and returns the query a
// backend runs. A limit out of range, an unknown status, a filter value that is not UTF-8
// text without NUL (which no tag or agent id can hold) and a cursor that a listing of the
// same workspace and filter did not return are ErrInvalid.
func PrepareThreadList(workspaceID string, f ThreadFilter) (ThreadQuery, error) {
	limit, err := CheckThreadPage(f.Limit)
	if err != nil {
		return ThreadQuery{}, err
	}
	if f.Status != "" && !f.Status.Valid() {
		return ThreadQuery{}, fmt.Errorf("status %q: want idle, running or terminated: %w", f.Status, ErrInvalid)
	}
	if len(f.Name) > MaxNameLen {
		return ThreadQuery{}, fmt.Errorf("the name to search for is over %d bytes: %w", MaxNameLen, ErrInvalid)
	}
	for _, v := range []struct{ what, s string }{{"agent id", f.AgentID}, {"tag", f.Tag}, {"tag", f.AlsoTag}, {"name", f.Name}} {
		if !utf8.ValidString(v.s) || strings.IndexByte(v.s, 0) >= 0 {
			return ThreadQuery{}, fmt.Errorf("the %s to list threads by is not UTF-8 text without NUL: %w", v.what, ErrInvalid)
		}
	}
	q := ThreadQuery{WorkspaceID: workspaceID, AgentID: f.AgentID, Tag: f.Tag, AlsoTag: f.AlsoTag, Status: f.Status, Name: f.Name, Limit: limit}
	if q.After, err = q.parseCursor(f.Cursor); err != nil {
		return ThreadQuery{}, err
	}
	return q, nil
}

// CheckThreadPage returns the page size for limit: DefaultThreadPage for 0, limit when it is
// 1 to MaxThreadPage, an ErrInvalid error otherwise.
func CheckThreadPage(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultThreadPage, nil
	case limit < 0 || limit > MaxThreadPage:
		return 0, fmt.Errorf("a page of threads holds 1 to %d, not %d: %w", MaxThreadPage, limit, ErrInvalid)
	}
	return limit, nil
}

// CheckThreadCursor reports, wrapping ErrInvalid, a cursor that no listing of workspaceID's
// threads with f's AgentID, Tag and Status returned (f.Cursor; "" is always good): what
// Threads refuses, for callers that want to tell that mistake from others before asking.
func CheckThreadCursor(workspaceID string, f ThreadFilter) error {
	q := ThreadQuery{WorkspaceID: workspaceID, AgentID: f.AgentID, Tag: f.Tag, AlsoTag: f.AlsoTag, Status: f.Status}
	_, err := q.parseCursor(f.Cursor)
	return err
}

// ThreadCursor is a place in the newest-first list: just after the thread created at CreatedAt
// with ID. The zero value is the start of the list.
type ThreadCursor struct {
	CreatedAt time.Time
	ID        string
}

// IsStart reports whether c is the start of the list.
func (c ThreadCursor) IsStart() bool { return c.ID == "" }

// A cursor, as callers carry it, is opaque: base64url (unpadded) of the creation time in Unix
// nanoseconds (8 bytes, big-endian), the thread id, and a check of cursorCheckBytes: the first
// bytes of the SHA-256 of the workspace, the filter and the place. The check is what turns a
// cursor used with another filter (whose place may not be in that list at all) or altered by
// hand into ErrInvalid rather than a page that silently skips or repeats threads. It is not a
// signature and needs no key: someone who forges a cursor that passes gains nothing, since it
// only names a place in a listing of their own workspace, which every query is held to.
const (
	cursorCheckBytes = 12
	cursorDomain     = "quiver thread cursor v1\x00"
)

// cursorCheck is the check of a place in q's listing.
func (q ThreadQuery) cursorCheck(place []byte) []byte {
	h := sha256.New()
	h.Write([]byte(cursorDomain))
	fields := []string{q.WorkspaceID, q.AgentID, q.Tag, string(q.Status)}
	if q.Name != "" {
		fields = append(fields, "name", q.Name) // only when set: cursors of the other filters stay as they were
	}
	if q.AlsoTag != "" {
		fields = append(fields, "also tag", q.AlsoTag)
	}
	for _, s := range fields {
		// Each field with its length first, so that no two filters write the same bytes.
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	h.Write(place)
	return h.Sum(nil)[:cursorCheckBytes]
}

// cursor is the cursor naming c in q's listing; "" for the start.
func (q ThreadQuery) cursor(c ThreadCursor) string {
	if c.IsStart() {
		return ""
	}
	place := binary.BigEndian.AppendUint64(nil, uint64(c.CreatedAt.UnixNano()))
	place = append(place, c.ID...)
	return base64.RawURLEncoding.EncodeToString(append(place, q.cursorCheck(place)...))
}

// parseCursor reads a cursor that q.cursor wrote; "" is the start of the list.
func (q ThreadQuery) parseCursor(s string) (ThreadCursor, error) {
	if s == "" {
		return ThreadCursor{}, nil
	}
	bad := fmt.Errorf("not a cursor of this thread list (pass, with the same filters, the next cursor a page returned): %w", ErrInvalid)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 8+len(PrefixThread)+2+cursorCheckBytes {
		return ThreadCursor{}, bad
	}
	place, check := b[:len(b)-cursorCheckBytes], b[len(b)-cursorCheckBytes:]
	if subtle.ConstantTimeCompare(check, q.cursorCheck(place)) != 1 {
		return ThreadCursor{}, bad
	}
	id := string(place[8:])
	if !strings.HasPrefix(id, PrefixThread+"_") || !utf8.ValidString(id) {
		return ThreadCursor{}, bad
	}
	return ThreadCursor{CreatedAt: time.Unix(0, int64(binary.BigEndian.Uint64(place[:8]))).UTC(), ID: id}, nil
}

// Page cuts rows, which a backend read with q.Limit+1 as its limit, to the page and the cursor
// of the next one ("" when this page is the last).
func (q ThreadQuery) Page(rows []*Thread) ([]*Thread, string) {
	if len(rows) <= q.Limit {
		return rows, ""
	}
	page := rows[:q.Limit]
	last := page[len(page)-1]
	return page, q.cursor(ThreadCursor{CreatedAt: last.CreatedAt, ID: last.ID})
}
