package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"go.opentelemetry.io/otel"
)

// exportErrors reports the failures of sending traces (the OpenTelemetry SDK hands them to
// its global error handler) the way a person wants them: tracing was asked for (tracingWanted),
// so the first failure while the command runs is said once, with the endpoint and how to stop
// sending, and the rest would only repeat it; what fails in the last flush, after the command
// has done its work and printed its answer, is not said at all. A one-shot command sends its
// spans only then, so `quiver call` with no collector listening prints its result and nothing
// else; a server, which sends as it goes, says once that its traces are lost. With
// QUIVER_LOG_LEVEL=debug every failure is printed, when it happens.
type exportErrors struct {
	w     io.Writer
	debug bool

	mu      sync.Mutex
	said    bool
	exiting bool
}

func newExportErrors(w io.Writer) *exportErrors {
	level, err := logLevel()
	return &exportErrors{w: w, debug: err == nil && level <= slog.LevelDebug}
}

// Handle reports one failure; it is the SDK's otel.ErrorHandler.
func (e *exportErrors) Handle(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.debug:
		fmt.Fprintf(e.w, "quiver: debug: sending traces: %v\n", err)
	case e.said || e.exiting:
	default:
		e.said = true
		fmt.Fprintf(e.w, "quiver: warning: traces are not reaching %s: %v; further failures are not reported "+
			"(QUIVER_LOG_LEVEL=debug shows them), and OTEL_TRACES_EXPORTER=none stops sending\n", otlpEndpoint(), err)
	}
}

// install makes e the SDK's error handler when traces are wanted; otherwise the SDK reports
// nothing of its own that this command would hear.
func (e *exportErrors) install() {
	if tracingWanted() {
		otel.SetErrorHandler(e)
	}
}

// exit marks the last flush: the command's work is done, and its failures are debug's only.
func (e *exportErrors) exit() {
	e.mu.Lock()
	e.exiting = true
	e.mu.Unlock()
}

// otlpEndpoint is where the exporter sends traces, as the environment names it.
func otlpEndpoint() string {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := os.Getenv(name); v != "" {
			return fmt.Sprintf("%s (%s)", v, name)
		}
	}
	return "the default OTLP endpoint (localhost:4318, or localhost:4317 over gRPC)"
}
