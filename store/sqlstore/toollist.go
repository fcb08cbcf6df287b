package sqlstore

import (
	"strconv"
	"strings"

	"github.com/quiverhq/quiver/store"
)

// query is the WHERE clause of a statement as it is built: its conditions, joined by AND, and
// their arguments, numbered in the order they are added.
type query struct {
	conds []string
	args  []any
}

// arg adds v to the arguments and returns its placeholder.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

func (q *query) where(cond string) { q.conds = append(q.conds, cond) }

func (q *query) eq(col string, v any) { q.where(col + ` = ` + q.arg(v)) }

// eqIfSet adds col = v when v is not empty: a filter left unset selects everything.
func (q *query) eqIfSet(col, v string) {
	if v != "" {
		q.eq(col, v)
	}
}

func (q *query) in(col string, vs []string) {
	marks := make([]string, len(vs))
	for i, v := range vs {
		marks[i] = q.arg(v)
	}
	q.where(col + ` IN (` + strings.Join(marks, ", ") + `)`)
}

func (q *query) conditions() string { return strings.Join(q.conds, " AND ") }

// toolQuery is the WHERE clause of a ToolFilter, but its cursor.
func toolQuery(f store.ToolFilter) *query {
	q := &query{}
	toolScope(q, f)
	q.eqIfSet("function_id", f.FunctionID)
	q.eqIfSet("target", string(f.Target))
	toolName(q, f)
	if f.Names != nil {
		q.in("name", f.Names)
	}
	if f.RequiresConfirmation != nil {
		q.eq("requires_confirmation", *f.RequiresConfirmation)
	}
	if cond, ok := deletedConds[f.Deleted]; ok {
		q.where(cond)
	}
	return q
}

// toolScope selects the system tools, a workspace's, or both.
func toolScope(q *query, f store.ToolFilter) {
	switch {
	case f.WorkspaceID == "":
		q.where(`workspace_id IS NULL`)
	case f.IncludeSystem:
		q.where(`(workspace_id = ` + q.arg(f.WorkspaceID) + ` OR workspace_id IS NULL)`)
	default:
		q.eq("workspace_id", f.WorkspaceID)
	}
}

// toolName selects tools by name, or by a prefix of it.
func toolName(q *query, f store.ToolFilter) {
	switch {
	case f.NamePrefix:
		// Not LIKE: a name may hold % and _.
		p := q.arg(f.Name)
		q.where(`substr(name, 1, length(CAST(` + p + ` AS TEXT))) = ` + p)
	case f.Name != "":
		q.eq("name", f.Name)
	}
}

// deletedConds are the conditions of each DeletedFilter; including the deleted tools needs
// none.
var deletedConds = map[store.DeletedFilter]string{
	"":                   `deleted_at IS NULL`,
	store.DeletedExclude: `deleted_at IS NULL`,
	store.DeletedOnly:    `deleted_at IS NOT NULL`,
}
