package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/model"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store/vars"
	"github.com/quiverhq/quiver/thread"
)

// defaultAgentsDir is where `quiver run --agent NAME` looks for definitions unless --agents or
// QUIVER_AGENTS says otherwise.
const defaultAgentsDir = "agents"

// defaultAgent is the agent run without --agent: every tool, a neutral system prompt.
func defaultAgent() *agent.Agent {
	return &agent.Agent{Name: "assistant", Description: "A general assistant with every available tool.",
		Prompt: &agent.Prompt{Name: "assistant", Tools: []string{"*"},
			System: "You are a helpful assistant. Use the tools when they help; answer briefly."}}
}

// runRequest is what quiver run was asked to do.
type runRequest struct {
	agentName, agentsDir, modelSpec, threadID, message string
	values                                             []vars.Value
	config                                             *string // --config
}

// parseRun reads quiver run's flags and message.
func parseRun(inv *invocation) (runRequest, error) {
	var r runRequest
	fs := inv.fs
	fs.StringVar(&r.agentName, "agent", "", "an agent NAME (from --agents) or a definition FILE (.yaml, .yml, .json); default: a general assistant")
	fs.StringVar(&r.agentsDir, "agents", "", "the directory of agent and prompt definitions (default: $QUIVER_AGENTS or ./"+defaultAgentsDir+")")
	fs.StringVar(&r.modelSpec, "model", "", "the model, provider:model (default: the agent's, or $QUIVER_MODEL)")
	fs.StringVar(&r.threadID, "thread", "", "continue this thread (default: a new one)")
	r.config = addConfigFlag(fs)
	fs.Func("var", "NAME=VALUE: a text variable set on the run's thread (repeatable; secrets: quiver vars set --secret)", func(s string) error {
		v, err := splitVar(s)
		if err == nil {
			r.values = append(r.values, v)
		}
		return err
	})
	pos, err := inv.parse(0, -1, "")
	if err != nil {
		return r, err
	}
	if len(pos) > 1 {
		return r, usagef("run takes one message (quote it), got %d arguments", len(pos))
	}
	r.message = strings.Join(pos, "")
	if strings.TrimSpace(r.message) == "" && r.threadID == "" {
		return r, usagef("run needs a message, or --thread ID to resume a paused thread")
	}
	return r, nil
}

