// Package peers benchmarks one tool, get_forecast (see bench/forecast), dispatched through
// Quiver and through the tool paths of peer libraries, so that their costs can be compared side
// by side, in process (this file) and over MCP on loopback HTTP (http_test.go). It is a separate
// module so that the peers never enter Quiver's own go.mod; genkit, whose requirements fight
// Quiver's, is in bench/genkit.
//
// Every in-process benchmark does, per op, what happens when a model's call arrives: take the
// raw JSON arguments, validate and decode them (where the library validates), run the handler
// and produce the library's encoded or normalised result.
package peers

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/google/jsonschema-go/jsonschema"
	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/bench/forecast"
)

const (
	toolName = forecast.Name
	toolDesc = forecast.Description
)

var (
	validArgs   = forecast.ValidArgs
	invalidArgs = forecast.InvalidArgs
	wantOutput  = forecast.WantOutput
)

// Forecast is the tool's result, shared by every library.
type Forecast = forecast.Forecast

// The input has the same JSON shape everywhere; each library gets its own Go type because each
// reads a different struct-tag dialect for descriptions and bounds.

// QuiverArgs uses Quiver's tags (schema.InferType).
type QuiverArgs struct {
	City string `json:"city" description:"City to forecast, e.g. Paris"`
	Days int    `json:"days" minimum:"1" maximum:"14" description:"Number of days to forecast, 1 to 14"`
}

// MCPArgs uses google/jsonschema-go tags, which carry only a description; the bound on days is
// added to the inferred schema by hand (see mcpInputSchema).
type MCPArgs struct {
	City string `json:"city" jsonschema:"City to forecast, e.g. Paris"`
	Days int    `json:"days" jsonschema:"Number of days to forecast, 1 to 14"`
}

// MCPGoArgs is what mcp-go binds the arguments into; its schema is built with mcp-go's
// property options (see newMCPGo), which carry the bound.
type MCPGoArgs struct {
	City string `json:"city"`
	Days int    `json:"days"`
}

// EinoArgs uses the eino-contrib/jsonschema (invopop fork) tags that eino's InferTool reads. The
// bound reaches the schema offered to the model, but eino never checks arguments against it.
type EinoArgs struct {
	City string `json:"city" jsonschema:"description=City to forecast, e.g. Paris"`
	Days int    `json:"days" jsonschema:"minimum=1,maximum=14,description=Number of days to forecast, 1 to 14"`
}

// handlerCalls is how often the handler ran, so the tests can tell that an invalid call was
// refused before it.
func handlerCalls() int64 { return forecast.Calls() }

func forecastFor(city string, days int) Forecast { return forecast.Run(city, days) }

// --- Quiver ---

func newQuiver(tb testing.TB) func(context.Context, []byte) *quiver.Result {
	tb.Helper()
	reg := &quiver.Registry{}
	tool := quiver.Func(toolName, toolDesc, func(_ context.Context, in QuiverArgs) (Forecast, error) {
		return forecastFor(in.City, in.Days), nil
	})
	if err := reg.Register(tool); err != nil {
		tb.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	return func(ctx context.Context, raw []byte) *quiver.Result {
		r, err := d.Dispatch(ctx, quiver.Call{Name: toolName, Args: raw})
		if err != nil { // only a Recorder failure; there is none here
			tb.Fatal(err)
		}
		return r
	}
}

// --- encoding/json baseline (no validation) ---

func baseline(raw []byte) ([]byte, error) { return forecast.Baseline(raw) }

// --- MCP Go SDK ---

func mcpInputSchema(tb testing.TB) *jsonschema.Schema {
	tb.Helper()
	s, err := jsonschema.For[MCPArgs](nil)
	if err != nil {
		tb.Fatal(err)
	}
	lo, hi := 1.0, 14.0
	s.Properties["days"].Minimum = &lo
	s.Properties["days"].Maximum = &hi
	return s
}

func newMCP(tb testing.TB) func(context.Context, []byte) (*mcp.CallToolResult, error) {
	tb.Helper()
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "v0.0.1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: toolName, Description: toolDesc, InputSchema: mcpInputSchema(tb)},
		func(_ context.Context, _ *mcp.CallToolRequest, in MCPArgs) (*mcp.CallToolResult, Forecast, error) {
			return nil, forecastFor(in.City, in.Days), nil
		})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		tb.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return func(ctx context.Context, raw []byte) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: toolName, Arguments: json.RawMessage(raw)})
	}
}

