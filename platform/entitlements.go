package platform

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/store"
)

// A workspace's entitlements say which of its tools each caller may see and call (see package
// entitle for the rules). They are stored as a versioned document, part of the workspace's
// tools (a change changes its ToolsStamp, so every node follows within a recheck), compiled
// when loaded with the tools, and asked by the workspace's dispatcher at every call
// (quiver.Dispatcher.Entitled) for the call's actor (WithActor): every door offers and allows
// the same. An actor no door authenticated (the CLI on its own database, MCP over standard
// input and output) is the workspace's operator, whom entitlements do not restrict.

// Entitlements is a workspace's entitlement document as a door shows it.
type Entitlements struct {
	Document entitle.Document
	// Version counts the changes (0: never set); UpdatedBy and UpdatedAt are the last one's.
	Version   int64
	UpdatedBy string
	UpdatedAt time.Time
	// Warnings name what the document names that the workspace does not have now (kept:
	// tools come and go).
	Warnings []string
}

// entitlementsOf returns the compiled entitlements of workspace w now; nil: none.
func (w *Workspace) entitlementsOf() *entitle.Set { return w.entitlements.Load() }

// loadEntitlements reads and compiles the workspace's document. One that no longer compiles
// (stored by another version, say) denies every tool until an admin sets it again, and the
// log says why: a rule that cannot be read must not fall open.
func (p *Platform) loadEntitlements(ctx context.Context, workspaceID string) (*entitle.Set, error) {
	e, err := p.cfg.Store.WorkspaceEntitlements(ctx, workspaceID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && e.Version == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	doc, derr := entitle.Decode(e.Document)
	if derr == nil {
		set, cerr := entitle.Compile(doc)
		if cerr == nil {
			return set, nil
		}
		derr = cerr
	}
	p.logger.ErrorContext(ctx, "platform: a workspace's entitlements cannot be read; every tool is denied until an admin sets them again",
		"workspace", workspaceID, "version", e.Version, "err", derr)
	return entitle.Compile(&entitle.Document{Default: quiver.AccessDeny})
}

// unrestricted reports whether entitlements leave the actor alone: the server's operator at
// a door that authenticates no one (the CLI on its own database, MCP over standard input and
// output, a server without keys), unless it asked for a toolset. An admin who came with a key
// or a token is decided by the rules like anyone: rules may name admins.
func (a Actor) unrestricted() bool {
	return a.Operator && a.KeyID == "" && a.Who == "" && a.Toolset == "" && len(a.Toolsets) == 0
}

// entitled is every workspace dispatcher's Entitled: what the call's actor may call.
func (w *Workspace) entitled(ctx context.Context) func(*quiver.Tool) bool {
	a, ok := ActorFrom(ctx)
	if !ok || a.unrestricted() {
		return nil
	}
	set := w.entitlementsOf()
	if !set.Restricts() && a.Toolset == "" && len(a.Toolsets) == 0 {
		return nil
	}
	if set == nil {
		// Bound to toolsets the workspace does not define: nothing.
		return func(*quiver.Tool) bool { return false }
	}
	sub := a.subject()
	return func(t *quiver.Tool) bool { return set.Allows(&sub, t) }
}

// subject is the actor as the entitlement rules see it.
func (a Actor) subject() entitle.Subject {
	return entitle.Subject{Key: a.KeyID, User: a.UserID, Role: string(a.Role), Claims: a.Claims, Agents: a.Agents,
		Toolset: a.Toolset, Toolsets: a.Toolsets}
}

// Entitlements returns the actor's workspace's entitlements (admins only: the rules say what
// every caller may do).
func (p *Platform) Entitlements(ctx context.Context, a Actor) (*Entitlements, error) {
	if err := a.mayAdminister("call the tools it is entitled to, not read the rules"); err != nil {
		return nil, err
	}
	e, err := p.cfg.Store.WorkspaceEntitlements(ctx, a.WorkspaceID)
	if err != nil {
		return nil, storeError(err, "workspace "+a.WorkspaceID, "")
	}
	out := &Entitlements{Version: e.Version, UpdatedBy: e.UpdatedBy, UpdatedAt: e.UpdatedAt}
	if e.Version == 0 {
		return out, nil
	}
	doc, err := entitle.Decode(e.Document)
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "the workspace's entitlements cannot be read: set them again", Cause: err}
	}
	out.Document = *doc
	if set, err := entitle.Compile(doc); err == nil {
		out.Warnings = set.Warnings(p.workspaceTools(ctx, a.WorkspaceID))
	}
	return out, nil
}