func (a *app) runAgent(ctx context.Context, inv *invocation) (int, error) {
	req, err := parseRun(inv)
	if err != nil {
		return exitUsage, err
	}
	ag, catalog, err := loadAgent(req.agentName, req.agentsDir)
	fleet := false // the agent is the fleet's configuration's (no agents directory here)
	if errors.Is(err, fs.ErrNotExist) && req.agentsDir == "" && os.Getenv("QUIVER_AGENTS") == "" {
		ag, catalog, err = a.fleetAgent(ctx, inv, req.agentName)
		fleet = err == nil
	}
	if err != nil {
		return exitError, err
	}
	if err := refuseSecretVars(req.values, ag.Prompt.Variables); err != nil {
		return exitUsage, err
	}
	m, err := pickModel(req.modelSpec, ag)
	if err != nil {
		return exitError, err
	}
	if req.modelSpec != "" {
		// --model is this run's model, over the one the agent's definition names.
		ag.Prompt.Model = ""
	}
	db, err := inv.open(ctx)
	if err != nil {
		return exitError, err
	}
	// The configuration's tools (OpenAPI documents, A2A agents, remote MCP servers), read as
	// quiver serve reads them: an agent given one of them finds it.
	disconnect, err := a.importConfigured(ctx, inv.store, *req.config)
	if err != nil {
		return exitError, err
	}
	defer disconnect()
	// The catalog's prompts and agents are what the agent may call as tools; its non-blocking
	// sub-agents run on goroutines of this process, which the run waits for.
	p, err := assemble(db, a.registry, agents{catalog: catalog, model: m}, nil, nil)
	if err != nil {
		return exitError, err
	}
	if err := p.SetOperatorRules(ctx, a.rules); err != nil {
		return exitError, err
	}
	if fleet {
		// The agent's tools and rules are the fleet's configuration's too.
		if err := p.LoadConfiguration(ctx); err != nil {
			return exitError, err
		}
	}
	// The tools and sub-agents of the agent declare variables too: known once the workspace's
	// tools are.
	decls, err := p.Runner().Declarations(ctx, localWorkspaceID, ag)
	if err != nil {
		return exitError, err
	}
	all := make([]quiver.Variable, len(decls))
	for i, d := range decls {
		all[i] = d.Variable
	}
	if err := refuseSecretVars(req.values, all); err != nil {
		return exitUsage, err
	}
	th, err := a.runThread(ctx, p, db, ag, req)
	if err != nil {
		return exitError, err
	}
	a.root = th.ID()
	r := p.Runner()
	r.Subscribe(a.showProgress)
	out, err := a.runToTheEnd(ctx, r, th, ag, req.message)
	if err != nil {
		return exitError, err
	}
	final := out.Text
	if out.Output != nil {
		final = string(out.Output)
	}
	a.progressMu.Lock()
	streamed := a.streamedTurn
	a.progressMu.Unlock()
	if !shownTwice(a.isTerminal(a.stdout), a.isTerminal(a.stderr), streamed, final) {
		fmt.Fprintln(a.stdout, final)
	}
	if out.Reason == agent.ReasonMaxSteps {
		fmt.Fprintf(a.stderr, "stopped after %d steps (the agent's stop.max_steps); continue with --thread %s\n", out.Steps, th.ID())
	}
	return exitOK, nil
}

// refuseSecretVars refuses a --var for a variable declared secret.
func refuseSecretVars(values []vars.Value, decls []quiver.Variable) error {
	for _, v := range values {
		for _, d := range decls {
			if d.Name == v.Name && d.Type == quiver.VarSecret {
				return usagef("%s is a secret, which --var would leave in shell history and the process list: "+
					"set it with quiver vars set %s --secret (the value is read from standard input)", v.Name, v.Name)
			}
		}
	}
	return nil
}

// runThread is the thread quiver run runs on: the one --thread names, with --var's values set
// on it, or a new one. Every variable the agent requires (its prompt's, its tools', its
// immediate sub-agents') is checked before a new thread exists, by the runner's CreateThread,
// so that a refused run leaves nothing behind.
func (a *app) runThread(ctx context.Context, p *platform.Platform, db *opened, ag *agent.Agent, req runRequest) (*thread.Thread, error) {
	if req.threadID != "" {
		th, err := thread.Open(ctx, db, localWorkspaceID, req.threadID)
		if err != nil {
			return nil, fmt.Errorf("thread %s: %w", req.threadID, err)
		}
		if len(req.values) > 0 {
			if err := p.Resolver().Set(ctx, localWorkspaceID, quiver.LayerThread, th.ID(), req.values...); err != nil {
				return nil, err
			}
		}
		if err := p.Runner().CheckVariables(ctx, th, ag); err != nil {
			return nil, cannotRun(ag, err)
		}
		return th, nil
	}
	th, err := p.Runner().CreateThread(ctx, thread.Options{WorkspaceID: localWorkspaceID, AgentID: ag.Name}, ag, req.values...)
	if err != nil {
		return nil, cannotRun(ag, err)
	}
	fmt.Fprintf(a.stderr, "thread %s\n", th.ID())
	return th, nil
}

