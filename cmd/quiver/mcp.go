package main

import "context"

// mcpCmd runs the mcp subcommands.
func (a *app) mcpCmd(ctx context.Context, args []string) (int, error) {
	if len(args) < 1 {
		return exitUsage, usagef("mcp needs a subcommand: stdio")
	}
	switch args[0] {
	case "stdio":
		return a.mcpStdio(ctx, args[1:])
	case "conformance-client":
		return a.mcpConformanceClient(ctx, args[1:])
	}
	return exitUsage, usagef("unknown mcp subcommand %q (stdio)", args[0])
}
