package agent_test

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quiverhq/quiver/model"
)

// A run is one invoke_agent span; each model request a chat span and each call an
// execute_tool span under it, with the GenAI conventions' attributes.
func TestRunSpans(t *testing.T) {
	m := &turnModel{turns: []model.Response{
		{Text: "Let me check.", ToolCalls: calls(call("c1", "echo", `{"text":"a"}`)), StopReason: "tool_calls",
			Usage: model.Usage{InputTokens: 12, OutputTokens: 5}},
		{Text: "Echoed.", StopReason: "stop"},
	}}
	f := newFixture(t, m, nil)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	f.r.TracerProvider = tp
	if _, err := f.r.Run(ctx, f.th, f.agent, "echo a"); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	var names []string
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		names = append(names, s.Name())
		byName[s.Name()] = s
	}
	run, chat, tool := byName["invoke_agent assistant"], byName["chat turns"], byName["execute_tool echo"]
	if len(spans) != 4 || run == nil || chat == nil || tool == nil {
		t.Fatalf("spans %q, want invoke_agent assistant, two chat turns and execute_tool echo", names)
	}
	for _, s := range spans {
		if s != run && s.Parent().SpanID() != run.SpanContext().SpanID() {
			t.Errorf("%s is not a child of the run's span", s.Name())
		}
	}
	want := map[sdktrace.ReadOnlySpan]map[string]string{
		run:  {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "assistant", "gen_ai.conversation.id": f.th.ID(), "quiver.run.status": "finished"},
		tool: {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "gen_ai.tool.call.id": "c1"},
	}
	first := spans[0] // the first model request ended first
	want[first] = map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "test", "gen_ai.request.model": "turns",
		"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "5", "gen_ai.response.finish_reasons": `["tool_calls"]`}
	for s, attrs := range want {
		got := map[string]string{}
		for _, kv := range s.Attributes() {
			got[string(kv.Key)] = kv.Value.Emit()
		}
		for k, v := range attrs {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", s.Name(), k, got[k], v)
			}
		}
	}
}

// A model request that fails marks its span and the run's with an error.
func TestRunSpansOnFailure(t *testing.T) {
	f := newFixture(t, &turnModel{}, nil) // no turns: the first request fails
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	f.r.TracerProvider = tp
	if _, err := f.r.Run(ctx, f.th, f.agent, "hi"); err == nil {
		t.Fatal("the run did not fail")
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the chat and the run", len(spans))
	}
	for _, s := range spans {
		if s.Status().Code != codes.Error {
			t.Errorf("%s: status %v, want an error", s.Name(), s.Status())
		}
	}
}

// A run counts as started and finished, its model requests' durations and tokens are
// recorded, and its calls are counted as coming in by the agent door.
func TestRunMetrics(t *testing.T) {
	m := &turnModel{turns: []model.Response{
		{ToolCalls: calls(call("c1", "echo", `{"text":"a"}`)), Usage: model.Usage{InputTokens: 12, OutputTokens: 5}},
		{Text: "Echoed.", Usage: model.Usage{InputTokens: 20, OutputTokens: 3}},
	}}
	f := newFixture(t, m, nil)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	f.r.MeterProvider = mp
	if _, err := f.r.Run(ctx, f.th, f.agent, "echo a"); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			switch data := metric.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					event, _ := dp.Attributes.Value("quiver.run.event")
					got[metric.Name+" "+event.AsString()] = fmt.Sprint(dp.Value)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					door, _ := dp.Attributes.Value("quiver.door")
					got[metric.Name+" "+door.AsString()] = fmt.Sprint(dp.Count)
				}
			case metricdata.Histogram[int64]:
				for _, dp := range data.DataPoints {
					kind, _ := dp.Attributes.Value("gen_ai.token.type")
					got[metric.Name+" "+kind.AsString()] = fmt.Sprint(dp.Sum)
				}
			}
		}
	}
	for k, want := range map[string]string{
		"quiver.agent.runs started": "1", "quiver.agent.runs finished": "1",
		"gen_ai.client.operation.duration ": "2",
		"gen_ai.client.token.usage input":   "32", "gen_ai.client.token.usage output": "8",
		"quiver.tool.call.duration agent": "1",
	} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q (all: %v)", k, got[k], want, got)
		}
	}
}