// runToTheEnd runs the agent with message (none: it resumes the thread), asks here for what a
// paused run waits on, and waits for the non-blocking sub-agents, whose results the agent
// takes in runs of its own: the answer is the thread's once they are all done (an interrupt
// leaves them stored, to resume with --thread).
func (a *app) runToTheEnd(ctx context.Context, r *agent.Runner, th *thread.Thread, ag *agent.Agent, message string) (*agent.Outcome, error) {
	var out *agent.Outcome
	var err error
	if message != "" {
		out, err = r.Run(ctx, th, ag, message)
	} else {
		out, err = r.Resume(ctx, th, ag)
	}
	in := bufio.NewReader(a.stdin)
	for {
		for err == nil && out.Status == agent.RunPaused {
			if err = a.answer(ctx, r, th, ag, out.Pending, in); err != nil {
				break
			}
			out, err = r.Resume(ctx, th, ag)
		}
		if err != nil {
			return nil, err
		}
		done := make(chan struct{})
		go func() { r.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, fmt.Errorf("interrupted while sub-agents worked; continue with --thread %s: %w", th.ID(), ctx.Err())
		}
		info, rerr := th.Refresh(ctx)
		if rerr != nil {
			return nil, rerr
		}
		st := agent.ReadState(&info)
		if st.Outcome == nil || st.Outcome.Steps <= out.Steps {
			return out, nil
		}
		out = st.Outcome // a later run of the agent, which may wait for an answer in turn
		if out.Status == agent.RunFailed {
			return nil, fmt.Errorf("the run that took the sub-agents' results failed (%s): %s", out.Reason, out.Error)
		}
	}
}

// cannotRun explains why a run could not start on its thread; for missing variables, how to
// give them.
func cannotRun(ag *agent.Agent, err error) error {
	var missing *quiver.MissingVariablesError
	if errors.As(err, &missing) {
		return fmt.Errorf("agent %s cannot run: %w; pass --var NAME=VALUE, or set it with quiver vars set NAME "+
			"[--agent %s | --prompt %s] (--secret for a secret, read from standard input)", ag.Name, err, ag.Name, ag.Prompt.Name)
	}
	return fmt.Errorf("agent %s cannot run: %w", ag.Name, err)
}

// fleetAgent is the agent called name of the fleet's configuration the database keeps, and
// its catalog: what quiver run runs where there is no agents directory.
func (a *app) fleetAgent(ctx context.Context, inv *invocation, name string) (*agent.Agent, *agent.Catalog, error) {
	db, err := inv.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	conf, version, err := platform.LatestConfiguration(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	if conf == nil {
		return nil, nil, fmt.Errorf("no agent %q: it is not a file, there is no ./%s directory and the database has no fleet configuration "+
			"(quiver apply -f DIR gives it one)", name, defaultAgentsDir)
	}
	where := fmt.Sprintf("the fleet's configuration (version %d)", version)
	c, err := conf.Catalog(where)
	if err != nil {
		return nil, nil, err
	}
	ag, ok := c.Agent(name)
	if !ok {
		return nil, nil, fmt.Errorf("no agent %q in %s (agents: %v)", name, where, c.Names())
	}
	return ag, c, nil
}

// loadAgent finds the agent --agent names, a definition file or a name in the agents
// directory, and the catalog it comes from: the prompts and agents it may call as tools.
func loadAgent(name, dir string) (*agent.Agent, *agent.Catalog, error) {
	if name == "" {
		return defaultAgent(), nil, nil
	}
	if st, err := os.Stat(name); err == nil && !st.IsDir() {
		c, err := agent.LoadFile(name)
		if err != nil {
			return nil, nil, err
		}
		names := c.Names()
		if len(names) != 1 {
			return nil, nil, fmt.Errorf("%s defines %d agents (%v); give a file with one agent, or a name", name, len(names), names)
		}
		ag, _ := c.Agent(names[0])
		return ag, c, nil
	}
	if dir == "" {
		dir = os.Getenv("QUIVER_AGENTS")
	}
	if dir == "" {
		dir = defaultAgentsDir
	}
	c, err := agent.LoadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("agent %q is not a file, and the agents directory could not be read: %w", name, err)
	}
	ag, ok := c.Agent(name)
	if !ok {
		return nil, nil, fmt.Errorf("no agent %q in %s (agents: %v)", name, filepath.Clean(dir), c.Names())
	}
	return ag, c, nil
}

