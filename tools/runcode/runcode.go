// Package runcode provides the built-in run_code tool: JavaScript or TypeScript written by the
// model (or a person), run in the sandbox (package sandbox) through the normal dispatcher.
// Importing it, even blank, registers run_code in quiver.Default with DefaultLimits:
//
//	import _ "github.com/quiverhq/quiver/tools/runcode"
//
// An operator who wants other limits builds the tool with New and registers it under the same
// name in a registry of their own.
package runcode

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/sandbox"
	"github.com/quiverhq/quiver/schema"
)

// Name is the tool's name.
const Name = "run_code"

// Limits are the operator's bounds on run_code. Zero fields take the value of DefaultLimits.
type Limits struct {
	// DefaultTimeout applies when a call gives no timeout_ms; MaxTimeout caps the one it gives.
	DefaultTimeout, MaxTimeout time.Duration
	// DefaultMemoryBytes applies when a call gives no memory_limit_bytes; MaxMemoryBytes caps
	// the one it gives.
	DefaultMemoryBytes, MaxMemoryBytes int64
	// MaxCodeBytes caps the size of the code.
	MaxCodeBytes int
	// MaxOutputBytes caps the JSON of the returned value; MaxLogBytes the console output.
	MaxOutputBytes, MaxLogBytes int
	// MaxConcurrent is how many runs may execute at once; further calls wait for a free slot
	// (or until shortly before their context ends, with an error result naming these limits).
	// With MaxMemoryBytes it bounds the memory run_code can take: MaxConcurrent ×
	// MaxMemoryBytes.
	MaxConcurrent int
	// MaxConcurrentPerOwner is how many of those one owner may hold, so that no caller can
	// take every slot: an owner is the call's thread (each MCP session has its own), else its
	// user, else its workspace, else one owner for every call without a scope. Free slots go
	// to waiting owners in turn, fewest runs first. At most MaxConcurrent.
	MaxConcurrentPerOwner int
}

// DefaultLimits are the limits of the registered tool.
var DefaultLimits = Limits{
	DefaultTimeout:     2 * time.Second,
	MaxTimeout:         10 * time.Second,
	DefaultMemoryBytes: 32 << 20,
	MaxMemoryBytes:     64 << 20,
	MaxCodeBytes:       256 << 10,
	MaxOutputBytes:     256 << 10,
	MaxLogBytes:        32 << 10,
	MaxConcurrent:      16,
	// Four: a model rarely runs more programs at once than that, and four owners at their
	// limit still leave slots for others.
	MaxConcurrentPerOwner: 4,
}

// Args are the arguments of run_code.
type Args struct {
	Code             string           `json:"code"`
	Language         sandbox.Language `json:"language,omitempty"`
	Args             json.RawMessage  `json:"args,omitempty"`
	TimeoutMS        int64            `json:"timeout_ms,omitempty"`
	MemoryLimitBytes int64            `json:"memory_limit_bytes,omitempty"`
}

// argsSchema describes Args; its args field is any JSON, which json.RawMessage would not say.
type argsSchema struct {
	Code      string `json:"code" minLength:"1" description:"an ES module in the chosen language; export default a function: it receives args and what it returns (awaited if a promise) is the result, as JSON"`
	Language  string `json:"language,omitempty" enum:"js,ts" default:"js" description:"js (JavaScript) or ts (TypeScript: types are erased, not checked)"`
	Args      any    `json:"args,omitempty" description:"any JSON value, passed to the default export as its argument"`
	TimeoutMS int64  `json:"timeout_ms,omitempty" minimum:"1"`
	Memory    int64  `json:"memory_limit_bytes,omitempty" minimum:"1048576"`
}

// Meta is what a run_code result's metadata (quiver.Result.Meta) says about the run. The
// result itself is the run's: a success whose value is what the code returned, or an error
// result saying how the code failed, so that run_code answers in the shape every tool does.
type Meta struct {
	// Status is how a failed run ended: error (the code threw), memory, link_error (an import
	// that does not resolve) or terminated (its time limit); empty on success.
	Status     sandbox.Status `json:"status,omitempty"`
	DurationMS float64        `json:"duration_ms"`
	// Logs is the console output, in order.
	Logs []sandbox.LogEntry `json:"logs,omitempty"`
	// LogsTruncated reports console output dropped past the log limit.
	LogsTruncated bool `json:"logs_truncated,omitempty"`
}

// Tool is run_code with DefaultLimits, registered in quiver.Default when the package is
// imported.
var Tool = mustNew(DefaultLimits)

func init() { quiver.MustRegister(Tool) }

func mustNew(l Limits) *quiver.Tool {
	t, err := New(l)
	if err != nil {
		panic(err)
	}
	return t
}

// New returns run_code with the operator's limits l; zero fields take DefaultLimits'.
func New(l Limits) (*quiver.Tool, error) {
	t, _, err := build(l)
	return t, err
}

