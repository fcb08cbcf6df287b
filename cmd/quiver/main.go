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
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/sandbox"
	"github.com/quiverhq/quiver/schema"
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
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		// Set here rather than in serve, so that the tests that serve in their own process
		// keep the collector they were started with.
		tuneGC()
	}
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
	// rules are the configuration's governance rules, once a command has read it: the
	// platform a command assembles governs its tools with them.
	rules  []quiver.Rule
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
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
	// importConfigured has run: tools list says which are not, and why. fleetRemotes is the
	// platform serving the fleet's configuration instead, whose servers it connected.
	imported     *mcp.Importer
	fleetRemotes *platform.Platform
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
	// The tools are listed as every door serves them: the remote MCP servers' as quiver call
	// would call them; a disabled one, or one the rules deny, not at all.
	d, disconnect, err := a.everyTool(ctx, inv, *config)
	if err != nil {
		return exitError, err
	}
	defer disconnect()
	tools := d.Tools()
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
	var status []mcp.RemoteStatus
	switch {
	case a.imported != nil:
		status = a.imported.Status()
	case a.fleetRemotes != nil:
		status = a.fleetRemotes.RemoteStatus()
	}
	for _, st := range status {
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

// everyTool is the local workspace's dispatcher as every door has it (see callPlatform): the
// workspace's stored tools (JavaScript, client, its OpenAPI documents') over the built-in and
// the configuration's ones (its OpenAPI documents, A2A agents and remote MCP servers), governed
// by the configuration's rules. The app's registry becomes its tools; disconnect ends the
// remotes' connections.
func (a *app) everyTool(ctx context.Context, inv *invocation, config string) (_ *quiver.Dispatcher, disconnect func(), _ error) {
	p, disconnect, err := a.callPlatform(ctx, inv, config, inv.store.exists())
	if err != nil {
		return nil, nil, err
	}
	d := p.Workspace(ctx, localWorkspaceID).Dispatcher()
	a.registry = d.Registry
	return d, disconnect, nil
}

func (a *app) toolsSchema(ctx context.Context, inv *invocation) (int, error) {
	dialect := inv.fs.String("dialect", string(schema.OpenAI), "openai, openai-strict, anthropic, gemini or mcp")
	config := addConfigFlag(inv.fs)
	pos, err := inv.parse(1, 1, "tools schema needs exactly one tool name")
	if err != nil {
		return exitUsage, err
	}
	dl, err := schema.ParseDialect(*dialect)
	if err != nil {
		return exitUsage, usagef("%v", err)
	}
	d, disconnect, err := a.everyTool(ctx, inv, *config)
	if err != nil {
		return exitError, err
	}
	defer disconnect()
	t, ok := servedTool(d, pos[0])
	if !ok {
		return exitError, fmt.Errorf("unknown tool %q; run \"quiver tools list\" to see the available tools", pos[0])
	}
	set, err := schema.Render(dl, quiver.ToolSchemas(a.registry, []*quiver.Tool{t}))
	if err != nil {
		return exitError, err
	}
	return exitOK, writeJSON(a.stdout, set)
}

// servedTool is the tool of that name among those d serves (as GET /v1/tools/served/{name}
// finds it).
func servedTool(d *quiver.Dispatcher, name string) (*quiver.Tool, bool) {
	for _, t := range d.Tools() {
		if t.Name() == name {
			return t, true
		}
	}
	return nil, false
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
