package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/stamp"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store/memstore"
)

// quiver call is a door like /v1/tools/{name}/call and MCP's tools/call: the call goes through
// the local workspace's dispatcher, which the platform keeps for every door (its tools,
// governance, variables, confirmation and recording), on a thread made as every door makes
// one (platform.CallThread).

func (a *app) call(ctx context.Context, inv *invocation) (int, error) {
	r, err := a.parseCall(inv)
	if err != nil {
		return exitUsage, err
	}
	// The database holds the stored tools and the variables they resolve, as for a model's or
	// an MCP client's call, and the thread the call is recorded on (made when there is none, so
	// that every call is recorded, whoever asks).
	withDB := !r.noRecord || inv.store.exists()
	if !withDB && (r.threadID != "" || r.agent != "" || r.user != "") {
		return exitUsage, usagef("--thread, --agent and --user need a database; there is none yet (quiver vars set creates it)")
	}
	p, disconnect, err := a.callPlatform(ctx, inv, r.config, withDB)
	if err != nil {
		return exitError, err
	}
	defer disconnect()
	if withDB {
		scope := quiver.Scope{WorkspaceID: localWorkspaceID, ThreadID: r.threadID, UserID: r.user}
		if !r.noRecord {
			if scope, err = callScope(ctx, p, r.threadID, r.user); err != nil {
				return exitError, err
			}
		}
		scope.AgentID = r.agent
		ctx = quiver.WithScope(ctx, scope)
	}
	// The call has its id before it runs, as at the other doors: the tool sees it as its
	// idempotency key (quiver.Execution.CallID), and the record carries the same one.
	d := p.Workspace(ctx, localWorkspaceID).Dispatcher()
	res, err := d.Dispatch(quiver.WithDoor(ctx, quiver.DoorCLI), quiver.Call{ID: stamp.ID(ctx, "call"), Name: r.tool, Args: r.args, NoRecord: r.noRecord})
	if err != nil {
		return exitError, err
	}
	if err := writeJSON(a.stdout, res); err != nil {
		return exitError, err
	}
	if hint := varHint(res); hint != "" {
		fmt.Fprintf(a.stderr, "quiver: %s\n", hint)
	}
	if res.IsError() {
		return exitError, nil
	}
	return exitOK, nil
}

// callRequest is what quiver call was asked: the tool and its arguments, where to record the
// call and on which layers to resolve its variables, and the configuration file.
type callRequest struct {
	tool                  string
	args                  json.RawMessage
	threadID, agent, user string
	noRecord              bool
	config                string
}

// parseCall reads quiver call's flags and arguments.
func (a *app) parseCall(inv *invocation) (callRequest, error) {
	argText := inv.fs.String("args", "{}", "arguments as JSON, @FILE to read a file, or - to read standard input")
	threadID := inv.fs.String("thread", "", "record the call on this thread (default: a new thread tagged cli) and resolve the tool's variables on it (then its agent, user and the instance)")
	agentName := inv.fs.String("agent", "", "resolve the tool's variables on this agent's layer (then the instance)")
	userID := inv.fs.String("user", "", "resolve the tool's variables on this user's layer (then the instance)")
	noRecord := inv.fs.Bool("no-record", false, "do not record the call in the database (recorded by default, as at every door: quiver threads list shows it)")
	config := addConfigFlag(inv.fs)
	pos, err := inv.parse(1, 1, "call needs exactly one tool name")
	if err != nil {
		return callRequest{}, err
	}
	raw, err := a.readArgs(*argText)
	if err != nil {
		return callRequest{}, err
	}
	return callRequest{tool: pos[0], args: raw, threadID: *threadID, agent: *agentName, user: *userID, noRecord: *noRecord, config: *config}, nil
}

