package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// A prompt or agent called as a tool runs in a child thread of the caller, with the runner's
// own loop: the child's history, pauses and results are persisted like any thread's, so a
// crash in the middle of a nested run resumes it where it stopped and never runs one of its
// calls twice. The child is found again by the call that spawned it (its call tag), so
// a call dispatched again after a crash continues the same child instead of starting another.
//
// A prompt tool's flow is such a child too, marked Spawn.Prompt: a nested flow runs in the
// calling thread, and a child thread is how it gets one with its own history and durability
// without its turns entering the caller's conversation, which providers would refuse while
// the caller's call is unanswered.

// DefaultMaxDepth bounds how deep a tree of nested prompts and sub-agents grows when the
// runner sets no MaxDepth: a spawn past it is an error result.
const DefaultMaxDepth = 5

// childTimeout bounds a call that runs a nested flow, in place of the dispatcher's default
// timeout (meant for functions): the child's own steps are bounded by its stop rules.
const childTimeout = time.Hour

// Codes of the error results of nested calls.
const (
	// CodeSubagentEnvRequired: subagent_create needs variables nobody provided; the result's
	// value names the request to answer (see Runner.Deferred).
	CodeSubagentEnvRequired quiver.Code = "subagent_env_required"
	// CodeSpawnRefused: the spawn would pass the depth or instance cap, or names an agent the
	// prompt may not spawn.
	CodeSpawnRefused quiver.Code = "spawn_refused"
	// CodeUnknownChild: subagent_message names no child of the thread, or one that cannot be
	// messaged.
	CodeUnknownChild quiver.Code = "unknown_child"
)

// Background runs work of a runner elsewhere, durably: jobs.Jobs implements it on River, so a
// non-blocking child survives a crash and, on PostgreSQL, runs on any node.
type Background interface {
	// Run queues a run of a thread (a non-blocking child) by agent.
	Run(ctx context.Context, workspaceID, threadID, agent string) error
	// Wake queues a run of a thread that has queued messages (a child's result), to start
	// once the run going on it, if any, has ended.
	Wake(ctx context.Context, workspaceID, threadID, agent string) error
}

// Scheduler is a Background that also runs a thread later: a run paused for its budget goes
// on when the budget has room again (Budget.RetryAt). jobs.Jobs's is one. Without it, such a
// run goes on when it is resumed.
type Scheduler interface {
	// RunAt queues a run of a thread by agent for at: it goes on if the thread is still paused
	// for its budget then.
	RunAt(ctx context.Context, workspaceID, threadID, agent string, at time.Time) error
}

// resumeAt has the runner's Background go on with the run rs paused for its budget at at.
func (r *Runner) resumeAt(ctx context.Context, rs *run, at time.Time) {
	s, ok := r.Background.(Scheduler)
	if !ok {
		return
	}
	if err := s.RunAt(ctx, rs.th.WorkspaceID(), rs.th.ID(), rs.agentName, at); err != nil {
		r.logger().Warn("agent: a run paused for its budget could not be scheduled to go on; it goes on when resumed",
			"thread", rs.th.ID(), "at", at, "err", err)
	}
}

// VariableWriter stores variable values; *vars.Resolver is one. The runner copies an immediate
// sub-agent's scopedEnv values into its child with it.
type VariableWriter interface {
	Set(ctx context.Context, workspaceID string, layer quiver.Layer, ownerID string, values ...quiver.VariableValue) error
}

type runKey struct{}

// runFrom returns the run a handler executes in.
func runFrom(ctx context.Context) *run {
	rs, _ := ctx.Value(runKey{}).(*run)
	return rs
}

// Lookup returns the agent called name, or the prompt exposed as a tool called name run as an
// agent: what runs a prompt tool's flow (a child thread), resumed after a pause or a crash.
// Safe on a nil catalog.
func (c *Catalog) Lookup(name string) (*Agent, bool) {
	if c == nil {
		return nil, false
	}
	if a, ok := c.Agents[name]; ok {
		return a, true
	}
	if p, ok := c.Prompts[name]; ok && p.ExposeAsTool {
		return &Agent{Name: p.Name, Description: p.Description, Prompt: p}, true
	}
	return nil, false
}

