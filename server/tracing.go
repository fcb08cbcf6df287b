package server

import (
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver/internal/genai"
)

// traceRequests is the /v1 API's door to tracing: each request continues the trace its
// client sends (W3C traceparent, through the global propagator) and, when traces are
// recorded, has a server span named for its operation ("POST /v1/tools/{name}/call"), under
// which the dispatcher's execute_tool span and a run's queueing nest. A run queued by the
// request carries that trace to whichever process runs it (see jobs.RunArgs.Trace).
//
// It is written here, not taken from otelhttp: the route a span is named for is the
// operation's, which only huma knows, and the server needs nothing else of that package.
func traceRequests(ctx huma.Context, next func(huma.Context)) {
	rctx := otel.GetTextMapPropagator().Extract(ctx.Context(), humaHeaders{ctx})
	tracer := genai.Tracer(nil)
	if tracer == nil {
		if trace.SpanContextFromContext(rctx).IsValid() {
			ctx = huma.WithContext(ctx, rctx)
		}
		next(ctx)
		return
	}
	op := ctx.Operation()
	rctx, span := tracer.Start(rctx, op.Method+" "+op.Path, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.request.method", op.Method), attribute.String("http.route", op.Path),
		attribute.String("quiver.operation", op.OperationID)))
	defer span.End()
	next(huma.WithContext(ctx, rctx))
	status := ctx.Status()
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// humaHeaders reads a request's headers for a propagator.
type humaHeaders struct{ ctx huma.Context }

func (h humaHeaders) Get(key string) string { return h.ctx.Header(key) }
func (h humaHeaders) Set(string, string)    {} // extraction only
func (h humaHeaders) Keys() []string {
	var keys []string
	h.ctx.EachHeader(func(name, _ string) { keys = append(keys, name) })
	return keys
}
