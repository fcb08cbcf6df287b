//go:build linux && (amd64 || arm64)

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clockArgs and clockResult mirror get_current_time's arguments and result in tools/clock,
// so the bare server decodes, validates and encodes the same shapes Quiver does.
type clockArgs struct {
	Timezone string `json:"timezone,omitempty" jsonschema:"IANA time zone name, like Europe/Paris; UTC when omitted"`
}

type clockResult struct {
	Time     string `json:"time" jsonschema:"current time in RFC 3339 format, with the zone's offset"`
	Timezone string `json:"timezone" jsonschema:"the IANA zone the time is given in"`
	Unix     int64  `json:"unix" jsonschema:"seconds since 1970-01-01T00:00:00Z"`
}

// serveBare is the bare server: the SDK's streamable HTTP handler with one tool, on a random
// port of 127.0.0.1, printing its URL the way quiver serve does. It stops on SIGTERM.
func serveBare() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	server := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: toolName, Description: "Returns the current date and time in the given IANA time zone."},
		func(_ context.Context, _ *mcp.CallToolRequest, a clockArgs) (*mcp.CallToolResult, clockResult, error) {
			zone := a.Timezone
			if zone == "" {
				zone = "UTC"
			}
			loc, err := time.LoadLocation(zone)
			if err != nil {
				return nil, clockResult{}, err
			}
			t := time.Now().In(loc)
			return nil, clockResult{Time: t.Format(time.RFC3339), Timezone: loc.String(), Unix: t.Unix()}, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bare: serving MCP at http://%s/mcp\n", ln.Addr())
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
