// Command quiver lists, renders and calls Quiver tools, serves them over MCP and HTTP, and
// runs agents. "quiver help" lists the commands (the table in commands.go); "quiver COMMAND -h"
// gives a command's flags.
//
// Exit status: 0 on success, 1 when a call returns an error result, 2 on a usage error.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/sandbox"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/server"
	"github.com/quiverhq/quiver/store"
	_ "github.com/quiverhq/quiver/tools/clock" // built-in tools register themselves
	_ "github.com/quiverhq/quiver/tools/runcode"
)

const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	// First: this program is also the sandbox's worker process (see sandboxWorkers).
	sandbox.WorkerMain()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError is a mistake in how the command was invoked.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// helpRequest is -h or --help given to a command: its usage and flags go to standard output.
type helpRequest struct{ fs *flag.FlagSet }

func (helpRequest) Error() string { return "help requested" }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// app is the command's environment, kept explicit so tests run it in-process.
type app struct {
	// cmd is the command being run ("serve", "tools list"), for the usage line of a usage error.
	cmd      string
	registry *quiver.Registry
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
	// quiver run: turnText gathers the text streamed to stderr of the model's turn under way;
	// streamedTurn is what was streamed of the last finished turn.
	turnText     strings.Builder
	streamedTurn string
	// side is the side of a two-sided agent whose turn was shown last.
	side string
	// terminal reports whether a stream is a terminal; nil: isTerminal. Tests stand in for
	// one, which they cannot open.
	terminal func(io.Writer) bool
	// The tree quiver run shows: the run's root thread, each child's label and parent.
	// progressMu serializes the progress of runs in the background.
	root       string
	children   map[string]string
	parents    map[string]string
	progressMu sync.Mutex
	// imported keeps the remote MCP servers of the configuration connected, once
	// importConfigured has run: tools list says which are not, and why.
	imported *mcp.Importer
}

// sandboxWorkers runs the code of run_code and of JavaScript tools in worker processes (this
// program started again), made once per process and shared by every command: a run that
// overruns its timeout is killed, so it stops using CPU within moments however it loops, and
// the code never shares an address space or an environment with the server's secrets. Workers
// start at the first run; they exit when this process does (their input ends).
var sandboxWorkers = sync.OnceValues(func() (*sandbox.Workers, error) {
	w, err := sandbox.NewWorkers(sandbox.WorkerConfig{})
	if err == nil {
		sandbox.UseWorkers(w)
	}
	return w, err
})

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if _, err := sandboxWorkers(); err != nil {
		fmt.Fprintf(stderr, "quiver: warning: code runs inside this process, where an overrunning run cannot be killed: %v\n", err)
	}
	exportErrs := newExportErrors(stderr)
	exportErrs.install()
	stopTracing, err := startTracing(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "quiver: warning: no traces will be sent: %v\n", err)
		stopTracing = func(context.Context) error { return nil }
	}
	defer func() {
		// What the batcher still holds goes out before the command exits, within a bound;
		// a failure then follows the command's answer, and is not said (see exportErrors).
		exportErrs.exit()
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := stopTracing(flush); err != nil {
			exportErrs.Handle(err)
		}
	}()
	a := &app{registry: quiver.Default, stdin: stdin, stdout: stdout, stderr: stderr}
	return a.run(ctx, args)
}

func (a *app) run(ctx context.Context, args []string) int {
	code, err := a.dispatch(ctx, args)
	var ue usageError
	var help helpRequest
	switch {
	case errors.As(err, &help):
		fmt.Fprintf(a.stdout, "Usage:\n%s\nFlags:\n", commandUsage(help.fs.Name()))
		help.fs.SetOutput(a.stdout)
		help.fs.PrintDefaults()
		return exitOK
	case errors.As(err, &ue):
		// The command's own usage, short; the whole help only when no command was recognised.
		if u := commandUsage(a.cmd); a.cmd != "" && u != "" {
			fmt.Fprintf(a.stderr, "quiver: %s\n\nUsage:\n%s\nRun 'quiver %s -h' for its flags, 'quiver help' for every command.\n", ue.msg, u, a.cmd)
		} else {
			fmt.Fprintf(a.stderr, "quiver: %s\n\n%s", ue.msg, helpText())
		}
		return exitUsage
	case err != nil:
		fmt.Fprintf(a.stderr, "quiver: %v\n", err)
		return exitError
	}
	return code
}

