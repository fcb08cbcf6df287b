package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Language is the source language of a run.
type Language string

// Languages. TypeScript is transpiled in-process (types are erased, nothing is type-checked).
const (
	JavaScript Language = "js"
	TypeScript Language = "ts"
)

// Defaults and bounds of the options.
const (
	DefaultMemoryLimit = 64 << 20
	// MinMemoryLimit leaves room for the interpreter's own start-up; below it every run would
	// fail the same way.
	MinMemoryLimit     = 1 << 20
	DefaultTimeout     = 5 * time.Second
	DefaultMaxOutput   = 1 << 20
	DefaultMaxLogBytes = 64 << 10
)

// Options describe one run.
type Options struct {
	// Source is the main module.
	Source string
	// Language is JavaScript ("js", the default) or TypeScript ("ts"); it applies to Source and
	// Modules.
	Language Language
	// Filename names the main module in stack traces and is the base relative imports resolve
	// against; "main.js" (or "main.ts") by default.
	Filename string
	// Modules are other modules the code may import, by relative specifier ("./util.js"):
	// source text in the run's language. An import without an extension also finds the
	// module with .js or .ts appended.
	Modules map[string]string
	// Imports are objects the host provides under bare specifiers ("config"): JSON-encodable
	// values, imported as the default export and, for an object, one named export per key.
	// They carry data only: the code reaches the host's functions only through Host.
	Imports map[string]any
	// Globals are JSON-encodable values set on the global object before the code runs, by
	// identifier.
	Globals map[string]any
	// Execute names the entry function and its arguments.
	Execute Execute
	// MemoryLimit caps the interpreter's heap, in bytes; 0 means DefaultMemoryLimit.
	MemoryLimit int64
	// Timeout ends the run with StatusTerminated; 0 means DefaultTimeout.
	Timeout time.Duration
	// Now is the only time the code can see: Date.now() and new Date() return it. The zero
	// value means the Unix epoch, so that a run never reads the host's clock.
	Now time.Time
	// MaxOutputBytes caps the JSON of the result; 0 means DefaultMaxOutput.
	MaxOutputBytes int
	// MaxLogBytes caps the captured console output; 0 means DefaultMaxLogBytes.
	MaxLogBytes int
	// OnLog, when set, sees each console call as it happens, on the run's goroutine: it must
	// return quickly and must not call back into the run.
	OnLog func(LogEntry)
	// Host are the host's functions the code may call, by name (a JavaScript identifier).
	// When there are any, the entry function gets one more argument after Execute.Args: a
	// frozen object with one function per name, which takes one JSON-encodable argument and
	// returns the function's answer, or throws an Error with the message of the error it
	// returned. Nothing else of the code sees them (they are not globals), so the entry
	// function decides what the rest of the code may do with them. A call blocks the
	// interpreter until the function returns; see HostFunc.
	Host map[string]HostFunc
}

// HostFunc is a host function the code may call (Options.Host). It runs on a goroutine of
// this process, in a worker's run too (the call crosses the process boundary), while the
// interpreter waits for its answer: a JSON-encodable value, or an error the code sees thrown.
// ctx carries the values of the run's context and its deadline (the run's timeout), and ends
// when the run is terminated: the function should return promptly then, since the run's
// interpreter cannot stop before it does.
type HostFunc func(ctx context.Context, call HostCall) (any, error)

// HostCall is one call of a host function.
type HostCall struct {
	// Arg is the argument the code passed, as JSON: null when it passed none.
	Arg json.RawMessage
	// MemoryFree is how many bytes of its memory limit the run's interpreter was not using
	// at the call: what a nested run (a host function that runs code in the sandbox) may
	// take so that, together, the two stay within the run's limit.
	MemoryFree int64
}

// Execute is the entry point of a run.
type Execute struct {
	// Fn names the module export to call; "" means the default export.
	Fn string
	// Args are the JSON-encodable arguments the entry function is called with.
	Args []any
}

