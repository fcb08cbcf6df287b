// Package jsfunc turns JavaScript (or TypeScript) function code into a quiver.Tool whose calls
// run in the sandbox: a function version stored in the database, or code and schemas from
// files.
//
// The code is an ES module whose exported function receives the validated arguments and a
// state object, and returns the result (or a promise of it): an exported execute(state, args),
// or a default export taking (args, state), the form Quiver took first:
//
//	export async function execute(state, args) {
//		return { status: "success", result: "hello " + args.name }
//	}
//
//	export default async function (args, state) {
//		const store = state.env("VECTOR_STORE_ID") // a variable the tool declares
//		if (!store) return { status: "error", error: "VECTOR_STORE_ID is empty" }
//		return { hits: [], store }
//	}
//
// # What a call returns
//
// A ToolResult is read as a Go tool's quiver.Result: an object whose status is
// "success" or "error" and whose every key is one of status, result, error, stack and
// attachments. Its result is the text, its error the error message (an error result, code
// tool_error), its stack is kept for people (Result.Stack, never shown to the model) and its
// attachments become the result's: a new one (name, mimeType, base64 data, optional width,
// height and description) is stored by the runtime under /attachments/ of the thread's file
// system when the result is recorded, as any tool's; a reference (id, type "file", path,
// name, mimeType, optional size, width, height, description) passes through once the
// recording finds a file of the thread at its path. A ToolResult with a field of the wrong type, an attachment with an
// unknown key, a name with a path in it, data that is not base64 or too large (the tool's
// output limit bounds it first) is an error result saying which. Seed 001's error convention
// is kept too: an object whose only key is error, a string ({ error: "API returned 401" }), is
// an error result (code tool_error) with that message. Any other value is what it was before:
// a string is the text, anything else the structured value (checked against the output
// schema) — so an object with other keys, another status, or an error that is not a string, is
// a value. A tool that declares an output schema answers with its value: a successful
// ToolResult's is its result when that is the JSON text of a value the schema validates
// (result: JSON.stringify({temperature: 72})), kept as the text too; any other has none.
//
// # The state object
//
//   - env(name): a declared variable's value (secrets included; undeclared names throw).
//   - tenvs: the declared variables' values, as an object.
//   - execution: stepCount, currentSide (null outside a dual-AI agent), callId and attempt
//     (the call's idempotency key), aborted and abortSignal.aborted (whether the call was
//     cancelled; a cancelled call's code is stopped at once, so running code rarely sees it
//     true) and abortSignal.throwIfAborted().
//   - threadId: the thread the call runs on, or null.
//   - runCode(code, options): runs other code (a model's, a user's) in a fresh sandbox and
//     resolves to its outcome ({status, value, errorName, errorMessage, stack, logs,
//     logsTruncated, durationMs}); options are language, args (the entry's argument), entry
//     (an export's name), modules, imports, globals, timeoutMs and memoryLimitBytes. The run
//     takes its time from the call's (it ends by the call's deadline at the latest) and its
//     memory from what the call's interpreter leaves free, so the two stay within the tool's
//     limits; the code it runs gets no state, so runs nest one deep.
//   - notifyParent(text): queues text to the parent of the thread the call runs on, and
//     wakes it (explicit parent communication); it rejects outside an agent's child thread.
//   - readState(): resolves to the state the call reads (its _instance's, else its thread's):
//     what thread.CallState gives a Go tool; it rejects on a call outside a thread.
//
// Every call runs in a fresh interpreter with the tool's memory and time limits. Only the
// variables the tool declares are passed in, secrets included; the dispatcher masks secret
// values in whatever the call returns. A thrown error, a memory or time overrun, or a module
// that does not resolve is an error result.
package jsfunc

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/sandbox"
	"github.com/quiverhq/quiver/schema"
)

// Limits bound each call of a function tool. Zero fields take DefaultLimits'.
type Limits struct {
	Timeout        time.Duration
	MemoryLimit    int64
	MaxOutputBytes int
	MaxLogBytes    int
}

// DefaultLimits apply to tools whose definition sets none.
var DefaultLimits = Limits{
	Timeout:        5 * time.Second,
	MemoryLimit:    32 << 20,
	MaxOutputBytes: 1 << 20,
	MaxLogBytes:    32 << 10,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	if l.MemoryLimit == 0 {
		l.MemoryLimit = d.MemoryLimit
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = d.MaxOutputBytes
	}
	if l.MaxLogBytes == 0 {
		l.MaxLogBytes = d.MaxLogBytes
	}
	return l
}

