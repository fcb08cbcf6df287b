package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/quiverhq/quiver/store/vars"
)

// command is one command of the CLI. The help, each command's usage and the dispatch all come
// from the commands table, so that a command is added, renamed or described in one place.
type command struct {
	name     string // "serve", "tools list"
	synopsis string // its flags and arguments
	about    string // what it does; lines after the first start with a newline
	run      func(a *app, ctx context.Context, inv *invocation) (int, error)
	store    bool // takes --db and --postgres, the database it works on (see invocation)
	hidden   bool // run by tools, not people: left out of the help
}

// commands lists every command in the order the help shows them. It is filled in init, since
// the help command reads it.
var commands []command

func init() {
	commands = []command{
		{name: "serve", synopsis: "[--addr HOST:PORT] [--config FILE] [--db PATH | --postgres DSN] [--journal=false] [--insecure-local] [--conformance]",
			about: `serve the tools over MCP at http://127.0.0.1:7411/mcp,
the JSON API at /v1 (OpenAPI document: /v1/openapi.json)
and the web console at http://127.0.0.1:7411/
(--addr or QUIVER_ADDR to change), to clients with an
API key (the first start prints one; --insecure-local:
none needed, on a loopback address only), recording every
call (with SQLite through a journal beside the database;
--journal=false stores each record before answering)`, run: (*app).serve, store: true},
		{name: "apply", synopsis: "-f DIR|FILE [--dry-run] [--db PATH | --postgres DSN]",
			about: `make the files the configuration every node serving
the database shares (agents, prompts, OpenAPI documents,
MCP servers, A2A agents, governance): its next version,
served by every node within a second; the same again
changes nothing; --dry-run prints the difference only`, run: (*app).apply, store: true},
		{name: "mcp stdio", synopsis: "[--agents DIR] [--config FILE] [--db PATH | --postgres DSN] [--journal=false]",
			about: "serve the tools over MCP on standard input and output", run: (*app).mcpStdio, store: true},
		{name: "mcp conformance-client", synopsis: "URL", about: "play a scenario of the MCP conformance suite",
			run: (*app).mcpConformanceClient, hidden: true},
		{name: "tools list", synopsis: "[--json] [--config FILE]",
			about: "list the available tools (the configuration's remote ones too)", run: (*app).toolsList, store: true},
		{name: "tools schema", synopsis: "NAME [--dialect D] [--config FILE]",
			about: "print a tool as a provider sees it; --dialect is\nopenai (the default), openai-strict, anthropic,\ngemini or mcp", run: (*app).toolsSchema, store: true},
		{name: "tools add", synopsis: "--js FILE --schema FILE [--name N] [--description D] [--requires-confirmation] [--config FILE] | DEFINITION.yaml",
			about: "store a JavaScript tool in the database (a new version\nif it exists); tools list, schema and call load them", run: (*app).toolsAdd, store: true},
		{name: "tools import-openapi", synopsis: "FILE|URL --name N [--server URL]... [--operations LIST] [--credential SCHEME=VARIABLE]... [--requires-confirmation | --confirm-writes] [--dry-run]",
			about: "make a tool of each operation of an OpenAPI document\n(NAME.operationId) and add it to the configuration file;\ncredentials come from secret variables", run: (*app).toolsImportOpenAPI, store: true},
		{name: "call", synopsis: "NAME [--args JSON|@FILE|-] [--config FILE] [--thread ID | --agent NAME | --user ID] [--no-record]",
			about: "call a tool and print the result as JSON; its variables\nresolve on the thread, agent or user given, then the instance;\nrecorded on --thread or a new thread tagged cli (--no-record: not)", run: (*app).call, store: true},
		{name: "vars set", synopsis: "NAME [VALUE] [--secret] [--thread ID | --agent NAME | --prompt NAME | --user ID]",
			about: "set a variable (no layer flag: the instance); a --secret\nvalue is read from standard input, never the command line", run: (*app).varsSet, store: true},
		{name: "vars list", synopsis: "[LAYER FLAG] [--json]", about: "list the values of a layer (secrets shown only as set)", run: (*app).varsList, store: true},
		{name: "vars unset", synopsis: "NAME [LAYER FLAG]", about: "remove a value", run: (*app).varsUnset, store: true},
		{name: "secrets rotate-key", synopsis: "[--db PATH | --postgres DSN] [--key PATH]",
			about: "re-encrypt every secret variable under a new key", run: (*app).rotateKey},
		{name: "run", synopsis: `[--agent NAME|FILE] [--model PROVIDER:MODEL] [--thread ID] [--var NAME=VALUE]... "message"`,
			about: "run an agent; asks here for confirmations and client results;\n--var sets a text variable on the run's thread", run: (*app).runAgent, store: true},
		{name: "threads list", synopsis: "[--limit N] [--cursor C] [--json]",
			about: "list the threads, newest first, a page at a time", run: (*app).threadsList, store: true},
		{name: "threads show", synopsis: "ID [--json]", about: "print a thread's messages and tool calls", run: (*app).threadsShow, store: true},
		{name: "keys create", synopsis: "--name N [--role R] [--expires DURATION] [--toolset NAME]...",
			about: "make an API key for quiver serve (printed once);\n--role is member (the default: calls tools), viewer\n(lists them) or admin; --toolset binds it to a\ntoolset's tools alone", run: (*app).keysCreate, store: true},
		{name: "keys list", synopsis: "[--json]", about: "list the API keys (never the keys themselves)", run: (*app).keysList, store: true},
		{name: "keys revoke", synopsis: "ID", about: "revoke a key; servers refuse it within a second", run: (*app).keysRevoke, store: true},
		{name: "access explain", synopsis: "--tool NAME [--subject SPEC] [--json] [--config FILE]",
			about: "say whether a subject may call a tool, and which rule\ndecided (exit 0: it may, 1: it may not); --subject\nholds any of key:ID, user:ID, role:ROLE,\nclaim:NAME=VALUE, agent:NAME and toolset:NAME,\ncomma-separated", run: (*app).accessExplain, store: true},
		{name: "access get", synopsis: "[--json]", about: "print the entitlements: who may see and call which\ntools, and the toolsets (YAML, or JSON)", run: (*app).accessGet, store: true},
		{name: "access set", synopsis: "FILE [--after N] [--config FILE]",
			about: "replace the entitlements with FILE's (YAML or JSON;\n- reads standard input), from version N (default:\nthe current one); servers follow within a second", run: (*app).accessSet, store: true},
		{name: "version", about: "print the version, commit and platform", run: func(a *app, _ context.Context, inv *invocation) (int, error) {
			if err := inv.parseNone(""); err != nil {
				return exitUsage, err
			}
			fmt.Fprintln(a.stdout, versionText())
			return exitOK, nil
		}},
	}
}

