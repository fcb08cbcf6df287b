package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Paging through a workspace's threads, newest first. The rules live here, once; a backend only
// runs the query: the threads created before the cursor's (or at the same instant with a
// smaller id), newest first, one more than the page holds, so that PageThreads knows whether
// another page follows.

const (
	// DefaultThreadPage is the page size when a caller asks for none.
	DefaultThreadPage = 50
	// MaxThreadPage bounds one page.
	MaxThreadPage = 500
)

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

// ThreadCursor is a place in the newest-first list: just after the thread created at CreatedAt
// with ID. The zero value is the start of the list.
type ThreadCursor struct {
	CreatedAt time.Time
	ID        string
}

// IsStart reports whether c is the start of the list.
func (c ThreadCursor) IsStart() bool { return c.ID == "" }

// String is the cursor as callers carry it: the creation time in Unix nanoseconds and the id.
func (c ThreadCursor) String() string {
	if c.IsStart() {
		return ""
	}
	return strconv.FormatInt(c.CreatedAt.UnixNano(), 10) + "." + c.ID
}

// ParseThreadCursor reads a cursor that String wrote; "" is the start of the list.
func ParseThreadCursor(s string) (ThreadCursor, error) {
	if s == "" {
		return ThreadCursor{}, nil
	}
	nanos, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(nanos, 10, 64)
	if !ok || err != nil || !strings.HasPrefix(id, "thr_") {
		return ThreadCursor{}, fmt.Errorf("%q is not a cursor of the thread list (pass the next cursor a page returned): %w", s, ErrInvalid)
	}
	return ThreadCursor{CreatedAt: time.Unix(0, n).UTC(), ID: id}, nil
}

// PageThreads cuts rows, which a backend read with limit+1 as its limit, to the page and the
// cursor of the next one.
func PageThreads(rows []*Thread, limit int) ([]*Thread, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	page := rows[:limit]
	last := page[len(page)-1]
	return page, ThreadCursor{CreatedAt: last.CreatedAt, ID: last.ID}.String()
}
