package tracelog_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/quiverhq/quiver/internal/tracelog"
)

func TestRecordsCarryTheSpan(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(tracelog.Handler(slog.NewTextHandler(&buf, nil))).With("component", "test")
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID}))
	log.ErrorContext(ctx, "in a span")
	log.Error("outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log: %q", buf.String())
	}
	if !strings.Contains(lines[0], "component=test") || !strings.Contains(lines[0], "trace_id=4bf92f3577b34da6a3ce929d0e0e4736") ||
		!strings.Contains(lines[0], "span_id=00f067aa0ba902b7") {
		t.Errorf("a record in a span: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("a record outside any span: %s", lines[1])
	}
}