// aboutColumn is where a command's description starts in the help.
const aboutColumn = 45

// usageOf is the help's entry for c: its synopsis, then its description at aboutColumn (on the
// synopsis's line when there is room).
func usageOf(c command) string {
	var b strings.Builder
	line := strings.TrimRight("  quiver "+c.name+" "+c.synopsis, " ")
	about := strings.Split(c.about, "\n")
	if len(line) < aboutColumn-1 {
		fmt.Fprintf(&b, "%-*s%s\n", aboutColumn, line, about[0])
		about = about[1:]
	} else {
		b.WriteString(line + "\n")
	}
	for _, l := range about {
		fmt.Fprintf(&b, "%*s%s\n", aboutColumn, "", l)
	}
	return b.String()
}

// helpText is the whole help: every command.
func helpText() string {
	var b strings.Builder
	b.WriteString("Quiver: define tools once; govern, validate, execute and record every call.\n\nUsage:\n")
	for _, c := range commands {
		if !c.hidden {
			b.WriteString(usageOf(c))
		}
	}
	b.WriteString("\nExit status: 0 success, 1 the call returned an error result, 2 usage error.\n")
	return b.String()
}

// commandUsage is the help's entry for the command called name, or for each command of the
// group called name ("tools"); "" when there is none.
func commandUsage(name string) string {
	var b strings.Builder
	for _, c := range commands {
		if !c.hidden && (c.name == name || strings.HasPrefix(c.name, name+" ")) {
			b.WriteString(usageOf(c))
		}
	}
	return b.String()
}

// lookup finds the command args start with, and returns the arguments after its name.
func lookup(args []string) (*command, []string) {
	for i := range commands {
		words := strings.Fields(commands[i].name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == commands[i].name {
			return &commands[i], args[len(words):]
		}
	}
	return nil, nil
}

// subcommands lists the visible commands of a group ("list", "schema", "add" of "tools").
func subcommands(group string) []string {
	var out []string
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok && !c.hidden {
			out = append(out, sub)
		}
	}
	return out
}

