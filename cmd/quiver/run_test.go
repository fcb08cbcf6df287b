package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/sqlite"
)

// chatServer speaks OpenAI's chat completions wire format (streamed as server-sent events, as
// the SDK asks when the CLI shows progress). It answers the request that carries n assistant
// messages with turns[n], and keeps every request body.
type chatServer struct {
	*httptest.Server
	mu    sync.Mutex
	turns []chatTurn
	reqs  []map[string]any
}

type chatTurn struct {
	text  string
	calls [][2]string // name, arguments
}

func newChatServer(t testing.TB, turns ...chatTurn) *chatServer {
	s := &chatServer{turns: turns}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *chatServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if r.URL.Path != "/chat/completions" || json.Unmarshal(body, &req) != nil {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	n := 0
	for _, m := range req["messages"].([]any) {
		if m.(map[string]any)["role"] == "assistant" {
			n++
		}
	}
	if n >= len(s.turns) {
		http.Error(w, `{"error":{"message":"script ended","type":"server_error"}}`, http.StatusInternalServerError)
		return
	}
	turn := s.turns[n]
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	if turn.text != "" {
		for _, word := range strings.SplitAfter(turn.text, " ") {
			chunk(map[string]any{"role": "assistant", "content": word}, nil)
		}
	}
	for i, c := range turn.calls {
		chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%d", n, i),
			"type": "function", "function": map[string]any{"name": c[0], "arguments": c[1]}}}}, nil)
	}
	finish := "stop"
	if len(turn.calls) > 0 {
		finish = "tool_calls"
	}
	chunk(map[string]any{}, finish)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func (s *chatServer) lastMessages() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[len(s.reqs)-1]["messages"].([]any)
}

// runWith runs the CLI in-process with a registry of its own.
func runWith(reg *quiver.Registry, stdin string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	a := &app{registry: reg, stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr}
	code := a.run(context.Background(), args)
	return code, stdout.String(), stderr.String()
}

