package jsfunc_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/backendtest"
	"github.com/quiverhq/quiver/sandbox"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/thread"
)

// Seed 003's contract for JavaScript tools: the ToolResult a function returns, its
// attachments, the state object (tenvs, execution, runCode, notifyParent, readState) and
// meta-fields, through the public API.

// TestMain lets this test binary serve as the sandbox's worker program (TestContractInWorkers).
func TestMain(m *testing.M) {
	sandbox.WorkerMain()
	m.Run()
}

func jsTool(t *testing.T, def jsfunc.Definition) *quiver.Tool {
	t.Helper()
	if def.Description == "" {
		def.Description = "A test tool."
	}
	tool, err := jsfunc.New(def)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func dispatcherOf(t *testing.T, rec quiver.Recorder, tools ...*quiver.Tool) *quiver.Dispatcher {
	t.Helper()
	reg := &quiver.Registry{}
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	return &quiver.Dispatcher{Registry: reg, Recorder: rec}
}

// returning is a tool whose code returns the JavaScript expression v.
func returning(t *testing.T, v string) *quiver.Tool {
	return jsTool(t, jsfunc.Definition{Name: "returns", Code: "export default (args, state) => (" + v + ")"})
}

func call(t *testing.T, d *quiver.Dispatcher, ctx context.Context, c quiver.Call) *quiver.Result {
	t.Helper()
	r, err := d.Dispatch(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A returned ToolResult is read as a Go tool's result; any other value keeps its meaning; a
// ToolResult with a field of the wrong type, or a hostile attachment, is an error result
// that says which.
func TestToolResult(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nfake"))
	ref := `{id: "fil_1", type: "file", path: "/attachments/chart.png", name: "chart.png", mimeType: "image/png", size: 12, width: 8, height: 6}`
	tests := []struct {
		name, ret string
		check     func(t *testing.T, r *quiver.Result)
	}{
		{"an error is an error result", `{status: "error", error: "API rate limit exceeded. Please try again later.", stack: "at fetch (api.js:3)"}`,
			func(t *testing.T, r *quiver.Result) {
				if !r.IsError() || r.Code != quiver.CodeToolError || r.Error != "API rate limit exceeded. Please try again later." ||
					!strings.Contains(r.Stack, "at fetch (api.js:3)") || r.Value != nil {
					t.Fatalf("result %+v", r)
				}
				if got := r.ModelText(); got != "Error: API rate limit exceeded. Please try again later." {
					t.Errorf("the model reads %q", got)
				}
			}},
		{"an error without a message", `{status: "error"}`, func(t *testing.T, r *quiver.Result) {
			if !r.IsError() || r.Error == "" {
				t.Fatalf("result %+v", r)
			}
		}},
		{"result is the text", `{status: "success", result: JSON.stringify({temperature: 72})}`, func(t *testing.T, r *quiver.Result) {
			if r.IsError() || r.Text != `{"temperature":72}` || r.Value != nil {
				t.Fatalf("result %+v", r)
			}
		}},
		{"null optional fields are absent", `{status: "success", result: "ok", error: null, stack: null, attachments: null}`,
			func(t *testing.T, r *quiver.Result) {
				if r.IsError() || r.Text != "ok" || len(r.Attachments) != 0 {
					t.Fatalf("result %+v", r)
				}
			}},
		{"new and referenced attachments", `{status: "success", result: "drawn", attachments: [
				{name: "chart.png", mimeType: "image/png", data: "` + png + `", width: 800, height: 600}, ` + ref + `]}`,
			func(t *testing.T, r *quiver.Result) {
				if r.IsError() || len(r.Attachments) != 2 {
					t.Fatalf("result %+v", r)
				}
				a, b := r.Attachments[0], r.Attachments[1]
				if a.Name != "chart.png" || a.Data != png || a.Width != 800 || a.Height != 600 || a.IsRef() {
					t.Errorf("new attachment %+v", a)
				}
				if !b.IsRef() || b.ID != "fil_1" || b.Path != "/attachments/chart.png" || b.Size != 12 || b.Width != 8 {
					t.Errorf("reference %+v", b)
				}
			}},
		// Other values keep their meaning.
		{"another key makes it a value", `{status: "success", result: "x", extra: 1}`, func(t *testing.T, r *quiver.Result) {
			if r.IsError() || string(r.Value) != `{"status":"success","result":"x","extra":1}` {
				t.Fatalf("result %+v", r)
			}
		}},
		{"another status makes it a value", `{status: "ok", result: "x"}`, func(t *testing.T, r *quiver.Result) {
			if r.IsError() || string(r.Value) != `{"status":"ok","result":"x"}` {
				t.Fatalf("result %+v", r)
			}
		}},
		{"a string is text", `"plain"`, func(t *testing.T, r *quiver.Result) {
			if r.IsError() || r.Text != "plain" {
				t.Fatalf("result %+v", r)
			}
		}},
		{"a list is a value", `[{status: "error"}]`, func(t *testing.T, r *quiver.Result) {
			if r.IsError() || string(r.Value) != `[{"status":"error"}]` {
				t.Fatalf("result %+v", r)
			}
		}},
		// Wrong types and hostile attachments.
		{"result of the wrong type", `{status: "success", result: 42}`, wantError("result must be a string, got a number")},
		{"error of the wrong type", `{status: "error", error: {message: "x"}}`, wantError("error must be a string, got an object")},
		{"stack of the wrong type", `{status: "error", error: "x", stack: ["a"]}`, wantError("stack must be a string, got a list")},
		{"attachments not a list", `{status: "success", attachments: "chart.png"}`, wantError("attachments must be a list, got a string")},
		{"an attachment not an object", `{status: "success", attachments: [1]}`, wantError("attachments[0] must be an object, got a number")},
		{"an unknown attachment key", `{status: "success", attachments: [{name: "a.png", mimetype: "image/png", data: "` + png + `"}]}`,
			wantError(`attachments[0] has an unknown key "mimetype": a new attachment (with data) has name, mimeType, data`)},
		{"a width that is a string", `{status: "success", attachments: [{name: "a.png", mimeType: "image/png", data: "` + png + `", width: "800"}]}`,
			wantError("attachments[0].width must be a number, got a string")},
		{"a fractional height", `{status: "success", attachments: [{name: "a.png", mimeType: "image/png", data: "` + png + `", height: 1.5}]}`,
			wantError("attachments[0].height must be a whole number")},
		{"a negative size", `{status: "success", attachments: [{id: "f", type: "file", path: "/a", name: "a", mimeType: "text/plain", size: -1}]}`,
			wantError("attachments[0].size must be a whole number of at least 0")},
		{"a name that climbs out", `{status: "success", attachments: [{name: "../../etc/passwd", mimeType: "text/plain", data: "aGk="}]}`,
			wantError(`must be a non-empty file name without /`)},
		{"an absolute name", `{status: "success", attachments: [{name: "/etc/passwd", mimeType: "text/plain", data: "aGk="}]}`,
			wantError(`must be a non-empty file name without /`)},
		{"a name with a backslash", `{status: "success", attachments: [{name: "..\\..\\x.txt", mimeType: "text/plain", data: "aGk="}]}`,
			wantError(`must be a non-empty file name without /`)},
		{"data that is not base64", `{status: "success", attachments: [{name: "a.txt", mimeType: "text/plain", data: "!!not base64!!"}]}`,
			wantError("not valid standard base64")},
		{"a MIME type that is not one", `{status: "success", attachments: [{name: "a.txt", mimeType: "text/plain; charset", data: "aGk="}]}`,
			wantError(`is not a MIME type`)},
		{"a reference that climbs out", `{status: "success", attachments: [{id: "f", type: "file", path: "/attachments/../../etc/passwd", name: "passwd", mimeType: "text/plain"}]}`,
			wantError("is not clean")},
		{"a relative reference", `{status: "success", attachments: [{id: "f", type: "file", path: "etc/passwd", name: "passwd", mimeType: "text/plain"}]}`,
			wantError("must be absolute")},
		{"a reference of another type", `{status: "success", attachments: [{id: "f", type: "folder", path: "/a", name: "a", mimeType: "text/plain"}]}`,
			wantError(`a reference must have type "file"`)},
		{"a reference with data keys", `{status: "success", attachments: [{id: "f", type: "file", path: "/a", name: "a", mimeType: "text/plain", data: "aGk="}]}`,
			wantError(`attachments[0] has an unknown key "id": a new attachment (with data) has`)},
		{"oversize data", `{status: "success", attachments: [{name: "big.bin", mimeType: "application/octet-stream", data: "A".repeat(2 << 20)}]}`,
			wantError("over the limit of 1048576 bytes")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dispatcherOf(t, nil, returning(t, tt.ret))
			tt.check(t, call(t, d, context.Background(), quiver.Call{Name: "returns"}))
		})
	}
}

func sameJSON(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func wantError(has string) func(t *testing.T, r *quiver.Result) {
	return func(t *testing.T, r *quiver.Result) {
		t.Helper()
		if !r.IsError() || !strings.Contains(r.Error, has) {
			t.Fatalf("result %+v, want an error result containing %q", r, has)
		}
		if len(r.Attachments) != 0 {
			t.Errorf("an error result kept attachments: %+v", r.Attachments)
		}
	}
}

// The state object: declared variables as tenvs, the execution state and the call's
// idempotency key, the thread's id and the abort flag.
func TestStateObject(t *testing.T) {
	tool := jsTool(t, jsfunc.Definition{Name: "inspect",
		Variables: []quiver.Variable{{Name: "REGION", Type: quiver.VarText}, {Name: "TOKEN", Type: quiver.VarSecret}},
		Code: `export default (args, state) => {
			const e = state.execution;
			return {
				tenvs: state.tenvs, frozen: Object.isFrozen(state.tenvs) && Object.isFrozen(state),
				step: e.stepCount, side: e.currentSide, callId: e.callId, attempt: e.attempt,
				aborted: e.aborted, signal: e.abortSignal.aborted, reason: e.abortSignal.reason === undefined,
				threadId: state.threadId, env: state.env("REGION"),
				methods: ["runCode", "notifyParent", "readState"].map((m) => typeof state[m]),
			};
		}`})
	reg := &quiver.Registry{}
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg, Resolver: quiver.Vars{"REGION": "eu", "TOKEN": "tok-secret-9"}}
	ctx := quiver.WithScope(context.Background(), quiver.Scope{WorkspaceID: "wsp_1", ThreadID: "thr_1"})
	ctx = quiver.WithExecution(ctx, quiver.Execution{StepCount: 3, Side: "side_b", CallID: "call_7", Attempt: 2})
	r := call(t, d, ctx, quiver.Call{ID: "call_7", Name: "inspect"})
	want := `{"tenvs":{"REGION":"eu","TOKEN":"[REDACTED]"},"frozen":true,"step":3,"side":"side_b","callId":"call_7","attempt":2,` +
		`"aborted":false,"signal":false,"reason":true,"threadId":"thr_1","env":"eu","methods":["function","function","function"]}`
	if r.IsError() || !sameJSON(r.Value, want) {
		t.Fatalf("result %s %s\nwant %s", r.Value, r.Error, want)
	}
	// Outside a run: no step, no side, no thread.
	r = call(t, d, context.Background(), quiver.Call{Name: "inspect"})
	var got map[string]any
	if err := json.Unmarshal(r.Value, &got); err != nil || got["step"] != 0.0 || got["side"] != nil || got["threadId"] != nil {
		t.Fatalf("outside a run: %s %s", r.Value, r.Error)
	}
}

// TestSeedFormExecute: seed 003's form of a tool, export function execute(state, args), gets
// the state first; Quiver's default export keeps (args, state); code with neither is refused.
func TestSeedFormExecute(t *testing.T) {
	var in schema.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"city":{"type":"string"}}}`), &in); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, code, want string }{
		{"seed form", `export function execute(state, args) { return state.env("REGION") + ":" + args.city; }`, "eu:Oslo"},
		{"seed form, async", `export const execute = async (state, args) => ({ status: "success", result: args.city + "@" + state.env("REGION") })`, "Oslo@eu"},
		{"default export", `export default (args, state) => args.city + "/" + state.env("REGION")`, "Oslo/eu"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tool := jsTool(t, jsfunc.Definition{Name: "where", Code: tt.code, InputSchema: &in,
				Variables: []quiver.Variable{{Name: "REGION", Type: quiver.VarText}}})
			d := dispatcherOf(t, nil, tool)
			d.Resolver = quiver.Vars{"REGION": "eu"}
			r := call(t, d, context.Background(), quiver.Call{Name: "where", Args: json.RawMessage(`{"city":"Oslo"}`)})
			if r.IsError() || r.Text != tt.want {
				t.Fatalf("result %+v, want text %q", r, tt.want)
			}
		})
	}
	tool := jsTool(t, jsfunc.Definition{Name: "nothing", Code: `export const helper = () => 1;`})
	r := call(t, dispatcherOf(t, nil, tool), context.Background(), quiver.Call{Name: "nothing"})
	if !r.IsError() || !strings.Contains(r.Error, "must export a function execute(state, args) or default (args, state)") {
		t.Fatalf("code without an entry: %+v", r)
	}
}

// state.runCode runs other code in a fresh sandbox within the call's limits: its time is
// the call's, its memory what the call leaves free, and the code it runs has no state, so
// that nothing nests deeper and a bomb ends at the call's deadline.
func TestRunCode(t *testing.T) {
	tests := []struct {
		name   string
		limits jsfunc.Limits
		code   string
		check  func(t *testing.T, r *quiver.Result, took time.Duration)
	}{
		{"a value", jsfunc.Limits{}, `return await state.runCode("export default (a) => a.n * 2", {args: {n: 21}})`,
			wantValue(`status`, `"success"`, `value`, `42`, `logs`, `[]`)},
		{"TypeScript, modules, imports, globals and a named entry", jsfunc.Limits{},
			`return await state.runCode("import {twice} from './lib.ts'; import cfg from 'cfg'; export function go(a: number): number { return twice(a) + cfg.k + g }",
				{language: "ts", entry: "go", args: 5, modules: {"./lib.ts": "export const twice = (n: number) => 2 * n"}, imports: {cfg: {k: 100}}, globals: {g: 1000}})`,
			wantValue(`status`, `"success"`, `value`, `1110`)},
		{"the code's failure is its result", jsfunc.Limits{},
			`return await state.runCode("export default () => { console.log('before'); throw new RangeError('too far') }")`,
			wantValue(`status`, `"error"`, `errorName`, `"RangeError"`, `errorMessage`, `"too far"`, `logs`, `[{"level":"log","text":"before"}]`)},
		{"the code gets no state", jsfunc.Limits{},
			`return await state.runCode("export default (...a) => [a.length, typeof state, typeof __quiver_host, typeof globalThis.runCode]")`,
			wantValue(`value`, `[0,"undefined","undefined","undefined"]`)},
		{"nested code cannot nest again", jsfunc.Limits{},
			`return await state.runCode("export default () => state.runCode('export default () => 1')")`,
			wantValue(`status`, `"error"`, `errorName`, `"ReferenceError"`)},
		{"its own time limit", jsfunc.Limits{Timeout: 20 * time.Second},
			`return await state.runCode("export default () => { for (;;) {} }", {timeoutMs: 50})`,
			func(t *testing.T, r *quiver.Result, took time.Duration) {
				wantValue(`status`, `"terminated"`, `errorMessage`, `"timed out after 50ms"`)(t, r, took)
				if took > 10*time.Second {
					t.Errorf("took %s", took)
				}
			}},
		{"its memory is what the call leaves", jsfunc.Limits{MemoryLimit: 8 << 20},
			`return await state.runCode("export default () => { const a = []; for (;;) a.push({}) }", {memoryLimitBytes: 1 << 30})`,
			func(t *testing.T, r *quiver.Result, took time.Duration) {
				wantValue(`status`, `"memory"`)(t, r, took)
				var v struct{ ErrorMessage string }
				_ = json.Unmarshal(r.Value, &v)
				var limit int64
				if _, err := fmt.Sscanf(v.ErrorMessage[strings.LastIndex(v.ErrorMessage, "limit of ")+len("limit of "):], "%d", &limit); err != nil ||
					limit >= 8<<20 || limit < 1<<20 {
					t.Errorf("the nested run's limit %d (%q), want under the tool's 8 MiB", limit, v.ErrorMessage)
				}
			}},
		{"an unknown option", jsfunc.Limits{},
			`try { await state.runCode("export default () => 1", {timeout: 5}) } catch (e) { return e.message }`,
			wantText(`state.runCode: options: json: unknown field "timeout" (the options are language, args, entry`)},
		{"code that is not a string", jsfunc.Limits{},
			`try { await state.runCode(42) } catch (e) { return e.message }`,
			wantText("code must be a string")},
		{"a bad module name", jsfunc.Limits{},
			`try { await state.runCode("export default () => 1", {modules: {"/etc/passwd": "x"}}) } catch (e) { return e.message }`,
			wantText("must be a relative path")},
		{"a bomb of runs ends at the call's deadline", jsfunc.Limits{Timeout: 300 * time.Millisecond},
			`for (;;) await state.runCode("export default () => 1")`,
			wantStopped},
		{"a bomb of nested loops ends at the call's deadline", jsfunc.Limits{Timeout: 300 * time.Millisecond},
			`for (;;) { try { await state.runCode("export default () => { for (;;) {} }") } catch (e) {} }`,
			wantStopped},
		{"a recursive bomb ends at the call's deadline", jsfunc.Limits{Timeout: 300 * time.Millisecond},
			`const f = async (n) => { await state.runCode("export default () => " + n); return f(n + 1) }; return f(0)`,
			wantStopped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := jsTool(t, jsfunc.Definition{Name: "runs", Limits: tt.limits,
				Code: "export default async (args, state) => { " + tt.code + " }"})
			start := time.Now()
			r := call(t, dispatcherOf(t, nil, tool), context.Background(), quiver.Call{Name: "runs"})
			tt.check(t, r, time.Since(start))
		})
	}
}

// wantValue checks that a successful result's value has the given keys with the given JSON
// values (pairs of key, value).
func wantValue(kv ...string) func(t *testing.T, r *quiver.Result, _ time.Duration) {
	return func(t *testing.T, r *quiver.Result, _ time.Duration) {
		t.Helper()
		if r.IsError() {
			t.Fatalf("error result %s (%s)", r.Error, r.Stack)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(r.Value, &got); err != nil {
			t.Fatalf("value %s: %v", r.Value, err)
		}
		for i := 0; i < len(kv); i += 2 {
			if string(got[kv[i]]) != kv[i+1] {
				t.Errorf("%s = %s, want %s (value %s)", kv[i], got[kv[i]], kv[i+1], r.Value)
			}
		}
	}
}

func wantText(has string) func(t *testing.T, r *quiver.Result, _ time.Duration) {
	return func(t *testing.T, r *quiver.Result, _ time.Duration) {
		t.Helper()
		if r.IsError() || !strings.Contains(r.Text, has) {
			t.Fatalf("result %+v, want text containing %q", r, has)
		}
	}
}

func wantStopped(t *testing.T, r *quiver.Result, took time.Duration) {
	t.Helper()
	if r.Code != quiver.CodeTimeout || !strings.Contains(r.Error, "was stopped: timed out after 300ms") {
		t.Fatalf("result %+v, want the call stopped at its time limit", r)
	}
	if took > 10*time.Second {
		t.Errorf("took %s to stop", took)
	}
}

// state.notifyParent goes through the runtime's thread.ParentNotifier; without one (a call
// outside an agent's child thread) it rejects, and its text must be a string.
func TestNotifyParent(t *testing.T) {
	var in schema.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"texts":{"type":"array"}}}`), &in); err != nil {
		t.Fatal(err)
	}
	tool := jsTool(t, jsfunc.Definition{Name: "report", InputSchema: &in, Code: `export default async (args, state) => {
		const out = [];
		for (const text of args.texts) {
			try { await state.notifyParent(text); out.push("sent") } catch (e) { out.push(e.message) }
		}
		return out;
	}`})
	d := dispatcherOf(t, nil, tool)
	var mu sync.Mutex
	var sent []string
	withNotifier := thread.WithParentNotifier(context.Background(), func(ctx context.Context, text string) error {
		if quiver.CallFrom(ctx) == nil {
			t.Error("the notifier's context has no call")
		}
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, text)
		return nil
	})
	r := call(t, d, withNotifier, quiver.Call{Name: "report", Args: json.RawMessage(`{"texts":["found 3 results",42]}`)})
	if string(r.Value) != `["sent","state.notifyParent takes a text (a string), got a number"]` || len(sent) != 1 || sent[0] != "found 3 results" {
		t.Fatalf("result %s %s, sent %q", r.Value, r.Error, sent)
	}
	r = call(t, d, context.Background(), quiver.Call{Name: "report", Args: json.RawMessage(`{"texts":["hello"]}`)})
	if !strings.Contains(string(r.Value), "does not run in an agent's run on a child thread") {
		t.Fatalf("outside a run: %s %s", r.Value, r.Error)
	}
}