// agentFor is the agent that runs th: the one a handoff gave it to, or the one it was spawned
// for, when the catalog knows it; otherwise a.
func (r *Runner) agentFor(info store.Thread, a *Agent) *Agent {
	st := ReadState(&info)
	name := st.Agent
	if name == "" && st.Spawn != nil {
		name = st.Spawn.Agent
	}
	if name == "" || (a != nil && name == a.Name) {
		return a
	}
	if found, ok := r.catalog().Lookup(name); ok {
		return found
	}
	return a
}

// target is what a nested call runs.
type target struct {
	agent     *Agent
	prompt    bool // a prompt tool's flow
	sub       Subagent
	shaping   Subprompt
	resumable *Resumable
}

// childCall is a nested call's arguments, read.
type childCall struct {
	message     string
	attachments []string
	name        string
}

// readArgs reads a nested call's arguments as its configuration says.
func readArgs(args json.RawMessage, msgProp, attProp, nameProp string, hasArgs bool) (childCall, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return childCall{}, err
	}
	var cc childCall
	if err := takeAttachments(obj, attProp, &cc.attachments); err != nil {
		return cc, err
	}
	if raw, ok := obj[nameProp]; ok && nameProp != "" {
		_ = json.Unmarshal(raw, &cc.name)
	}
	cc.message = messageArg(obj, msgProp, hasArgs)
	return cc, nil
}

// takeAttachments reads the attachments property attProp, when there is one, and takes it
// out of obj.
func takeAttachments(obj map[string]json.RawMessage, attProp string, paths *[]string) error {
	raw, ok := obj[attProp]
	if attProp == "" || !ok {
		return nil
	}
	if err := json.Unmarshal(raw, paths); err != nil {
		return fmt.Errorf("%s: want a list of paths under /attachments/", attProp)
	}
	delete(obj, attProp)
	return nil
}

// messageArg is a child's first message: the message property (a string, else its JSON), or
// the arguments left, as JSON. Without arguments of its own, the property is "message".
func messageArg(obj map[string]json.RawMessage, msgProp string, hasArgs bool) string {
	if msgProp == "" && !hasArgs {
		msgProp = "message"
	}
	if raw, ok := obj[msgProp]; ok && msgProp != "" {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return string(raw)
	}
	b, _ := json.Marshal(obj)
	return string(b)
}

// checkAttachmentPaths refuses paths a model may not hand over: only files under
// /attachments/ of the caller's thread, without "." or ".." segments.
func checkAttachmentPaths(paths []string) error {
	if len(paths) > maxAttachmentsPerCall {
		return fmt.Errorf("%d attachments: at most %d in one call", len(paths), maxAttachmentsPerCall)
	}
	for _, p := range paths {
		if err := checkAttachmentPath(p); err != nil {
			return err
		}
	}
	return nil
}

func checkAttachmentPath(p string) error {
	if !strings.HasPrefix(p, "/attachments/") || len(p) == len("/attachments/") {
		return fmt.Errorf("attachment %q: only paths under /attachments/ of this thread can be handed over", p)
	}
	if err := quiver.CheckPath(p); err != nil {
		return fmt.Errorf("attachment %q: %v", p, err)
	}
	if slices.ContainsFunc(strings.Split(p, "/"), func(seg string) bool { return seg == ".." || seg == "." }) {
		return fmt.Errorf("attachment %q: a path may not contain . or .. segments", p)
	}
	return nil
}

// checkAttachments refuses paths a model may not hand over (checkAttachmentPaths) and files the
// thread does not have, before anything is spawned for them.
func checkAttachments(ctx context.Context, th *thread.Thread, paths []string) error {
	if err := checkAttachmentPaths(paths); err != nil {
		return err
	}
	for _, p := range paths {
		fi, err := th.Files().Stat(ctx, p)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("attachment %q: this thread has no such file", p)
		case err != nil:
			return err
		case fi.IsDir:
			return fmt.Errorf("attachment %q is a directory: name its files", p)
		}
	}
	return nil
}