// callPlatform assembles the platform quiver call dispatches through: the app's tools and the
// configuration's (its OpenAPI documents, A2A agents and remote MCP servers: disconnect ends
// their connections) shared under the local workspace's stored ones, governed by the
// configuration's rules. The configuration is the fleet's when the database keeps one, as
// every node serves it (a configuration file is then not read: quiver apply applies it), else
// the configuration file. Without a database (withDB false), a store held in memory stands in
// for it: no stored tools, no variables, nothing recorded.
func (a *app) callPlatform(ctx context.Context, inv *invocation, config string, withDB bool) (_ *platform.Platform, disconnect func(), err error) {
	reg := &quiver.Registry{Logger: a.registry.Logger}
	if err := reg.Register(a.registry.Tools()...); err != nil {
		return nil, nil, err
	}
	a.registry = reg // the configuration's tools join it, not quiver.Default
	var db *opened
	var fleet int64 // the version of the fleet's configuration the database keeps; 0: none
	if withDB {
		if db, err = inv.open(ctx); err != nil {
			return nil, nil, err
		}
		if _, fleet, err = platform.LatestConfiguration(ctx, db); err != nil {
			return nil, nil, err
		}
	}
	disconnect = func() {}
	if fleet == 0 {
		if disconnect, err = a.importConfigured(ctx, inv.store, config); err != nil {
			return nil, nil, err
		}
	}
	defer func() {
		if err != nil {
			disconnect()
		}
	}()
	var p *platform.Platform
	if withDB {
		p, err = assemble(db, reg, agents{}, nil, nil)
	} else {
		p, err = platform.New(platform.Config{Store: memstore.New(), Registry: reg})
	}
	if err != nil {
		return nil, nil, err
	}
	if err := p.SetOperatorRules(ctx, a.rules); err != nil {
		return nil, nil, err
	}
	if fleet > 0 {
		stopRemotes, err := a.serveFleet(ctx, p, db, config, fleet)
		if err != nil {
			return nil, nil, err
		}
		disconnect = stopRemotes
	}
	stop := disconnect
	// Closing the platform writes the usage the command metered (see platform.Close).
	return p, func() { stop(); _ = p.Close() }, nil
}

// serveFleet serves the fleet's configuration (version) on p, as a node does, with its remote
// MCP servers connected (disconnect ends the connections). A configuration file the command
// would otherwise read is named on stderr as not read.
func (a *app) serveFleet(ctx context.Context, p *platform.Platform, db *opened, config string, version int64) (disconnect func(), err error) {
	a.sayFleetConfiguration(config, version)
	if err := p.LoadConfiguration(ctx); err != nil {
		return nil, err
	}
	grants, err := oauthGrants(db.KeyPath)
	if err != nil {
		return nil, err
	}
	az := newTerminalAuthorizer(a.stderr)
	stop := p.ConnectRemotes(ctx, platform.RemoteAccess{Authorizer: az, Tokens: grants, RedirectURL: defaultBaseURL() + mcp.OAuthCallbackPath,
		Logger: slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	a.fleetRemotes = p
	return func() { stop(); az.Close() }, nil
}

// callScope is where quiver call records its call (platform.CallThread): on threadID, a thread
// of the local workspace, or on a new thread of userID tagged "cli"; refused in the CLI's
// words.
func callScope(ctx context.Context, p *platform.Platform, threadID, userID string) (quiver.Scope, error) {
	scope, err := p.CallThread(ctx, platform.Operator(localWorkspaceID, userID), threadID, "cli")
	var e *platform.Error
	switch {
	case err == nil:
		return scope, nil
	case !errors.As(err, &e):
	case threadID != "" && e.Kind == platform.NotFound:
		return scope, fmt.Errorf("no thread %s to record the call on (quiver threads list shows them; without --thread the call gets a new one)", threadID)
	case e.Cause != nil:
		err = e.Cause // the store's words: an internal failure's say nothing of it
	}
	if threadID != "" {
		return scope, fmt.Errorf("thread %s: %w", threadID, err)
	}
	return scope, fmt.Errorf("creating a thread to record the call on (--no-record calls without one): %w", err)
}

// sayFleetConfiguration says on stderr that the fleet's configuration (version) is used, when
// a configuration file would otherwise be read.
func (a *app) sayFleetConfiguration(config string, version int64) {
	if file := nodeConfigFile(config); file != "" {
		fmt.Fprintf(a.stderr, "quiver: the database keeps the fleet's configuration (version %d), which this command uses; %s is not read (quiver apply -f %s makes it the fleet's)\n",
			version, file, file)
	}
}
