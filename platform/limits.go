package platform

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/internal/ids"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/platform/limits"
	"github.com/quiverhq/quiver/store"
)

// A workspace's limits say how often its callers may call which tools, and how many calls may
// run at once (see package limits). They are stored as a versioned document, part of the
// workspace's tools (a change changes its ToolsStamp, so every node follows within a
// recheck), compiled when loaded with the tools, and counted at every call by the workspace's
// dispatcher (quiver.Dispatcher.Admit) for the call's actor: every door counts alike. The
// counts are the platform's Meter's: in this process over a database one process serves,
// exactly; in the database over one a fleet shares (store.LimitWindows), a few calls at a
// time.

// Limits is a workspace's limits document as a door shows it.
type Limits struct {
	Document limits.Document
	// Version counts the changes (0: never set); UpdatedBy and UpdatedAt are the last one's.
	Version   int64
	UpdatedBy string
	UpdatedAt time.Time
}

// limitsOf returns the compiled limits of workspace w now; nil: none.
func (w *Workspace) limitsOf() *limits.Set { return w.limits.Load() }

// loadLimits reads and compiles the workspace's document. One that no longer compiles (stored
// by another version, say) keeps the limits the workspace had, and the log says why: calls go
// on, counted as before, until an admin sets the document again.
func (p *Platform) loadLimits(ctx context.Context, w *Workspace) (*limits.Set, error) {
	l, err := p.cfg.Store.WorkspaceLimits(ctx, w.id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && l.Version == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	doc, derr := limits.Decode(l.Document)
	if derr == nil {
		set, cerr := limits.Compile(doc)
		if cerr == nil {
			return set, nil
		}
		derr = cerr
	}
	p.logger.ErrorContext(ctx, "platform: a workspace's limits cannot be read; the limits it had still count until an admin sets them again",
		"workspace", w.id, "version", l.Version, "err", derr)
	return w.limitsOf(), nil
}

// newMeter is the platform's meter: in the database when the store is one a fleet shares.
func newMeter(st store.Backend, now func() time.Time) *limits.Meter {
	m := &limits.Meter{Now: now}
	if lw, ok := st.(store.LimitWindows); ok {
		m.Windows, m.Batch = storeWindows{lw}, true
		if lc, ok := st.(store.LimitCounts); ok {
			m.Windows = countedWindows{storeWindows{lw}, lc}
		}
	}
	if lh, ok := st.(store.LimitHolds); ok {
		m.Holds = storeHolds{lh, ids.Random(12)}
	}
	return m
}

// storeWindows are a store's limit windows as a Meter counts in them.
type storeWindows struct{ store.LimitWindows }

func (s storeWindows) Take(ctx context.Context, workspaceID string, t limits.Take) (limits.Taken, error) {
	got, err := s.TakeLimitWindow(ctx, store.LimitTake{WorkspaceID: workspaceID, Key: t.Key, Slot: t.Slot, Span: t.Span, Slots: t.Slots, Max: t.Max, Want: t.Want})
	return limits.Taken{Taken: got.Taken, Until: got.Until, Counts: got.Counts}, err
}

// countedWindows are a store's limit windows whose counts can be read (limits.Counts).
type countedWindows struct {
	storeWindows
	store.LimitCounts
}

func (c countedWindows) Counts(ctx context.Context, workspaceID string) (map[string]int, error) {
	return c.LimitCounts.LimitCounts(ctx, workspaceID)
}

// storeHolds are a store's holdings of concurrent calls as a Meter keeps this process's, under
// a name of its own (node).
type storeHolds struct {
	store.LimitHolds
	node string
}

func (s storeHolds) Hold(ctx context.Context, workspaceID, key string, want, max int) (int, error) {
	return s.HoldLimit(ctx, workspaceID, key, s.node, want, max, limits.HoldTTL)
}

// admit is every workspace dispatcher's Admit: the call of t by the call's actor counted
// against the workspace's limits. When the counts cannot be reached (the database is down)
// the call goes through and the log says so: a limit bounds use, and the store's failure will
// refuse the call's record anyway if it lasts.
func (w *Workspace) admit(ctx context.Context, t *quiver.Tool) (func(), *quiver.Result) {
	set := w.limitsOf()
	if set.Empty() {
		return func() {}, nil
	}
	var sub limits.Subject
	if a, ok := ActorFrom(ctx); ok {
		sub = a.subject()
	}
	checks := set.Match(&sub, t)
	if len(checks) == 0 {
		return func() {}, nil
	}
	done, refusal, err := w.p.meter.Admit(ctx, w.id, checks)
	switch {
	case err != nil:
		w.p.logger.WarnContext(ctx, "platform: the limits' counts cannot be read; the call is let through", "workspace", w.id, "tool", t.Name(), "err", err)
		return func() {}, nil
	case refusal != nil:
		return nil, refusal.Result()
	}
	return done, nil
}

// spend is a run's CallerRules.Spend: a model request of the run by ctx's actor, checked
// against the workspace's limits of tokens and cost before it goes, and charged once it has
// ended. When the counts cannot be reached the request goes, as a call does (see admit).
func (w *Workspace) spend(ctx context.Context, modelName string) (func(context.Context, *model.Usage), *agent.Budget) {
	set := w.limitsOf()
	if set.Empty() {
		return nil, nil
	}
	var sub limits.Subject
	if a, ok := ActorFrom(ctx); ok {
		sub = a.subject()
	}
	checks := set.MatchModel(&sub)
	if len(checks) == 0 {
		return nil, nil
	}
	refusal, err := w.p.meter.Room(ctx, w.id, checks)
	if err != nil {
		w.p.logger.WarnContext(ctx, "platform: the limits' counts cannot be read; the model request goes", "workspace", w.id, "err", err)
	}
	if refusal != nil {
		at := w.p.now().Add(refusal.RetryAfter).UTC().Truncate(time.Second).Add(time.Second) // the platform's clock: the jobs' too
		return nil, &agent.Budget{Limit: refusal.Limit, RetryAt: at,
			Message: refusal.Reached() + ": the run goes on at " + at.Format(time.RFC3339) + ", or when an admin raises the limit"}
	}
	return func(ctx context.Context, u *model.Usage) {
		if u == nil {
			return
		}
		cost := set.CostMicros(modelName, u.InputTokens, u.OutputTokens)
		if err := w.p.meter.Charge(context.WithoutCancel(ctx), w.id, checks, u.InputTokens, u.OutputTokens, cost); err != nil {
			w.p.logger.WarnContext(ctx, "platform: a model request's tokens and cost could not be counted against the limits", "workspace", w.id, "err", err)
		}
	}, nil
}

// Limits returns the actor's workspace's limits (admins only: they say what every caller may
// do).
func (p *Platform) Limits(ctx context.Context, a Actor) (*Limits, error) {
	if err := a.mayAdminister("call within the limits, not read them"); err != nil {
		return nil, err
	}
	l, err := p.cfg.Store.WorkspaceLimits(ctx, a.WorkspaceID)
	if err != nil {
		return nil, storeError(err, "workspace "+a.WorkspaceID, "")
	}
	out := &Limits{Version: l.Version, UpdatedBy: l.UpdatedBy, UpdatedAt: l.UpdatedAt}
	if l.Version == 0 {
		return out, nil
	}
	doc, err := limits.Decode(l.Document)
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "the workspace's limits cannot be read: set them again", Cause: err}
	}
	out.Document = *doc
	return out, nil
}

