// Package jsfunc turns JavaScript (or TypeScript) function code into a quiver.Tool whose calls
// run in the sandbox: a function version stored in the database, or code and schemas from
// files.
//
// The code is an ES module whose default export receives the validated arguments and a state
// object, and returns the result (or a promise of it):
//
//	export default async function (args, state) {
//		const store = state.env("VECTOR_STORE_ID") // a variable the tool declares
//		return { hits: [], store }
//	}
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
}

// entry wraps the tool's code: it builds the state object and calls the default export, so
// that the code's own module keeps its file name in stack traces.
const entry = `import * as mod from %q;
export default function (args, vars, declared, tool) {
	if (typeof mod.default !== "function")
		throw new TypeError("the code of tool " + tool + " must export default a function (args, state) => result");
	const state = Object.freeze({
		env(name) {
			if (!declared.includes(name))
				throw new ReferenceError("variable " + JSON.stringify(name) + " is not declared by tool " + tool +
					(declared.length ? "; it declares " + declared.join(", ") : "; it declares none"));
			return vars[name];
		},
	});
	return mod.default(args, state);
}`

// entryFile names the wrapper module; .mjs, so no tool's file (its name + .js) can take it.
const entryFile = "__quiver_entry.mjs"

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// New builds the tool def describes. Its code is parsed (and TypeScript transpiled) once, here:
// code that does not parse is refused with the place where it is wrong.
func New(def Definition) (*quiver.Tool, error) {
	f, err := newFunction(def)
	if err != nil {
		return nil, err
	}
	return quiver.NewTool(quiver.Spec{
		Name: def.Name, Description: def.Description,
		InputSchema: def.InputSchema, OutputSchema: def.OutputSchema,
		Examples: def.Examples, Variables: def.Variables,
		RequiresConfirmation: def.RequiresConfirmation, Disabled: def.Disabled,
		// The sandbox ends the code at its own timeout and says so; this is the backstop.
		Timeout: f.limits.Timeout + 2*time.Second,
	}, f.call)
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
	return &function{name: def.Name, file: file, code: code, limits: l, declared: declared,
		entry: fmt.Sprintf(entry, "./"+file)}, nil
}

type function struct {
	name, file, code, entry string
	limits                  Limits
	declared                []string
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
		Source: f.entry, Filename: entryFile,
		Modules: map[string]string{"./" + f.file: f.code},
		Execute: sandbox.Execute{Args: []any{args, vars, f.declared, f.name}},
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