// Definition is a function tool before it is built.
type Definition struct {
	Name, Description string
	// Source says where the tool came from, as rules select it (quiver.Spec.Source): Load
	// gives a workspace's stored tools quiver.SourceStored; "" for a Go program's own.
	Source string
	// Code is the module; Language is "js" (default) or "ts".
	Code     string
	Language sandbox.Language
	// Filename names the code in stack traces; the tool's name with .js by default.
	Filename     string
	InputSchema  *schema.Schema
	OutputSchema *schema.Schema
	// Variables are the thread variables the code may read with state.env(name).
	Variables            []quiver.Variable
	Examples             []quiver.Example
	RequiresConfirmation bool
	Disabled             bool
	Limits               Limits
	// MetaFields are the stateful meta-fields a call may carry (_outputPath, _instance,
	// _delegate): quiver.Spec.MetaFields. A stored tool keeps them in its input schema
	// document, as properties (see quiver.ParseSchemaSpec).
	MetaFields []string
	// Annotations are the tool's MCP annotations: quiver.Spec.Annotations. A stored tool keeps
	// them in its input schema document, under "annotations" (see quiver.ParseSchemaSpec).
	Annotations quiver.Annotations
}

// entry wraps the tool's code: it builds the state object and calls the default export, so
// that the code's own module keeps its file name in stack traces.
const entry = `import * as mod from %q;
export default function (args, vars, declared, tool, info, host) {
	// The execute form, export function execute(state, args), or Quiver's older one, export
	// default (args, state): the two differ in the order of their parameters, so the name
	// says which is meant.
	const seedForm = typeof mod.execute === "function";
	if (!seedForm && typeof mod.default !== "function")
		throw new TypeError("the code of tool " + tool + " must export a function execute(state, args) or default (args, state) => result");
	const abortSignal = Object.freeze({
		get aborted() { return host.aborted(); },
		get reason() { return host.aborted() ? new Error("the call was cancelled") : undefined; },
		throwIfAborted() { if (host.aborted()) throw new Error("the call was cancelled"); },
	});
	const execution = Object.freeze({
		stepCount: info.stepCount, currentSide: info.currentSide, callId: info.callId, attempt: info.attempt,
		get aborted() { return host.aborted(); },
		abortSignal,
	});
	const state = Object.freeze({
		env(name) {
			if (!declared.includes(name))
				throw new ReferenceError("variable " + JSON.stringify(name) + " is not declared by tool " + tool +
					(declared.length ? "; it declares " + declared.join(", ") : "; it declares none"));
			return vars[name];
		},
		tenvs: Object.freeze(Object.assign({}, vars)),
		execution,
		threadId: info.threadId,
		async runCode(code, options) { return host.runCode({ code, options: options ?? {} }); },
		async notifyParent(text) { host.notifyParent(text); },
		async readState() { return host.readState(); },
	});
	return seedForm ? mod.execute(state, args) : mod.default(args, state);
}`

// entryFile names the wrapper module; .mjs, so no tool's file (its name + .js) can take it.
const entryFile = "__quiver_entry.mjs"

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// New builds the tool def describes. Its code is parsed (and TypeScript transpiled) once, here:
// code that does not parse is refused with the place where it is wrong.
func New(def Definition) (*quiver.Tool, error) {
	return NewContext(context.Background(), def)
}

// NewContext is New for a tool made on behalf of a request or a load (see
// quiver.NewToolContext: ctx ends the compilation of its schemas, and may ask for them to be
// compiled on use).
func NewContext(ctx context.Context, def Definition) (*quiver.Tool, error) {
	f, err := newFunction(def)
	if err != nil {
		return nil, err
	}
	t, err := quiver.NewToolContext(ctx, quiver.Spec{
		Name: def.Name, Description: def.Description,
		InputSchema: def.InputSchema, OutputSchema: def.OutputSchema,
		Examples: def.Examples, Variables: def.Variables,
		RequiresConfirmation: def.RequiresConfirmation, Disabled: def.Disabled, MetaFields: def.MetaFields,
		Annotations: def.Annotations, Source: def.Source,
		// The sandbox ends the code at its own timeout and says so; this is the backstop.
		Timeout: f.limits.Timeout + 2*time.Second,
	}, f.call)
	if err != nil {
		return nil, err
	}
	f.tool = t
	return t, nil
}