func build(l Limits) (*quiver.Tool, *runner, error) {
	l = l.withDefaults()
	if l.DefaultTimeout > l.MaxTimeout || l.DefaultMemoryBytes > l.MaxMemoryBytes {
		return nil, nil, fmt.Errorf("runcode: the default timeout (%s) and memory (%d bytes) must not exceed their maximums (%s, %d bytes)",
			l.DefaultTimeout, l.DefaultMemoryBytes, l.MaxTimeout, l.MaxMemoryBytes)
	}
	if l.MaxMemoryBytes < sandbox.MinMemoryLimit || l.DefaultMemoryBytes < sandbox.MinMemoryLimit {
		return nil, nil, fmt.Errorf("runcode: memory limits must be at least %d bytes (1 MiB)", sandbox.MinMemoryLimit)
	}
	if l.MaxConcurrent < 0 || l.MaxConcurrentPerOwner < 0 {
		return nil, nil, fmt.Errorf("runcode: MaxConcurrent (%d) and MaxConcurrentPerOwner (%d) must not be negative; 0 takes the default",
			l.MaxConcurrent, l.MaxConcurrentPerOwner)
	}
	in, err := schema.InferType(reflect.TypeFor[argsSchema]())
	if err != nil {
		return nil, nil, fmt.Errorf("runcode: %w", err)
	}
	in.Properties["timeout_ms"].Description = fmt.Sprintf("time limit in milliseconds; %d by default, at most %d (larger values are capped)",
		l.DefaultTimeout.Milliseconds(), l.MaxTimeout.Milliseconds())
	in.Properties["memory_limit_bytes"].Description = fmt.Sprintf("memory limit in bytes; %d by default, at most %d (larger values are capped)",
		l.DefaultMemoryBytes, l.MaxMemoryBytes)
	r := &runner{limits: l, slots: newSlots(l.MaxConcurrent, l.MaxConcurrentPerOwner)}
	t, err := quiver.NewFunc(Name, description, r.run,
		quiver.WithInputSchema(in),
		// The sandbox stops the code at its own timeout and reports what it logged; the
		// dispatcher's bound is only a backstop.
		quiver.WithTimeout(l.MaxTimeout+2*time.Second))
	return t, r, err
}

const description = "Runs JavaScript or TypeScript in an isolated sandbox and returns its result: use it to compute, " +
	"transform data or check logic exactly rather than by estimation. The code is an ES module whose default export " +
	"is a function receiving args; its return value (JSON) is the result, and console output is captured. " +
	"The sandbox has no file system, network, timers or modules beyond what you write, and Date is frozen at the call's start. " +
	"The result is the returned value, followed by the console output when there is any; code that throws, runs out of memory " +
	"or time, or imports a module fails the call with the error, its stack and the console output."

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v, def int64) int64 {
		if v == 0 {
			return def
		}
		return v
	}
	l.DefaultTimeout = time.Duration(pick(int64(l.DefaultTimeout), int64(d.DefaultTimeout)))
	l.MaxTimeout = time.Duration(pick(int64(l.MaxTimeout), int64(d.MaxTimeout)))
	l.DefaultMemoryBytes = pick(l.DefaultMemoryBytes, d.DefaultMemoryBytes)
	l.MaxMemoryBytes = pick(l.MaxMemoryBytes, d.MaxMemoryBytes)
	l.MaxCodeBytes = int(pick(int64(l.MaxCodeBytes), int64(d.MaxCodeBytes)))
	l.MaxOutputBytes = int(pick(int64(l.MaxOutputBytes), int64(d.MaxOutputBytes)))
	l.MaxLogBytes = int(pick(int64(l.MaxLogBytes), int64(d.MaxLogBytes)))
	l.MaxConcurrent = int(pick(int64(l.MaxConcurrent), int64(d.MaxConcurrent)))
	l.MaxConcurrentPerOwner = min(int(pick(int64(l.MaxConcurrentPerOwner), int64(d.MaxConcurrentPerOwner))), l.MaxConcurrent)
	return l
}

type runner struct {
	limits Limits
	slots  *slots
}

// giveUpBefore is how long before its context's deadline a waiting call stops waiting: an
// error returned after the deadline is replaced by the dispatcher's own timeout message, which
// would not say which limit held the call up.
const giveUpBefore = 200 * time.Millisecond

