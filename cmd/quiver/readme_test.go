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
	"regexp"
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
	"cat > lookup_order.yaml <<'YAML'":                                                            entitlementsGuide,
	"cat > quiver.yaml <<'YAML'":                                                                  entitlementsGuide,
	"quiver keys create --name support-desk --toolset support > support.key":                      entitlementsGuide,
	"quiver access explain --subject toolset:support --tool refund_payment":                       entitlementsGuide,
	"quiver access explain --subject role:viewer --tool refund_payment":                           entitlementsGuide,
	"quiver access explain --subject toolset:support --tool deploy_service":                       entitlementsGuide,
	"quiver access explain --subject role:member --tool lookup_order":                             entitlementsGuide,
	`curl -s -H "Authorization: Bearer $QUIVER_KEY" \`:                                            entitlementsGuideOnline,
	`curl -s -H "Authorization: Bearer $(cat engineering.key)" http://127.0.0.1:7411/v1/toolsets`: entitlementsGuideOnline,
	`curl -s -H "Authorization: Bearer $QUIVER_KEY" http://127.0.0.1:7411/v1/entitlements`:        entitlementsGuideOnline,
	"claude mcp add --transport http support http://127.0.0.1:7411/mcp/support \\": {
		skip: "it needs Claude Code: TestEntitlementsMatrix (server) connects the MCP go-sdk client to /mcp/support with keys " +
			"bound to the toolset and others, and TestREADMEMCPClientConfigs checks the README's own Claude Code command"},
	"go run ./cmd/quiver serve     # run Quiver: MCP, the /v1 API and the console on http://127.0.0.1:7411": {
		skip: "it serves until stopped, and runs the tests this one is among: TestServe starts serve with no configuration, " +
			"TestServeBanner checks what it prints against the README's sample"},
	`claude mcp add --transport http quiver http://127.0.0.1:7411/mcp --header "Authorization: Bearer $QUIVER_KEY"`: {
		skip: "it needs Claude Code: TestREADMEMCPClientConfigs connects to quiver serve with its URL and header"},
	"mkdir forecast && cd forecast": {
		skip: "go mod tidy fetches go.mod files from the module proxy: TestDocsGoBlocks (docs_test.go at the root) " +
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
		skip: "no container engine in CI; the Dockerfile was checked with a linter (see docs/guides/install.md)"},
	"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_SERVICE_NAME=quiver quiver serve": {
		skip: "it serves until stopped: TestServeContinuesTheClientsTrace starts serve with OTEL_EXPORTER_OTLP_ENDPOINT and checks the spans an OTLP receiver gets"},
	"go run -tags quiver_lean ./cmd/quiver serve": {
		skip: "it serves until stopped: TestLeanBuild builds the command with the tag and checks what it serves and refuses"},
	`npx -y @modelcontextprotocol/inspector@2.12.0 --cli http://127.0.0.1:7411/mcp --transport http --header "Authorization: Bearer $QUIVER_KEY" --method tools/list`: {
		skip: "it needs a running server and the Inspector 2.12.0 from npm, which .ci/run does not pin: run by hand against quiver serve " +
			"with a key when docs/guides/clients.md was written; TestInspectorCLI runs the pinned 0.15.0 against --insecure-local"},
	"npx -y @modelcontextprotocol/inspector@0.15.0 --cli http://127.0.0.1:7411/mcp --transport http --method tools/list": {
		skip: "it needs a running server and npm: TestInspectorCLI runs the same version's CLI against quiver serve --insecure-local"},
	"go run . serve": {
		skip: "it serves the embedding program of docs/guides/embedding.md until stopped: TestDocsGoBlocks runs the program's own check, " +
			"the same calls on a database of its own"},
	`curl -s -H "Authorization: Bearer $QUIVER_KEY" -H 'Content-Type: application/json' -d '{"args":{"city":"Oslo"}}' http://127.0.0.1:7412/v1/tools/get_forecast/call`: {
		skip: "it needs the embedding program serving: TestDocsGoBlocks runs the program, which makes the same call with its key"},
	"quiver threads list --db quiver.db": {
		skip: "it reads the embedding program's database: TestThreadsList checks quiver threads list"},
	"cat > orders.yaml <<'YAML'": {
		exit: exitError, want: []string{"2 tools:", "orders.refundOrder", "ORDERS_TOKEN", "added to", "[read-only",
			`"code": "invalid_arguments"`, "/id", `"code": "confirmation_required"`}, unwanted: []string{"tok-0123456789"}},
	"mkdir -p agents && cat > agents/support.yaml <<'YAML'": {
		want: []string{"added tool refund (tol_", "[a]pprove, [e]dit, [d]eny?", "new arguments", `← refund: {"order":"A-7","refunded":4}`,
			"I refunded what was approved."}},
	`psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE quiver_fleet'`: fleetTutorial,
	"mkdir -p fleet/agents": fleetTutorial,
	"XDG_DATA_HOME=$PWD/node1 quiver serve --addr 127.0.0.1:7411 --drain-delay 2s > node1.log 2>&1 &":                                                                                                        fleetTutorial,
	"export QUIVER_KEY=$(quiver keys create --name tutorial --role admin | grep -o 'qvk_[A-Za-z0-9_-]*')":                                                                                                    fleetTutorial,
	`THREAD=$(curl -s -H "Authorization: Bearer $QUIVER_KEY" -H 'Content-Type: application/json' -d '{"agent":"helper"}' http://127.0.0.1:7411/v1/threads | grep -o '"id":"thr_[a-z0-9]*"' | cut -d'"' -f4)`: fleetTutorial,
	"quiver apply -f fleet/ --dry-run": fleetTutorial,
	"kill %1 %2 %3":                    fleetTutorial,
	`quiver apply -f deploy/ --dry-run --postgres "$QUIVER_POSTGRES"`: {
		skip: "it needs PostgreSQL and a deploy/ folder: TestFleetSharesOneConfiguration applies and dry-runs the fleet's configuration"},
	`quiver keys create --name ci --role member --postgres "$QUIVER_POSTGRES"`: {
		skip: "it needs PostgreSQL: TestFleetSharesOneConfiguration makes keys on the fleet's database"},
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

