//go:build linux && (amd64 || arm64)

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The peer servers: this command re-executed with SERVERBENCH_ROLE=bare (the go-sdk's
// streamable HTTP handler with default options) or SERVERBENCH_ROLE=mcp-go (mcp-go's streamable
// HTTP server, input validation on), each serving get_current_time and the filler tools, and
// the runtime's profiles under /debug/pprof/ on the same listener.

const (
	// roleEnv names the peer server this process is to be: roleBare or roleMCPGo.
	roleEnv   = "SERVERBENCH_ROLE"
	roleBare  = "bare"
	roleMCPGo = "mcp-go"
	// toolsEnv is how many filler tools a peer registers.
	toolsEnv = "SERVERBENCH_TOOLS"

	// toolName is the tool every server serves and the calls call: quiver serve's built-in
	// tools/clock, mirrored by the peers.
	toolName = "get_current_time"
	toolDesc = "Returns the current date and time, in the given IANA time zone (UTC by default). Use it whenever the answer depends on today's date or the time of day."
	zoneDesc = "IANA time zone name, like Europe/Paris or America/New_York; UTC when omitted"
)

// clockArgs and clockResult mirror get_current_time's arguments and result in tools/clock.
type clockArgs struct {
	Timezone string `json:"timezone,omitempty" jsonschema:"IANA time zone name, like Europe/Paris or America/New_York; UTC when omitted"`
}

type clockResult struct {
	Time     string `json:"time" jsonschema:"current time in RFC 3339 format, with the zone's offset"`
	Timezone string `json:"timezone" jsonschema:"the IANA zone the time is given in"`
	Unix     int64  `json:"unix" jsonschema:"seconds since 1970-01-01T00:00:00Z"`
}

// currentTime is what get_current_time does in tools/clock.
func currentTime(zone string) (clockResult, error) {
	if zone == "" {
		zone = "UTC"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "Local" {
		return clockResult{}, fmt.Errorf("timezone %q is not a known IANA time zone; use a name like UTC, Europe/Paris or America/New_York", zone)
	}
	t := time.Now().In(loc)
	return clockResult{Time: t.Format(time.RFC3339), Timezone: loc.String(), Unix: t.Unix()}, nil
}

// fillerName, fillerDesc and fillerSchema are filler tool i's (0-based) name, description and
// input schema, the same on every server: tools that are listed, never called, so that
// tools/list carries as many tools as a real deployment's. The schema is about 450 bytes.
func fillerName(i int) string { return fmt.Sprintf("filler_%04d", i+1) }

func fillerDesc(i int) string {
	return fmt.Sprintf("Filler tool %04d: finds the records of collection %04d that match a query and returns them, newest first.", i+1, i+1)
}

func fillerSchema(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
		`"query":{"type":"string","maxLength":200,"description":"Words to look for in the records of collection %04d"},`+
		`"limit":{"type":"integer","minimum":1,"maximum":100,"description":"How many records to return at most, 1 to 100"},`+
		`"include_archived":{"type":"boolean","description":"Also look in the archived records"},`+
		`"tags":{"type":"array","items":{"type":"string"},"maxItems":10,"description":"Only the records that carry every one of these tags"}},`+
		`"required":["query"]}`, i+1))
}

// serveRole runs this process as the peer server role names until SIGTERM or SIGINT.
func serveRole(role string) error {
	tools, err := strconv.Atoi(os.Getenv(toolsEnv))
	if err != nil || tools < 0 {
		return fmt.Errorf("%s=%q: want the number of filler tools", toolsEnv, os.Getenv(toolsEnv))
	}
	var handler http.Handler
	switch role {
	case roleBare:
		handler, err = bareHandler(tools)
	case roleMCPGo:
		handler = mcpGoHandler(tools)
	default:
		return fmt.Errorf("%s=%q: want %s or %s", roleEnv, role, roleBare, roleMCPGo)
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "serverbench %s: serving MCP at http://%s/mcp\n", role, ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// bareHandler is the go-sdk server: mcp.NewServer and mcp.NewStreamableHTTPHandler with
// default options. get_current_time's input is validated against its schema by the SDK.
func bareHandler(tools int) (http.Handler, error) {
	server := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	in, err := jsonschema.For[clockArgs](nil)
	if err != nil {
		return nil, err
	}
	in.Properties["timezone"].MaxLength = new(64) // as tools/clock's maxLength tag
	mcp.AddTool(server, &mcp.Tool{Name: toolName, Description: toolDesc, InputSchema: in},
		func(_ context.Context, _ *mcp.CallToolRequest, a clockArgs) (*mcp.CallToolResult, clockResult, error) {
			r, err := currentTime(a.Timezone)
			return nil, r, err
		})
	filler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "[]"}}}, nil
	}
	for i := range tools {
		server.AddTool(&mcp.Tool{Name: fillerName(i), Description: fillerDesc(i), InputSchema: fillerSchema(i)}, filler)
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil), nil
}

// mcpGoHandler is the mcp-go server, with input validation on (opt-in in mcp-go, and what its
// documentation recommends), as bench/peers builds it.
func mcpGoHandler(tools int) http.Handler {
	s := mcpgoserver.NewMCPServer("bench", "1", mcpgoserver.WithToolCapabilities(false), mcpgoserver.WithInputSchemaValidation())
	s.AddTool(mcpgo.NewTool(toolName, mcpgo.WithDescription(toolDesc),
		mcpgo.WithString("timezone", mcpgo.Description(zoneDesc), mcpgo.MaxLength(64)),
		mcpgo.WithOutputSchema[clockResult](),
	), mcpgo.NewStructuredToolHandler(func(_ context.Context, _ mcpgo.CallToolRequest, a clockArgs) (clockResult, error) {
		return currentTime(a.Timezone)
	}))
	filler := func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("[]"), nil
	}
	fillers := make([]mcpgoserver.ServerTool, tools)
	for i := range tools {
		fillers[i] = mcpgoserver.ServerTool{Tool: mcpgo.NewToolWithRawSchema(fillerName(i), fillerDesc(i), fillerSchema(i)), Handler: filler}
	}
	s.AddTools(fillers...)
	return mcpgoserver.NewStreamableHTTPServer(s)
}
