package platform

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/openapi"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/platform/limits"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// Each workspace calls its own stored tools (JavaScript functions and client tools) over the
// tools every workspace shares (Config.Registry): a registry per workspace, made on first
// use, whose stored tools follow the store.

// recheck is how often a workspace's registry asks the store whether its stored tools
// changed (Entities.ToolsStamp): the most another process's change takes to be seen here. A
// change made through this platform is seen at once (ToolsChanged).
const recheck = time.Second

// Workspace holds the tools one workspace may call.
type Workspace struct {
	id       string
	registry *quiver.Registry
	p        *Platform
	// dispatcher is the one every door calls the workspace's tools through (dispatcher.go).
	dispatcherOnce sync.Once
	dispatcher     *quiver.Dispatcher
	// generation counts the loads of the stored tools, for those who tell clients the tool
	// list changed.
	generation atomic.Uint64

	// checked is when the stamp was last compared (Unix nanoseconds), stale says a change
	// was made here since: either makes the next use look at the store.
	checked atomic.Int64
	stale   atomic.Bool
	loaded  atomic.Bool // the stored tools were loaded once
	// failed is why the store could not be read at the last look, nil when it could.
	failed atomic.Pointer[error]
	mu     sync.Mutex // one reload at a time
	stamp  string
	// built holds the stored tools as the last load built them, by tool id (guarded by mu).
	built map[string]builtTool
	// entitlements are the workspace's, compiled when loaded with its tools; nil: none.
	entitlements atomic.Pointer[entitle.Set]
	// limits are the workspace's, compiled when loaded with its tools; nil: none.
	limits atomic.Pointer[limits.Set]
}

// builtTool is a stored tool as a load built it, kept so that the next load builds again only
// the tools that changed. Building one parses its code and compiles its schemas (most of a
// millisecond); building every tool on every change made creating the thousandth tool of a
// workspace take a second, and a thousand of them a quarter of an hour.
type builtTool struct {
	// record and versionID are what the tool was built from: its stored record (as JSON) and
	// the function version it runs ("" for a client tool). Versions and schemas never change
	// under their ids, so the two say whether the tool would be built the same today. (The
	// record's updated_at alone would not: two changes may share a timestamp.)
	record    []byte
	versionID string
	tool      *quiver.Tool      // as built, before the runtime user is applied
	tools     []*quiver.Tool    // an OpenAPI source's (versionID: sourceVersion)
	skipped   []openapi.Skipped // its operations left out
}

// ID is the workspace's id.
func (w *Workspace) ID() string { return w.id }

// Registry holds the workspace's tools: its stored tools over the shared ones. It is the same
// registry for the platform's life; its tools change as the store's do.
func (w *Workspace) Registry() *quiver.Registry { return w.registry }

// Generation changes each time the workspace's stored tools are loaded again.
func (w *Workspace) Generation() uint64 { return w.generation.Load() }

type workspaces struct {
	mu sync.Mutex
	m  map[string]*Workspace
}

// Workspace returns the workspace's tools as the store has them now (give or take recheck).
// A store that cannot be read leaves the tools as they were loaded last: the failure is
// logged, and the shared tools keep being served.
func (p *Platform) Workspace(ctx context.Context, workspaceID string) *Workspace {
	p.workspaces.mu.Lock()
	w := p.workspaces.m[workspaceID]
	if w == nil {
		w = &Workspace{id: workspaceID, registry: &quiver.Registry{Base: p.Registry(), Logger: p.cfg.Registry.Logger}, p: p}
		w.stale.Store(true)
		if p.workspaces.m == nil {
			p.workspaces.m = map[string]*Workspace{}
		}
		p.workspaces.m[workspaceID] = w
	}
	p.workspaces.mu.Unlock()
	if w.stale.Load() || time.Now().UnixNano()-w.checked.Load() > int64(recheck) {
		// Once a workspace's tools are loaded, a caller does not wait for another's recheck:
		// it gets the tools as they were a moment ago.
		p.refresh(ctx, w, !w.loaded.Load())
	}
	return w
}