// pickModel opens --model, else the agent's model, else $QUIVER_MODEL, and says exactly how to
// configure one when there is none.
func pickModel(flagSpec string, ag *agent.Agent) (model.Model, error) {
	spec := flagSpec
	if spec == "" {
		spec = ag.Prompt.Model
	}
	if spec == "" {
		spec = os.Getenv("QUIVER_MODEL")
	}
	if spec == "" {
		// SpecHelp ends with an example of its own: one is enough.
		return nil, fmt.Errorf("no model configured. Pass --model, set model: in the agent's definition, or set QUIVER_MODEL.\n%s", model.SpecHelp)
	}
	m, err := model.Open(spec)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// shownTwice reports whether printing the final answer on standard output would show it a
// second time: both streams are the same terminal's and the answer was streamed on standard
// error as the model wrote it, whole: as the turn's text, a structured output written as JSON,
// or the output inside the {calls, output} document of a model without structured output (its
// output is a piece of what it wrote). Redirected, standard output always gets the answer, for
// scripts.
func shownTwice(stdoutTTY, stderrTTY bool, streamed, final string) bool {
	return stdoutTTY && stderrTTY && final != "" && strings.Contains(streamed, final)
}

// isTerminal reports whether w is a terminal, as a.terminal says when set.
func (a *app) isTerminal(w io.Writer) bool {
	if a.terminal != nil {
		return a.terminal(w)
	}
	return isTerminal(w)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// showProgress prints the run as it goes, on standard error: the model's text as it streams,
// each call and its result, and the tree of sub-agents as it grows (a child's calls marked
// with its name). It is called from the runs of children in the background too.
func (a *app) showProgress(e agent.Event) {
	a.progressMu.Lock()
	defer a.progressMu.Unlock()
	w := a.stderr
	switch e.Type {
	case agent.EventChildStarted:
		label := childLabel(e.Child)
		if a.children == nil {
			a.children = map[string]string{}
		}
		a.children[e.Child.Ref] = label
		if a.parents == nil {
			a.parents = map[string]string{}
		}
		a.parents[e.Child.Ref] = e.Child.Parent
		fmt.Fprintf(w, "%s▸ %s started (%s)\n", a.indent(e.ThreadID), label, e.Child.Ref)
		return
	case agent.EventChildFinished:
		fmt.Fprintf(w, "%s◂ %s %s: %s\n", a.indent(e.ThreadID), childLabel(e.Child), e.Child.Status, oneLine(e.Child.Text, 200))
		return
	case agent.EventHandoff:
		fmt.Fprintf(w, "%s⇢ handed over to %s\n", a.indent(e.ThreadID), e.Text)
		return
	}
	if label, ok := a.children[e.ThreadID]; ok && e.ThreadID != a.root {
		// A child's run: its calls, marked; its streamed text would interleave with the
		// parent's, so it is shown by child_finished.
		switch e.Type {
		case agent.EventToolCall:
			fmt.Fprintf(w, "%s[%s] → %s %s\n", a.indent(e.ThreadID), label, e.Call.Name, oneLine(string(e.Call.Args), 200))
		case agent.EventToolResult:
			fmt.Fprintf(w, "%s[%s] ← %s: %s\n", a.indent(e.ThreadID), label, e.Call.Name, oneLine(e.Result.ModelText(), 200))
		}
		return
	}
	switch e.Type {
	case agent.EventStepStarted:
		if e.Side != "" && e.Side != a.side { // a two-sided agent: say whose turn it is
			a.side = e.Side
			fmt.Fprintf(w, "[%s]\n", e.Side)
		}
	case agent.EventTextDelta:
		fmt.Fprint(w, e.Text)
		a.turnText.WriteString(e.Text)
	case agent.EventModelTurn:
		if e.Text != "" || a.turnText.Len() > 0 { // end the streamed text's line
			fmt.Fprintln(w)
		}
		a.streamedTurn = a.turnText.String()
		a.turnText.Reset()
	case agent.EventToolCall:
		fmt.Fprintf(w, "→ %s %s\n", e.Call.Name, oneLine(string(e.Call.Args), 200))
	case agent.EventToolResult:
		if e.Result.IsError() {
			fmt.Fprintf(w, "← %s failed: %s\n", e.Call.Name, oneLine(e.Result.Error, 300))
		} else {
			fmt.Fprintf(w, "← %s: %s\n", e.Call.Name, oneLine(e.Result.ModelText(), 300))
		}
	case agent.EventResumed:
		fmt.Fprintf(w, "(resuming thread %s)\n", e.ThreadID)
	}
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// errNoAnswer: standard input ended while a call waited for an answer.
var errNoAnswer = errors.New("no answer on standard input")

// answer asks on the terminal for what the paused call needs: a decision, or a client result.
func (a *app) answer(ctx context.Context, r *agent.Runner, th *thread.Thread, ag *agent.Agent, p *agent.Pending, in *bufio.Reader) error {
	ask := func(prompt string) (string, error) {
		fmt.Fprint(a.stderr, prompt)
		line, err := in.ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			return "", fmt.Errorf("%w: the run is paused on call %s to %s; resume it with: quiver run --thread %s",
				errNoAnswer, p.Call.ID, p.Call.Name, th.ID())
		}
		return strings.TrimSpace(line), nil
	}
	args := oneLine(string(p.Call.Args), 500)
	if p.Reason == agent.ReasonClientTool {
		fmt.Fprintf(a.stderr, "? client tool %s (%s) called with %s\n", p.Call.Name, p.Description, args)
		text, err := ask("  result (text, or JSON starting with {): ")
		if err != nil {
			return err
		}
		res := quiver.Text(text)
		if strings.HasPrefix(text, "{") && json.Valid([]byte(text)) {
			res = &quiver.Result{Status: quiver.StatusSuccess, Value: json.RawMessage(text)}
		}
		return r.SubmitResult(ctx, th, ag, p.Call.ID, res)
	}
	fmt.Fprintf(a.stderr, "? %s wants to run with %s\n  (%s)\n", p.Call.Name, args, p.Description)
	for {
		choice, err := ask("  [a]pprove, [e]dit, [d]eny? ")
		if err != nil {
			return err
		}
		var d quiver.Decision
		switch strings.ToLower(choice) {
		case "a", "approve", "y", "yes":
			d.Action = quiver.Approve
		case "e", "edit":
			edited, err := ask("  new arguments (a JSON object): ")
			if err != nil {
				return err
			}
			if !json.Valid([]byte(edited)) || !strings.HasPrefix(edited, "{") {
				fmt.Fprintln(a.stderr, "  that is not a JSON object; try again")
				continue
			}
			d = quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(edited)}
		case "d", "deny", "n", "no":
			msg, err := ask("  a word for the model (optional): ")
			if err != nil {
				return err
			}
			d = quiver.Decision{Action: quiver.Deny, Message: msg}
		default:
			fmt.Fprintln(a.stderr, "  answer a, e or d")
			continue
		}
		return r.Decide(ctx, th, ag, p.Call.ID, d)
	}
}

// childLabel names a child as quiver run shows it: its agent, and its name when it has one.
func childLabel(c *agent.ChildEvent) string {
	if c.Name != "" {
		return fmt.Sprintf("%s %q", c.Agent, c.Name)
	}
	return c.Agent
}

// indent is two spaces per level of a thread under the run's root, for the tree.
func (a *app) indent(threadID string) string {
	depth := 0
	for id := threadID; id != a.root && depth < 10; depth++ {
		parent, ok := a.parents[id]
		if !ok {
			break
		}
		id = parent
	}
	return strings.Repeat("  ", depth)
}