// On a thread of a real store (both backends): new attachments land under /attachments/ of
// the thread's file system and the result refers to them, a reference to a file of the thread
// passes through and one to no file is an error result; a meta-field the definition enables
// writes the output into the thread's state, which state.readState reads.
func TestContractOnAThread(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake image bytes")
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ctx := context.Background()
		th, err := thread.Create(ctx, st, thread.Options{WorkspaceID: "wsp_test"})
		if err != nil {
			t.Fatal(err)
		}
		report, err := th.Files().Write(ctx, "/reports/q3.pdf", []byte("%PDF-1.7"), store.FileMeta{MimeType: "application/pdf"})
		if err != nil {
			t.Fatal(err)
		}
		var in schema.Schema
		if err := json.Unmarshal([]byte(`{"type":"object","properties":{"png":{"type":"string"},"refs":{"type":"array"}}}`), &in); err != nil {
			t.Fatal(err)
		}
		draw := jsTool(t, jsfunc.Definition{Name: "draw", InputSchema: &in, Code: `export default (args) => ({
			status: "success", result: "Chart generated successfully",
			attachments: [{name: "chart.png", mimeType: "image/png", data: args.png, width: 800, height: 600}, ...args.refs],
		})`})
		plan := jsTool(t, jsfunc.Definition{Name: "plan", MetaFields: []string{"_outputPath"},
			Code: `export default () => ({steps: ["draw", "send"]})`})
		read := jsTool(t, jsfunc.Definition{Name: "read", Code: `export default async (args, state) => state.readState()`})
		d := dispatcherOf(t, th, draw, plan, read)
		hctx := thread.NewContext(ctx, th)
		n := 0
		run := func(name, args string) *quiver.Result {
			t.Helper()
			n++
			id := fmt.Sprintf("call_%d", n)
			if _, err := th.AppendAssistant(ctx, "", []quiver.Call{{ID: id, Name: name, Args: json.RawMessage(args)}}); err != nil {
				t.Fatal(err)
			}
			return call(t, d, hctx, quiver.Call{ID: id, Name: name, Args: json.RawMessage(args)})
		}
		refJSON, _ := json.Marshal(thread.AttachmentRef(report))
		r := run("draw", fmt.Sprintf(`{"png":%q,"refs":[%s]}`, base64.StdEncoding.EncodeToString(png), refJSON))
		if r.IsError() || r.Text != "Chart generated successfully" || len(r.Attachments) != 2 {
			t.Fatalf("result %+v", r)
		}
		a := r.Attachments[0]
		if !a.IsRef() || !strings.HasPrefix(a.Path, "/attachments/") || !strings.HasSuffix(a.Path, ".png") ||
			a.Size != int64(len(png)) || a.Width != 800 || a.Height != 600 || a.MimeType != "image/png" {
			t.Fatalf("stored attachment %+v", a)
		}
		data, fi, err := th.Files().Read(ctx, a.Path)
		if err != nil || string(data) != string(png) || fi.ID != a.ID {
			t.Fatalf("the stored file: %q %+v %v", data, fi, err)
		}
		if b := r.Attachments[1]; b.Path != report.Path || b.ID != report.ID {
			t.Fatalf("the reference changed: %+v", b)
		}
		hist, err := th.History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := thread.Result(hist[len(hist)-1].Result)
		if err != nil || len(stored.Attachments) != 2 || stored.Attachments[0].Path != a.Path || stored.Attachments[0].Data != "" {
			t.Fatalf("the recorded result %+v, %v", stored, err)
		}

		// A reference to no file of the thread, or to a directory.
		for _, p := range []string{"/attachments/missing.png", "/reports"} {
			r = run("draw", fmt.Sprintf(`{"png":%q,"refs":[{"id":"fil_x","type":"file","path":%q,"name":"x.png","mimeType":"image/png"}]}`,
				base64.StdEncoding.EncodeToString(png), p))
			if !r.IsError() || !strings.Contains(r.Error, p) || len(r.Attachments) != 0 {
				t.Fatalf("a reference to %s: %+v", p, r)
			}
		}

		// _outputPath, enabled by the definition, writes the output into the state readState reads.
		if r = run("plan", `{"_outputPath":"/plan"}`); r.IsError() {
			t.Fatalf("plan: %+v", r)
		}
		if r = run("read", `{}`); r.IsError() || !strings.Contains(string(r.Value), `"plan":{"steps":["draw","send"]}`) {
			t.Fatalf("read: %s %+v", r.Value, r)
		}
		// A meta-field the definition does not enable is refused.
		if r = run("read", `{"_outputPath":"/again"}`); !r.IsError() || !strings.Contains(r.Error, "_outputPath") {
			t.Fatalf("an unenabled meta-field: %+v", r)
		}
	})
}

