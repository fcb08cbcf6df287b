package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/quiverhq/quiver/internal/hostcheck"
)

// tracingWanted reports whether the environment asks for traces, the standard way: an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// OTEL_TRACES_EXPORTER=otlp, unless OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true.
func tracingWanted() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch exporter := strings.ToLower(os.Getenv("OTEL_TRACES_EXPORTER")); exporter {
	case "none":
		return false
	case "otlp":
		return true
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// startTracing sends the spans of calls, model requests and runs (see quiver.Dispatcher and
// agent.Runner) over OTLP when the environment asks for it (tracingWanted); the exporter reads
// the rest of the OTEL_EXPORTER_OTLP_* variables itself (endpoint, headers, timeout, TLS), and
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES describe the service ("quiver" by default).
// OTEL_EXPORTER_OTLP_PROTOCOL (or ..._TRACES_PROTOCOL) picks http/protobuf (the default) or
// grpc. It also takes trace context from and gives it to other services in W3C form
// (traceparent). The returned function sends what is left and switches tracing off; without
// tracing wanted it does nothing.
func startTracing(ctx context.Context) (stop func(context.Context) error, err error) {
	if !tracingWanted() {
		return func(context.Context) error { return nil }, nil
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exporter sdktrace.SpanExporter
	switch protocol {
	case "", "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q is not supported: use http/protobuf (the default) or grpc", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "quiver")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: the service's resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		err := tp.Shutdown(ctx)
		otel.SetTracerProvider(noop.NewTracerProvider())
		return err
	}, nil
}

// startMetrics serves the metrics of calls, model requests, runs and the journal (see
// quiver.Dispatcher, agent.Runner and server.Server) in the Prometheus text format at
// http://ADDR/metrics, on a listener of their own: an operator's address, apart from the one
// clients reach. It sets the global meter provider, which every dispatcher and runner made
// afterwards uses. The returned function stops serving and switches metrics off.
func startMetrics(addr string, guard hostcheck.Policy, stderr io.Writer) (stop func(context.Context) error, err error) {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listening on %s: %w (choose another address with --metrics-addr)", addr, err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	otel.SetMeterProvider(mp)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	// A scrape by a page that rebinds its name to this address learns the tools and agents in
	// use: the metrics answer to the same names as the server.
	hs := &http.Server{Handler: guard.Guard(mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	fmt.Fprintf(stderr, "quiver: metrics at http://%s/metrics\n", ln.Addr())
	if w := exposedMetricsWarning(ln.Addr()); w != "" {
		fmt.Fprintln(stderr, w)
	}
	return func(ctx context.Context) error {
		err := hs.Shutdown(ctx)
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		return errors.Join(err, mp.Shutdown(ctx))
	}, nil
}

// exposedMetricsWarning is what quiver serve says when its metrics listen where other hosts
// can reach them: they name the tools and agents in use, and nothing authenticates a scrape.
func exposedMetricsWarning(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("quiver: WARNING: metrics on %s, which is not a loopback address: anyone who can reach it can read them", addr)
}