// SetEntitlements replaces the actor's workspace's entitlements (admins only) when they are
// at version after (Conflict otherwise: the admin decided from a document another has changed
// since). A document that does not check is refused naming the part (rules[3].tools[0]), and
// nothing changes; names of tools and toolsets that are not there are kept, and the answer's
// Warnings list them. Every door of every node follows within a second.
func (p *Platform) SetEntitlements(ctx context.Context, a Actor, doc entitle.Document, after int64) (*Entitlements, error) {
	if err := a.mayAdminister("read what it is entitled to, not change the rules"); err != nil {
		return nil, err
	}
	where, err := p.entitlementsSource(ctx, a.WorkspaceID)
	if err != nil {
		return nil, storeError(err, "the fleet's configuration", "")
	}
	if where != "" {
		// The configuration would put its block back at its next version or a node's start:
		// a change here would be lost without a word.
		return nil, &Error{Kind: Conflict, Field: "document", Message: "the workspace's entitlements are the entitlements block of " +
			where + ": change them there and run quiver apply, or apply a configuration without the block to manage them here"}
	}
	if _, err := entitle.Compile(&doc); err != nil {
		var fe *entitle.FieldError
		if errors.As(err, &fe) {
			return nil, invalid(fe.Field, fe.Message)
		}
		return nil, invalid("document", err.Error())
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, &Error{Kind: Internal, Message: "encoding the entitlements", Cause: err}
	}
	e := &store.WorkspaceEntitlements{WorkspaceID: a.WorkspaceID, Document: raw, UpdatedBy: a.UserID}
	if err := p.cfg.Store.PutWorkspaceEntitlements(ctx, e, after); err != nil {
		return nil, storeError(err, "workspace "+a.WorkspaceID, "version")
	}
	p.ToolsChanged(ctx, a.WorkspaceID)
	return p.Entitlements(ctx, a)
}

// workspaceTools are the workspace's tools now, for warnings; none when they cannot be read.
func (p *Platform) workspaceTools(ctx context.Context, workspaceID string) []*quiver.Tool {
	return p.Workspace(ctx, workspaceID).Dispatcher().Tools()
}

// Explanation says whether a subject may call a tool of the workspace, and what decided.
type Explanation struct {
	Subject string
	Tool    string
	entitle.Decision
}

// Explain says whether the subject spec names (see ParseSubject; "" for the actor) may call
// the tool named, and which rule decided. An admin may ask of anyone; anyone else of
// themselves alone. A tool the subject is not entitled to and one that does not exist are
// told apart to an admin only.
func (p *Platform) Explain(ctx context.Context, a Actor, spec, toolName string) (*Explanation, error) {
	sub := a
	if spec != "" {
		if err := a.mayAdminister("ask what it is entitled to itself (leave subject out)"); err != nil {
			return nil, err
		}
		var err error
		if sub, err = p.ParseSubject(ctx, a.WorkspaceID, spec); err != nil {
			return nil, err
		}
	}
	w := p.Workspace(ctx, a.WorkspaceID)
	out := &Explanation{Subject: cmp.Or(spec, "the caller"), Tool: toolName}
	t, ok := w.Registry().Lookup(toolName)
	if !ok {
		if spec != "" || a.Role == store.KeyRoleAdmin {
			return nil, &Error{Kind: NotFound, Field: "tool", Message: "the workspace has no tool " + quoteShort(toolName)}
		}
		out.Decision = entitle.Decision{Rule: -1, Reason: "no tool of that name is available to this caller"}
		return out, nil
	}
	set := w.entitlementsOf()
	s := sub.subject()
	if sub.unrestricted() {
		out.Decision = entitle.Decision{Allowed: true, Rule: -1, Reason: "the server's operator at a door that authenticates no one: entitlements do not restrict it"}
		return out, nil
	}
	out.Decision = set.Explain(&s, t)
	if !out.Allowed && spec == "" && a.Role != store.KeyRoleAdmin {
		// The rules are an admin's to read: a caller learns that it may not, not why.
		out.Decision = entitle.Decision{Rule: -1, Reason: "no tool of that name is available to this caller"}
	}
	return out, nil
}

