package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/secret"
	"github.com/quiverhq/quiver/store/vars"
	"github.com/quiverhq/quiver/thread"
)

// refusingModel answers every request with a provider's error of its status.
type refusingModel struct{ status int }

func (m refusingModel) Name() string            { return fmt.Sprintf("test:http%d", m.status) }
func (m refusingModel) Dialect() schema.Dialect { return schema.OpenAI }

func (m refusingModel) Generate(context.Context, *model.Request, func(model.Delta)) (*model.Response, error) {
	return nil, &model.APIError{Provider: "test", StatusCode: m.status, Message: "the provider says no"}
}

// logRecords keeps the records of a logger, for a test to find one by its attributes.
type logRecords struct {
	mu      sync.Mutex
	records []map[string]string // message under "msg", level under "level"
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }

func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	rec := map[string]string{"msg": r.Message, "level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool { rec[a.Key] = a.Value.String(); return true })
	l.mu.Lock()
	l.records = append(l.records, rec)
	l.mu.Unlock()
	return nil
}

// about returns the records of level that say msg about thread.
func (l *logRecords) about(level slog.Level, msg, threadID string) []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, r := range l.records {
		if r["level"] == level.String() && r["msg"] == msg && r["thread"] == threadID {
			out = append(out, r)
		}
	}
	return out
}

// failureEvents keeps the failed and retrying events of the runs, by thread.
type failureEvents struct {
	mu     sync.Mutex
	events map[string][]agent.Event
}

func (e *failureEvents) add(ev agent.Event) {
	if ev.Type != agent.EventFailed && ev.Type != agent.EventRetrying {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events[ev.ThreadID] = append(e.events[ev.ThreadID], ev)
}

func (e *failureEvents) of(threadID string) []agent.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events[threadID])
}

// failingConfig is config with an agent for each way a run fails, a resolver whose key cannot
// open what another key sealed, tools of a remote MCP server still connecting, and River giving
// up after two tries.
func failingConfig(t *testing.T, st thread.Store, logs *logRecords) (Config, *vars.Resolver) {
	t.Helper()
	_, reg := newTools(t)
	connecting := make(chan struct{}) // never closes: the remote does not connect in this test
	reg.Explain(func(name string) error {
		if strings.HasPrefix(name, "remote.") {
			return &quiver.ToolPending{Err: errors.New("the tool is on the MCP server remote, which is connecting"), Ready: connecting}
		}
		return nil
	})
	backend, ok := st.(interface {
		store.Store
		store.Variables
	})
	if !ok {
		t.Fatalf("%T keeps no variables", st)
	}
	sealer, reader := testKey(t), testKey(t)
	cfg := config(st, reg, &stepModel{turns: []string{"work"}})
	cfg.Logger = slog.New(logs)
	cfg.maxAttempts = 2
	cfg.Runner.Resolver = vars.New(backend, secret.NewKeyring(reader))
	cfg.Runner.OpenModel = func(spec string) (model.Model, error) {
		switch spec {
		case "test:http401":
			return refusingModel{401}, nil
		case "test:http503":
			return refusingModel{503}, nil
		}
		return nil, fmt.Errorf("model: unknown provider in %q", spec)
	}
	prompt := func(name string, p agent.Prompt) *agent.Agent {
		p.Name = name
		return &agent.Agent{Name: name, Prompt: &p}
	}
	agents := map[string]*agent.Agent{
		"needs_region":  prompt("needs_region", agent.Prompt{Variables: quiver.Variables{{Name: "REGION", Required: true}}}),
		"bad_tools":     prompt("bad_tools", agent.Prompt{Tools: []string{"work", "nosuch"}}),
		"remote_tools":  prompt("remote_tools", agent.Prompt{Tools: []string{"remote.search"}}),
		"secretive":     prompt("secretive", agent.Prompt{Variables: quiver.Variables{{Name: "TOKEN", Type: quiver.VarSecret, Required: true}}}),
		"unconfigured":  prompt("unconfigured", agent.Prompt{Model: "nosuch:model"}),
		"refused":       prompt("refused", agent.Prompt{Model: "test:http401"}),
		"provider_down": prompt("provider_down", agent.Prompt{Model: "test:http503"}),
	}
	helper := cfg.Agents
	cfg.Agents = func(ctx context.Context, name string) (*agent.Agent, error) {
		if a, ok := agents[name]; ok {
			return a, nil
		}
		return helper(ctx, name)
	}
	return cfg, vars.New(backend, secret.NewKeyring(sealer))
}

