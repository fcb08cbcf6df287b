// Package tracehttp passes trace context on to the services Quiver calls over HTTP (model
// providers): the request's span, as W3C trace context headers (traceparent, tracestate), so
// that the provider's side of a model request joins the run's trace. It is the one thing
// Quiver needs of an HTTP instrumentation library, written here rather than pulling one in.
package tracehttp

import (
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport returns a RoundTripper that adds the request context's trace context to each
// request, through the global propagator (otel.SetTextMapPropagator), before base sends it
// (http.DefaultTransport when nil). A request without a span, or a program without a
// propagator, goes out as it came.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return transport{base}
}

type transport struct{ base http.RoundTripper }

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	p := otel.GetTextMapPropagator()
	if len(p.Fields()) == 0 || !trace.SpanContextFromContext(r.Context()).IsValid() {
		return t.base.RoundTrip(r)
	}
	// A RoundTripper must not change the request it was given.
	r = r.Clone(r.Context())
	p.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return t.base.RoundTrip(r)
}