// config is Options checked, with defaults applied and everything the interpreter needs
// encoded.
type config struct {
	main         string
	sources      map[string]string // normalized module name -> JavaScript
	imports      map[string]string // bare specifier -> generated module source
	language     Language
	memoryLimit  int64
	timeout      time.Duration
	maxOutput    int
	maxLogBytes  int
	onLog        func(LogEntry)
	preludeInput string // JSON given to the prelude
	// hostNames are the names of the run's host functions (sorted), host the functions: set
	// in the caller's process only. In a worker, remoteHost forwards each call to the caller.
	hostNames  []string
	host       map[string]HostFunc
	remoteHost func(h *Handle, name, arg string, free int64) string
}

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// reservedGlobals are the names the prelude uses; a global of that name would be overwritten.
var reservedGlobals = []string{"__quiver_log", "__quiver_settle", "__quiver_host", "console", "Date", "globalThis"}

// check validates o and builds its config. Errors say which option is wrong and what is
// allowed; transpiling TypeScript is not done here, since a syntax error in the code is the
// code's failure (a Result), not the caller's.
func (o *Options) check() (*config, error) {
	c := &config{
		language: o.Language, memoryLimit: o.MemoryLimit, timeout: o.Timeout,
		maxOutput: o.MaxOutputBytes, maxLogBytes: o.MaxLogBytes, onLog: o.OnLog,
	}
	for _, step := range []func(*Options) error{c.checkLanguage, c.checkRunLimits, c.checkOutputLimits, c.addSources, c.addImports, c.addHost} {
		if err := step(o); err != nil {
			return nil, err
		}
	}
	input, err := o.preludeInput(c.main, maxLength(c.memoryLimit), c.hostNames)
	if err != nil {
		return nil, err
	}
	c.preludeInput = input
	return c, nil
}

func (c *config) checkLanguage(o *Options) error {
	switch c.language {
	case "":
		c.language = JavaScript
	case JavaScript, TypeScript:
	default:
		return fmt.Errorf("sandbox: language %q is not supported; use %q or %q", o.Language, JavaScript, TypeScript)
	}
	return nil
}

// checkRunLimits checks the memory limit and the timeout, or sets their defaults.
func (c *config) checkRunLimits(o *Options) error {
	switch {
	case c.memoryLimit == 0:
		c.memoryLimit = DefaultMemoryLimit
	case c.memoryLimit < MinMemoryLimit:
		return fmt.Errorf("sandbox: memory limit %d bytes is below the minimum of %d bytes (1 MiB)", o.MemoryLimit, MinMemoryLimit)
	}
	switch {
	case c.timeout == 0:
		c.timeout = DefaultTimeout
	case c.timeout < 0:
		return fmt.Errorf("sandbox: timeout %s is negative; use a positive duration, or 0 for the default %s", o.Timeout, DefaultTimeout)
	}
	return nil
}

// checkOutputLimits checks the limits on the result and the log, or sets their defaults.
func (c *config) checkOutputLimits(o *Options) error {
	if c.maxOutput == 0 {
		c.maxOutput = DefaultMaxOutput
	}
	if c.maxLogBytes == 0 {
		c.maxLogBytes = DefaultMaxLogBytes
	}
	if c.maxOutput < 0 || c.maxLogBytes < 0 {
		return fmt.Errorf("sandbox: output and log limits must not be negative (got %d and %d)", o.MaxOutputBytes, o.MaxLogBytes)
	}
	return nil
}

// addSources names the main module and the other modules, each once.
func (c *config) addSources(o *Options) error {
	main := o.Filename
	if main == "" {
		main = "main." + string(c.language)
	}
	main, err := moduleKey(main)
	if err != nil {
		return fmt.Errorf("sandbox: filename: %w", err)
	}
	c.main = main
	c.sources = map[string]string{main: o.Source}
	for spec, src := range o.Modules {
		key, err := moduleKey(spec)
		if err != nil {
			return fmt.Errorf("sandbox: modules: %w", err)
		}
		if _, dup := c.sources[key]; dup {
			return fmt.Errorf("sandbox: modules: %q names the same module as another entry or the main file %q", spec, main)
		}
		c.sources[key] = src
	}
	return nil
}

