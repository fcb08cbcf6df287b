package sqlstore

import (
	"strconv"
	"strings"

	"github.com/quiverhq/quiver/store"
)

// The thread list (Store.Threads), written once for both backends. The backends keep threads
// in their own SQL (appends are their hot path) and scan the rows themselves, so this is the
// statement, not its execution.

// ThreadList returns the statement that reads the rows of a page of the threads q selects,
// newest first, and its arguments: cols (the backend's thread columns, each of the table
// aliased t) of at most q.Limit+1 threads, for q.Page.
//
// Every filter alone reads an index in order from the cursor and stops after q.Limit+1 rows
// (migrations 0006 and 0008): by tag, thread_tags_newest, joined to each thread by its key;
// by agent, threads_agent_newest; by status, threads_status_newest; none, threads_newest. With
// several filters the database reads the index of one of them and checks the others on each
// row: a page costs at most the rows that one filter keeps, between the cursor and the page's
// end.
func ThreadList(d Dialect, cols string, q store.ThreadQuery) (string, []any) {
	args := []any{q.WorkspaceID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var b strings.Builder
	b.WriteString("SELECT " + cols)
	// at and id are the columns the list is ordered by: the tag's row's when the tag leads,
	// so that the order comes from its index; they equal the thread's.
	at, id := "t.created_at", "t.id"
	if q.Tag != "" {
		at, id = "g.created_at", "g.thread_id"
		b.WriteString(" FROM thread_tags g JOIN threads t ON t.id = g.thread_id" +
			" WHERE g.workspace_id = $1 AND t.workspace_id = $1 AND g.tag = " + arg(q.Tag))
	} else {
		b.WriteString(" FROM threads t WHERE t.workspace_id = $1")
	}
	if q.AgentID != "" {
		b.WriteString(" AND t.agent_id = " + arg(q.AgentID))
	}
	if q.Status != "" {
		b.WriteString(" AND t.status = " + arg(string(q.Status)))
	}
	if q.AlsoTag != "" {
		b.WriteString(" AND EXISTS (SELECT 1 FROM thread_tags a WHERE a.workspace_id = $1 AND a.thread_id = t.id AND a.tag = " + arg(q.AlsoTag) + ")")
	}
	if q.Name != "" {
		// A name is a tag name:<value>: a substring of it, in any case, its LIKE wildcards
		// taken literally.
		pattern := "name:%" + likeEscaper.Replace(strings.ToLower(q.Name)) + "%"
		b.WriteString(" AND EXISTS (SELECT 1 FROM thread_tags n WHERE n.workspace_id = $1 AND n.thread_id = t.id AND n.tag LIKE 'name:%'" +
			" AND lower(n.tag) LIKE " + arg(pattern) + ` ESCAPE '\')`)
	}
	if !q.After.IsStart() {
		b.WriteString(" AND (" + at + ", " + id + ") < (" + arg(d.Time(q.After.CreatedAt)) + ", " + arg(q.After.ID) + ")")
	}
	b.WriteString(" ORDER BY " + at + " DESC, " + id + " DESC LIMIT " + arg(q.Limit+1))
	return b.String(), args
}

// likeEscaper makes a text literal in a LIKE pattern whose escape is a backslash.
var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)
