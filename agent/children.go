package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
// A prompt tool's flow is such a child too, marked Spawn.Prompt: Q1 asks for a nested flow
// "in the calling thread", and a child thread is how it gets one with its own history and
// durability without its turns entering the caller's conversation, which providers would
// refuse while the caller's call is unanswered.

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

func (r *Runner) maxDepth() int {
	if r.MaxDepth > 0 {
		return r.MaxDepth
	}
	return DefaultMaxDepth
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
	if found, ok := r.Catalog.Lookup(name); ok {
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
	if attProp != "" {
		if raw, ok := obj[attProp]; ok {
			if err := json.Unmarshal(raw, &cc.attachments); err != nil {
				return cc, fmt.Errorf("%s: want a list of paths under /attachments/", attProp)
			}
			delete(obj, attProp)
		}
	}
	if nameProp != "" {
		if raw, ok := obj[nameProp]; ok {
			_ = json.Unmarshal(raw, &cc.name)
		}
	}
	if msgProp == "" && !hasArgs {
		msgProp = "message"
	}
	if msgProp != "" {
		raw, ok := obj[msgProp]
		if ok && json.Unmarshal(raw, &cc.message) == nil {
			return cc, nil
		}
		if ok {
			cc.message = string(raw)
			return cc, nil
		}
	}
	b, _ := json.Marshal(obj)
	cc.message = string(b)
	return cc, nil
}

// checkAttachmentPaths refuses paths a model may not hand over: only files under
// /attachments/ of the caller's thread, without "." or ".." segments.
func checkAttachmentPaths(paths []string) error {
	if len(paths) > maxAttachmentsPerCall {
		return fmt.Errorf("%d attachments: at most %d in one call", len(paths), maxAttachmentsPerCall)
	}
	for _, p := range paths {
		if !strings.HasPrefix(p, "/attachments/") || len(p) == len("/attachments/") {
			return fmt.Errorf("attachment %q: only paths under /attachments/ of this thread can be handed over", p)
		}
		if err := quiver.CheckPath(p); err != nil {
			return fmt.Errorf("attachment %q: %v", p, err)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == ".." || seg == "." {
				return fmt.Errorf("attachment %q: a path may not contain . or .. segments", p)
			}
		}
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

// spawnError is an error result of a refused spawn.
func spawnError(format string, args ...any) *quiver.Result {
	return quiver.Errorf(CodeSpawnRefused, format, args...)
}

// spawnInfo is the parent's place in the tree: the agents from the root down to it, and the
// policy it runs under.
func (rs *run) spawnInfo() (path []string, ceiling quiver.Policy) {
	if rs.spawn != nil && len(rs.spawn.Path) > 0 {
		path = slices.Clone(rs.spawn.Path)
		if path[len(path)-1] != rs.agentName { // handed over inside the child
			path = append(path, rs.agentName)
		}
		return path, rs.policy
	}
	return []string{rs.agentName}, rs.policy
}

// DefaultMaxSpawnsPerRun bounds the children one run spawns when the runner sets no
// MaxSpawnsPerRun: every one is a thread, and a non-blocking one a run of its own.
const DefaultMaxSpawnsPerRun = 100

func (r *Runner) maxSpawnsPerRun() int {
	if r.MaxSpawnsPerRun > 0 {
		return r.MaxSpawnsPerRun
	}
	return DefaultMaxSpawnsPerRun
}

// checkSpawn refuses a spawn past the run's cap on children or the runner's depth limit.
func (rs *run) checkSpawn(name string) *quiver.Result {
	if max := rs.r.maxSpawnsPerRun(); rs.spawned >= max {
		return spawnError("cannot start %s: this run has started %d sub-agents and prompt flows, its limit; "+
			"work with the answers you have, or message a resumable sub-agent instead", name, max)
	}
	return rs.checkDepth(name)
}

// checkDepth refuses a spawn that would pass the runner's depth limit, naming the chain.
func (rs *run) checkDepth(name string) *quiver.Result {
	path, _ := rs.spawnInfo()
	if len(path) > rs.r.maxDepth() {
		return spawnError("cannot start %s: the tree of sub-agents is already %d deep (%s), the limit is %d. "+
			"An agent that keeps spawning itself through others is a cycle; answer with what you have instead.",
			name, len(path)-1, strings.Join(append(path, name), " > "), rs.r.maxDepth())
	}
	return nil
}

// callTag marks the child a call spawned: the parent's id and the call's, so that one indexed
// lookup finds it (call ids repeat across threads; some providers number them per turn).
func callTag(parentID, callID string) string { return "call:" + parentID + "/" + callID }

// childFor returns the child a call spawned, found by its call tag, or nil.
func childFor(ctx context.Context, th *thread.Thread, callID string) (*thread.Thread, error) {
	if callID == "" {
		return nil, nil
	}
	found, _, err := th.Store().Threads(ctx, th.WorkspaceID(), store.ThreadFilter{Tag: callTag(th.ID(), callID), Limit: 1})
	if err != nil || len(found) == 0 || found[0].ParentID != th.ID() {
		return nil, err
	}
	return thread.Open(ctx, th.Store(), th.WorkspaceID(), found[0].ID)
}

// spawnChild creates the child thread of a nested call with its spawn record; the caller has
// looked for the one the call may have spawned before a crash (childFor).
func (rs *run) spawnChild(ctx context.Context, parent *thread.Thread, t target, callID, name string, extraTags ...string) (*thread.Thread, bool, error) {
	path, ceiling := rs.spawnInfo()
	sp := &Spawn{Agent: t.agent.Name, Prompt: t.prompt, Call: callID, Path: append(path, t.agent.Name), Ceiling: &ceiling,
		Communication: Implicit}
	resumable := t.resumable != nil
	if resumable {
		sp.Communication, sp.Receives = t.resumable.communication(), t.resumable.receives()
	}
	state, err := json.Marshal(ThreadState{Spawn: sp})
	if err != nil {
		return nil, false, err
	}
	tags := slices.Clone(extraTags)
	if callID != "" {
		tags = append(tags, callTag(parent.ID(), callID))
	}
	if t.prompt {
		tags = append(tags, "prompt:"+t.agent.Name)
	}
	info := &store.Thread{WorkspaceID: parent.WorkspaceID(), AgentID: t.agent.Name, UserID: parent.UserID(), ParentID: parent.ID(),
		Tags: tags, Blocking: t.prompt || t.sub.blocking(), Resumable: resumable, Status: store.StatusIdle, State: state}
	if name != "" {
		info.Tags = append(info.Tags, "name:"+name)
	}
	if err := parent.Store().CreateThread(ctx, info); err != nil {
		return nil, false, err
	}
	rs.spawned++
	child, err := thread.Open(ctx, parent.Store(), parent.WorkspaceID(), info.ID)
	if err != nil {
		return nil, false, err
	}
	rs.r.events.emit(Event{Type: EventChildStarted, ThreadID: parent.ID(), Child: &ChildEvent{Ref: child.ID(), Name: name,
		Agent: t.agent.Name, Parent: parent.ID()}})
	return child, true, nil
}

// handOver copies the caller's files into the child and returns the message with the paths
// rewritten to the child's.
func handOver(ctx context.Context, parent, child *thread.Thread, message string, paths []string) (string, error) {
	if len(paths) == 0 {
		return message, nil
	}
	atts := make([]quiver.Attachment, len(paths))
	for i, p := range paths {
		atts[i] = quiver.Attachment{Path: p}
	}
	copied, err := child.Files().CopyAttachments(ctx, parent, atts)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(message)
	b.WriteString("\n\nAttachments:")
	for _, a := range copied {
		fmt.Fprintf(&b, "\n- %s (%s, %d bytes)", a.Path, a.MimeType, a.Size)
	}
	return b.String(), nil
}

// startChild gives the child its first message, once: a child found again (a call dispatched
// again after a crash) may have it already; a fresh one has not.
func startChild(ctx context.Context, parent, child *thread.Thread, message string, paths []string, fresh bool) error {
	if !fresh {
		hist, err := child.Messages(ctx, store.Page{Limit: 1})
		if err != nil || len(hist) > 0 {
			return err
		}
	}
	text, err := handOver(ctx, parent, child, message, paths)
	if err != nil {
		return err
	}
	_, err = child.AppendUser(ctx, text)
	return err
}

// runNested is the handler of a prompt tool and of a sub-agent tool.
func (r *Runner) runNested(ctx context.Context, t target, args json.RawMessage) (any, error) {
	rs, parent := runFrom(ctx), threadFrom(ctx)
	if rs == nil || parent == nil {
		return nil, quiver.Fail(quiver.CodeRejected, "%s runs only inside an agent run on a thread", t.agent.Name)
	}
	call := quiver.CallFrom(ctx)
	var cc childCall
	var err error
	if t.prompt {
		cc, err = readArgs(args, t.shaping.InitUserMessageProperty, t.shaping.InitAttachmentsProperty, "", t.agent.Prompt.Args != nil)
	} else {
		cc, err = readArgs(args, t.sub.InitUserMessageProperty, t.sub.InitAttachmentsProperty, t.sub.InitAgentNameProperty, t.agent.Prompt.Args != nil)
	}
	if err != nil {
		return quiver.Errorf(quiver.CodeInvalidArguments, "%v", err), nil
	}
	if err := checkAttachments(ctx, parent, cc.attachments); err != nil {
		return quiver.Errorf(quiver.CodeInvalidArguments, "%v", err), nil
	}
	if cc.name != "" && (strings.TrimSpace(cc.name) != cc.name || len(cc.name) > store.MaxNameLen) {
		return quiver.Errorf(quiver.CodeInvalidArguments, "%s %q: a name has no surrounding spaces and at most %d bytes",
			t.sub.InitAgentNameProperty, cc.name, store.MaxNameLen), nil
	}
	child, err := childFor(ctx, parent, call.ID)
	if err != nil {
		return nil, err
	}
	fresh := child == nil
	if fresh {
		if res := rs.checkSpawn(t.agent.Name); res != nil {
			return res, nil
		}
		if child, _, err = rs.spawnChild(ctx, parent, t, call.ID, cc.name); err != nil {
			return nil, err
		}
	}
	if err := startChild(ctx, parent, child, cc.message, cc.attachments, fresh); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return quiver.Errorf(quiver.CodeInvalidArguments, "attachments: %v", err), nil
		}
		return nil, err
	}
	if !t.prompt && !t.sub.blocking() {
		if err := r.runInBackground(ctx, child, t.agent); err != nil {
			return nil, err
		}
		return reference(child, t.agent.Name, cc.name, "running"), nil
	}
	return r.runBlocking(ctx, parent, child, t)
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

// runBlocking runs the child to its end (or pause) and makes the call's result of it.
func (r *Runner) runBlocking(ctx context.Context, parent, child *thread.Thread, t target) (*quiver.Result, error) {
	before, err := lastSeq(ctx, child)
	if err != nil {
		return nil, err
	}
	var out *Outcome
	var crs *run
	info, err := child.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	if info.Status == store.StatusTerminated {
		// The child finished before a crash kept its result from being recorded: its
		// answer is in its history, not to be asked for again.
		out, crs, before = ReadState(&info).Outcome, &run{r: r, th: child}, 0
		if out == nil {
			return quiver.Errorf(quiver.CodeToolError, "sub-agent %s (%s) ended without an answer", t.agent.Name, child.ID()), nil
		}
		if crs.hist, err = child.History(ctx); err != nil {
			return nil, err
		}
	} else {
		out, crs, err = r.runChild(ctx, child, t.agent)
	}
	if errors.Is(err, ErrBusy) {
		return quiver.Errorf(quiver.CodeRejected, "sub-agent %s (%s) is busy with another run in this process; try the call again later", t.agent.Name, child.ID()), nil
	}
	if err != nil {
		return nil, err
	}
	if out.Status == RunPaused {
		return &quiver.Result{Status: quiver.StatusSuccess, Text: fmt.Sprintf("%s (%s) is waiting for %s on its call %s to %s. Its result "+
			"will arrive as a message once it has finished.", t.agent.Name, child.ID(), pauseWhat(out.Pending), out.Pending.Call.ID,
			out.Pending.Call.Name)}, nil
	}
	r.events.emit(Event{Type: EventChildFinished, ThreadID: parent.ID(), Child: &ChildEvent{Ref: child.ID(), Name: child.Name(),
		Agent: t.agent.Name, Parent: parent.ID(), Status: string(out.Status), Text: out.Text}})
	atts, err := crs.attachmentsAfter(ctx, parent, before)
	if err != nil {
		return nil, err
	}
	res := shapeResult(t, out, crs.hist, before)
	res.Attachments = atts
	return res, nil
}

// busyWait bounds how long a blocking call waits for a child another run has (a wake taking a
// grandchild's result, on another node).
const busyWait = 30 * time.Second

// runChild runs a blocking call's child, waiting while another run has it.
func (r *Runner) runChild(ctx context.Context, child *thread.Thread, a *Agent) (*Outcome, *run, error) {
	deadline := time.Now().Add(busyWait)
	for {
		out, crs, err := r.runThread(ctx, child, a, "", false)
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			return out, crs, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func pauseWhat(p *Pending) string {
	if p != nil && p.Reason == ReasonClientTool {
		return "a client's result"
	}
	return "a person's decision"
}

func lastSeq(ctx context.Context, th *thread.Thread) (int64, error) {
	page, err := th.Messages(ctx, store.Page{Limit: 1})
	if err != nil || len(page) == 0 {
		return 0, err
	}
	return page[0].Seq, nil
}

// shapeResult is a finished child's result: for a sub-agent its answer, for a prompt tool
// its answer joined with a summary of the calls the flow made (Q3), as configured.
func shapeResult(t target, out *Outcome, hist []*store.Message, after int64) *quiver.Result {
	answer := out.Text
	if len(out.Output) > 0 {
		answer = string(out.Output)
	}
	if !t.prompt {
		res := &quiver.Result{Status: quiver.StatusSuccess, Text: answer}
		if len(out.Output) > 0 {
			res.Value = out.Output
		}
		return res
	}
	var summary, failures []string
	for _, m := range hist {
		if m.Seq <= after || m.Role != store.RoleTool || m.Result == nil {
			continue
		}
		line := fmt.Sprintf("- %s: %s", m.ToolName, oneLine(m.Content, 200))
		if quiver.Status(m.Result.Status) == quiver.StatusError {
			failures = append(failures, fmt.Sprintf("- %s failed: %s", m.ToolName, oneLine(m.Result.Error, 300)))
			line = fmt.Sprintf("- %s (error): %s", m.ToolName, oneLine(m.Result.Error, 200))
		}
		summary = append(summary, line)
	}
	var parts []string
	if on(t.shaping.IncludeTextResponse) && answer != "" {
		parts = append(parts, answer)
	}
	if on(t.shaping.IncludeToolCalls) && len(summary) > 0 {
		parts = append(parts, "Tool calls:\n"+strings.Join(summary, "\n"))
	}
	text := strings.Join(parts, "\n\n")
	if on(t.shaping.IncludeErrors) && len(failures) > 0 {
		return &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeToolError,
			Error: fmt.Sprintf("prompt %s: %d nested call(s) failed:\n%s\n\n%s", t.agent.Name, len(failures), strings.Join(failures, "\n"), text)}
	}
	return &quiver.Result{Status: quiver.StatusSuccess, Text: text}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// attachmentsAfter copies the files the run's results attached after seq into dst and
// returns them as references there (R7): every path a thread receives is its own.
func (rs *run) attachmentsAfter(ctx context.Context, dst *thread.Thread, after int64) ([]quiver.Attachment, error) {
	var refs []quiver.Attachment
	for _, m := range rs.hist {
		if m.Seq <= after || m.Role != store.RoleTool || m.Result == nil || len(m.Result.Attachments) == 0 {
			continue
		}
		var atts []quiver.Attachment
		if json.Unmarshal(m.Result.Attachments, &atts) != nil {
			continue
		}
		for _, a := range atts {
			if a.IsRef() && a.Path != "" {
				refs = append(refs, quiver.Attachment{Path: a.Path, Description: a.Description})
			}
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	return dst.Files().CopyAttachments(ctx, rs.th, refs)
}

func threadFrom(ctx context.Context) *thread.Thread {
	th, _ := thread.FromContext(ctx)
	return th
}

// runInBackground starts a run of th by a: on the runner's Background when set (durable),
// else on a goroutine of this process (see Runner.Wait).
func (r *Runner) runInBackground(ctx context.Context, th *thread.Thread, a *Agent) error {
	if r.Background != nil {
		return r.Background.Run(ctx, th.WorkspaceID(), th.ID(), a.Name)
	}
	r.goRun(ctx, th, a, false)
	return nil
}

// goRun runs th by a on a goroutine Wait waits for, after the run going on it in this process,
// if any (ErrBusy: it tries again every 10 ms); onlyQueued runs it only while it has queued
// messages (a wake).
func (r *Runner) goRun(ctx context.Context, th *thread.Thread, a *Agent, onlyQueued bool) {
	r.goBackground(ctx, func(ctx context.Context) {
		for {
			if onlyQueued {
				q, err := th.Queued(ctx)
				if err != nil || len(q) == 0 {
					return
				}
			}
			_, _, err := r.runThread(ctx, th, a, "", true)
			if !errors.Is(err, ErrBusy) {
				if err != nil {
					r.logger().Warn("agent: a run in the background failed", "thread", th.ID(), "agent", a.Name, "err", err)
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
}

// goBackground runs fn on a goroutine that Wait waits for, with ctx's values but not its end.
func (r *Runner) goBackground(ctx context.Context, fn func(context.Context)) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		fn(context.WithoutCancel(ctx))
	}()
}

// Wait waits for the work this runner started on its own goroutines (non-blocking children and
// the runs of parents taking their results, when the runner has no Background) to end.
func (r *Runner) Wait() { r.bg.Wait() }

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// deliver queues a child's result, or its failure, to its parent (implicit communication), once:
// the message's id is derived from the child's last message, so a run tried again after a crash
// finds it taken. Then the parent is woken to take it.
func (r *Runner) deliver(ctx context.Context, rs *run, out *Outcome, runErr error) {
	sp := rs.spawn
	if sp == nil || sp.Communication == Explicit || (out != nil && out.Status == RunPaused) {
		return
	}
	child := rs.th
	parent, err := child.Parent(ctx)
	if err != nil {
		r.logger().Warn("agent: a child's result has no parent to go to", "thread", child.ID(), "err", err)
		return
	}
	var text string
	var seq int64
	if len(rs.hist) > 0 {
		seq = rs.hist[len(rs.hist)-1].Seq
	}
	label := fmt.Sprintf("sub-agent %s%s (ref %s)", sp.Agent, nameSuffix(child.Name()), child.ID())
	if runErr != nil {
		// The cause may name what no model should read (a database's address): its kind
		// only; the log has the rest.
		text = fmt.Sprintf("[%s failed] its run stopped with an error (%s) and will not answer; the server's log has the details",
			label, errorType(runErr))
		r.logger().Warn("agent: a child's run failed for good; its parent is told", "thread", child.ID(), "parent", parent.ID(), "err", runErr)
	} else {
		answer := out.Text
		if len(out.Output) > 0 {
			answer = string(out.Output)
		}
		text = fmt.Sprintf("[%s finished]\n%s", label, answer)
		if atts, err := rs.attachmentsAfter(ctx, parent, rs.startSeq); err == nil && len(atts) > 0 {
			text += "\n\nAttachments:"
			for _, a := range atts {
				text += fmt.Sprintf("\n- %s (%s, %d bytes)", a.Path, a.MimeType, a.Size)
			}
		} else if err != nil {
			text += fmt.Sprintf("\n\n(its attachments could not be copied: %v)", err)
		}
	}
	id := fmt.Sprintf("msg_dlv_%s_%d", strings.TrimPrefix(child.ID(), "thr_"), seq)
	if runErr != nil {
		id += "_failed"
	}
	err = parent.Queue(ctx, &store.Message{ID: id, Role: store.RoleSystem, Content: text})
	if errors.Is(err, store.ErrIDTaken) {
		// Delivered by an earlier try, which may have died before it woke the parent: wake it
		// again (a wake that finds nothing queued ends at once), or the result stays queued
		// on a parent that has finished.
		r.wake(ctx, parent)
		return
	}
	if err != nil {
		r.logger().Warn("agent: queueing a child's result to its parent", "thread", child.ID(), "parent", parent.ID(), "err", err)
		return
	}
	status := "finished"
	if runErr != nil {
		status = "failed"
	}
	r.events.emit(Event{Type: EventChildFinished, ThreadID: parent.ID(), Child: &ChildEvent{Ref: child.ID(), Name: child.Name(),
		Agent: sp.Agent, Parent: parent.ID(), Status: status, Text: text}})
	r.wake(ctx, parent)
}

// wake has a thread take its queued messages: on Background, or on a goroutine that waits for
// the run going on it, if any, to end.
func (r *Runner) wake(ctx context.Context, th *thread.Thread) {
	info, err := th.Refresh(ctx)
	if err != nil {
		r.logger().Warn("agent: waking a thread", "thread", th.ID(), "err", err)
		return
	}
	name := CurrentAgent(&info)
	if r.Background != nil {
		if err := r.Background.Wake(ctx, th.WorkspaceID(), th.ID(), name); err != nil {
			r.logger().Warn("agent: waking a thread", "thread", th.ID(), "err", err)
		}
		return
	}
	a, ok := r.Catalog.Lookup(name)
	if !ok {
		r.logger().Warn("agent: a thread has queued messages but its agent is unknown to the runner's catalog", "thread", th.ID(), "agent", name)
		return
	}
	r.goRun(ctx, th, a, true)
}

// NotifyParent queues text to the parent of the thread a tool runs on, and wakes it: how a
// child whose parent communication is explicit reports back (A4). It is the runtime function
// tools call; outside a child thread it fails.
func NotifyParent(ctx context.Context, text string) error {
	rs, th := runFrom(ctx), threadFrom(ctx)
	if rs == nil || th == nil || th.ParentID() == "" {
		return errors.New("agent: NotifyParent: the call does not run on a child thread")
	}
	if strings.TrimSpace(text) == "" || len(text) > maxMessageChars {
		return fmt.Errorf("agent: NotifyParent: the text must be 1 to %d bytes, got %d", maxMessageChars, len(text))
	}
	parent, err := th.Parent(ctx)
	if err != nil {
		return err
	}
	name := th.Name()
	label := fmt.Sprintf("sub-agent %s%s (ref %s)", CurrentAgent(ptr(th.Info())), nameSuffix(name), th.ID())
	msg := &store.Message{Role: store.RoleSystem, Content: fmt.Sprintf("[%s says]\n%s", label, text)}
	if call := quiver.CallFrom(ctx); call != nil && call.ID != "" {
		// Once per call and text: a call dispatched again after a crash (its result not
		// recorded) says it again, and finds it said.
		sum := sha256.Sum256([]byte(text))
		msg.ID = fmt.Sprintf("msg_ntf_%s_%s_%x", strings.TrimPrefix(th.ID(), "thr_"), call.ID, sum[:8])
	}
	if err := parent.Queue(ctx, msg); err != nil && !errors.Is(err, store.ErrIDTaken) {
		return err
	}
	rs.r.wake(ctx, parent)
	return nil
}
