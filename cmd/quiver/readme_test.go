package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeExample says how TestREADMEShellExamples runs one sh block of the README, which it
// finds by the block's first line: a block the README gains or changes has no entry and fails
// the test until someone says how it is checked.
type readmeExample struct {
	// skip says why the block is not run here, and what checks it instead.
	skip string
	// setup is shell run before the block, in the same folder: what a reader following the
	// README has made by then.
	setup string
	// anthropic answers the agent's model with this final answer (a fake Anthropic API that
	// speaks its wire format, at ANTHROPIC_BASE_URL).
	anthropic string
	// exit is the block's exit status (its last command's); want is what its output says, and
	// unwanted what it must not.
	exit     int
	want     []string
	unwanted []string
}

var readmeExamples = map[string]readmeExample{
	"go run ./cmd/quiver serve     # run Quiver: MCP, the /v1 API and the console on http://127.0.0.1:7411": {
		skip: "it serves until stopped, and runs the tests this one is among: TestServe starts serve with no configuration, " +
			"TestServeBanner checks what it prints against the README's sample"},
	`claude mcp add --transport http quiver http://127.0.0.1:7411/mcp --header "Authorization: Bearer $QUIVER_KEY"`: {
		skip: "it needs Claude Code: TestREADMEMCPClientConfigs connects to quiver serve with its URL and header"},
	"mkdir forecast && cd forecast": {
		skip: "go mod tidy fetches go.mod files from the module proxy: TestREADMEGoPrograms (readme_test.go at the root) " +
			"builds and runs the program in a module made the same way, a require and a replace of this checkout"},
	"cat > refund.yaml <<'YAML'": {
		exit: exitError, want: []string{"added tool refund (tol_", `"code": "confirmation_required"`}},
	`go run ./cmd/quiver call get_current_time --args '{"timezone":"Europe/Paris"}'`: {
		exit: exitError, want: []string{`"status": "success"`, `"timezone": "Europe/Paris"`, `"code": "invalid_arguments"`, "timezone"}},
	`curl -s -H "Authorization: Bearer $QUIVER_KEY" -H 'Content-Type: application/json' \`: {
		skip: "it needs a running server and its key: TestServeAPI makes the same calls against quiver serve"},
	"go install ./cmd/quiver       # from the clone; puts quiver in $(go env GOPATH)/bin": {
		skip: "it installs into the user's GOPATH and serves until stopped: TestVersion checks quiver version, TestServe serve"},
	"docker build -t quiver .": {
		skip: "no container engine in CI; the Dockerfile was checked with a linter (see README, Installing)"},
	"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_SERVICE_NAME=quiver quiver serve": {
		skip: "it serves until stopped: TestServeContinuesTheClientsTrace starts serve with OTEL_EXPORTER_OTLP_ENDPOINT and checks the spans an OTLP receiver gets"},
	"cat > /tmp/demo.yaml <<'YAML'": {
		want: []string{"get_current_time", "Done, I checked the time in Paris."}},
	`go run ./cmd/quiver call run_code --args '{"code":"export default ({n}) => Array.from({length: n}, (_, i) => i * i)","args":{"n":5}}'`: {
		// One result, not a report of the run inside one (issue 35): the value at the top, the
		// duration in meta.
		want: []string{`"status": "success"`, "\"value\": [\n    0,", "16", `"meta": {`, `"duration_ms": `}, unwanted: []string{`"value": {`}},
	"mkdir -p agents": {
		want: []string{"▸ researcher started", "◂ researcher finished: Otters hold hands while they sleep.", "▸ writer started",
			"◂ writer finished", "Title: Hand in Hand."}},
	"mkdir -p agents && cd agents": {
		want: []string{"[side_a]", "[side_b]", "Go: fast.", "Too thin: say why it matters.", "APPROVED", "Go: simple, fast, yours."}},
	"cat > weather.yaml <<'YAML'": {
		exit: exitError, want: []string{"1 tool:", "weather.getForecast", "WEATHER_KEY", "added to", `"name": "weather_getForecast"`,
			`"code": "invalid_arguments"`, "days"}, unwanted: []string{"wk-0123456789"}},
	"quiver serve --agents agents &            # serves agents/forecaster.yaml (expose_as_tool: true) at /a2a/forecaster": {
		skip: "it serves in the background on the default port until stopped: TestServeAgentsOverA2A runs the same, quiver serve's exposed agent " +
			"imported by another command's a2a block and called by quiver call, on a random port"},
	"cat > weather.js <<'JS'": {
		want: []string{`"city": "Oslo"`, `"temp": 21`, `"region": "eu"`}},
	"quiver vars set REGION eu-west                       # the instance": {
		setup:     "printf 'hunter2' > token.txt\nmkdir -p agents\n" + "cat > agents/researcher.yaml <<'YAML'\n%s\nYAML",
		anthropic: "It is daytime in the Nordics.",
		want:      []string{"VAULT_TOKEN", "(secret, set)", "It is daytime in the Nordics."}},
}

// TestREADMEShellExamples runs the README's sh blocks as a reader would, with the quiver
// command built from this checkout (`go run ./cmd/quiver` becomes `quiver`), each in a fresh
// folder and data directory, and checks their exit status and what they print.
func TestREADMEShellExamples(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	bin := quiverBinary(t)
	agent := readmeAgent(t, string(readme))
	blocks := shellBlocks(string(readme))
	if len(blocks) < 5 {
		t.Fatalf("found %d sh blocks in the README", len(blocks))
	}
	seen := map[string]bool{}
	for _, block := range blocks {
		first, _, _ := strings.Cut(block, "\n")
		seen[first] = true
		ex, ok := readmeExamples[first]
		if !ok {
			t.Errorf("the README's sh block starting %q has no entry in readmeExamples: say how it is checked", first)
			continue
		}
		t.Run(first, func(t *testing.T) {
			if ex.skip != "" {
				t.Logf("not run: %s", ex.skip) // a skipped block's reason, not t.Skip: nothing failed
				return
			}
			dir := t.TempDir()
			env := append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
				"HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "QUIVER_AGENTS="+filepath.Join(dir, "agents"))
			if ex.anthropic != "" {
				env = append(env, "ANTHROPIC_API_KEY=sk-ant-test", "ANTHROPIC_BASE_URL="+fakeAnthropic(t, ex.anthropic))
			}
			script := strings.ReplaceAll(block, "go run ./cmd/quiver", "quiver")
			if ex.setup != "" {
				setup := ex.setup
				if strings.Contains(setup, "%s") {
					setup = fmt.Sprintf(setup, agent)
				}
				script = setup + "\n" + script
			}
			cmd := exec.Command("bash", "-c", script)
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.CombinedOutput()
			if code := exitCode(t, err); code != ex.exit {
				t.Errorf("exit status %d, want %d", code, ex.exit)
			}
			for _, w := range ex.want {
				if !bytes.Contains(out, []byte(w)) {
					t.Errorf("the output does not say %q", w)
				}
			}
			for _, w := range ex.unwanted {
				if bytes.Contains(out, []byte(w)) {
					t.Errorf("the output says %q", w)
				}
			}
			if t.Failed() {
				t.Logf("the block:\n%s\nits output:\n%s", script, out)
			}
		})
	}
	for first := range readmeExamples {
		if !seen[first] {
			t.Errorf("readmeExamples has an entry for %q, which no sh block of the README starts with", first)
		}
	}
}

// shellBlocks returns the text of every ```sh block in md.
func shellBlocks(md string) []string {
	var blocks []string
	var b strings.Builder
	in := false
	for line := range strings.Lines(md) {
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in = true
			b.Reset()
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.TrimSuffix(b.String(), "\n"))
		case in:
			b.WriteString(line)
		}
	}
	return blocks
}

// readmeAgent is the README's agents/researcher.yaml, which its variables example runs.
func readmeAgent(t testing.TB, readme string) string {
	t.Helper()
	start := strings.Index(readme, "# agents/researcher.yaml")
	if start < 0 {
		t.Fatal("the README has no agents/researcher.yaml example")
	}
	def := readme[start:]
	return def[:strings.Index(def, "```")]
}

// fakeAnthropic serves Anthropic's Messages API, streamed as the SDK asks, answering every
// request with answer as the run's structured final answer: a call of the tool that carries
// the output (model/anthropic asks for structured output with one, the request's last).
func fakeAnthropic(t testing.TB, answer string) string {
	t.Helper()
	input, _ := json.Marshal(map[string]string{"answer": answer})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Tools []struct{ Name string } }
		if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != "sk-ant-test" ||
			json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Tools) == 0 {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"unexpected request"}}`, http.StatusBadRequest)
			return
		}
		name, _ := json.Marshal(req.Tools[len(req.Tools)-1].Name)
		partial, _ := json.Marshal(string(input))
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range [][2]string{
			{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01","name":` + string(name) + `,"input":{}}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":` + string(partial) + `}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e[0], e[1])
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