// --- mcp-go ---

// newMCPGo serves the tool from an mcp-go server with input validation on (opt-in in mcp-go,
// and what its documentation recommends), called through mcp-go's in-process client.
func newMCPGo(tb testing.TB) func(context.Context, []byte) (*mcpgo.CallToolResult, error) {
	tb.Helper()
	ctx := context.Background()
	c, err := mcpgoclient.NewInProcessClient(newMCPGoServer())
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: "bench-client", Version: "v0.0.1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return func(ctx context.Context, raw []byte) (*mcpgo.CallToolResult, error) {
		req := mcpgo.CallToolRequest{}
		req.Params.Name = toolName
		req.Params.Arguments = json.RawMessage(raw)
		return c.CallTool(ctx, req)
	}
}

func newMCPGoServer() *mcpgoserver.MCPServer {
	s := mcpgoserver.NewMCPServer("bench", "v0.0.1", mcpgoserver.WithToolCapabilities(false), mcpgoserver.WithInputSchemaValidation())
	s.AddTool(mcpgo.NewTool(toolName, mcpgo.WithDescription(toolDesc),
		mcpgo.WithString("city", mcpgo.Required(), mcpgo.Description("City to forecast, e.g. Paris")),
		mcpgo.WithNumber("days", mcpgo.Required(), mcpgo.Min(1), mcpgo.Max(14), mcpgo.Description("Number of days to forecast, 1 to 14")),
	), mcpgo.NewStructuredToolHandler(func(_ context.Context, _ mcpgo.CallToolRequest, in MCPGoArgs) (Forecast, error) {
		return forecastFor(in.City, in.Days), nil
	}))
	return s
}

// --- Eino ---