// Bounds of a subject explain is asked about.
const (
	maxSubjectBytes = 4096
	maxSubjectParts = 64
)

// ParseSubject reads a subject as explain names one: parts separated by commas, each
// key:ID (the key's role, user and toolsets with it), user:ID (the user's role in the
// workspace with it), role:ROLE, claim:NAME=VALUE, agent:NAME (again for a sub-agent's chain,
// the parent first), toolset:NAME (the address the request comes through).
func (p *Platform) ParseSubject(ctx context.Context, workspaceID, spec string) (Actor, error) {
	a := Actor{WorkspaceID: workspaceID}
	parts := strings.Split(spec, ",")
	switch {
	case len(spec) > maxSubjectBytes:
		return Actor{}, invalid("subject", fmt.Sprintf("%d bytes are over the %d a subject may have", len(spec), maxSubjectBytes))
	case len(parts) > maxSubjectParts:
		return Actor{}, invalid("subject", fmt.Sprintf("%d parts are over the %d a subject may have", len(parts), maxSubjectParts))
	}
	for i, part := range parts {
		kind, val, ok := strings.Cut(strings.TrimSpace(part), ":")
		field := fmt.Sprintf("subject[%d]", i)
		if !ok || val == "" {
			return Actor{}, invalid(field, "write key:ID, user:ID, role:ROLE, claim:NAME=VALUE, agent:NAME or toolset:NAME, not "+quoteShort(part))
		}
		if err := p.subjectPart(ctx, &a, kind, val, field); err != nil {
			return Actor{}, err
		}
	}
	return a, nil
}

func (p *Platform) subjectPart(ctx context.Context, a *Actor, kind, val, field string) error {
	switch kind {
	case "key":
		keys, err := p.cfg.Store.APIKeys(ctx, a.WorkspaceID)
		if err != nil {
			return storeError(err, "the workspace's API keys", "")
		}
		i := slices.IndexFunc(keys, func(k *store.APIKey) bool { return k.ID == val })
		if i < 0 {
			return &Error{Kind: NotFound, Field: field, Message: "the workspace has no API key " + quoteShort(val)}
		}
		k := keys[i]
		a.KeyID, a.UserID, a.Role, a.Toolsets = k.ID, k.UserID, k.Role, slices.Clone(k.Toolsets)
	case "user":
		m, err := p.cfg.Store.Member(ctx, a.WorkspaceID, val)
		if err != nil {
			return &Error{Kind: NotFound, Field: field, Message: "the workspace has no member " + quoteShort(val)}
		}
		a.UserID, a.Role = val, store.MemberKeyRole(m.Role)
	case "role":
		if r := store.KeyRole(val); r.Valid() {
			a.Role = r
			return nil
		}
		return invalid(field, "role "+quoteShort(val)+" is none of admin, member, viewer")
	case "claim":
		name, v, ok := strings.Cut(val, "=")
		if !ok || name == "" || v == "" {
			return invalid(field, "write claim:NAME=VALUE, not "+quoteShort(val))
		}
		if a.Claims == nil {
			a.Claims = map[string]any{}
		}
		prev, _ := a.Claims[name].([]any)
		a.Claims[name] = append(prev, v)
	case "agent":
		a.Agents = append(a.Agents, val)
	case "toolset":
		if err := entitle.CheckToolsetName(val); err != nil {
			return invalid(field, err.Error())
		}
		a.Toolset = val
	default:
		return invalid(field, "write key:ID, user:ID, role:ROLE, claim:NAME=VALUE, agent:NAME or toolset:NAME, not "+quoteShort(kind+":"+val))
	}
	return nil
}

// Toolset is a toolset as a door lists it: the tools of it the actor may call.
type Toolset struct {
	Name        string
	Description string
	Tools       []string
}

