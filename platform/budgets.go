package platform

import (
	"context"

	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/store"
)

// A run whose caller's budget of model tokens or cost is reached stops before its next model
// request, paused (agent.ReasonBudgetExhausted), and goes on by itself when the budget has room
// again (the runner's Background schedules it: agent.Scheduler). An admin who raises the limits
// need not wait for that: every run of the workspace paused for its budget is asked to go on
// when the limits change, and checks its budget again (one still reached pauses again).

// maxBudgetResumes bounds the runs one change of the limits asks to go on: past it, the rest
// go on at their own time, and the log says so.
const maxBudgetResumes = 10_000

// budgetResumeDelay is how long after a change of the limits the paused runs go on: every node
// has the new limits by then (each asks the store within recheck), whichever takes the run.
const budgetResumeDelay = 2 * recheck

// resumeBudgets asks every run of the workspace paused for its budget to go on, once the
// limits have changed.
func (p *Platform) resumeBudgets(ctx context.Context, workspaceID string) {
	s, ok := p.runner.Background.(agent.Scheduler)
	if !ok {
		return
	}
	ctx = context.WithoutCancel(ctx)
	at := p.now().Add(budgetResumeDelay)
	f := store.ThreadFilter{Tag: agent.BudgetTag, Status: store.StatusIdle, Limit: store.MaxThreadPage}
	for n := 0; ; {
		threads, next, err := p.cfg.Store.Threads(ctx, workspaceID, f)
		if err != nil {
			p.logger.WarnContext(ctx, "platform: the runs paused for their budget could not be listed; they go on at their own time",
				"workspace", workspaceID, "err", err)
			return
		}
		for _, t := range threads {
			if err := s.RunAt(ctx, workspaceID, t.ID, agent.CurrentAgent(t), at); err != nil {
				p.logger.WarnContext(ctx, "platform: a run paused for its budget could not be asked to go on", "thread", t.ID, "err", err)
			}
		}
		if n += len(threads); next == "" {
			return
		}
		if n >= maxBudgetResumes {
			p.logger.WarnContext(ctx, "platform: more runs are paused for their budget than one change of the limits resumes; the rest go on at their own time",
				"workspace", workspaceID, "resumed", n)
			return
		}
		f.Cursor = next
	}
}