// parseFlags parses flags that may come before or after the positional arguments, as in
// "quiver call NAME --args {}".
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpRequest{fs}
			}
			return nil, flagError(fs, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func (a *app) toolsList(ctx context.Context, inv *invocation) (int, error) {
	asJSON := inv.fs.Bool("json", false, "print name, description, input_schema, output_schema and annotations as JSON")
	config := addConfigFlag(inv.fs)
	if err := inv.parseNone(""); err != nil {
		return exitUsage, err
	}
	// The remote MCP servers' tools are listed as quiver call would call them.
	disconnect, err := a.everyTool(ctx, inv, *config)
	if err != nil {
		return exitError, err
	}
	defer disconnect()
	tools := a.registry.Tools()
	if *asJSON {
		type entry struct {
			Name         string              `json:"name"`
			Description  string              `json:"description"`
			InputSchema  *schema.Schema      `json:"input_schema"`
			OutputSchema *schema.Schema      `json:"output_schema,omitempty"`
			Annotations  *quiver.Annotations `json:"annotations,omitempty"`
		}
		list := make([]entry, len(tools))
		for i, t := range tools {
			s := t.Spec()
			list[i] = entry{s.Name, s.Description, s.InputSchema, s.OutputSchema, nil}
			if !s.Annotations.IsZero() {
				list[i].Annotations = &s.Annotations
			}
		}
		a.warnNotConnected()
		return exitOK, writeJSON(a.stdout, list)
	}
	a.warnNotConnected()
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, t := range tools {
		desc, _, _ := strings.Cut(t.Description(), "\n")
		fmt.Fprintf(w, "%s\t%s%s\n", t.Name(), desc, hintsText(t.Spec().Annotations))
	}
	return exitOK, w.Flush()
}

// hintsText is a tool's annotations for the listing, after its description: the hints it
// declares true, and "not read-only" where it says so ("" for none). A hint left out says
// nothing, so it is not shown as false.
func hintsText(a quiver.Annotations) string {
	var hints []string
	for _, h := range []struct {
		v    *bool
		name string
	}{{a.ReadOnlyHint, "read-only"}, {a.DestructiveHint, "destructive"}, {a.IdempotentHint, "idempotent"}, {a.OpenWorldHint, "open world"}} {
		switch {
		case h.v == nil:
		case *h.v:
			hints = append(hints, h.name)
		case h.name == "read-only":
			hints = append(hints, "not read-only")
		}
	}
	if len(hints) == 0 {
		return ""
	}
	return "  [" + strings.Join(hints, ", ") + "]"
}

// warnNotConnected says on standard error which remote MCP servers of the configuration are
// not connected, and why: their tools are missing from the list, and silence would make them
// look like servers without tools.
func (a *app) warnNotConnected() {
	if a.imported == nil {
		return
	}
	for _, st := range a.imported.Status() {
		if st.Connected {
			continue
		}
		why := cmp.Or(st.LastError, "not connected yet")
		if !st.LastAttempt.IsZero() {
			why += " (last tried " + st.LastAttempt.UTC().Format(time.RFC3339) + ")"
		}
		fmt.Fprintf(a.stderr, "quiver: the MCP server %q is not connected, so its tools are not listed: %s\n", st.Name, why)
	}
}

// everyTool adds to the registry the tools stored in the database and those of the remote MCP
// servers the configuration file names; disconnect ends the remotes' connections.
func (a *app) everyTool(ctx context.Context, inv *invocation, config string) (disconnect func(), err error) {
	if err := a.loadStoredTools(ctx, inv); err != nil {
		return nil, err
	}
	return a.importConfigured(ctx, inv.store, config)
}

func (a *app) toolsSchema(ctx context.Context, inv *invocation) (int, error) {
	dialect := inv.fs.String("dialect", string(schema.OpenAI), "openai, openai-strict, anthropic, gemini or mcp")
	config := addConfigFlag(inv.fs)
	pos, err := inv.parse(1, 1, "tools schema needs exactly one tool name")
	if err != nil {
		return exitUsage, err
	}
	d, err := schema.ParseDialect(*dialect)
	if err != nil {
		return exitUsage, usagef("%v", err)
	}
	disconnect, err := a.everyTool(ctx, inv, *config)
	if err != nil {
		return exitError, err
	}
	defer disconnect()
	t, ok := a.registry.Lookup(pos[0])
	if !ok {
		return exitError, fmt.Errorf("unknown tool %q; run \"quiver tools list\" to see the available tools", pos[0])
	}
	set, err := schema.Render(d, quiver.ToolSchemas(a.registry, []*quiver.Tool{t}))
	if err != nil {
		return exitError, err
	}
	return exitOK, writeJSON(a.stdout, set)
}

func (a *app) call(ctx context.Context, inv *invocation) (int, error) {
	argText := inv.fs.String("args", "{}", "arguments as JSON, @FILE to read a file, or - to read standard input")
	threadID := inv.fs.String("thread", "", "record the call on this thread (default: a new thread tagged cli) and resolve the tool's variables on it (then its agent, user and the instance)")
	agentName := inv.fs.String("agent", "", "resolve the tool's variables on this agent's layer (then the instance)")
	userID := inv.fs.String("user", "", "resolve the tool's variables on this user's layer (then the instance)")
	noRecord := inv.fs.Bool("no-record", false, "do not record the call in the database (recorded by default, as at every door: quiver threads list shows it)")
	config := addConfigFlag(inv.fs)
	pos, err := inv.parse(1, 1, "call needs exactly one tool name")
	if err != nil {
		return exitUsage, err
	}
	raw, err := a.readArgs(*argText)
	if err != nil {
		return exitUsage, err
	}
	d := &quiver.Dispatcher{Registry: a.registry}
	if !*noRecord || inv.store.exists() {
		// The database holds the stored tools and the variables they resolve, as for a
		// model's or an MCP client's call, and the thread the call is recorded on (it is
		// made when there is none, so that every call is recorded, whoever asks).
		db, resolver, err := inv.resolver(ctx)
		if err != nil {
			return exitError, err
		}
		if a.registry, err = a.withStoredTools(ctx, db); err != nil {
			return exitError, err
		}
		d.Resolver = resolver
		scope := quiver.Scope{WorkspaceID: localWorkspaceID, ThreadID: *threadID, AgentID: *agentName, UserID: *userID}
		if !*noRecord {
			if scope.ThreadID, err = callThread(ctx, db, *threadID, *userID); err != nil {
				return exitError, err
			}
			d.Recorder = &server.Recorder{Store: db}
		}
		ctx = quiver.WithScope(ctx, scope)
	} else if *threadID != "" || *agentName != "" || *userID != "" {
		return exitUsage, usagef("--thread, --agent and --user need a database; there is none yet (quiver vars set creates it)")
	}
	// Tools of the remote MCP servers in the configuration file are callable too.
	disconnect, err := a.importConfigured(ctx, inv.store, *config)
	if err != nil {
		return exitError, err
	}
	defer disconnect()
	d.Registry = a.registry
	// The call has its id before it runs, as at the other doors: the tool sees it as its
	// idempotency key (quiver.Execution.CallID), and the record carries the same one.
	r, err := d.Dispatch(quiver.WithDoor(ctx, quiver.DoorCLI), quiver.Call{ID: stamp.ID(ctx, "call"), Name: pos[0], Args: raw})
	if err != nil {
		return exitError, err
	}
	if err := writeJSON(a.stdout, r); err != nil {
		return exitError, err
	}
	if hint := varHint(r); hint != "" {
		fmt.Fprintf(a.stderr, "quiver: %s\n", hint)
	}
	if r.IsError() {
		return exitError, nil
	}
	return exitOK, nil
}

// callThread is the thread quiver call records its call on: id, which must be a thread of the
// local workspace, or a new thread tagged "cli" (as the API's calls get one tagged "api").
func callThread(ctx context.Context, db *opened, id, userID string) (string, error) {
	if id != "" {
		if _, err := db.Thread(ctx, localWorkspaceID, id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return "", fmt.Errorf("no thread %s to record the call on (quiver threads list shows them; without --thread the call gets a new one)", id)
			}
			return "", fmt.Errorf("thread %s: %w", id, err)
		}
		return id, nil
	}
	th := &store.Thread{WorkspaceID: localWorkspaceID, UserID: userID, Tags: []string{"cli"}}
	if err := db.CreateThread(ctx, th); err != nil {
		return "", fmt.Errorf("creating a thread to record the call on (--no-record calls without one): %w", err)
	}
	return th.ID, nil
}

func (a *app) readArgs(text string) (json.RawMessage, error) {
	switch {
	case text == "-":
		b, err := io.ReadAll(io.LimitReader(a.stdin, 64<<20))
		if err != nil {
			return nil, usagef("reading arguments from standard input: %v", err)
		}
		return b, nil
	case strings.HasPrefix(text, "@"):
		b, err := os.ReadFile(text[1:])
		if err != nil {
			return nil, usagef("reading arguments: %v", err)
		}
		return b, nil
	}
	return json.RawMessage(text), nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