// addImports makes the module of each import, under its bare specifier.
func (c *config) addImports(o *Options) error {
	c.imports = make(map[string]string, len(o.Imports))
	for spec, v := range o.Imports {
		if !bare(spec) {
			return fmt.Errorf("sandbox: imports: %q is not a bare specifier; imports are named like \"config\" or \"@acme/data\" (relative ones go in Modules)", spec)
		}
		if _, clash := c.sources[spec]; clash {
			return fmt.Errorf("sandbox: imports: %q is also the name of a module", spec)
		}
		src, err := importModule(v)
		if err != nil {
			return fmt.Errorf("sandbox: imports: %q: %w", spec, err)
		}
		c.imports[spec] = src
	}
	return nil
}

// addHost checks the names of the host functions, and keeps them in order.
func (c *config) addHost(o *Options) error {
	for name, f := range o.Host {
		if !identifier.MatchString(name) || f == nil {
			return fmt.Errorf("sandbox: host: %q must be a JavaScript identifier (letters, digits, _ and $, not starting with a digit) naming a function", name)
		}
		c.hostNames = append(c.hostNames, name)
	}
	slices.Sort(c.hostNames)
	c.host = o.Host
	return nil
}

func (o *Options) preludeInput(main string, maxLength int64, host []string) (string, error) {
	for name := range o.Globals {
		if !identifier.MatchString(name) {
			return "", fmt.Errorf("sandbox: globals: %q is not a JavaScript identifier (letters, digits, _ and $, not starting with a digit)", name)
		}
		if slices.Contains(reservedGlobals, name) {
			return "", fmt.Errorf("sandbox: globals: %q is reserved by the sandbox; choose another name", name)
		}
	}
	entry, explicit := o.Execute.Fn, true
	if entry == "" {
		entry, explicit = "default", false
	}
	args := o.Execute.Args
	if args == nil {
		args = []any{}
	}
	now := o.Now
	if now.IsZero() {
		now = time.Unix(0, 0)
	}
	in := struct {
		Main     string         `json:"main"`
		Entry    string         `json:"entry"`
		Explicit bool           `json:"explicit"`
		Args     []any          `json:"args"`
		Globals  map[string]any `json:"globals"`
		Now      int64          `json:"now"`
		MaxLen   int64          `json:"maxLength"`
		Sort     int64          `json:"sortAlone"`
		Host     []string       `json:"host,omitempty"`
	}{"./" + main, entry, explicit, args, o.Globals, now.UnixMilli(), maxLength, sortAlone, host}
	b, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("sandbox: execute arguments and globals must be JSON-encodable: %w", err)
	}
	return string(b), nil
}

// moduleKey turns a relative specifier ("./lib/util.js", "lib/util.js") into the module's name
// in the run: a clean relative path that stays inside the run's root.
func moduleKey(spec string) (string, error) {
	if spec == "" {
		return "", fmt.Errorf("empty module name")
	}
	if strings.HasPrefix(spec, "/") || strings.ContainsAny(spec, "\\\x00") {
		return "", fmt.Errorf("%q must be a relative path like \"./util.js\" (no leading /, no \\ or NUL)", spec)
	}
	key := path.Clean(spec)
	if key == "." || key == ".." || strings.HasPrefix(key, "../") {
		return "", fmt.Errorf("%q leaves the run's root; use a path like \"./util.js\"", spec)
	}
	return key, nil
}

// bare reports whether spec is a bare specifier: not relative, not absolute.
func bare(spec string) bool {
	return spec != "" && !strings.HasPrefix(spec, ".") && !strings.HasPrefix(spec, "/") &&
		!strings.ContainsAny(spec, "\\\x00")
}

// importModule is the source of the module that provides v: its default export, and for an
// object one named export per key.
func importModule(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("not JSON-encodable: %w", err)
	}
	lit, _ := json.Marshal(string(b)) // a JSON string is a JavaScript string literal
	var sb strings.Builder
	fmt.Fprintf(&sb, "const v = JSON.parse(%s);\nexport default v;\n", lit)
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) == nil && obj != nil {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			if k != "default" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for i, k := range keys {
			name, _ := json.Marshal(k)
			fmt.Fprintf(&sb, "const v%d = v[%s];\nexport { v%d as %s };\n", i, name, i, name)
		}
	}
	return sb.String(), nil
}