func TestRunWithoutAModelSaysHowToConfigureOne(t *testing.T) {
	t.Setenv("QUIVER_MODEL", "")
	code, _, stderr := runCLI(t, "", "run", "--db", filepath.Join(t.TempDir(), "q.db"), "hello")
	if code != exitError {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"no model configured", "--model", "OPENAI_API_KEY", "openai:gpt-4.1-mini", "ollama:llama3.2"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if n := strings.Count(strings.ToLower(stderr), "for example"); n != 1 {
		t.Errorf("the help says \"for example\" %d times, want once:\n%s", n, stderr)
	}
	t.Setenv("OPENAI_API_KEY", "")
	code, _, stderr = runCLI(t, "", "run", "--model", "openai:gpt-4.1-mini", "--db", filepath.Join(t.TempDir(), "q.db"), "hello")
	if code != exitError || !strings.Contains(stderr, "OPENAI_API_KEY") {
		t.Fatalf("openai without a key: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "run"); code != exitUsage || !strings.Contains(stderr, "needs a message") {
		t.Fatalf("no message: exit %d\n%s", code, stderr)
	}
}

// TestRunAgainstAnOpenAICompatibleServer runs the default agent on a local server speaking the
// chat completions wire format, through the real SDK: a tool call, its result, the answer, and
// the thread shown afterwards.
func TestRunAgainstAnOpenAICompatibleServer(t *testing.T) {
	srv := newChatServer(t,
		chatTurn{text: "Checking the time.", calls: [][2]string{{"get_current_time", `{"timezone":"Europe/Paris"}`}}},
		chatTurn{text: "It is noon in Paris."},
	)
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	db := filepath.Join(t.TempDir(), "q.db")
	code, stdout, stderr := runCLI(t, "", "run", "--model", "openai:gpt-4.1-mini", "--db", db, "what time is it in Paris?")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if strings.TrimSpace(stdout) != "It is noon in Paris." {
		t.Fatalf("stdout %q", stdout)
	}
	for _, want := range []string{"Checking the time.", `→ get_current_time {"timezone":"Europe/Paris"}`, "← get_current_time:"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	msgs := srv.lastMessages()
	toolMsg := msgs[len(msgs)-1].(map[string]any)
	if toolMsg["role"] != "tool" || toolMsg["tool_call_id"] != "call_0_0" || !strings.Contains(fmt.Sprint(toolMsg["content"]), "Europe/Paris") {
		t.Fatalf("tool result sent back as %v", toolMsg)
	}
	id := regexp.MustCompile(`thread (thr_\w+)`).FindStringSubmatch(stderr)
	if id == nil {
		t.Fatalf("no thread id in:\n%s", stderr)
	}
	code, stdout, stderr = runCLI(t, "", "threads", "show", id[1], "--db", db)
	if code != exitOK {
		t.Fatalf("threads show: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"user      what time is it in Paris?", "→ get_current_time [call_0_0]", "tool      get_current_time [call_0_0] ok:",
		"assistant It is noon in Paris."} {
		if !strings.Contains(stdout, want) {
			t.Errorf("threads show lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, stderr := runCLI(t, "", "threads", "show", "thr_missing", "--db", db); code != exitError ||
		!strings.Contains(stderr, "no thread thr_missing in this database ("+db+")") {
		t.Fatalf("missing thread: exit %d\n%s", code, stderr)
	}
}

// TestRunAsksForConfirmationInTheTerminal: the tool needs confirmation; the terminal answers
// "edit", then an invalid object, then a valid one, and the edited call runs.
func TestRunAsksForConfirmationInTheTerminal(t *testing.T) {
	cases := []struct {
		name, stdin, wantRan, wantOut string
	}{
		{"approve", "a\n", "/tmp/a", "Done."},
		{"edit", "e\n[1]\ne\n{\"path\":\"/tmp/b\"}\n", "/tmp/b", "Done."},
		{"deny", "d\nnot today\n", "", "Done."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newChatServer(t,
				chatTurn{calls: [][2]string{{"delete_file", `{"path":"/tmp/a"}`}}},
				chatTurn{text: "Done."},
			)
			t.Setenv("OPENAI_API_KEY", "sk-test")
			t.Setenv("OPENAI_BASE_URL", srv.URL)
			var ran []string
			reg := &quiver.Registry{}
			if err := reg.Register(quiver.Func("delete_file", "Deletes a file.", func(_ context.Context, in struct {
				Path string `json:"path"`
			}) (string, error) {
				ran = append(ran, in.Path)
				return "deleted", nil
			}, quiver.WithConfirmation())); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runWith(reg, c.stdin, "run", "--model", "openai:gpt-4.1-mini", "--db", filepath.Join(t.TempDir(), "q.db"), "clean up")
			if code != exitOK || strings.TrimSpace(stdout) != c.wantOut {
				t.Fatalf("exit %d stdout %q\n%s", code, stdout, stderr)
			}
			if got := strings.Join(ran, ","); got != c.wantRan {
				t.Fatalf("ran %q, want %q", got, c.wantRan)
			}
			if !strings.Contains(stderr, "delete_file wants to run") {
				t.Fatalf("no question asked:\n%s", stderr)
			}
			if c.name == "deny" {
				msgs := srv.lastMessages()
				if content := fmt.Sprint(msgs[len(msgs)-1].(map[string]any)["content"]); !strings.Contains(content, "not today") {
					t.Fatalf("the model was not told: %s", content)
				}
			}
		})
	}
	// With nothing to read, the run stays paused and says how to resume it.
	srv := newChatServer(t, chatTurn{calls: [][2]string{{"delete_file", `{"path":"/tmp/a"}`}}}, chatTurn{text: "Done."})
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	reg := &quiver.Registry{}
	if err := reg.Register(quiver.Func("delete_file", "Deletes a file.", func(context.Context, struct {
		Path string `json:"path"`
	}) (string, error) {
		return "", nil
	}, quiver.WithConfirmation())); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runWith(reg, "", "run", "--model", "openai:gpt-4.1-mini", "--db", filepath.Join(t.TempDir(), "q.db"), "clean up")
	if code != exitError || !strings.Contains(stderr, "quiver run --thread thr_") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}

// TestRunScriptedAndResumeInAnotherInvocation: an offline run on a scripted model, paused for a
// confirmation with nothing to answer, then resumed by a second invocation with --thread that
// approves it.
func TestRunScriptedAndResumeInAnotherInvocation(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "demo.yaml")
	if err := os.WriteFile(script, []byte(`turns:
  - calls:
      - name: delete_file
        args: {path: /tmp/old.log}
  - expect:
      result_contains: deleted
    text: The old log is gone.
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var ran []string
	reg := &quiver.Registry{}
	if err := reg.Register(quiver.Func("delete_file", "Deletes a file.", func(_ context.Context, in struct {
		Path string `json:"path"`
	}) (string, error) {
		ran = append(ran, in.Path)
		return "deleted " + in.Path, nil
	}, quiver.WithConfirmation())); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "q.db")
	code, _, stderr := runWith(reg, "", "run", "--model", "scripted:"+script, "--db", db, "clean up")
	id := regexp.MustCompile(`--thread (thr_\w+)`).FindStringSubmatch(stderr)
	if code != exitError || id == nil || len(ran) != 0 {
		t.Fatalf("first invocation: exit %d, ran %v\n%s", code, ran, stderr)
	}
	code, stdout, stderr := runWith(reg, "a\n", "run", "--model", "scripted:"+script, "--db", db, "--thread", id[1])
	if code != exitOK || strings.TrimSpace(stdout) != "The old log is gone." || strings.Join(ran, ",") != "/tmp/old.log" {
		t.Fatalf("second invocation: exit %d stdout %q ran %v\n%s", code, stdout, ran, stderr)
	}
}

// In a terminal the final answer, already streamed on standard error, is not printed again on
// standard output; redirected, standard output always gets it.
func TestFinalAnswerShownOnce(t *testing.T) {
	tests := []struct {
		name                 string
		stdoutTTY, stderrTTY bool
		streamed, final      string
		twice                bool
	}{
		{"both a terminal, streamed", true, true, "It is noon.", "It is noon.", true},
		{"stdout redirected", false, true, "It is noon.", "It is noon.", false},
		{"stderr redirected", true, false, "It is noon.", "It is noon.", false},
		{"not streamed", true, true, "", "It is noon.", false},
		{"an earlier turn streamed", true, true, "Checking.", "It is noon.", false},
		{"partly streamed", true, true, "is noon.", "It is noon.", false},
		{"a structured output streamed as written", true, true, `{"answer":"noon"}`, `{"answer":"noon"}`, true},
		{"the output inside a {calls, output} document", true, true, `{"calls":[],"output":{"answer":"noon"}}`, `{"answer":"noon"}`, true},
	}
	for _, tt := range tests {
		if got := shownTwice(tt.stdoutTTY, tt.stderrTTY, tt.streamed, tt.final); got != tt.twice {
			t.Errorf("%s: shownTwice = %v, want %v", tt.name, got, tt.twice)
		}
	}
}

// quiver run in a terminal shows the final answer once, whatever its form: text, or an agent's
// structured output, which the model writes inside a {calls, output} document (over OpenAI's
// wire format and the scripted model's); redirected, standard output gets it (issue 35: a
// structured answer was printed after its document had streamed).
func TestRunShowsTheFinalAnswerOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const schema = "output:\n  type: object\n  properties: {answer: {type: string}}\n  required: [answer]\n  additionalProperties: false\n"
	structured := write("structured.yaml", "name: structured\nsystem: Answer.\n"+schema)
	composed := write("composed.yaml", "name: composed\nsystem: Answer.\nmodel: scripted:"+
		write("composed.script.yaml", "turns:\n  - output: {calls: [], output: {answer: It is noon.}}\n")+"\n"+schema)
	tests := []struct {
		name   string
		args   []string
		turn   string // the OpenAI server's answer; "": the agent's scripted model answers
		answer string
	}{
		{"text", []string{"--model", "openai:gpt-4.1-mini"}, "It is noon in Paris.", "It is noon in Paris."},
		{"structured output", []string{"--model", "openai:gpt-4.1-mini", "--agent", structured}, `{"calls": [], "output": {"answer": "It is noon."}}`,
			`{"answer": "It is noon."}`},
		{"structured output of the scripted model", []string{"--agent", composed}, "", `{"answer":"It is noon."}`},
	}
	for _, tt := range tests {
		for _, terminal := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/terminal=%v", tt.name, terminal), func(t *testing.T) {
				if tt.turn != "" {
					srv := newChatServer(t, chatTurn{text: tt.turn})
					t.Setenv("OPENAI_API_KEY", "sk-test")
					t.Setenv("OPENAI_BASE_URL", srv.URL)
				}
				var stdout, stderr bytes.Buffer
				a := &app{registry: quiver.Default, stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
					terminal: func(io.Writer) bool { return terminal }}
				args := append([]string{"run", "--db", filepath.Join(t.TempDir(), "q.db")}, tt.args...)
				if code := a.run(context.Background(), append(args, "What time is it?")); code != exitOK {
					t.Fatalf("exit %d\n%s", code, stderr.String())
				}
				if !strings.Contains(stderr.String(), tt.answer) {
					t.Errorf("the answer %s was not streamed on stderr:\n%s", tt.answer, stderr.String())
				}
				want := tt.answer + "\n"
				if terminal {
					want = ""
				}
				if stdout.String() != want {
					t.Errorf("stdout %q, want %q (stderr:\n%s)", stdout.String(), want, stderr.String())
				}
			})
		}
	}
}

// The README's agent definition (agents/researcher.yaml) runs as written: its tools exist, its
// required variable can be given with --var, and --model overrides the model it names.
func TestREADMEAgentExampleRuns(t *testing.T) {
	def := readmeBlock(t, "# agents/researcher.yaml")
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	script := filepath.Join(dir, "turns.yaml")
	if err := os.MkdirAll(agents, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		filepath.Join(agents, "researcher.yaml"): def,
		// The definition asks for a structured answer, so the model answers in JSON documents
		// ({calls, output} mode).
		script: "turns:\n" +
			"  - text: '{\"calls\": [{\"_tool\": \"get_current_time\", \"timezone\": \"Europe/Oslo\"}], \"output\": null}'\n" +
			"  - text: '{\"calls\": [], \"output\": {\"answer\": \"It is daytime in Oslo.\"}}'\n",
	} {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "q.db")
	args := []string{"run", "--agents", agents, "--agent", "researcher", "--model", "scripted:" + script, "--db", db}
	if code, _, stderr := runCLI(t, "", append(args, "time in Oslo?")...); code != exitError || !strings.Contains(stderr, "required variable not set: REGION") {
		t.Fatalf("without REGION: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "", append(args, "--var", "REGION=nordics", "time in Oslo?")...)
	var out struct{ Answer string }
	if code != exitOK || json.Unmarshal([]byte(stdout), &out) != nil || out.Answer != "It is daytime in Oslo." ||
		!strings.Contains(stderr, "\n→ get_current_time") {
		t.Fatalf("with REGION: exit %d\nstdout %q\nstderr %s", code, stdout, stderr)
	}
}

// quiver threads list pages through the threads newest first, says how to see the next page,
// and prints the same as JSON.
func TestThreadsList(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	if code, _, stderr := runCLI(t, "", "threads", "list", "--db", db); code != exitOK || !strings.Contains(stderr, "no threads yet") {
		t.Fatalf("without a database: exit %d\n%s", code, stderr)
	}
	st, err := sqlite.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		th := &store.Thread{WorkspaceID: localWorkspaceID, AgentID: "researcher", Tags: []string{fmt.Sprintf("n:%d", i)}}
		if i == 0 {
			if err := ensureLocalWorkspace(context.Background(), st); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.CreateThread(context.Background(), th); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, th.ID)
	}
	st.Close()
	code, stdout, stderr := runCLI(t, "", "threads", "list", "--db", db, "--limit", "2")
	next := regexp.MustCompile(`--cursor (\S+)`).FindStringSubmatch(stderr)
	if code != exitOK || next == nil || !strings.Contains(stdout, "THREAD") || !strings.Contains(stdout, "researcher") {
		t.Fatalf("first page: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	first := strings.Index(stdout, ids[2])
	if first < 0 || strings.Index(stdout, ids[1]) < first || strings.Contains(stdout, ids[0]) {
		t.Errorf("first page of 2, newest first, want %s then %s:\n%s", ids[2], ids[1], stdout)
	}
	code, stdout, stderr = runCLI(t, "", "threads", "list", "--db", db, "--limit", "2", "--cursor", next[1], "--json")
	var page struct {
		Threads []store.Thread `json:"threads"`
		Next    string         `json:"next"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &page) != nil || len(page.Threads) != 1 || page.Threads[0].ID != ids[0] || page.Next != "" {
		t.Fatalf("second page: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "", "threads", "list", "--db", db, "--cursor", "nonsense"); code != exitUsage || !strings.Contains(stderr, "not a cursor") {
		t.Errorf("bad cursor: exit %d\n%s", code, stderr)
	}
}

// The README's planner runs with quiver run and a scripted model: its calls write their
// outputs into the thread's state and an instance's, a second write of a path is refused, and
// quiver threads show prints the state.
func TestREADMEStatefulCallsExampleRuns(t *testing.T) {
	def := readmeBlock(t, "# agents/planner.yaml")
	dir := t.TempDir()
	agents, script := filepath.Join(dir, "agents"), filepath.Join(dir, "turns.yaml")
	writeTestFiles(t, map[string]string{
		filepath.Join(agents, "planner.yaml"): def,
		script: "turns:\n" +
			"  - calls:\n" +
			"      - {name: get_current_time, args: {timezone: Europe/Oslo, _outputPath: /departure}}\n" +
			"      - {name: get_current_time, args: {timezone: Europe/Paris, _outputPath: /departure, _instance: outbound}}\n" +
			"      - {name: get_current_time, args: {timezone: UTC, _outputPath: /departure}}\n" +
			"      - {name: get_current_time, args: {timezone: UTC, _instance: sideways}}\n" +
			"  - expect: {result_contains: the instances are}\n    text: Planned.\n",
	})
	db := filepath.Join(dir, "q.db")
	code, stdout, stderr := runCLI(t, "", "run", "--agents", agents, "--agent", "planner", "--model", "scripted:"+script, "--db", db, "plan it")
	if code != exitOK || strings.TrimSpace(stdout) != "Planned." {
		t.Fatalf("run: exit %d\nstdout %q\nstderr %s", code, stdout, stderr)
	}
	id := regexp.MustCompile(`thread (thr_\w+)`).FindStringSubmatch(stderr)
	if id == nil {
		t.Fatalf("no thread id in:\n%s", stderr)
	}
	code, stdout, stderr = runCLI(t, "", "threads", "show", id[1], "--db", db)
	if code != exitOK {
		t.Fatalf("threads show: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"state:\n  {\n    \"departure\": {", `"timezone": "Europe/Oslo"`, "instance inbound:\n  {}",
		"instance outbound:\n  {\n    \"departure\": {", `"timezone": "Europe/Paris"`, "error (state_conflict)", "error (invalid_arguments)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("threads show lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, `"timezone": "UTC"`) {
		t.Errorf("a refused write reached the state:\n%s", stdout)
	}
}

// readmeBlock returns the README's code block that starts with first (a line), up to the
// block's end.
func readmeBlock(t *testing.T, first string) string {
	t.Helper()
	readme := docPages(t)
	start := strings.Index(readme, first)
	if start < 0 {
		t.Fatalf("neither the README nor the docs pages have an example starting with %q", first)
	}
	def := readme[start:]
	return def[:strings.Index(def, "```")]
}