// entitlementsGuide is how the offline blocks of docs/guides/entitlements.md are checked: run
// in order, in one folder and data directory, by TestDocsShellBlocks (docs_shell_test.go), as
// a reader following the page runs them.
var entitlementsGuide = readmeExample{skip: "docs/guides/entitlements.md's offline blocks run in order in TestDocsShellBlocks " +
	"(quiver apply of the block, keys bound to toolsets, quiver access explain with its exit codes, quiver access set)"}

// entitlementsGuideOnline is how its blocks that need a running server are checked.
var entitlementsGuideOnline = readmeExample{skip: "it needs quiver serve on the default port: TestEntitlementsAtTheDoors and " +
	"TestEntitlementsMatrix (server) call the same endpoints, /v1/entitlements, its explain, /v1/toolsets and /mcp/support, " +
	"with keys bound to toolsets; TestEntitlementsGuideBody (config) decodes and checks the PUT body"}

// fleetTutorial is how the blocks of docs/tutorials/fleet.md are checked: they need PostgreSQL,
// three servers and curl, and were run by hand in that order on PostgreSQL when the page was
// written.
var fleetTutorial = readmeExample{skip: "docs/tutorials/fleet.md needs PostgreSQL and three servers: TestFleetSharesOneConfiguration " +
	"runs the same (quiver apply, two nodes serving its agents, a run started on one and read on the other), TestFleetChaos three nodes"}

// TestREADMEShellExamples runs the sh blocks of the README and the docs pages (docPages) as a
// reader would, with the quiver
// command built from this checkout (`go run ./cmd/quiver` becomes `quiver`), each in a fresh
// folder and data directory, and checks their exit status and what they print.
func TestREADMEShellExamples(t *testing.T) {
	readme := docPages(t)
	bin := quiverBinary(t)
	agent := readmeAgent(t, readme)
	blocks := shellBlocks(readme)
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

// docPages returns the text of the README and of the docs/ pages that hold the examples it
// used to (docs/index.md and the tutorials, guides and explanations), one after the other:
// the pages whose examples these tests run. docs/reference/ is generated, and checked where it
// is generated.
func docPages(t testing.TB) string {
	t.Helper()
	paths := []string{"../../README.md", "../../docs/index.md"}
	for _, dir := range []string{"tutorials", "guides", "explanations"} {
		found, err := filepath.Glob(filepath.Join("../../docs", dir, "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, found...)
	}
	var b strings.Builder
	for _, path := range paths {
		md, err := os.ReadFile(path)
		if err != nil && !(os.IsNotExist(err) && path != "../../README.md") {
			t.Fatal(err)
		}
		b.Write(md)
		b.WriteString("\n")
	}
	return b.String()
}

// shellFence is the opening fence of a sh block, with the attributes it may give in braces
// ({exit=1}, {no-run: why}, {no-test: why}: see internal/mdblocks).
var shellFence = regexp.MustCompile("^```sh(?:\\s+\\{(.*)\\})?$")

// shellBlocks returns the text of every ```sh block in md, but those whose fence says no-test.
func shellBlocks(md string) []string {
	var blocks []string
	var b strings.Builder
	in, skip := false, false
	for line := range strings.Lines(md) {
		m := shellFence.FindStringSubmatch(strings.TrimSpace(line))
		switch {
		case !in && m != nil:
			in, skip = true, strings.Contains(m[1], "no-test")
			b.Reset()
		case in && skip && strings.TrimSpace(line) == "```":
			in = false
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