func newEino(tb testing.TB) func(context.Context, []byte) (string, error) {
	tb.Helper()
	tool, err := utils.InferTool(toolName, toolDesc, func(_ context.Context, in EinoArgs) (Forecast, error) {
		return forecastFor(in.City, in.Days), nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return func(ctx context.Context, raw []byte) (string, error) {
		// InvokableRun takes the arguments as a string, as a chat model's tool call carries them;
		// the conversion is part of the path.
		return tool.InvokableRun(ctx, string(raw))
	}
}

// --- benchmarks ---

func BenchmarkQuiver(b *testing.B) {
	call := newQuiver(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := call(ctx, validArgs); r.IsError() {
			b.Fatal(r.Error)
		}
	}
}

func BenchmarkBaseline(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := baseline(validArgs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMCPGoSDK(b *testing.B) {
	call := newMCP(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := call(ctx, validArgs)
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatal("tool error")
		}
	}
}

func BenchmarkMCPGo(b *testing.B) {
	call := newMCPGo(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := call(ctx, validArgs)
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatal("tool error")
		}
	}
}

func BenchmarkEino(b *testing.B) {
	call := newEino(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := call(ctx, validArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// --- correctness ---

// sameJSON reports whether got is the JSON encoding of the same value as want.
func sameJSON(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("result %q is not JSON: %v", got, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, w)
}

// TestSameAnswer checks that every library returns the expected result for validArgs, so no
// benchmark measures an error path, and that the validating ones refuse days=30 without running
// the handler. Eino does not validate: that it runs the handler is logged, not failed.
func TestSameAnswer(t *testing.T) {
	ctx := context.Background()

	t.Run("Quiver", func(t *testing.T) {
		call := newQuiver(t)
		r := call(ctx, validArgs)
		if r.IsError() || !sameJSON(t, r.Value, wantOutput) {
			t.Fatalf("valid call: got %+v, want value %s", r, wantOutput)
		}
		before := handlerCalls()
		r = call(ctx, invalidArgs)
		if !r.IsError() || r.Code != quiver.CodeInvalidArguments {
			t.Errorf("days=30: got %+v, want an %s error", r, quiver.CodeInvalidArguments)
		}
		if handlerCalls() != before {
			t.Error("days=30: the handler ran")
		}
		t.Logf("days=30: %s", r.Error)
	})

	t.Run("Baseline", func(t *testing.T) {
		out, err := baseline(validArgs)
		if err != nil || !sameJSON(t, out, wantOutput) {
			t.Fatalf("valid call: got %s, %v; want %s", out, err, wantOutput)
		}
	})

	t.Run("MCPGoSDK", func(t *testing.T) {
		call := newMCP(t)
		res, err := call(ctx, validArgs)
		if err != nil || res.IsError {
			t.Fatalf("valid call: %+v, %v", res, err)
		}
		sc, err := json.Marshal(res.StructuredContent)
		if err != nil || !sameJSON(t, sc, wantOutput) {
			t.Errorf("valid call: structuredContent %s, want %s", sc, wantOutput)
		}
		if len(res.Content) != 1 {
			t.Fatalf("valid call: %d content items, want 1", len(res.Content))
		}
		text, ok := res.Content[0].(*mcp.TextContent)
		if !ok || !sameJSON(t, []byte(text.Text), wantOutput) {
			t.Errorf("valid call: content %#v, want text %s", res.Content[0], wantOutput)
		}
		before := handlerCalls()
		res, err = call(ctx, invalidArgs)
		switch {
		case err != nil:
			t.Logf("days=30: protocol error %v", err)
		case !res.IsError:
			t.Errorf("days=30: accepted, returned %+v", res)
		default:
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				t.Logf("days=30: tool error %s", tc.Text)
			}
		}
		if handlerCalls() != before {
			t.Error("days=30: the handler ran")
		}
	})

	t.Run("MCPGo", func(t *testing.T) {
		call := newMCPGo(t)
		res, err := call(ctx, validArgs)
		if err != nil || res.IsError {
			t.Fatalf("valid call: %+v, %v", res, err)
		}
		sc, err := json.Marshal(res.StructuredContent)
		if err != nil || !sameJSON(t, sc, wantOutput) {
			t.Errorf("valid call: structuredContent %s, want %s", sc, wantOutput)
		}
		before := handlerCalls()
		res, err = call(ctx, invalidArgs)
		switch {
		case err != nil:
			t.Logf("days=30: protocol error %v", err)
		case !res.IsError:
			t.Errorf("days=30: accepted, returned %+v", res)
		default:
			if tc, ok := res.Content[0].(mcpgo.TextContent); ok {
				t.Logf("days=30: tool error %s", tc.Text)
			}
		}
		if handlerCalls() != before {
			t.Error("days=30: the handler ran")
		}
	})

	t.Run("Eino", func(t *testing.T) {
		call := newEino(t)
		out, err := call(ctx, validArgs)
		if err != nil || !sameJSON(t, []byte(out), wantOutput) {
			t.Fatalf("valid call: got %s, %v; want %s", out, err, wantOutput)
		}
		before := handlerCalls()
		out, err = call(ctx, invalidArgs)
		switch {
		case err != nil:
			t.Logf("days=30: rejected: %v", err)
		case handlerCalls() != before:
			t.Logf("days=30: NOT rejected (eino does not validate arguments); the handler ran and returned %s", out)
		default:
			t.Logf("days=30: no error, but the handler did not run: %s", out)
		}
	})
}
