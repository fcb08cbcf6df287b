package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/mcp/conformance"
	"github.com/quiverhq/quiver/platform"
)

// mcpStdio serves the local workspace's tools over MCP on standard input and output: the
// platform's MCP door (its workspace's dispatcher and what Platform.MCPOptions adds: the
// prompts of the agents directory among them), recording calls as quiver serve does, with no
// HTTP server. Its agents are found as quiver serve's (--agents, $QUIVER_AGENTS, ./agents),
// and served, not stored, where the database has no fleet configuration.
func (a *app) mcpStdio(ctx context.Context, inv *invocation) (int, error) {
	f := addServeFlags(inv.fs)
	agentsDir := inv.fs.String("agents", "", "the directory of agent and prompt definitions served (default: $QUIVER_AGENTS, else ./"+defaultAgentsDir+" when it exists)")
	toolset := inv.fs.String("toolset", "", "serve only the tools of this toolset of the workspace's entitlements, as /mcp/NAME does over HTTP")
	if err := inv.parseNone(""); err != nil {
		return exitUsage, err
	}
	ag, err := loadAgents(*agentsDir, a.stderr)
	if err != nil {
		return exitError, err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopWatching, err := a.startWatching(f)
	if err != nil {
		return exitError, err
	}
	defer stopWatching()
	defer inv.close() // within the signal handling, as in serve
	sv, err := a.prepareServed(ctx, inv, f, ag)
	if err != nil {
		return exitError, err
	}
	defer sv.stopWatch()
	if err := sv.openJournal(ctx); err != nil {
		return exitError, err
	}
	defer sv.p.Close()
	if *toolset != "" {
		if !sv.p.HasToolset(ctx, localWorkspaceID, *toolset) {
			return exitUsage, usagef("--toolset %q: the workspace's entitlements define no such toolset (quiver access get lists them)", *toolset)
		}
		// The workspace's operator, limited to the toolset as a request to its address is.
		a := platform.Operator(localWorkspaceID, "")
		a.Toolset = *toolset
		ctx = platform.WithActor(ctx, a)
	}
	opts := sv.p.MCPOptions(localWorkspaceID, sv.mcp)
	srv := mcp.NewServer(sv.p.Workspace(ctx, localWorkspaceID).Dispatcher(), &opts)
	if sv.setupMCP != nil {
		sv.setupMCP(srv)
	}
	defer srv.Close()
	// No HTTP server here to come back to from an authorization: listen at the redirect URL
	// while a user authorizes.
	az := newTerminalAuthorizer(a.stderr)
	defer az.Close()
	disconnect := sv.p.ConnectRemotes(ctx, platform.RemoteAccess{Authorizer: az, Tokens: sv.grants,
		RedirectURL: defaultBaseURL() + mcp.OAuthCallbackPath, OnChange: srv.ToolsChanged, Logger: sv.logger})
	defer disconnect()
	releaseStartupGarbage()
	// A line is capped like a request body on /mcp.
	err = srv.Run(ctx, mcp.StdioTransport(a.stdin, a.stdout, int(sdk.DefaultMaxRequestBodyBytes)))
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return exitError, err
	}
	return exitOK, nil
}

// mcpConformanceClient plays one client scenario of the MCP conformance suite, which runs it
// as "COMMAND URL" with the scenario in MCP_CONFORMANCE_SCENARIO. Its argument is taken as
// given: it has no flags.
func (a *app) mcpConformanceClient(ctx context.Context, inv *invocation) (int, error) {
	if len(inv.args) != 1 {
		return exitUsage, usagef("mcp conformance-client needs the server URL")
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	if scenario == "" {
		return exitUsage, usagef("MCP_CONFORMANCE_SCENARIO is not set (the conformance suite sets it)")
	}
	logger := slog.New(slog.NewTextHandler(a.stderr, nil))
	if err := conformance.RunClient(ctx, inv.args[0], scenario, logger); err != nil {
		return exitError, fmt.Errorf("scenario %s: %w", scenario, err)
	}
	return exitOK, nil
}
