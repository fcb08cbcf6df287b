package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/jsonvalue"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// Threads and the runs of agents on them, in the background: start a run, decide on a call
// that waits for a person, answer a client tool's call. Each needs the background runs
// (StartJobs).

// NewThread is a thread to create.
type NewThread struct {
	Agent     string   // the agent it is for, whose required variables must resolve; "" for none
	Tags      []string // none may be one the runtime sets (agent.ReservedTag)
	Instances []string // each gets a state object of its own
	// Variables are values set on the thread as it is created, which count towards the
	// agent's required variables: each is a secret (sealed) when a declaration says so.
	Variables map[string]string
}

// Run is a run queued on a thread: its background job.
type Run struct {
	ThreadID string
	JobID    int64
}

// NewDecision is a decision on a call that waits for a person's confirmation.
type NewDecision struct {
	Agent   string // the agent whose run waits; "" for the agent that has the thread
	CallID  string
	Action  quiver.DecisionAction
	Args    json.RawMessage // edited arguments (edit only), checked as the dispatcher will
	Message string          // told to the model (deny)
}

// NewResult is the answer to a client tool's call.
type NewResult struct {
	Agent  string // as NewDecision's
	CallID string
	Result quiver.Result
}

// OpenThread creates a thread in the actor's workspace (a member's or admin's), for an agent
// when one is named: refused when one of the agent's required variables has no value.
func (p *Platform) OpenThread(ctx context.Context, a Actor, in NewThread) (*store.Thread, error) {
	if err := a.mayChange("read threads but not create them"); err != nil {
		return nil, err
	}
	for i, tag := range in.Tags {
		if agent.ReservedTag(tag) {
			return nil, &Error{Kind: Invalid, Field: fmt.Sprintf("tags[%d]", i), Detail: "tag " + strconv.Quote(tag) + " is one the runtime sets on the threads it spawns",
				Message: "a tag not starting with " + strings.Join(agent.ReservedTagPrefixes, ", ")}
		}
	}
	for i, name := range in.Instances {
		if err := store.CheckInstance(name); err != nil || slices.Contains(in.Instances[:i], name) {
			return nil, &Error{Kind: Invalid, Field: fmt.Sprintf("instances[%d]", i), Detail: "instance " + strconv.Quote(name) + " cannot be given to the thread",
				Message: "a name of 1 to 64 characters of [A-Za-z0-9_-], once"}
		}
	}
	th := &store.Thread{WorkspaceID: a.WorkspaceID, UserID: a.UserID, AgentID: in.Agent, Tags: in.Tags}
	var ag *agent.Agent
	if in.Agent != "" {
		if !p.HasAgents() && p.Jobs() == nil {
			return nil, &Error{Kind: Invalid, Field: "agent", Detail: "this server runs no agents (quiver serve --agents DIR)", Message: "leave it out: this server has no agents"}
		}
		var err error
		if ag, err = p.Agent(ctx, in.Agent); err != nil {
			return nil, &Error{Kind: Invalid, Field: "agent", Detail: err.Error(), Message: "an agent this server runs"}
		}
	}
	if len(in.Variables) > 0 && ag == nil {
		return nil, &Error{Kind: Invalid, Field: "variables", Detail: "variables are given for a thread of no agent, which requires none",
			Message: "leave them out, or name the agent the thread is for"}
	}
	if err := checkThreadValues(in.Variables); err != nil {
		return nil, err
	}
	if err := p.CreateThread(ctx, th, ag, threadValues(in.Variables)...); err != nil {
		var missing *quiver.MissingVariablesError
		switch {
		case errors.As(err, &missing):
			return nil, missingVariables("the thread cannot be created", missing)
		case errors.Is(err, store.ErrInvalid):
			return nil, &Error{Kind: Invalid, Message: "the thread cannot be created: " + err.Error(), Cause: err}
		}
		return nil, storeError(err, "a thread", "")
	}
	if len(in.Instances) > 0 {
		if err := p.cfg.Store.AddInstances(ctx, th.WorkspaceID, th.ID, in.Instances...); err != nil {
			return nil, storeError(err, "the instances of thread "+th.ID, "")
		}
	}
	return th, nil
}

