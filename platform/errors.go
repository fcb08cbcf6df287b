package platform

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/quiverhq/quiver/store"
)

// Kind is what kind of refusal an Error is; each door answers it its own way (an HTTP status,
// a JSON-RPC code, an exit status).
type Kind string

// The kinds of Error.
const (
	Invalid     Kind = "invalid"     // the input breaks a rule
	NotFound    Kind = "not_found"   // no such record in the workspace (another's included)
	Forbidden   Kind = "forbidden"   // the actor may not do this
	Conflict    Kind = "conflict"    // a name taken, a record in the way
	Unavailable Kind = "unavailable" // the platform cannot do this at all (its store keeps no such records)
	Internal    Kind = "internal"    // the platform failed; the cause is for the log, not the caller
	// MissingVariables: a variable the agent requires has no value (a *quiver.MissingVariablesError is the cause).
	MissingVariables Kind = "missing_variables"
	NotPending       Kind = "not_pending" // the call named waits for no such answer (any more)
	RunQueued        Kind = "run_queued"  // the thread has a run queued or running
)

// Error is an operation's refusal. Every operation returns one for anything but success.
type Error struct {
	Kind Kind
	// Field is the input at fault as the operation's input names it ("name", "input_schema",
	// "id"), or "" when no one input is.
	Field string
	// Message says what is wrong and what is allowed: about Field when there is one.
	Message string
	// Detail, when set, is the whole refusal's words where they are not Field's: a store's
	// refusal names the record first.
	Detail string
	// Fields are the inputs at fault when there are several (each of a tool's arguments):
	// Detail says what was refused, and Field and Message nothing more.
	Fields []FieldProblem
	// Cause is what failed underneath, for errors.Is and the log.
	Cause error
}

// FieldProblem is one input at fault: its name ("args.amount", "args.items[0].name") and
// what is wrong with it.
type FieldProblem struct {
	Field, Message string
}

func (e *Error) Error() string {
	switch {
	case len(e.Fields) > 0:
		msgs := make([]string, len(e.Fields))
		for i, f := range e.Fields {
			msgs[i] = f.Field + ": " + f.Message
		}
		return e.Detail + ": " + strings.Join(msgs, "; ")
	case e.Detail != "":
		return e.Detail
	case e.Field != "":
		return e.Field + ": " + e.Message
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// invalid is an Invalid refusal of field.
func invalid(field, msg string) *Error { return &Error{Kind: Invalid, Field: field, Message: msg} }

// fail is a refusal of field of the given kind.
func fail(kind Kind, field, msg string) *Error { return &Error{Kind: kind, Field: field, Message: msg} }

// storeError is the refusal of an operation the store refused, what naming the record ("tool
// tol_1") and field the input at fault ("" for none): not found (another workspace's record
// included, so that nothing says it exists), invalid, a conflict, forbidden; anything else is
// Internal.
func storeError(err error, what, field string) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	kind := Internal
	switch {
	case errors.Is(err, store.ErrNotFound):
		msg := "no " + what + " in this workspace"
		return &Error{Kind: NotFound, Field: field, Message: msg, Detail: msg, Cause: err}
	case errors.Is(err, store.ErrInvalid):
		kind = Invalid
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrExists):
		kind = Conflict
	case errors.Is(err, store.ErrForbidden):
		kind = Forbidden
	}
	if kind == Internal {
		return &Error{Kind: Internal, Message: what, Cause: err}
	}
	return &Error{Kind: kind, Field: field, Message: err.Error(), Detail: what + ": " + err.Error(), Cause: err}
}

// quoteShort quotes s for a message, cut when long: a refusal must not echo a megabyte back.
func quoteShort(s string) string {
	if len(s) > 70 {
		s = s[:64] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}