// runNested is the handler of a prompt tool and of a sub-agent tool.
func (r *Runner) runNested(ctx context.Context, t target, args json.RawMessage) (any, error) {
	rs, parent := runFrom(ctx), threadFrom(ctx)
	if rs == nil || parent == nil {
		return nil, quiver.Fail(quiver.CodeRejected, "%s runs only inside an agent run on a thread", t.agent.Name)
	}
	cc, res := t.readCall(ctx, parent, args)
	if res != nil {
		return res, nil
	}
	child, res, err := rs.startNested(ctx, parent, t, quiver.CallFrom(ctx).ID, cc)
	if err != nil {
		return nil, err
	}
	if res != nil {
		return res, nil
	}
	if !t.prompt && !t.sub.blocking() {
		if err := r.runInBackground(ctx, child, t.agent); err != nil {
			return nil, err
		}
		return reference(child, t.agent.Name, cc.name, "running"), nil
	}
	return r.runBlocking(ctx, parent, child, t)
}

// readCall reads a nested call's arguments as the target's configuration says, and checks
// them; a result refuses them.
func (t target) readCall(ctx context.Context, parent *thread.Thread, args json.RawMessage) (childCall, *quiver.Result) {
	hasArgs := t.agent.Prompt.Args != nil
	var cc childCall
	var err error
	if t.prompt {
		cc, err = readArgs(args, t.shaping.InitUserMessageProperty, t.shaping.InitAttachmentsProperty, "", hasArgs)
	} else {
		cc, err = readArgs(args, t.sub.InitUserMessageProperty, t.sub.InitAttachmentsProperty, t.sub.InitAgentNameProperty, hasArgs)
	}
	if err == nil {
		err = checkAttachments(ctx, parent, cc.attachments)
	}
	if err != nil {
		return cc, quiver.Errorf(quiver.CodeInvalidArguments, "%v", err)
	}
	if cc.name != "" && (strings.TrimSpace(cc.name) != cc.name || len(cc.name) > store.MaxNameLen) {
		return cc, quiver.Errorf(quiver.CodeInvalidArguments, "%s %q: a name has no surrounding spaces and at most %d bytes",
			t.sub.InitAgentNameProperty, cc.name, store.MaxNameLen)
	}
	return cc, nil
}

// startNested gives the call's child its first message and attachments: the child a run
// before this one spawned for the call (it was resumed), or a new one. A result refuses the
// call.
func (rs *run) startNested(ctx context.Context, parent *thread.Thread, t target, callID string, cc childCall) (*thread.Thread, *quiver.Result, error) {
	child, err := childFor(ctx, parent, callID)
	if err != nil {
		return nil, nil, err
	}
	fresh := child == nil
	if fresh {
		if res := rs.checkSpawn(t.agent.Name); res != nil {
			return nil, res, nil
		}
		if child, _, err = rs.spawnChild(ctx, parent, t, callID, cc.name); err != nil {
			return nil, nil, err
		}
	}
	if err := startChild(ctx, parent, child, cc.message, cc.attachments, fresh); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, quiver.Errorf(quiver.CodeInvalidArguments, "attachments: %v", err), nil
		}
		return nil, nil, err
	}
	return child, nil, nil
}

// reference is a non-blocking call's result: where the child's result will come from.
func reference(child *thread.Thread, agentName, name, status string) *quiver.Result {
	v, _ := json.Marshal(map[string]string{"ref": child.ID(), "agent": agentName, "name": name, "status": status})
	return &quiver.Result{Status: quiver.StatusSuccess, Value: v, Text: fmt.Sprintf("Started sub-agent %s%s as %s; its result will "+
		"arrive as a message when it finishes. Go on meanwhile.", agentName, nameSuffix(name), child.ID())}
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", name)
}

func threadFrom(ctx context.Context) *thread.Thread {
	th, _ := thread.FromContext(ctx)
	return th
}
