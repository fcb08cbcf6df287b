package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/store"
)

// violation is a constraint violation as a driver reports it, for Dialect.Constraint below.
type violation struct {
	kind error
	name string
}

func (v violation) Error() string { return "violates " + v.name }

// TestErr checks the one mapping of database errors to the store's, with a dialect whose
// classes come from the error itself (the backends' tests check theirs on real databases).
func TestErr(t *testing.T) {
	d := &Dialect{Name: "db", Constraint: func(err error) Violation {
		var v violation
		if !errors.As(err, &v) {
			return Violation{}
		}
		return Violation{Kind: v.kind, Name: v.name, Message: err.Error()}
	}}
	driverErr := errors.New("connection reset")
	for _, tc := range []struct {
		name   string
		err    error
		want   []error
		saying string
	}{
		{"nil", nil, nil, ""},
		{"no row", fmt.Errorf("scan: %w", sql.ErrNoRows), []error{store.ErrNotFound}, "db: op: store: not found"},
		{"already a store error", fmt.Errorf("rule: %w", store.ErrForbidden), []error{store.ErrForbidden}, "rule:"},
		{"not a violation", driverErr, []error{driverErr}, "db: op: connection reset"},
		{"unnamed unique", violation{store.ErrConflict, ""}, []error{store.ErrConflict}, "violates"},
		{"named wording", violation{store.ErrConflict, "tools_name"}, []error{store.ErrConflict}, "already has this name"},
		{"named kind", violation{store.ErrConflict, "messages_one_result"}, []error{store.ErrResultExists}, "already has a result"},
		{"id taken", violation{store.ErrConflict, "messages_pkey"}, []error{store.ErrIDTaken, store.ErrInvalid}, "id is already taken"},
		{"another primary key", violation{store.ErrConflict, "widgets_pkey"}, []error{store.ErrConflict}, "id is already taken"},
		{"check", violation{store.ErrInvalid, "widgets_size_check"}, []error{store.ErrInvalid}, "violates"},
	} {
		got := d.Err("op", tc.err)
		if tc.err == nil {
			if got != nil {
				t.Errorf("%s: %v", tc.name, got)
			}
			continue
		}
		for _, w := range tc.want {
			if !errors.Is(got, w) {
				t.Errorf("%s: %v, want %v", tc.name, got, w)
			}
		}
		if !strings.Contains(got.Error(), tc.saying) {
			t.Errorf("%s: %q does not say %q", tc.name, got, tc.saying)
		}
	}
}
