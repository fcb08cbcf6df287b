package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A failure to send traces is said once while the command works, never after its answer, and
// every time with QUIVER_LOG_LEVEL=debug (issue 35: an OTLP export error followed a successful
// quiver call).
func TestExportErrorsAreSaidOnce(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	refused := errors.New("traces export: connection refused")
	tests := []struct {
		name             string
		debug            bool
		during, atExit   int // failures while the command works, and in the last flush
		warnings, debugs int
	}{
		{"a one-shot command's flush at exit", false, 0, 1, 0, 0},
		{"a server that cannot reach its collector", false, 3, 1, 1, 0},
		{"with QUIVER_LOG_LEVEL=debug", true, 2, 1, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			e := &exportErrors{w: &out, debug: tt.debug}
			for range tt.during {
				e.Handle(refused)
			}
			e.exit()
			for range tt.atExit {
				e.Handle(refused)
			}
			text := out.String()
			if n := strings.Count(text, "quiver: warning: traces are not reaching http://127.0.0.1:1 (OTEL_EXPORTER_OTLP_ENDPOINT): "+
				"traces export: connection refused; further failures are not reported"); n != tt.warnings {
				t.Errorf("%d warnings, want %d:\n%s", n, tt.warnings, text)
			}
			if n := strings.Count(text, "quiver: debug: sending traces: traces export: connection refused\n"); n != tt.debugs {
				t.Errorf("%d debug lines, want %d:\n%s", n, tt.debugs, text)
			}
			if lines := strings.Count(text, "\n"); lines != tt.warnings+tt.debugs {
				t.Errorf("%d lines, want %d:\n%s", lines, tt.warnings+tt.debugs, text)
			}
		})
	}
}

// quiver call with tracing asked for and no collector listening prints its result and nothing
// about traces; QUIVER_LOG_LEVEL=debug shows why none arrived. The binary runs, since the
// SDK's own reports went to the process's standard error.
func TestCallWithoutACollectorSaysNothingOfTraces(t *testing.T) {
	bin := quiverBinary(t)
	for _, level := range []string{"", "debug"} {
		t.Run("QUIVER_LOG_LEVEL="+level, func(t *testing.T) {
			var stdout, stderr strings.Builder
			cmd := exec.Command(bin, "call", "get_current_time", "--args", `{"timezone":"UTC"}`, "--db", filepath.Join(t.TempDir(), "q.db"))
			cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "QUIVER_LOG_LEVEL="+level)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), `"status": "success"`) {
				t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
			}
			if said := strings.Contains(stderr.String(), "traces"); said != (level == "debug") {
				t.Errorf("stderr mentions traces: %v, want %v:\n%s", said, level == "debug", stderr.String())
			}
		})
	}
}