// Outside a thread, readState rejects, saying why.
func TestReadStateOutsideAThread(t *testing.T) {
	tool := jsTool(t, jsfunc.Definition{Name: "read", Code: `export default async (args, state) => {
		try { return await state.readState() } catch (e) { return e.message }
	}`})
	r := call(t, dispatcherOf(t, nil, tool), context.Background(), quiver.Call{Name: "read"})
	if r.IsError() || !strings.Contains(r.Text, "state.readState: thread: the call runs on no thread") {
		t.Fatalf("result %+v", r)
	}
}

// A stored tool's definition enables meta-fields as a Go tool's does: they are kept with the
// tool (in its input schema document) and loaded with it, on both backends.
func TestMetaFieldsStored(t *testing.T) {
	backendtest.Each(t, func(t *testing.T, st backendtest.Store) {
		ctx := context.Background()
		ent, ok := st.(store.Entities)
		if !ok {
			t.Fatalf("%T stores no tools: every backend must", st)
		}
		if err := ent.CreateWorkspace(ctx, &store.Workspace{ID: "wsp_meta", Name: "meta"}); err != nil {
			t.Fatal(err)
		}
		def := jsfunc.Definition{Name: "planner", Description: "Plans.", Code: `export default () => ({steps: []})`,
			MetaFields: []string{"_outputPath", "_instance"}, Variables: []quiver.Variable{{Name: "REGION", Type: quiver.VarText}}}
		saved, _, err := jsfunc.Save(ctx, ent, "wsp_meta", "", def)
		if err != nil {
			t.Fatal(err)
		}
		tool, err := jsfunc.Load(ctx, ent, "wsp_meta", saved, jsfunc.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		spec := tool.Spec()
		if fmt.Sprint(spec.MetaFields) != "[_outputPath _instance]" || len(spec.Variables) != 1 {
			t.Fatalf("loaded meta-fields %v, variables %v", spec.MetaFields, spec.Variables)
		}
		if spec.InputSchema != nil && len(spec.InputSchema.Properties) != 0 {
			t.Errorf("the meta-fields leaked into the arguments: %+v", spec.InputSchema.Properties)
		}
		// A tool saved without them has none.
		def.Name, def.MetaFields = "plain", nil
		saved, _, err = jsfunc.Save(ctx, ent, "wsp_meta", "", def)
		if err != nil {
			t.Fatal(err)
		}
		if tool, err = jsfunc.Load(ctx, ent, "wsp_meta", saved, jsfunc.Limits{}); err != nil || len(tool.Spec().MetaFields) != 0 {
			t.Fatalf("plain tool: %v, %v", tool, err)
		}
		// An unknown one is refused when the tool is saved.
		def.Name, def.MetaFields = "bad", []string{"_outputpath"}
		if _, _, err := jsfunc.Save(ctx, ent, "wsp_meta", "", def); err == nil || !strings.Contains(err.Error(), `unknown meta-field "_outputpath"`) {
			t.Fatalf("unknown meta-field: %v", err)
		}
	})
}

// In worker processes (as quiver serve runs code), the state's host calls cross the process
// boundary: runCode (whose nested run takes a worker of its own), readState's error, and a
// ToolResult.
func TestContractInWorkers(t *testing.T) {
	w, err := sandbox.NewWorkers(sandbox.WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	sandbox.UseWorkers(w)
	t.Cleanup(func() { sandbox.UseWorkers(nil) })
	tool := jsTool(t, jsfunc.Definition{Name: "both", Code: `export default async (args, state) => {
		const r = await state.runCode("export default (a) => a * 3", {args: 14});
		let err = "";
		try { await state.readState() } catch (e) { err = e.message }
		return {status: "error", error: "nested " + r.value + "; " + err + "; aborted " + state.execution.aborted};
	}`})
	r := call(t, dispatcherOf(t, nil, tool), context.Background(), quiver.Call{Name: "both"})
	if !r.IsError() || r.Error != "nested 42; state.readState: thread: the call runs on no thread, so it has no state; aborted false" {
		t.Fatalf("result %+v", r)
	}
}
