// Package genai names the spans and attributes of OpenTelemetry's semantic conventions for
// generative AI (https://opentelemetry.io/docs/specs/semconv/gen-ai/) that Quiver emits: one
// place for the strings, so that the dispatcher and the agent loop spell them alike. They are
// written out rather than taken from a semconv package of the SDK, whose GenAI names change
// with each version of the conventions.
package genai

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Instrumentation is the name Quiver's tracers are made with.
const Instrumentation = "github.com/quiverhq/quiver"

// Operations (gen_ai.operation.name), which also begin the span names.
const (
	OpExecuteTool = "execute_tool"
	OpChat        = "chat"
	OpInvokeAgent = "invoke_agent"
)

// Attribute keys.
const (
	Operation         attribute.Key = "gen_ai.operation.name"
	ProviderName      attribute.Key = "gen_ai.provider.name"
	RequestModel      attribute.Key = "gen_ai.request.model"
	ResponseFinish    attribute.Key = "gen_ai.response.finish_reasons"
	UsageInputTokens  attribute.Key = "gen_ai.usage.input_tokens"
	UsageOutputTokens attribute.Key = "gen_ai.usage.output_tokens"
	AgentName         attribute.Key = "gen_ai.agent.name"
	ConversationID    attribute.Key = "gen_ai.conversation.id"
	ToolName          attribute.Key = "gen_ai.tool.name"
	ToolCallID        attribute.Key = "gen_ai.tool.call.id"
	ToolType          attribute.Key = "gen_ai.tool.type"
	ToolArguments     attribute.Key = "gen_ai.tool.call.arguments"
	ToolResult        attribute.Key = "gen_ai.tool.call.result"
	ErrorType         attribute.Key = "error.type"
	TokenType         attribute.Key = "gen_ai.token.type"
	// Quiver's own, where the conventions have none.
	Door       attribute.Key = "quiver.door"
	CallStatus attribute.Key = "quiver.call.status"
	RunEvent   attribute.Key = "quiver.run.event"
)

// Metric names: the conventions' for model requests, Quiver's own for calls and runs.
const (
	MetricOperationDuration = "gen_ai.client.operation.duration"
	MetricTokenUsage        = "gen_ai.client.token.usage"
	MetricToolCallDuration  = "quiver.tool.call.duration"
	MetricRuns              = "quiver.agent.runs"
	MetricJournalPending    = "quiver.journal.pending"
	MetricJobs              = "quiver.jobs"
)

// unsetGlobal is the global tracer provider before a program sets one: the API's placeholder,
// which makes non-recording spans until then.
var unsetGlobal = otel.GetTracerProvider()

// Tracer returns Quiver's tracer from tp, or from the global provider when tp is nil; nil when
// neither makes spans (no provider was set, or the API's no-op one), so that a hot path can
// skip tracing with one comparison: starting even a non-recording span allocates. The global
// provider is read when this is called, so a program sets its provider before the first call.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
		if tp == unsetGlobal {
			return nil
		}
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	return tp.Tracer(Instrumentation)
}

// unsetGlobalMeter is the global meter provider before a program sets one (see unsetGlobal).
var unsetGlobalMeter = otel.GetMeterProvider()

// Meter is Tracer for metrics: Quiver's meter from mp or the global provider, nil when neither
// records anything, so that a call records no metric and reads no clock for one.
func Meter(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = otel.GetMeterProvider()
		if mp == unsetGlobalMeter {
			return nil
		}
	}
	if _, ok := mp.(metricnoop.MeterProvider); ok {
		return nil
	}
	return mp.Meter(Instrumentation)
}

// DurationBuckets are the histogram bounds, in seconds, of call and model request durations:
// from a fraction of a millisecond (a call in process) to minutes (a model's long answer).
var DurationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
