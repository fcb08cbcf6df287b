// Package genai names the spans and attributes of OpenTelemetry's semantic conventions for
// generative AI (https://opentelemetry.io/docs/specs/semconv/gen-ai/) that Quiver emits: one
// place for the strings, so that the dispatcher and the agent loop spell them alike. They are
// written out rather than taken from a semconv package of the SDK, whose GenAI names change
// with each version of the conventions.
package genai

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
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