// registry is Workspace's registry, as agent.Runner.Registries asks for it: an error while
// the workspace's stored tools have never been read (its store failing, as on a node started
// during a database's restart), so that a run fails and is tried again rather than finding its
// prompt's tools unknown, which would fail it for good.
func (p *Platform) registry(ctx context.Context, workspaceID string) (*quiver.Registry, error) {
	w := p.Workspace(ctx, workspaceID)
	if agent.FreshRegistry(ctx) {
		// A run is about to fail for a tool its prompt names: another node may have made it
		// within the last recheck. Ask the store now, waiting for a refresh under way.
		w.checked.Store(0)
		p.refresh(ctx, w, true)
	}
	if !w.loaded.Load() {
		cause := errors.New("not read yet")
		if err := w.failed.Load(); err != nil {
			cause = *err
		}
		return nil, fmt.Errorf("platform: the stored tools of workspace %s could not be read: %w", workspaceID, cause)
	}
	return w.Registry(), nil
}

// ToolsChanged makes the workspace's next use load its stored tools again, and loads them
// now: every change to them through the platform calls it, so that its writer's next call
// sees the change.
func (p *Platform) ToolsChanged(ctx context.Context, workspaceID string) {
	p.workspaces.mu.Lock()
	w := p.workspaces.m[workspaceID]
	p.workspaces.mu.Unlock()
	if w != nil {
		w.stale.Store(true)
		p.refresh(ctx, w, true)
	}
}

// refresh loads the workspace's stored tools again when the store's stamp says they changed
// (or a change was made here). When wait is false and another caller is refreshing the
// workspace, it returns at once.
func (p *Platform) refresh(ctx context.Context, w *Workspace, wait bool) {
	if wait {
		w.mu.Lock()
	} else if !w.mu.TryLock() {
		return
	}
	defer w.mu.Unlock()
	if !w.stale.Load() && time.Now().UnixNano()-w.checked.Load() <= int64(recheck) {
		return // another caller refreshed it while this one waited
	}
	ent := p.cfg.Store
	// A caller that is cancelled must not leave the workspace half-checked for the others.
	// Stored and imported tools are many and seldom all called: their schemas are checked as
	// they load and compiled for keeps at each one's first call.
	ctx = quiver.WithSchemasCompiledOnUse(context.WithoutCancel(ctx))
	wasStale := w.stale.Swap(false)
	stamp, err := ent.ToolsStamp(ctx, w.id)
	var tools []*quiver.Tool
	var broken error
	var docs workspaceRules
	if err == nil && (stamp != w.stamp || wasStale) {
		docs, err = p.loadRules(ctx, w)
	}
	if err == nil && (stamp != w.stamp || wasStale) {
		var built map[string]builtTool
		tools, built, broken, err = loadStoredTools(ctx, ent, w.id, p.cfg.FunctionLimits, w.built)
		if err == nil {
			// An imported tool never takes a shared tool's place, nor a stored one's.
			taken := make(map[string]bool, len(tools))
			for _, t := range tools {
				taken[t.Name()] = true
			}
			for _, t := range w.registry.Base.Tools() {
				taken[t.Name()] = true
			}
			var imported []*quiver.Tool
			var unusable error
			imported, unusable, err = p.loadOpenAPITools(ctx, w.id, taken, w.built, built)
			tools, broken = append(tools, imported...), errors.Join(broken, unusable)
		}
		if err == nil {
			w.built = built
		}
	}
	if err != nil {
		w.stale.Store(wasStale || w.stamp != stamp)
		w.failed.Store(&err)
		p.logger.ErrorContext(ctx, "platform: reading a workspace's stored tools", "workspace", w.id, "err", err)
		w.checked.Store(time.Now().UnixNano()) // ask again after recheck, not on every call
		return
	}
	w.failed.Store(nil)
	w.checked.Store(time.Now().UnixNano())
	if stamp == w.stamp && !wasStale {
		return
	}
	if broken != nil {
		// The tools that load are served; the log names the ones that do not.
		p.logger.WarnContext(ctx, "platform: some stored tools are not served", "workspace", w.id, "err", broken)
	}
	w.registry.SetGovernance(docs.governance)
	w.entitlements.Store(docs.entitlements)
	w.limits.Store(docs.limits)
	if err := w.registry.Replace(tools...); err != nil {
		p.logger.ErrorContext(ctx, "platform: serving a workspace's stored tools", "workspace", w.id, "err", err)
		w.stale.Store(true)
		return
	}
	w.stamp = stamp
	w.loaded.Store(true)
	w.generation.Add(1)
}

// workspaceRules are a workspace's documents that govern its tools, compiled.
type workspaceRules struct {
	governance   *quiver.Governance
	entitlements *entitle.Set
	limits       *limits.Set
}