func newFunction(def Definition) (*function, error) {
	file := def.Filename
	if file == "" {
		file = unsafeFileChars.ReplaceAllString(def.Name, "_") + ".js"
	}
	code := def.Code
	if strings.TrimSpace(code) == "" {
		return nil, fmt.Errorf("jsfunc: tool %q: the code is empty; it must export default a function (args, state) => result", def.Name)
	}
	if err := sandbox.Check(file, code, def.Language); err != nil {
		return nil, fmt.Errorf("jsfunc: tool %q: %w", def.Name, err)
	}
	if def.Language == sandbox.TypeScript {
		js, err := sandbox.Transpile(file, code)
		if err != nil {
			return nil, fmt.Errorf("jsfunc: tool %q: %w", def.Name, err)
		}
		code = js
	}
	l := def.Limits.withDefaults()
	declared := make([]string, len(def.Variables))
	for i, v := range def.Variables {
		declared[i] = v.Name
	}
	f := &function{name: def.Name, file: file, code: code, limits: l, declared: declared}
	f.host = map[string]sandbox.HostFunc{"runCode": f.runCode, "notifyParent": notifyParent, "readState": readState, "aborted": aborted}
	return f, nil
}

type function struct {
	name, file, code string
	limits           Limits
	declared         []string
	host             map[string]sandbox.HostFunc // what state reaches the host through
	// tool is the tool that runs the function: its output schema, compiled on use, makes a
	// ToolResult's result that is the JSON text of a value it validates that value (see
	// toolResult).
	tool *quiver.Tool
}

func (f *function) call(ctx context.Context, args json.RawMessage) (any, error) {
	vars := make(map[string]string, len(f.declared))
	for _, name := range f.declared {
		if v, ok := quiver.Var(ctx, name); ok {
			vars[name] = v
		}
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res, err := sandbox.Run(ctx, sandbox.Options{
		Source: fmt.Sprintf(entry, "./"+f.file), Filename: entryFile,
		Modules: map[string]string{"./" + f.file: f.code},
		Execute: sandbox.Execute{Args: []any{args, vars, f.declared, f.name, callInfo(ctx)}},
		Host:    f.host,
		Timeout: f.limits.Timeout, MemoryLimit: f.limits.MemoryLimit,
		MaxOutputBytes: f.limits.MaxOutputBytes, MaxLogBytes: f.limits.MaxLogBytes,
		Now: time.Now(),
	})
	if err != nil {
		return nil, err
	}
	return f.result(res), nil
}

// result maps a run to the call's result. The model reads the error text; the stack and the
// console output are for people (Result.Stack).
func (f *function) result(res *sandbox.Result) *quiver.Result {
	if res.Status == sandbox.StatusSuccess {
		if msg, ok := errorObject(res.Value); ok {
			return f.errorObjectResult(msg, res)
		}
		if fields, ok := toolResultFields(res.Value); ok {
			return f.toolResult(fields, res)
		}
		var s string
		if json.Unmarshal(res.Value, &s) == nil {
			return quiver.Text(s) // a string is text, as for a Go tool
		}
		return &quiver.Result{Status: quiver.StatusSuccess, Value: res.Value}
	}
	r := &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeToolError, Stack: debugText(res)}
	switch res.Status {
	case sandbox.StatusMemory:
		r.Error = fmt.Sprintf("tool %s ran out of memory (its limit is %d bytes)", f.name, f.limits.MemoryLimit)
	case sandbox.StatusTerminated:
		r.Code = quiver.CodeTimeout
		r.Error = fmt.Sprintf("tool %s was stopped: %s", f.name, res.ErrorMessage)
	case sandbox.StatusLinkError:
		r.Error = fmt.Sprintf("tool %s cannot run, its code is broken: %s", f.name, res.Err())
	default:
		r.Error = fmt.Sprintf("tool %s failed: %s", f.name, res.Err())
	}
	return r
}

func debugText(res *sandbox.Result) string {
	var sb strings.Builder
	for line := range strings.Lines(res.Stack) {
		if !strings.Contains(line, entryFile) {
			sb.WriteString(line)
		}
	}
	if len(res.Logs) > 0 {
		sb.WriteString("\nconsole output:\n")
		for _, e := range res.Logs {
			fmt.Fprintf(&sb, "[%s] %s\n", e.Level, e.Text)
		}
	}
	return strings.TrimSpace(sb.String())
}
