package platform

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
)

// Every workspace's tools are governed by two layers of rules (quiver.Governance): the
// operator's, from the fleet's configuration (Config.Governance, SetOperatorRules), then the
// workspace's own, which its admins set (SetWorkspaceRules) and which may only tighten. Both
// are set on the workspace's registry, which every door reads, so the dispatcher enforces the
// same rules whoever calls.

// GovernanceRules is a workspace's governance as a door shows it.
type GovernanceRules struct {
	// Operator are the rules of the fleet's configuration, which apply to every workspace.
	Operator []quiver.Rule
	// Workspace are the workspace's own rules, at Version (0: it never set any).
	Workspace []quiver.Rule
	Version   int64
	UpdatedBy string
	UpdatedAt time.Time
}

// operatorRules returns the operator's rules now in force.
func (p *Platform) operatorRules() []quiver.Rule {
	if r := p.operator.Load(); r != nil {
		return *r
	}
	return nil
}

// SetOperatorRules replaces the operator's rules (the fleet configuration's governance) for
// every workspace, from each one's next call on. Rules that do not check are refused, and
// the rules in force stay.
func (p *Platform) SetOperatorRules(ctx context.Context, rules []quiver.Rule) error {
	if _, err := quiver.NewGovernance(rules, nil); err != nil {
		return err
	}
	rules = append([]quiver.Rule(nil), rules...)
	p.operator.Store(&rules)
	p.workspaces.mu.Lock()
	all := make([]*Workspace, 0, len(p.workspaces.m))
	for _, w := range p.workspaces.m {
		all = append(all, w)
	}
	p.workspaces.mu.Unlock()
	for _, w := range all {
		w.stale.Store(true)
		p.refresh(ctx, w, true)
	}
	return nil
}

// Governance returns the rules that govern the actor's workspace's tools.
func (p *Platform) Governance(ctx context.Context, a Actor) (*GovernanceRules, error) {
	g, err := p.cfg.Store.WorkspaceGovernance(ctx, a.WorkspaceID)
	if err != nil {
		return nil, storeError(err, "workspace "+a.WorkspaceID, "")
	}
	rules, err := decodeRules(g.Rules)
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "the workspace's governance rules cannot be read", Cause: err}
	}
	return &GovernanceRules{Operator: p.operatorRules(), Workspace: rules, Version: g.Version, UpdatedBy: g.UpdatedBy, UpdatedAt: g.UpdatedAt}, nil
}

// SetWorkspaceRules replaces the actor's workspace's rules (admins only) when they are at
// version after (Conflict otherwise: the admin decided from rules another has changed since).
// Each rule is checked as a workspace's (it may tighten, not loosen); a refusal names the rule
// by its index. The workspace's next call is governed by them, on every node within a second.
func (p *Platform) SetWorkspaceRules(ctx context.Context, a Actor, rules []quiver.Rule, after int64) (*GovernanceRules, error) {
	if err := a.mayAdminister("read the governance rules but not change them"); err != nil {
		return nil, err
	}
	for i := range rules {
		if _, err := quiver.NewGovernance(nil, rules[i:i+1]); err != nil {
			// The field names the rule (from 0); the wrapping's "rule 1", counted within the
			// one-rule slice checked, would name another.
			return nil, invalid(fmt.Sprintf("rules[%d]", i), cmp.Or(errors.Unwrap(err), err).Error())
		}
	}
	if rules == nil {
		rules = []quiver.Rule{}
	}
	raw, err := json.Marshal(rules)
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "encoding the rules", Cause: err}
	}
	g := &store.WorkspaceGovernance{WorkspaceID: a.WorkspaceID, Rules: raw, UpdatedBy: a.UserID}
	if err := p.cfg.Store.PutWorkspaceGovernance(ctx, g, after); err != nil {
		return nil, storeError(err, "workspace "+a.WorkspaceID, "version")
	}
	p.ToolsChanged(ctx, a.WorkspaceID)
	return p.Governance(ctx, a)
}

// loadGovernance reads the workspace's rules and makes its governance with the operator's.
// Rules that no longer check (stored by another version, say) deny every tool of the
// workspace until an admin sets them again, and the log says why.
func (p *Platform) loadGovernance(ctx context.Context, workspaceID string) (*quiver.Governance, error) {
	g, err := p.cfg.Store.WorkspaceGovernance(ctx, workspaceID)
	if errors.Is(err, store.ErrNotFound) {
		// A workspace the store holds no record of (a library's platform serving ids of its
		// own) has set no rules, and must still be served its tools: the operator's govern it.
		return quiver.NewGovernance(p.operatorRules(), nil)
	}
	if err != nil {
		return nil, err
	}
	rules, err := decodeRules(g.Rules)
	if err == nil {
		var gov *quiver.Governance
		if gov, err = quiver.NewGovernance(p.operatorRules(), rules); err == nil {
			return gov, nil
		}
	}
	// Fail closed: the workspace's rules may have denied tools, which must not become
	// callable because the rules cannot be read.
	p.logger.ErrorContext(ctx, "platform: a workspace's governance rules cannot be applied; its tools are denied until they are set again",
		"workspace", workspaceID, "err", err)
	return quiver.NewGovernance(p.operatorRules(), []quiver.Rule{{Access: quiver.AccessDeny}})
}

func decodeRules(raw json.RawMessage) ([]quiver.Rule, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var rules []quiver.Rule
	return rules, json.Unmarshal(raw, &rules)
}