// LimitStatus is how close each bound of the actor's workspace's limits is now (admins only).
func (p *Platform) LimitStatus(ctx context.Context, a Actor) ([]limits.Status, error) {
	if err := a.mayAdminister("call within the limits, not read how close they are"); err != nil {
		return nil, err
	}
	st, err := p.meter.Status(ctx, a.WorkspaceID, p.Workspace(ctx, a.WorkspaceID).limitsOf())
	if err != nil {
		return nil, storeError(err, "the limits' counts", "")
	}
	return st, nil
}

// SetLimits replaces the actor's workspace's limits (admins only) when they are at version
// after (Conflict otherwise). A document that does not check is refused naming the part
// (limits[3].calls.per_minute), and nothing changes. Every door of every node follows within
// a second; what was counted under a limit of the same name and kind still counts. The runs
// paused for their budget go on, and check it again.
func (p *Platform) SetLimits(ctx context.Context, a Actor, doc limits.Document, after int64) (*Limits, error) {
	if err := a.mayAdminister("call within the limits, not change them"); err != nil {
		return nil, err
	}
	if where, err := p.limitsSource(ctx, a.WorkspaceID); err != nil {
		return nil, storeError(err, "the fleet's configuration", "")
	} else if where != "" {
		return nil, &Error{Kind: Conflict, Field: "document", Message: "the workspace's limits are the limits block of " +
			where + ": change them there and run quiver apply, or apply a configuration without the block to manage them here"}
	}
	if _, err := limits.Compile(&doc); err != nil {
		var fe *limits.FieldError
		if errors.As(err, &fe) {
			return nil, invalid(fe.Field, fe.Message)
		}
		return nil, invalid("document", err.Error())
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "encoding the limits", Cause: err}
	}
	l := &store.WorkspaceLimits{WorkspaceID: a.WorkspaceID, Document: raw, UpdatedBy: a.UserID}
	if err := p.cfg.Store.PutWorkspaceLimits(ctx, l, after); err != nil {
		return nil, storeError(err, "workspace "+a.WorkspaceID, "version")
	}
	p.ToolsChanged(ctx, a.WorkspaceID)
	p.resumeBudgets(ctx, a.WorkspaceID)
	return p.Limits(ctx, a)
}
