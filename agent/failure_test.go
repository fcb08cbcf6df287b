package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/store/secret"
)

// Each way a run fails has its reason, is for good or not, and is said in words safe to show:
// what the operator is to fix (a definition, variables, a key) as it is, on one line and
// bounded; the runtime's own errors by kind, never with what they name (a database's address,
// a password in it).
func TestFailuresSayWhyAndNoMore(t *testing.T) {
	const leak = "postgres://quiver:hunter2@db.internal:5432"
	for _, tt := range []struct {
		name    string
		err     error
		reason  agent.Reason
		forGood bool
		says    string
	}{
		{"an unknown agent", fmt.Errorf("%w \"x\" on the node that took the run", agent.ErrUnknownAgent), agent.ReasonUnknownAgent, true, `"x" on the node`},
		{"a bad definition", fmt.Errorf("%w: prompt p names unknown tools [nosuch]", agent.ErrDefinition), agent.ReasonBadDefinition, true, "nosuch"},
		{"tools not connected yet", fmt.Errorf("%w: prompt p names tools [r.t]", agent.ErrToolsUnavailable), agent.ReasonToolsUnavailable, false, "r.t"},
		{"missing variables", &quiver.MissingVariablesError{Missing: []quiver.Variable{{Name: "REGION"}}}, agent.ReasonMissingVariables, true, "REGION"},
		{"a secret the keys cannot open", fmt.Errorf("resolving variable TOKEN: %w", secret.ErrDecrypt), agent.ReasonSecret, true, "TOKEN"},
		{"a provider not configured", fmt.Errorf("agent: %w: openai needs OPENAI_API_KEY;\n  export OPENAI_API_KEY=...", model.ErrNotConfigured), agent.ReasonModelSetup, true, "OPENAI_API_KEY; export"},
		{"an empty thread", agent.ErrEmptyThread, agent.ReasonEmptyThread, true, "no messages"},
		{"a timeout", fmt.Errorf("reading %s: %w", leak, context.DeadlineExceeded), agent.ReasonTimeout, false, "longer than a run may"},
		{"the store", errors.New("dial " + leak + ": connection refused"), agent.ReasonInternal, false, "an error of the server"},
		{"a node stopping", fmt.Errorf("query %s: %w", leak, context.Canceled), agent.ReasonInternal, false, "cut short"},
		{"a long definition error", fmt.Errorf("%w: %s", agent.ErrDefinition, strings.Repeat("tool_é ", 400)), agent.ReasonBadDefinition, true, "…"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reason, forGood := agent.Classify(tt.err)
			text := agent.FailureText(tt.err)
			if reason != tt.reason || forGood != tt.forGood || !strings.Contains(text, tt.says) {
				t.Errorf("Classify: %s, %v; FailureText: %q; want %s, %v, saying %q", reason, forGood, text, tt.reason, tt.forGood, tt.says)
			}
			if strings.Contains(text, "hunter2") || strings.Contains(text, "db.internal") || strings.Contains(text, "\n") || len(text) > 1000 {
				t.Errorf("FailureText says too much: %q", text)
			}
			failed := &agent.FailedError{Outcome: &agent.Outcome{Status: agent.RunFailed, Reason: reason, Error: text}, Err: tt.err}
			if r, ok := agent.Classify(failed); r != reason || !ok || agent.FailureText(failed) != text || !errors.Is(failed, tt.err) {
				t.Errorf("the recorded failure reads %s, %v, %q", r, ok, agent.FailureText(failed))
			}
		})
	}
}