// jobs are the background runs, or Unavailable without them.
func (p *Platform) runs() (*jobs.Jobs, error) {
	j := p.Jobs()
	if j == nil {
		return nil, &Error{Kind: Unavailable, Message: "this server runs no agents"}
	}
	return j, nil
}

// StartRun queues a run of the agent on the thread, with message (none: the run resumes the
// thread, which must have messages).
func (p *Platform) StartRun(ctx context.Context, a Actor, threadID, agentName, message string) (*Run, error) {
	if err := a.mayChange("read threads but not run agents"); err != nil {
		return nil, err
	}
	j, err := p.runs()
	if err != nil {
		return nil, err
	}
	info, err := p.cfg.Store.Thread(ctx, a.WorkspaceID, threadID)
	if err != nil {
		return nil, storeError(err, "thread "+threadID, "")
	}
	if message == "" {
		msgs, err := p.cfg.Store.Messages(ctx, a.WorkspaceID, threadID, store.Page{Limit: 1})
		if err != nil {
			return nil, storeError(err, "the messages of thread "+threadID, "")
		}
		if len(msgs) == 0 {
			return nil, &Error{Kind: Invalid, Field: "message", Detail: "thread " + threadID + " has no messages: a run needs one to answer",
				Message: "required on a thread without messages"}
		}
	}
	ag, err := p.Agent(ctx, agentName)
	if err != nil {
		return nil, &Error{Kind: Invalid, Field: "agent", Detail: err.Error(), Message: "an agent this server runs"}
	}
	if err := p.checkFirstRun(ctx, info, ag); err != nil {
		return nil, err
	}
	id, err := j.Start(ctx, jobs.RunArgs{WorkspaceID: a.WorkspaceID, ThreadID: threadID, Agent: agentName, Message: message, Caller: a.runCaller(p.Workspace(ctx, a.WorkspaceID))})
	if errors.Is(err, jobs.ErrRunQueued) {
		return nil, &Error{Kind: RunQueued, Message: "thread " + threadID + " has a run queued or running; wait for it to end (the thread's events say when)", Cause: err}
	}
	if err != nil {
		return nil, storeError(err, "a run", "")
	}
	return &Run{ThreadID: threadID, JobID: id}, nil
}

// ThreadAgent opens the workspace's thread and the agent that runs it: name, or the agent that
// has the thread when name is "" (after a handoff, the one it was handed to; nil when none).
func (p *Platform) ThreadAgent(ctx context.Context, a Actor, threadID, name string) (*thread.Thread, *agent.Agent, error) {
	th, err := thread.Open(ctx, p.cfg.Store, a.WorkspaceID, threadID)
	if err != nil {
		return nil, nil, storeError(err, "thread "+threadID, "")
	}
	if name == "" {
		info := th.Info()
		name = agent.CurrentAgent(&info)
	}
	if name == "" {
		return th, nil, nil
	}
	ag, err := p.Agent(ctx, name)
	if err != nil {
		return nil, nil, &Error{Kind: Invalid, Field: "agent", Detail: err.Error(), Message: "an agent this server runs"}
	}
	return th, ag, nil
}