// dispatch runs the command args name.
func (a *app) dispatch(ctx context.Context, args []string) (int, error) {
	a.cmd = ""
	if len(args) == 0 {
		return exitUsage, usagef("no command given")
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(a.stdout, helpText())
		return exitOK, nil
	case "--version":
		args = []string{"version"}
	}
	if c, rest := lookup(args); c != nil {
		a.cmd = c.name
		inv := newInvocation(c, rest)
		inv.stderr = a.stderr
		defer inv.close()
		return c.run(a, ctx, inv)
	}
	group := args[0]
	subs := subcommands(group)
	if len(subs) == 0 {
		return exitUsage, usagef("unknown command %q", group)
	}
	a.cmd = group
	switch {
	case len(args) == 1:
		return exitUsage, usagef("%s needs a subcommand: %s", group, oneOf(subs))
	case args[1] == "-h" || args[1] == "--help" || args[1] == "help":
		fmt.Fprintf(a.stdout, "Usage:\n%s\nRun 'quiver %s COMMAND -h' for a command's flags.\n", commandUsage(group), group)
		return exitOK, nil
	}
	return exitUsage, usagef("unknown %s subcommand %q (%s)", group, args[1], oneOf(subs))
}

// invocation is the command being run, made by dispatch from its entry in the table: its flag
// set, named after it (for its -h and its usage errors), with --db and --postgres when the
// entry says store, and the arguments after its name. The command adds its own flags, then
// parses; the database it opens is closed by dispatch when the command returns.
type invocation struct {
	name  string
	fs    *flag.FlagSet
	store storeFlags // nil pointers unless the command takes them
	args  []string
	db    *opened
	// stderr is told when a database is created rather than opened (a mistyped --db).
	stderr io.Writer
	// describing: the command is asked for its flags only (see describe): parse returns
	// errDescribed once the command has added them, before it does anything.
	describing bool
}

// errDescribed is what parse returns to a command being described: its flags are all added.
var errDescribed = errors.New("quiver: the command's flags are described, not parsed")

// describe returns c's flag set, with every flag the command takes, without running it: the
// command adds its flags and stops at its parse (every command parses before it does
// anything else). The CLI reference (docs/reference/cli.md) and the documentation's checks of
// quiver commands read it.
func describe(c *command) (*flag.FlagSet, error) {
	inv := newInvocation(c, nil)
	inv.describing = true
	inv.fs.SetOutput(io.Discard)
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	if _, err := c.run(a, context.Background(), inv); !errors.Is(err, errDescribed) {
		return nil, fmt.Errorf("quiver %s did not stop at its flags' parse when described (%v)", c.name, err)
	}
	return inv.fs, nil
}

func newInvocation(c *command, args []string) *invocation {
	inv := &invocation{name: c.name, fs: flag.NewFlagSet(c.name, flag.ContinueOnError), args: args}
	if c.store {
		inv.store = addStoreFlags(inv.fs)
	}
	return inv
}

// parse parses the flags and returns the positional arguments, which must number from min to
// max (max -1: any number); else the usage error is need, the command's words for what they
// are ("call needs exactly one tool name").
func (inv *invocation) parse(min, max int, need string) ([]string, error) {
	if inv.describing {
		return nil, errDescribed
	}
	pos, err := parseFlags(inv.fs, inv.args)
	if err != nil {
		return nil, err
	}
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		return nil, usagef("%s", need)
	}
	return pos, nil
}

// parseNone parses the flags of a command that takes no positional argument: one given is a
// usage error: "keys list takes no arguments, got "x"", then hint.
func (inv *invocation) parseNone(hint string) error {
	if inv.describing {
		return errDescribed
	}
	pos, err := parseFlags(inv.fs, inv.args)
	if err == nil && len(pos) > 0 {
		err = usagef("%s takes no arguments, got %q%s", inv.name, pos[0], hint)
	}
	return err
}

// open opens the database the store flags name (see storeFlags.open), once: a second call
// returns the same. Dispatch closes it when the command returns.
func (inv *invocation) open(ctx context.Context) (*opened, error) {
	if inv.store.db == nil {
		panic("quiver: command " + inv.name + " opens the database but its entry in the table has no store flags")
	}
	if inv.db == nil {
		db, err := inv.store.open(ctx)
		if err != nil {
			return nil, err
		}
		if db.Created && inv.stderr != nil {
			fmt.Fprintf(inv.stderr, "quiver: created a new database at %s (there was none; give --db to use another)\n", db.SQLitePath)
		}
		inv.db = db
	}
	return inv.db, nil
}

// resolver opens the database (see open) and a variable resolver over it with the secret
// keyring, checked against the database's key (see keyring).
func (inv *invocation) resolver(ctx context.Context) (*opened, *vars.Resolver, error) {
	db, err := inv.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	keys, err := keyring(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	return db, vars.New(db, keys), nil
}

// close closes the database the command opened, if it did; once.
func (inv *invocation) close() {
	if inv.db != nil {
		inv.db.Close()
		inv.db = nil
	}
}

// oneOf lists choices as a sentence does: "a", "a or b", "a, b or c".
func oneOf(choices []string) string {
	if len(choices) < 2 {
		return strings.Join(choices, "")
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}
