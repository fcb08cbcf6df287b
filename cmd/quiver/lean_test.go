package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLeanBuild: go build -tags quiver_lean leaves every model provider's SDK out of the
// binary, which still serves and calls tools and runs scripted agents, and a provider left out
// says how to get it.
func TestLeanBuild(t *testing.T) {
	deps, err := exec.Command("go", "list", "-deps", "-tags", "quiver_lean", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, deps)
	}
	for _, sdk := range []string{"github.com/anthropics/anthropic-sdk-go", "github.com/openai/openai-go", "google.golang.org/genai"} {
		if strings.Contains(string(deps), sdk) {
			t.Errorf("the lean build compiles %s", sdk)
		}
	}
	bin := filepath.Join(t.TempDir(), "quiver-lean")
	if out, err := exec.Command("go", "build", "-tags", "quiver_lean", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags quiver_lean: %v\n%s", err, out)
	}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(cmd.Environ(), "XDG_DATA_HOME="+t.TempDir(), "ANTHROPIC_API_KEY=sk-ant-test")
		out, err := cmd.CombinedOutput()
		return exitCode(t, err), string(out)
	}
	if code, out := run("call", "get_current_time", "--args", `{"timezone":"UTC"}`, "--no-record"); code != exitOK || !strings.Contains(out, `"timezone": "UTC"`) {
		t.Errorf("call: exit %d\n%s", code, out)
	}
	code, out := run("run", "--model", "anthropic:claude-sonnet-4-5", "hello")
	if code == exitOK || !strings.Contains(out, "built with -tags quiver_lean") || !strings.Contains(out, "go install ./cmd/quiver") {
		t.Errorf("a provider left out: exit %d\n%s", code, out)
	}
}
