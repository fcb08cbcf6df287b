package platform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/vars"
	"github.com/quiverhq/quiver/thread"
)

// The variables a thread for an agent requires are checked by the runner
// (agent.Runner.CreateThread, and a thread's first run); the platform turns its refusal into
// one every door answers alike, naming each missing variable as a field of its own.

// missingVariables is the refusal of what (a thread's creation) for the variables m names:
// each a field, variables.NAME, saying what requires it. Names and descriptions only: a value
// is never part of it.
func missingVariables(what string, m *quiver.MissingVariablesError) *Error {
	fields := make([]FieldProblem, len(m.Missing))
	for i, v := range m.Missing {
		msg := "required"
		if by := m.RequiredBy[v.Name]; len(by) > 0 {
			msg += " by " + strings.Join(by, ", ")
		}
		if v.Description != "" {
			msg += " (" + v.Description + ")"
		}
		fields[i] = FieldProblem{Field: "variables." + v.Name, Message: msg}
	}
	n := "a required variable is not set; give it with the thread, or set it"
	if len(m.Missing) > 1 {
		n = fmt.Sprintf("%d required variables are not set; give them with the thread, or set them", len(m.Missing))
	}
	return &Error{Kind: MissingVariables, Detail: what + ": " + n + " on the agent, the prompt, the user or the instance",
		Fields: fields, Cause: m}
}

// threadValues are the values given for a new thread, by name.
func threadValues(given map[string]string) []vars.Value {
	out := make([]vars.Value, 0, len(given))
	for _, name := range slices.Sorted(maps.Keys(given)) {
		out = append(out, vars.Value{Name: name, Value: given[name]})
	}
	return out
}

// checkThreadValues refuses, naming the first at fault, a value given for a new thread that
// could not be stored: what is wrong is said, never the value.
// MaxThreadValues bounds the variables given to a thread as it is created: each is a stored
// row (and a secret a sealing), and an agent's required variables are a handful.
const MaxThreadValues = 100

func checkThreadValues(given map[string]string) error {
	if len(given) > MaxThreadValues {
		return &Error{Kind: Invalid, Field: "variables", Detail: fmt.Sprintf("the thread cannot be created: %d variables are given, at most %d are allowed", len(given), MaxThreadValues),
			Message: fmt.Sprintf("at most %d", MaxThreadValues)}
	}
	for _, name := range slices.Sorted(maps.Keys(given)) {
		v := &store.Variable{WorkspaceID: "-", Layer: store.LayerThread, OwnerID: "-", Name: name, Value: given[name]}
		err := store.CheckVariable(v)
		if err == nil && len(v.Value) > vars.MaxValueBytes {
			err = fmt.Errorf("variable %s: the value is %d bytes, more than the %d allowed", name, len(v.Value), vars.MaxValueBytes)
		}
		if err != nil {
			return &Error{Kind: Invalid, Field: "variables", Detail: "the thread cannot be created: " + err.Error(),
				Message: "names of printable UTF-8 text, each value at most " + fmt.Sprint(vars.MaxValueBytes) + " bytes of UTF-8 text", Cause: err}
		}
	}
	return nil
}

// checkFirstRun refuses a run that would be the thread's first (agent.FirstRun) when a variable
// it requires has no value: the run would fail on it in the background, where no one sees why.
func (p *Platform) checkFirstRun(ctx context.Context, info *store.Thread, ag *agent.Agent) error {
	if !agent.FirstRun(info) {
		return nil
	}
	th, err := thread.Open(ctx, p.cfg.Store, info.WorkspaceID, info.ID)
	if err != nil {
		return storeError(err, "thread "+info.ID, "")
	}
	err = p.runner.CheckVariables(ctx, th, ag)
	var missing *quiver.MissingVariablesError
	switch {
	case errors.As(err, &missing):
		return &Error{Kind: MissingVariables, Message: "the run cannot start: " + missing.Error(), Cause: err}
	case err != nil:
		return &Error{Kind: Internal, Message: "checking the variables of thread " + info.ID, Cause: err}
	}
	return nil
}
