package main

import (
	"context"
	"io"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

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

// stdioTransport speaks MCP over the command's standard input and output (os.Stdin and
// os.Stdout in production, pipes in tests).
func stdioTransport(in io.Reader, out io.Writer) sdk.Transport {
	return &sdk.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