// Decide records a decision on a call that waits for a person, then queues the run again.
// Edited arguments are checked as the dispatcher will check them, so that a person fixes them
// now, field by field, rather than the model meeting an invalid_arguments result later.
func (p *Platform) Decide(ctx context.Context, a Actor, threadID string, in NewDecision) (*Run, error) {
	if err := a.mayChange("read threads but not decide on calls"); err != nil {
		return nil, err
	}
	th, ag, err := p.ThreadAgent(ctx, a, threadID, in.Agent)
	if err != nil {
		return nil, err
	}
	if in.Action == quiver.Edit {
		if w, err := p.runner.Waiting(ctx, th, ag); err == nil && w != nil && w.Call.ID == in.CallID {
			if tool, ok := p.Workspace(ctx, a.WorkspaceID).Registry().Lookup(w.Call.Name); ok {
				if _, err := CheckArgs(tool, in.Args); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := p.watch(ctx, a, threadID, agentName(ag, in.Agent)); err != nil {
		return nil, err
	}
	d := quiver.Decision{Action: in.Action, Args: in.Args, Message: in.Message, UserID: a.UserID, KeyID: a.KeyID,
		AccessToken: a.token()}
	switch err := p.runner.Decide(ctx, th, ag, in.CallID, d); {
	case errors.Is(err, agent.ErrNotPending), errors.Is(err, store.ErrDecided):
		if same, at := p.sameDecision(ctx, a, threadID, in); same {
			if run := p.requeueAnswered(ctx, a, threadID, agentName(ag, in.Agent), in.CallID, at); run != nil {
				return run, nil
			}
		}
		return nil, &Error{Kind: NotPending, Field: "call_id", Detail: err.Error(), Message: "a call the thread waits on for a decision, not yet decided", Cause: err}
	case errors.Is(err, store.ErrInvalid):
		return nil, &Error{Kind: Invalid, Message: err.Error(), Cause: err}
	case err != nil:
		return nil, storeError(err, "the decision", "")
	}
	return p.resume(ctx, a, threadID, agentName(ag, in.Agent), "the decision is recorded, but ")
}

// SubmitResult records the answer to a client tool's call, once, then queues the run again.
func (p *Platform) SubmitResult(ctx context.Context, a Actor, threadID string, in NewResult) (*Run, error) {
	if err := a.mayChange("read threads but not answer calls"); err != nil {
		return nil, err
	}
	th, ag, err := p.ThreadAgent(ctx, a, threadID, in.Agent)
	if err != nil {
		return nil, err
	}
	res := in.Result
	if len(res.Value) > 0 && !json.Valid(res.Value) {
		return nil, &Error{Kind: Invalid, Field: "value", Detail: "the result's value is not JSON", Message: "any JSON value"}
	}
	if res.Status == quiver.StatusError && res.Error == "" {
		return nil, &Error{Kind: Invalid, Field: "error", Detail: "an error result says what went wrong", Message: "required when status is error"}
	}
	if err := p.watch(ctx, a, threadID, agentName(ag, in.Agent)); err != nil {
		return nil, err
	}
	switch err := p.runner.SubmitResult(ctx, th, ag, in.CallID, &res); {
	case errors.Is(err, agent.ErrNotPending), errors.Is(err, store.ErrExists), errors.Is(err, store.ErrConflict):
		if same, at := p.sameResult(ctx, a, threadID, in); same {
			if run := p.requeueAnswered(ctx, a, threadID, agentName(ag, in.Agent), in.CallID, at); run != nil {
				return run, nil
			}
		}
		return nil, &Error{Kind: NotPending, Field: "call_id", Detail: err.Error(), Message: "a client tool's call the thread waits on", Cause: err}
	case err != nil:
		return nil, storeError(err, "the result", "")
	}
	return p.resume(ctx, a, threadID, agentName(ag, in.Agent), "the result is recorded, but ")
}

// resume queues the run of the thread again after a decision or a result; recorded begins
// the words of a refusal, since what came before it stays recorded.
func (p *Platform) resume(ctx context.Context, a Actor, threadID, agentName, recorded string) (*Run, error) {
	j, err := p.runs()
	if err != nil {
		return nil, err
	}
	id, err := j.Continue(ctx, jobs.RunArgs{WorkspaceID: a.WorkspaceID, ThreadID: threadID, Agent: agentName})
	if errors.Is(err, jobs.ErrRunQueued) {
		return nil, &Error{Kind: RunQueued, Message: recorded + err.Error(), Cause: err}
	}
	if err != nil {
		return nil, storeError(err, "the resumed run", "")
	}
	return &Run{ThreadID: threadID, JobID: id}, nil
}

// watch queues, before an answer is recorded, the watch that runs the thread answerWatch later
// if the process dies before it queues the run that acts on the answer (jobs.Watch).
func (p *Platform) watch(ctx context.Context, a Actor, threadID, agentName string) error {
	j := p.Jobs()
	if j == nil {
		return nil // no run to watch for: resume says so once the answer is recorded
	}
	if _, err := j.Watch(ctx, jobs.RunArgs{WorkspaceID: a.WorkspaceID, ThreadID: threadID, Agent: agentName}, answerWatch); err != nil {
		return storeError(err, "the answer", "")
	}
	return nil
}

// answerWatch is how long after an answer its watch looks for a run left paused: long after
// the answer's own run was queued, as a rule (a watch that comes first queues that run
// itself, which is as safe), and within the fleet's failover time.
const answerWatch = 5 * time.Second

// requeueAnswered resumes a run that a crash left paused: recording an answer and queueing
// the run again are two steps, and a node that dies (or a database that restarts) between
// them leaves the answer stored and the thread paused with no run to go on. The same answer
// sent again (the caller checked that it matches the stored one), at least answerSettle after
// it was recorded,
// to a thread still paused on that call with no run queued or going on, queues the run now;
// nil otherwise, and the caller refuses the answer as any second answer is (a client that
// answers twice at once, or right after its first answer, is told so as before).
func (p *Platform) requeueAnswered(ctx context.Context, a Actor, threadID, agentName, callID string, answeredAt time.Time) *Run {
	if stamp.Now(ctx).Sub(answeredAt) < answerSettle {
		return nil
	}
	t, err := p.cfg.Store.Thread(ctx, a.WorkspaceID, threadID)
	if err != nil {
		return nil
	}
	st := agent.ReadState(t)
	if t.Status == store.StatusRunning || st.Outcome == nil || st.Outcome.Status != agent.RunPaused ||
		st.Outcome.Pending == nil || st.Outcome.Pending.Call.ID != callID {
		return nil
	}
	j, err := p.runs()
	if err != nil {
		return nil
	}
	// Start, not Continue: a run queued or going on means nothing is stuck.
	id, err := j.Start(ctx, jobs.RunArgs{WorkspaceID: a.WorkspaceID, ThreadID: threadID, Agent: agentName})
	if err != nil {
		return nil
	}
	p.logger.WarnContext(ctx, "platform: a run left paused with its answer recorded is queued again", "thread", threadID, "call", callID)
	return &Run{ThreadID: threadID, JobID: id}
}

// answerSettle is how long after an answer was recorded the same answer again may resume a
// run left paused: by then the first answer's own queueing has long happened, if it was to.
const answerSettle = time.Second

// sameDecision reports whether in is the decision stored on its call, and when that was made.
func (p *Platform) sameDecision(ctx context.Context, a Actor, threadID string, in NewDecision) (bool, time.Time) {
	ds, err := p.cfg.Store.Decisions(ctx, a.WorkspaceID, threadID)
	if err != nil {
		return false, time.Time{}
	}
	for _, d := range ds {
		if d.CallID == in.CallID {
			return string(d.Action) == string(in.Action) && d.Message == in.Message && jsonvalue.Equal(d.Args, in.Args), d.DecidedAt
		}
	}
	return false, time.Time{}
}

// sameResult reports whether in is the result stored for its call, among the thread's last
// messages (a paused thread's result is among them), and when it was stored.
func (p *Platform) sameResult(ctx context.Context, a Actor, threadID string, in NewResult) (bool, time.Time) {
	msgs, err := p.cfg.Store.Messages(ctx, a.WorkspaceID, threadID, store.Page{Limit: 100})
	if err != nil {
		return false, time.Time{}
	}
	for _, m := range msgs {
		if m.Role != store.RoleTool || m.ToolCallID != in.CallID || m.Result == nil {
			continue
		}
		r := in.Result
		return m.Result.Status == string(r.Status) && m.Result.Text == r.Text && m.Result.Error == r.Error && jsonvalue.Equal(m.Result.Value, r.Value), m.CreatedAt
	}
	return false, time.Time{}
}

func agentName(a *agent.Agent, asked string) string {
	if a != nil {
		return a.Name
	}
	return asked
}