func testKey(t *testing.T) *secret.Key {
	t.Helper()
	k, _, err := secret.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A run that cannot start or go on ends failed, whatever the kind of failure, on both
// databases: the thread idle with a failed outcome saying why (its reason, and words that
// name what is wrong), a failed event carrying it, one warning in the log naming the thread,
// the agent and the reason, and the job given up: at once when trying again cannot help, after
// River's last try (each earlier one announced as retrying) when it might. A later run on the
// thread replaces the failed outcome as any run does.
func TestRunsThatCannotRunEndFailed(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			logs := &logRecords{}
			cfg, sealer := failingConfig(t, b.st, logs)
			events := &failureEvents{events: map[string][]agent.Event{}}
			defer cfg.Runner.Subscribe(events.add)()
			j := b.start(t, cfg)
			for _, tt := range []struct {
				name, agent string
				message     string // "" runs the thread without one
				reason      agent.Reason
				says        string // in the failure's words
				tries       int    // 1: for good at once; 2: after River's retry
			}{
				{"an agent this node does not have", "nobody", "hi", agent.ReasonUnknownAgent, `"nobody"`, 1},
				{"a required variable without a value", "needs_region", "hi", agent.ReasonMissingVariables, "REGION", 1},
				{"a prompt naming a tool that does not exist", "bad_tools", "hi", agent.ReasonBadDefinition, "nosuch", 1},
				{"a secret the server's key cannot open", "secretive", "hi", agent.ReasonSecret, "TOKEN", 1},
				{"a model no provider opens", "unconfigured", "hi", agent.ReasonModelSetup, "nosuch:model", 1},
				{"a provider refusing the request", "refused", "hi", agent.ReasonModelRefused, "HTTP 401", 1},
				{"a thread without messages run without one", "helper", "", agent.ReasonEmptyThread, "no messages", 1},
				{"a provider down", "provider_down", "hi", agent.ReasonModelUnavailable, "HTTP 503", 2},
				{"a tool of a remote MCP server still connecting", "remote_tools", "hi", agent.ReasonToolsUnavailable, "connecting", 2},
			} {
				t.Run(tt.name, func(t *testing.T) {
					ctx := context.Background()
					th, err := thread.Create(ctx, b.st, thread.Options{WorkspaceID: ws, UserID: "usr_failing"})
					if err != nil {
						t.Fatal(err)
					}
					if err := sealer.Set(ctx, ws, quiver.LayerThread, th.ID(), vars.Value{Name: "TOKEN", Value: "s3cret-value", Secret: true}); err != nil {
						t.Fatal(err)
					}
					args := RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: tt.agent, Message: tt.message}
					id, err := j.Start(ctx, args)
					if err != nil {
						t.Fatal(err)
					}
					waitState(t, j, id, rivertype.JobStateCancelled)
					row, err := j.client.JobGet(ctx, id)
					if err != nil || row.Attempt != tt.tries {
						t.Errorf("the job was tried %d times (%v), want %d", row.Attempt, err, tt.tries)
					}
					if run, err := j.RunStatus(ctx, ws, th.ID(), id); run != RunGivenUp {
						t.Errorf("RunStatus: %q (%v), want %q", run, err, RunGivenUp)
					}
					info, err := th.Refresh(ctx)
					if err != nil {
						t.Fatal(err)
					}
					out := agent.ReadState(&info).Outcome
					if info.Status != store.StatusIdle || out == nil || out.Status != agent.RunFailed || out.Reason != tt.reason ||
						!strings.Contains(out.Error, tt.says) || out.Steps != 0 {
						t.Fatalf("the thread is %s with outcome %+v, want idle, failed (%s) saying %q", info.Status, out, tt.reason, tt.says)
					}
					if strings.Contains(out.Error, "s3cret-value") || strings.Contains(out.Error, "\n") {
						t.Errorf("the failure's words show a secret or span lines: %q", out.Error)
					}
					checkFailureEvents(t, events.of(th.ID()), out, tt.tries)
					warned := logs.about(slog.LevelWarn, "agent: the run failed", th.ID())
					if len(warned) != 1 || warned[0]["agent"] != tt.agent || warned[0]["reason"] != string(tt.reason) {
						t.Errorf("the log's warnings of the failure: %v, want one naming agent %s and reason %s", warned, tt.agent, tt.reason)
					}

					// A run that succeeds replaces the failure.
					id, err = j.Start(ctx, RunArgs{WorkspaceID: ws, ThreadID: th.ID(), Agent: "helper", MessageID: ids.New("msg"), Message: "and now?"})
					if err != nil {
						t.Fatal(err)
					}
					waitState(t, j, id, rivertype.JobStateCompleted)
					if info, err = th.Refresh(ctx); err != nil {
						t.Fatal(err)
					}
					if out := agent.ReadState(&info).Outcome; out == nil || out.Status != agent.RunFinished || out.Error != "" {
						t.Errorf("after a run that succeeded, the outcome is %+v, want finished", out)
					}
				})
			}
		})
	}
}

// checkFailureEvents checks what a failed run's thread heard: each try River repeats as
// retrying, saying why, then one failed event carrying the recorded outcome.
func checkFailureEvents(t *testing.T, events []agent.Event, out *agent.Outcome, tries int) {
	t.Helper()
	var retrying, failed []agent.Event
	for _, e := range events {
		switch {
		case e.Type == agent.EventRetrying:
			retrying = append(retrying, e)
		case e.Type == agent.EventFailed && e.Outcome != nil:
			failed = append(failed, e)
		}
	}
	if len(failed) != 1 || failed[0].Outcome.Status != out.Status || failed[0].Outcome.Reason != out.Reason ||
		failed[0].Outcome.Error != out.Error || failed[0].Text != out.Error {
		t.Errorf("failed events with an outcome: %+v, want one with %+v", failed, out)
	}
	if len(retrying) != tries-1 {
		t.Errorf("%d retrying events, want %d: %+v", len(retrying), tries-1, retrying)
	}
	for _, e := range retrying {
		if e.Text == "" {
			t.Errorf("a retrying event says nothing of why: %+v", e)
		}
	}
}