// loadRules reads and compiles the workspace's governance, entitlements and limits.
func (p *Platform) loadRules(ctx context.Context, w *Workspace) (workspaceRules, error) {
	var r workspaceRules
	var err error
	if r.governance, err = p.loadGovernance(ctx, w.id); err != nil {
		return r, err
	}
	if r.entitlements, err = p.loadEntitlements(ctx, w.id); err != nil {
		return r, err
	}
	r.limits, err = p.loadLimits(ctx, w)
	return r, err
}

// loadStoredTools builds the workspace's active stored tools: server tools run their function
// version in the sandbox, as their runtime user (see runtimes), client tools are offered with
// their schemas and run by the client. A tool that prev holds as built from the same record
// and function version is reused, not built again; built is what the next load reuses. A tool
// that cannot be built does not keep the others out: broken names each one. err is the
// store's failure to list them, which leaves no tools to serve: a part of them would leave the
// rest unknown.
func loadStoredTools(ctx context.Context, ent store.Entities, workspaceID string, l jsfunc.Limits, prev map[string]builtTool) (
	tools []*quiver.Tool, built map[string]builtTool, broken, err error) {
	var errs []error
	built = make(map[string]builtTool, len(prev))
	rt := &runtimes{workspaceID: workspaceID}
	defaults := map[string]string{} // function id: its default version id, read once per load
	f := store.ToolFilter{WorkspaceID: workspaceID, Limit: store.MaxListLimit}
	for {
		page, err := ent.ListTools(ctx, f)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, st := range page.Tools {
			t, err := reuseOrBuild(ctx, ent, workspaceID, st, l, prev, built, defaults)
			if err == nil && st.Target != store.TargetClient {
				t, err = rt.runAs(ctx, ent, st, t)
			}
			if err != nil {
				if errors.Is(err, errRuntimes) {
					return nil, nil, nil, err // the store failed: as for the listing
				}
				errs = append(errs, err)
				continue
			}
			tools = append(tools, t)
		}
		if page.NextCursor == "" {
			return tools, built, errors.Join(errs...), nil
		}
		f.Cursor = page.NextCursor
	}
}

// reuseOrBuild returns stored tool st as prev holds it when it was built from the same record
// and function version, else builds it; either way it records the tool in built.
func reuseOrBuild(ctx context.Context, ent store.Entities, workspaceID string, st *store.Tool, l jsfunc.Limits,
	prev, built map[string]builtTool, defaults map[string]string) (*quiver.Tool, error) {
	version := st.FunctionVersionID
	if st.Target != store.TargetClient && version == "" {
		def, ok := defaults[st.FunctionID]
		if !ok {
			fn, err := ent.Function(ctx, workspaceID, st.FunctionID)
			if err != nil {
				return nil, fmt.Errorf("tool %q: function %s: %w", st.Name, st.FunctionID, err)
			}
			def = fn.DefaultVersionID
			defaults[st.FunctionID] = def
		}
		version = def
	}
	record, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", st.Name, err)
	}
	if b, ok := prev[st.ID]; ok && b.versionID == version && bytes.Equal(b.record, record) {
		built[st.ID] = b
		return b.tool, nil
	}
	var t *quiver.Tool
	if st.Target == store.TargetClient {
		t, err = clientTool(ctx, ent, workspaceID, st)
	} else {
		t, err = jsfunc.Load(ctx, ent, workspaceID, st, l)
	}
	if err != nil {
		return nil, err
	}
	built[st.ID] = builtTool{record: record, versionID: version, tool: t}
	return t, nil
}

// Who a stored server tool runs as: its runtime user (runtime_user_id), else the
// workspace's default one, else the caller. The users are read once per load of the
// workspace's tools, not per call: the store's stamp (Entities.ToolsStamp) changes with the
// default runtime user and with the members, so a change to either loads the tools again
// (at once in this process, within recheck in the others). A tool whose runtime user is no
// longer a member is served as a refusal naming that user and what to do, and runs nothing.

// errRuntimes marks the store's failure to say who the tools run as.
var errRuntimes = errors.New("platform: who the stored tools run as")

// runtimes is who a workspace's stored tools may run as, read on first need.
type runtimes struct {
	workspaceID string
	read        bool
	fallback    string          // the workspace's default runtime user, "" for none
	members     map[string]bool // read when a tool runs as someone
}