func (r *runner) run(ctx context.Context, a Args) (*quiver.Result, error) {
	l := r.limits
	if len(a.Code) > l.MaxCodeBytes {
		return nil, quiver.Fail(quiver.CodeInvalidArguments, "code is %d bytes, over the limit of %d bytes; send a shorter program", len(a.Code), l.MaxCodeBytes)
	}
	opts := sandbox.Options{
		Source: a.Code, Language: a.Language,
		Timeout:        capped(time.Duration(a.TimeoutMS)*time.Millisecond, l.DefaultTimeout, l.MaxTimeout),
		MemoryLimit:    capped(a.MemoryLimitBytes, l.DefaultMemoryBytes, l.MaxMemoryBytes),
		MaxOutputBytes: l.MaxOutputBytes, MaxLogBytes: l.MaxLogBytes,
		Now: time.Now(),
	}
	if len(a.Args) > 0 {
		opts.Execute.Args = []any{a.Args}
	}
	release, err := r.wait(ctx)
	if err != nil {
		return nil, err
	}
	h, err := sandbox.Start(ctx, opts)
	if err != nil {
		release()
		return nil, quiver.Fail(quiver.CodeInvalidArguments, "%v", err)
	}
	res := h.Wait()
	// A terminated run is answered at its deadline, but its interpreter may still be finishing
	// one builtin call: the slot stays taken until it has stopped, so that abandoned runs
	// cannot add up to more CPU than the limits allow.
	select {
	case <-h.Stopped():
		release()
	default:
		go func() {
			<-h.Stopped()
			release()
		}()
	}
	return result(res)
}

// wait takes a slot for the call's owner, and gives up shortly before ctx's deadline with an
// error result that says which limit held the call up and who sets it.
func (r *runner) wait(ctx context.Context) (release func(), err error) {
	start := time.Now()
	waitCtx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, deadline.Add(-giveUpBefore))
		defer cancel()
	}
	key := ownerOf(ctx)
	release, running, waiting, err := r.slots.acquire(waitCtx, key)
	if err == nil {
		return release, nil
	}
	l := r.limits
	why := fmt.Sprintf("all %d sandboxes were busy", l.MaxConcurrent)
	if running >= l.MaxConcurrentPerOwner {
		why = fmt.Sprintf("this caller (%s) already had %d programs running, its limit", key, running)
	}
	return nil, quiver.Fail(quiver.CodeTimeout, "the code did not run: it waited %s for a sandbox until the call had to end (%v), because %s. "+
		"run_code runs at most %d programs at once, %d per caller (runcode.Limits MaxConcurrent and MaxConcurrentPerOwner, set by the operator); "+
		"this caller had %d more waiting. Run fewer programs at once, or retry when they have finished.",
		time.Since(start).Round(time.Millisecond), err, why, l.MaxConcurrent, l.MaxConcurrentPerOwner, waiting)
}

// capped is v, or def when v is not set, never more than limit.
func capped[T int64 | time.Duration](v, def, limit T) T {
	if v <= 0 {
		v = def
	}
	return min(v, limit)
}

// maxErrorDetail bounds the stack and logs repeated in the error text the model reads.
const maxErrorDetail = 2 << 10

// result makes the run the call's result: its status the call's, its value the call's value,
// and the rest of what the sandbox reports (duration, console output, how a failure ended) the
// result's metadata.
func result(res *sandbox.Result) (*quiver.Result, error) {
	m := Meta{Logs: res.Logs, LogsTruncated: res.LogsTruncated, DurationMS: float64(res.Duration.Microseconds()) / 1000}
	if res.Status != sandbox.StatusSuccess {
		m.Status = res.Status
	}
	meta, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if res.Status == sandbox.StatusSuccess {
		value := res.Value
		if len(value) == 0 {
			// A function that returns nothing: JSON has no undefined.
			value = json.RawMessage("null")
		}
		r := &quiver.Result{Status: quiver.StatusSuccess, Value: value, Meta: meta}
		if len(res.Logs) > 0 {
			// The model reads the text of a result, never its metadata, and code often
			// prints what it found rather than returning it.
			r.Text = string(value) + "\n\nconsole output:\n" + logText(res.Logs)
			if res.LogsTruncated {
				r.Text += "\n[console output past the log limit was dropped]"
			}
		}
		return r, nil
	}
	// The model reads only the error text of a failed call: say what happened, where, and
	// what the code printed before it.
	var sb strings.Builder
	fmt.Fprintf(&sb, "the code ended with status %s: %s", res.Status, res.Err())
	if res.Stack != "" {
		sb.WriteString("\n" + clip(res.Stack, maxErrorDetail))
	}
	if len(res.Logs) > 0 {
		sb.WriteString("\nconsole output:\n" + clip(logText(res.Logs), maxErrorDetail))
	}
	return &quiver.Result{Status: quiver.StatusError, Code: quiver.CodeToolError, Error: sb.String(), Meta: meta}, nil
}

// logText is console output as the model reads it: one "[level] text" line a call.
func logText(logs []sandbox.LogEntry) string {
	var b strings.Builder
	for _, e := range logs {
		fmt.Fprintf(&b, "[%s] %s\n", e.Level, e.Text)
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "\n..."
}
