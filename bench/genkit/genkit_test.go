// Package genkit benchmarks get_forecast (see bench/forecast) as a genkit tool. It is a module
// of its own because genkit v1.4.0 cannot be built beside Quiver: its dotprompt dependency
// passes github.com/wk8/go-ordered-map/v2 maps to github.com/invopop/jsonschema, whose v0.14.0
// (which Quiver requires through the Anthropic SDK) takes github.com/pb33f/ordered-map/v2 maps
// instead, and the module graph can hold only one version. bench/run runs it beside the other
// peers, each with the same encoding/json floor.
package genkit

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/quiverhq/quiver/bench/forecast"
)

// Args uses the invopop/jsonschema tags that genkit's schema inference reads.
type Args struct {
	City string `json:"city" jsonschema:"description=City to forecast, e.g. Paris"`
	Days int    `json:"days" jsonschema:"minimum=1,maximum=14,description=Number of days to forecast, 1 to 14"`
}

func newGenkit(tb testing.TB) func(context.Context, []byte) (any, error) {
	tb.Helper()
	g := genkit.Init(context.Background())
	tool := genkit.DefineTool(g, forecast.Name, forecast.Description, func(_ *ai.ToolContext, in Args) (forecast.Forecast, error) {
		return forecast.Run(in.City, in.Days), nil
	})
	return func(ctx context.Context, raw []byte) (any, error) {
		// RunRaw marshals its input to JSON; a json.RawMessage passes through (compacted), so
		// the arguments are parsed once, by the action, which validates them against the
		// inferred schema before calling the handler.
		return tool.RunRaw(ctx, json.RawMessage(raw))
	}
}

func BenchmarkGenkit(b *testing.B) {
	call := newGenkit(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := call(ctx, forecast.ValidArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaseline is the floor, measured in the same run as genkit.
func BenchmarkBaseline(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := forecast.Baseline(forecast.ValidArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSameAnswer checks that genkit returns the expected result, so that the benchmark does
// not measure an error path, and that it refuses days=30 without running the handler.
func TestSameAnswer(t *testing.T) {
	ctx := context.Background()
	call := newGenkit(t)
	out, err := call(ctx, forecast.ValidArgs)
	if err != nil {
		t.Fatalf("valid call: %v", err)
	}
	b, err := json.Marshal(out)
	if err != nil || !forecast.SameJSON(b, forecast.WantOutput) {
		t.Fatalf("valid call: got %s (%T), want %s", b, out, forecast.WantOutput)
	}
	before := forecast.Calls()
	if out, err = call(ctx, forecast.InvalidArgs); err == nil {
		t.Errorf("days=30: accepted, returned %v", out)
	}
	if forecast.Calls() != before {
		t.Error("days=30: the handler ran")
	}
}