// runAs returns t running as st's runtime user, else the workspace's default one, else as it
// is (the caller); a refusal when that user is no longer a member.
func (r *runtimes) runAs(ctx context.Context, ent store.Entities, st *store.Tool, t *quiver.Tool) (*quiver.Tool, error) {
	if !r.read {
		w, err := ent.Workspace(ctx, r.workspaceID)
		switch {
		case errors.Is(err, store.ErrNotFound): // no record: no default
		case err != nil:
			return nil, fmt.Errorf("%w: workspace %s: %w", errRuntimes, r.workspaceID, err)
		default:
			r.fallback = w.DefaultRuntimeUserID
		}
		r.read = true
	}
	user := cmp.Or(st.RuntimeUserID, r.fallback)
	if user == "" {
		return t, nil
	}
	if r.members == nil {
		ms, err := ent.Members(ctx, r.workspaceID)
		if err != nil {
			return nil, fmt.Errorf("%w: the members of workspace %s: %w", errRuntimes, r.workspaceID, err)
		}
		r.members = make(map[string]bool, len(ms))
		for _, m := range ms {
			r.members[m.UserID] = true
		}
	}
	if r.members[user] {
		return t.RunningAs(user), nil
	}
	var why string
	if st.RuntimeUserID != "" {
		why = fmt.Sprintf("it runs as user %s (its runtime_user_id), who is no longer a member of workspace %s; "+
			"a workspace admin sets the tool's runtime_user_id to a member, or clears it for the workspace's default runtime user",
			user, r.workspaceID)
	} else {
		why = fmt.Sprintf("it runs as user %s, the workspace's default runtime user (default_runtime_user_id), who is no longer a member "+
			"of workspace %s; a workspace admin sets the workspace's default_runtime_user_id to a member, or clears it, "+
			"or gives the tool a runtime_user_id of its own", user, r.workspaceID)
	}
	spec := t.Spec()
	// Nothing runs, so nothing is resolved for the former member nor confirmed by anyone.
	spec.Variables, spec.RequiresConfirmation, spec.RunAs = nil, false, user
	refused, err := quiver.NewTool(spec, func(context.Context, json.RawMessage) (any, error) {
		return nil, quiver.Fail(quiver.CodeRejected, "tool %s was not run: %s", st.Name, why)
	})
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", st.Name, err)
	}
	return refused, nil
}

// clientTool builds a stored client tool (target client): its schemas and flags, and no code,
// since the client runs it: an agent's run pauses on its calls until the client posts the
// result.
func clientTool(ctx context.Context, ent store.Entities, workspaceID string, st *store.Tool) (*quiver.Tool, error) {
	in, err := ent.Schema(ctx, workspaceID, st.InputSchemaID)
	if err != nil {
		return nil, fmt.Errorf("client tool %q: input schema %s: %w", st.Name, st.InputSchemaID, err)
	}
	out, err := ent.Schema(ctx, workspaceID, st.OutputSchemaID)
	if err != nil {
		return nil, fmt.Errorf("client tool %q: output schema %s: %w", st.Name, st.OutputSchemaID, err)
	}
	// _activity and _output are not read: the client runs the tool, and its result schema is
	// the tool's output schema (the API refuses either in a new input schema).
	doc, err := quiver.ParseSchemaSpec(in.Content)
	if err != nil {
		return nil, fmt.Errorf("client tool %q: input schema %s: %w", st.Name, st.InputSchemaID, err)
	}
	var output *schema.Schema
	if c := strings.TrimSpace(string(out.Content)); c != "true" && c != "{}" {
		output = &schema.Schema{}
		if err := json.Unmarshal(out.Content, output); err != nil {
			return nil, fmt.Errorf("client tool %q: output schema %s: %w", st.Name, st.OutputSchemaID, err)
		}
	}
	examples := make([]quiver.Example, len(st.Examples))
	for i, e := range st.Examples {
		examples[i] = quiver.Example{Args: e.Args, Result: e.Result}
	}
	spec := quiver.Spec{Name: st.Name, Description: cmp.Or(st.Description, doc.Description), Target: quiver.TargetClient,
		InputSchema: doc.InputSchema, OutputSchema: output,
		Examples: examples, RequiresConfirmation: st.RequiresConfirmation, Disabled: !st.Enabled, Annotations: doc.Annotations,
		Source: quiver.SourceStored}
	t, err := quiver.NewToolContext(ctx, spec, nil)
	if err != nil {
		return nil, fmt.Errorf("client tool %q: %w", st.Name, err)
	}
	return t, nil
}
