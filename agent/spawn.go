package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

func (r *Runner) maxDepth() int {
	if r.MaxDepth > 0 {
		return r.MaxDepth
	}
	return DefaultMaxDepth
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
		Communication: Implicit, Caller: rs.caller}
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
		fmt.Fprintf(&b, "\n- %s (%s, %s, %d bytes)", a.Path, a.Name, a.MimeType, a.Size)
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