// Toolsets lists the actor's workspace's toolsets and, for each, the tools in it the actor
// may call; a key bound to toolsets is shown those alone.
func (p *Platform) Toolsets(ctx context.Context, a Actor) ([]Toolset, error) {
	w := p.Workspace(ctx, a.WorkspaceID)
	set := w.entitlementsOf()
	if set == nil {
		return []Toolset{}, nil
	}
	tools := w.Dispatcher().ToolsFor(WithActor(ctx, a))
	out := []Toolset{}
	for _, ts := range set.Document().Toolsets {
		if len(a.Toolsets) > 0 && !slices.Contains(a.Toolsets, ts.Name) {
			continue
		}
		item := Toolset{Name: ts.Name, Description: ts.Description, Tools: []string{}}
		for _, t := range tools {
			if set.InToolset(ts.Name, t) {
				item.Tools = append(item.Tools, t.Name())
			}
		}
		out = append(out, item)
	}
	return out, nil
}

// HasToolset reports whether the workspace defines the toolset named: its MCP address serves
// nothing otherwise.
func (p *Platform) HasToolset(ctx context.Context, workspaceID, name string) bool {
	return p.Workspace(ctx, workspaceID).entitlementsOf().HasToolset(name)
}

// caller is an actor as a run keeps it (agent.ThreadState.Caller), to be entitled as it
// whichever node runs it and however later it resumes.
type caller struct {
	Key      string         `json:"key,omitempty"`
	User     string         `json:"user,omitempty"`
	Role     store.KeyRole  `json:"role,omitempty"`
	Claims   map[string]any `json:"claims,omitempty"`
	Toolsets []string       `json:"toolsets,omitempty"`
	Toolset  string         `json:"toolset,omitempty"`
	// Unrestricted: the server's operator at a door that authenticates no one.
	Unrestricted bool `json:"unrestricted,omitempty"`
}

// runCaller encodes a for a run it starts in workspace w (see agent.WithCaller). Of a token's
// claims it keeps those the workspace's rules read now: a run is stored with its caller, and
// a token's claims may say more about a person than any rule needs.
func (a Actor) runCaller(w *Workspace) json.RawMessage {
	b, err := json.Marshal(caller{Key: a.KeyID, User: a.UserID, Role: a.Role, Claims: w.entitlementsOf().Claims(a.Claims), Toolsets: a.Toolsets,
		Toolset: a.Toolset, Unrestricted: a.unrestricted()})
	if err != nil {
		return nil // claims that do not encode came from a decoded token: cannot happen
	}
	return b
}

// runEntitlements is the runner's Entitlements: a run's caller, decoded once per run, as the
// agents of its chain. A run no door started (nil caller: the library's own, a wake with no
// record) is its workspace's operator's, whom entitlements do not restrict; a caller that
// does not decode (written by another version) may call nothing, rather than everything.
func (p *Platform) runEntitlements(ctx context.Context, workspaceID string, raw json.RawMessage, agents []string) func(context.Context) func(*quiver.Tool) bool {
	a, known, err := p.runActor(workspaceID, raw, agents)
	switch {
	case err != nil:
		p.logger.ErrorContext(ctx, "platform: a run's caller cannot be read; it may call no tool", "workspace", workspaceID, "err", err)
		return func(context.Context) func(*quiver.Tool) bool { return func(*quiver.Tool) bool { return false } }
	case !known:
		return nil
	}
	w := p.Workspace(ctx, workspaceID)
	withActor := WithActor(ctx, a)
	return func(context.Context) func(*quiver.Tool) bool { return w.entitled(withActor) }
}

// runActor is a run's caller as an actor, as the agents of its chain; known is false for a
// run no door started, or one whose caller is the unrestricted operator.
func (p *Platform) runActor(workspaceID string, raw json.RawMessage, agents []string) (a Actor, known bool, err error) {
	if raw == nil {
		return Actor{}, false, nil
	}
	var c caller
	if err := json.Unmarshal(raw, &c); err != nil {
		return Actor{}, false, err
	}
	if c.Unrestricted {
		return Actor{}, false, nil
	}
	// Who is set so that a caller kept without a key (a token's) is never taken for the
	// unrestricted operator.
	return Actor{WorkspaceID: workspaceID, KeyID: c.Key, UserID: c.User, Role: c.Role, Claims: c.Claims, Toolsets: c.Toolsets,
		Toolset: c.Toolset, Who: "the caller of a run", Agents: agents}, true, nil
}
