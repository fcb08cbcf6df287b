package quiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

// Eight levels of objects below the root: {"n":{"n":...{"v":1}}}.
type (
	lvl8 struct {
		V int `json:"v" maximum:"5"`
	}
	lvl7 struct {
		N lvl8 `json:"n"`
	}
	lvl6 struct {
		N lvl7 `json:"n"`
	}
	lvl5 struct {
		N lvl6 `json:"n"`
	}
	lvl4 struct {
		N lvl5 `json:"n"`
	}
	lvl3 struct {
		N lvl4 `json:"n"`
	}
	lvl2 struct {
		N lvl3 `json:"n"`
	}
	lvl1 struct {
		N lvl2 `json:"n"`
	}
	deepArgs struct {
		N lvl1 `json:"n"`
	}
)

func nested(depth int, leaf string) string {
	return strings.Repeat(`{"n":`, depth) + leaf + strings.Repeat("}", depth)
}

type orderArgs struct {
	Customer string  `json:"customer" minLength:"1"`
	Items    []item  `json:"items" minItems:"1"`
	Note     *string `json:"note,omitempty" maxLength:"64"`
	Express  bool    `json:"express,omitempty"`
}

type item struct {
	SKU string `json:"sku" pattern:"^[A-Z]{3}-[0-9]+$"`
	Qty int    `json:"qty" minimum:"1" maximum:"99"`
}

// badInputDispatcher has tools for every kind of bad input; handlers count their runs.
func badInputDispatcher(t testing.TB, runs *atomic.Int32) *quiver.Dispatcher {
	t.Helper()
	count := func(v any) { runs.Add(1) }
	deep := quiver.Func("deep", "Takes deeply nested arguments.", func(_ context.Context, a deepArgs) (int, error) {
		count(a)
		return a.N.N.N.N.N.N.N.N.V, nil
	})
	order := quiver.Func("place_order", "Places an order.", func(_ context.Context, a orderArgs) (string, error) {
		count(a)
		return "ok", nil
	})
	echo := quiver.Func("echo", "Echoes text.", func(_ context.Context, a struct {
		Text string `json:"text" maxLength:"64"`
	}) (string, error) {
		count(a)
		return a.Text, nil
	})
	hidden := textTool("hidden_tool", "secret stuff")
	return &quiver.Dispatcher{Registry: newRegistry(t, deep, order, echo, hidden), Policy: quiver.Policy{Deny: []string{"hidden_*"}},
		MaxArgsBytes: 4096}
}

func TestDispatchBadInput(t *testing.T) {
	const payload = "ZQX_PAYLOAD_7781"
	huge := strings.Repeat("x", 10000)
	large := strings.Repeat("y", 3000)
	hostile := strings.Repeat("A", 10000)
	tests := []struct {
		name   string
		tool   string
		args   string
		code   quiver.Code
		has    []string
		hasNot []string
	}{
		// Types, required, extra properties.
		{name: "wrong type", tool: "place_order", args: `{"customer":42,"items":[{"sku":"ABC-1","qty":1}]}`,
			code: quiver.CodeInvalidArguments, has: []string{"/customer: expected string, got number"}},
		{name: "wrong nested type", tool: "place_order", args: `{"customer":"c","items":[{"sku":"ABC-1","qty":"two"}]}`,
			code: quiver.CodeInvalidArguments, has: []string{"/items/0/qty: expected integer, got string"}},
		{name: "float for integer", tool: "place_order", args: `{"customer":"c","items":[{"sku":"ABC-1","qty":1.5}]}`,
			code: quiver.CodeInvalidArguments, has: []string{"/items/0/qty"}},
		{name: "array for object", tool: "place_order", args: `{"customer":"c","items":[[]]}`,
			code: quiver.CodeInvalidArguments, has: []string{"/items/0"}},
		{name: "missing required", tool: "place_order", args: `{"items":[{"sku":"ABC-1","qty":1}]}`,
			code: quiver.CodeInvalidArguments, has: []string{`missing required property "customer"`}},
		{name: "missing nested required", tool: "place_order", args: `{"customer":"c","items":[{"sku":"ABC-1"}]}`,
			code: quiver.CodeInvalidArguments, has: []string{"/items/0", `"qty"`}},
		{name: "extra property", tool: "place_order", args: `{"customer":"c","items":[{"sku":"ABC-1","qty":1}],"coupon":"FREE"}`,
			code: quiver.CodeInvalidArguments, has: []string{`unknown property "coupon"`}},
		{name: "extra nested property", tool: "place_order", args: `{"customer":"c","items":[{"sku":"ABC-1","qty":1,"price":0}]}`,
			code: quiver.CodeInvalidArguments, has: []string{"/items/0", `"price"`}},
		{name: "null for non-nullable", tool: "place_order", args: `{"customer":null,"items":[{"sku":"ABC-1","qty":1}]}`,
			code: quiver.CodeInvalidArguments, has: []string{"/customer"}},
		{name: "several problems at once", tool: "place_order", args: `{"customer":"","items":[{"sku":"abc","qty":100}]}`,
			code: quiver.CodeInvalidArguments, has: []string{"/customer", "/items/0/sku", "/items/0/qty: maximum 99, got 100"}},
		{name: "empty array under minItems", tool: "place_order", args: `{"customer":"c","items":[]}`,
			code: quiver.CodeInvalidArguments, has: []string{"/items: at least 1 items, got 0"}},

		// Deep nesting.
		{name: "8 levels invalid leaf", tool: "deep", args: `{"n":` + nested(7, `{"v":6}`) + `}`,
			code: quiver.CodeInvalidArguments, has: []string{"/n/n/n/n/n/n/n/n/v: maximum 5, got 6"}},
		{name: "8 levels wrong type", tool: "deep", args: `{"n":` + nested(7, `{"v":"x"}`) + `}`,
			code: quiver.CodeInvalidArguments, has: []string{"/n/n/n/n/n/n/n/n/v: expected integer, got string"}},
		{name: "8 levels missing leaf", tool: "deep", args: `{"n":` + nested(7, `{}`) + `}`,
			code: quiver.CodeInvalidArguments, has: []string{"/n/n/n/n/n/n/n/n", `"v"`}},

		// Size.
		{name: "over MaxArgsBytes", tool: "echo", args: `{"text":"` + huge + `"}`,
			code: quiver.CodeInvalidArguments, has: []string{"over the limit of 4096 bytes"}, hasNot: []string{huge[:100]}},
		{name: "over maxLength", tool: "echo", args: `{"text":"` + large + `"}`,
			code: quiver.CodeInvalidArguments, has: []string{"/text: maximum length 64, got 3000"}, hasNot: []string{large[:100]}},
		{name: "huge pattern mismatch is cut short", tool: "place_order", args: `{"customer":"c","items":[{"sku":"` + large + `","qty":1}]}`,
			code: quiver.CodeInvalidArguments, has: []string{"/items/0/sku: must match pattern"}, hasNot: []string{large[:100]}},

		// Encoding and syntax.
		{name: "invalid UTF-8", tool: "echo", args: "{\"text\":\"ab\xff\xfe\"}",
			code: quiver.CodeInvalidJSON, has: []string{"UTF-8", "offset 11"}},
		{name: "invalid UTF-8 in key", tool: "echo", args: "{\"te\xc3xt\":\"a\"}", code: quiver.CodeInvalidJSON, has: []string{"UTF-8"}},
		{name: "malformed: unquoted value", tool: "echo", args: `{"text": ` + payload + `}`,
			code: quiver.CodeInvalidJSON, has: []string{"not valid JSON", "offset", "text (string, required)", "Available tools: "}, hasNot: []string{payload, "PAYLOAD"}},
		{name: "malformed: truncated", tool: "echo", args: `{"text":"` + payload,
			code: quiver.CodeInvalidJSON, has: []string{"not valid JSON"}, hasNot: []string{payload}},
		{name: "malformed: trailing data", tool: "echo", args: `{"text":"a"} ` + payload,
			code: quiver.CodeInvalidJSON, has: []string{"not valid JSON"}, hasNot: []string{payload}},
		{name: "malformed: single quotes", tool: "echo", args: `{'text':'` + payload + `'}`,
			code: quiver.CodeInvalidJSON, hasNot: []string{payload}},
		{name: "malformed: trailing comma", tool: "echo", args: `{"text":"` + payload + `",}`,
			code: quiver.CodeInvalidJSON, hasNot: []string{payload}},
		{name: "non-object: array", tool: "echo", args: `["text"]`,
			code: quiver.CodeInvalidArguments, has: []string{"must be a JSON object, got an array"}},
		{name: "non-object: string", tool: "echo", args: `"text"`,
			code: quiver.CodeInvalidArguments, has: []string{"must be a JSON object, got a string"}},
		{name: "non-object: number", tool: "echo", args: `42`,
			code: quiver.CodeInvalidArguments, has: []string{"must be a JSON object, got a number"}},
		{name: "non-object: boolean", tool: "echo", args: `true`,
			code: quiver.CodeInvalidArguments, has: []string{"must be a JSON object, got a boolean"}},

		// Lookup and policy.
		{name: "unknown tool", tool: "no_such_tool", args: `{}`,
			code: quiver.CodeUnknownTool, has: []string{`unknown tool "no_such_tool"`, "Available tools: deep, echo, place_order."},
			hasNot: []string{"hidden_tool"}},
		{name: "hostile name", tool: hostile, args: `{}`, code: quiver.CodeUnknownTool,
			has: []string{`"` + hostile[:64] + `..."`, "Available tools:"}, hasNot: []string{hostile[:65]}},
		{name: "name with quotes and newline", tool: "x\"\n<script>", args: `{}`, code: quiver.CodeUnknownTool,
			has: []string{`"x\"\n<script>"`}, hasNot: []string{"x\"\n"}},
		{name: "name with invalid UTF-8", tool: "bad\xffname", args: `{}`, code: quiver.CodeUnknownTool,
			has: []string{"bad\uFFFDname"}, hasNot: []string{"\xff"}},
		{name: "empty name", tool: "", args: `{}`, code: quiver.CodeUnknownTool, has: []string{`unknown tool ""`}},
		{name: "denied tool", tool: "hidden_tool", args: `{}`, code: quiver.CodePolicyDenied,
			has: []string{"deny list", "Available tools: deep, echo, place_order."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int32
			d := badInputDispatcher(t, &runs)
			r := dispatch(t, d, tt.tool, tt.args)
			wantError(t, r, tt.code, tt.has...)
			for _, s := range tt.hasNot {
				if strings.Contains(r.Error, s) {
					t.Errorf("error echoes %.40q...", s)
				}
			}
			if len(r.Error) > 2000 {
				t.Errorf("error is %d bytes long", len(r.Error))
			}
			if runs.Load() != 0 {
				t.Error("the handler ran on bad input")
			}
			if !strings.HasPrefix(r.ModelText(), "Error: ") {
				t.Errorf("ModelText %q", r.ModelText())
			}
		})
	}
}

func TestDispatchValidInputReachesHandler(t *testing.T) {
	tests := []struct {
		name, tool, args string
		want             string // text or JSON value
	}{
		{"8 levels valid", "deep", `{"n":` + nested(7, `{"v":5}`) + `}`, `5`},
		{"order", "place_order", `{"customer":"c","items":[{"sku":"ABC-1","qty":99}],"note":"leave at door"}`, "ok"},
		{"nullable pointer", "place_order", `{"customer":"c","items":[{"sku":"ABC-12","qty":1}],"note":null}`, "ok"},
		{"unicode text", "echo", `{"text":"héllo wörld ✓"}`, "héllo wörld ✓"},
		{"escaped text", "echo", `{"text":"line\nnext \"q\" \u00e9"}`, "line\nnext \"q\" é"},
		{"whitespace around", "echo", "  \n{\"text\":\"a\"}\t ", "a"},
		{"64 characters exactly", "echo", `{"text":"` + strings.Repeat("é", 64) + `"}`, strings.Repeat("é", 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int32
			d := badInputDispatcher(t, &runs)
			r := dispatch(t, d, tt.tool, tt.args)
			wantSuccess(t, r)
			if r.Text != tt.want && string(r.Value) != tt.want {
				t.Errorf("result text %q value %s, want %s", r.Text, r.Value, tt.want)
			}
			if runs.Load() != 1 {
				t.Errorf("handler ran %d times", runs.Load())
			}
		})
	}
}

func TestDispatchDefaultArgsLimit(t *testing.T) {
	tool := quiver.Func("big", "Takes a big text.", func(_ context.Context, a struct {
		Text string `json:"text"`
	}) (int, error) {
		return len(a.Text), nil
	})
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	under := `{"text":"` + strings.Repeat("z", 1<<20-20) + `"}`
	wantSuccess(t, dispatch(t, d, "big", under))
	over := `{"text":"` + strings.Repeat("z", 1<<20) + `"}`
	wantError(t, dispatch(t, d, "big", over), quiver.CodeInvalidArguments, "over the limit of 1048576 bytes")
}

func TestValidationErrorResult(t *testing.T) {
	type planArgs struct {
		Days  int    `json:"days" minimum:"1" maximum:"14"`
		Place string `json:"place,omitempty" enum:"beach,mountain"`
	}
	tool := quiver.Func("plan_trip", "Plans a trip.", func(context.Context, planArgs) (string, error) { return "planned", nil })
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	tests := []struct {
		args string
		want []schema.Problem
		text string
	}{
		{`{"days":30}`, []schema.Problem{{Pointer: "/days", Message: "maximum 14, got 30"}}, "/days: maximum 14, got 30"},
		{`{"days":0}`, []schema.Problem{{Pointer: "/days", Message: "minimum 1, got 0"}}, "/days: minimum 1, got 0"},
		{`{"days":"3"}`, []schema.Problem{{Pointer: "/days", Message: "expected integer, got string"}}, "/days: expected integer, got string"},
		{`{}`, []schema.Problem{{Pointer: "", Message: `missing required property "days"`}}, `/: missing required property "days"`},
		{`{"days":3,"place":"moon"}`, []schema.Problem{{Pointer: "/place", Message: `must be one of "beach", "mountain", got "moon"`}},
			`/place: must be one of "beach", "mountain", got "moon"`},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			r := dispatch(t, d, "plan_trip", tt.args)
			wantError(t, r, quiver.CodeInvalidArguments, tt.text, "plan_trip", "Correct them and call the tool again.")
			if !reflect.DeepEqual(r.Problems, tt.want) {
				t.Errorf("problems %+v, want %+v", r.Problems, tt.want)
			}
			if !strings.Contains(r.ModelText(), tt.text) {
				t.Errorf("ModelText %q lacks %q", r.ModelText(), tt.text)
			}
			// Problems travel in the result's JSON form.
			b, _ := json.Marshal(r)
			if !strings.Contains(string(b), `"problems":[{"pointer":"`+tt.want[0].Pointer+`"`) {
				t.Errorf("JSON %s", b)
			}
		})
	}
}

// lying encodes itself against the Go type its schema was inferred from.
type lying struct {
	N int `json:"n"`
}

func (lying) MarshalJSON() ([]byte, error) { return []byte(`{"n":"not a number"}`), nil }

func TestOutputCheck(t *testing.T) {
	handOut := `{"type":"object","properties":{"n":{"type":"integer","maximum":10}},"required":["n"]}`
	type rated struct {
		Grade string `json:"grade" enum:"A,B,C"`
	}
	tests := []struct {
		name   string
		tool   *quiver.Tool
		code   quiver.Code // "" for success
		errHas string
	}{
		{"hand-written schema satisfied",
			quiver.Func("t", "T.", func(context.Context, struct{}) (map[string]int, error) { return map[string]int{"n": 3}, nil },
				quiver.WithOutputSchema(mustSchema(t, handOut))), "", ""},
		{"hand-written schema violated",
			quiver.Func("t", "T.", func(context.Context, struct{}) (map[string]int, error) { return map[string]int{"n": 30}, nil },
				quiver.WithOutputSchema(mustSchema(t, handOut))), quiver.CodeInvalidOutput, "/n: maximum 10, got 30"},
		{"hand-written schema, missing property",
			quiver.Func("t", "T.", func(context.Context, struct{}) (map[string]int, error) { return map[string]int{}, nil },
				quiver.WithOutputSchema(mustSchema(t, handOut))), quiver.CodeInvalidOutput, `"n"`},
		{"raw tool with output schema violated",
			rawTool(t, "t", "", returning(json.RawMessage(`{"n":"x"}`), nil), func(s *quiver.Spec) { s.OutputSchema = mustSchema(t, handOut) }),
			quiver.CodeInvalidOutput, "does not match its output schema"},
		{"no structured value",
			rawTool(t, "t", "", returning("just text", nil), func(s *quiver.Spec) { s.OutputSchema = mustSchema(t, handOut) }),
			quiver.CodeInvalidOutput, "returned no structured value"},
		{"error results are not checked",
			rawTool(t, "t", "", returning(nil, errors.New("backend down")), func(s *quiver.Spec) { s.OutputSchema = mustSchema(t, handOut) }),
			quiver.CodeToolError, "backend down"},
		{"inferred with constraints is checked",
			quiver.Func("t", "T.", func(context.Context, struct{}) (rated, error) { return rated{Grade: "Z"}, nil }),
			quiver.CodeInvalidOutput, "/grade"},
		{"inferred with constraints, valid",
			quiver.Func("t", "T.", func(context.Context, struct{}) (rated, error) { return rated{Grade: "B"}, nil }), "", ""},
		// A type that encodes itself is not described by the schema inferred from its Go shape,
		// so its results are checked even without constraint tags.
		{"custom MarshalJSON is checked",
			quiver.Func("t", "T.", func(context.Context, struct{}) (lying, error) { return lying{N: 1}, nil }),
			quiver.CodeInvalidOutput, "/n: expected integer, got string"},
		{"same schema hand-written is checked",
			quiver.Func("t", "T.", func(context.Context, struct{}) (lying, error) { return lying{N: 1}, nil },
				quiver.WithOutputSchema(mustSchema(t, `{"type":"object","properties":{"n":{"type":"integer"}}}`))),
			quiver.CodeInvalidOutput, "/n: expected integer, got string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &quiver.Dispatcher{Registry: newRegistry(t, tt.tool)}
			r := dispatch(t, d, "t", "{}")
			if tt.code == "" {
				wantSuccess(t, r)
				return
			}
			wantError(t, r, tt.code, tt.errHas)
		})
	}
}

func TestPanickingHandler(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // >0 runs the handler on its own goroutine
		value   any
		want    string
	}{
		{"string panic", 0, "kaboom", "panic: kaboom"},
		{"error panic", 0, errors.New("nil map write"), "panic: nil map write"},
		{"guarded", 200 * time.Millisecond, "kaboom", "panic: kaboom"},
		{"nil pointer", 0, nil, "panic:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := quiver.Func("crash", "Crashes.", func(context.Context, struct{}) (string, error) {
				if tt.value == nil {
					var m *struct{ X int }
					return fmt.Sprint(m.X), nil
				}
				panic(tt.value)
			}, quiver.WithTimeout(tt.timeout))
			rec := &memRecorder{}
			d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Recorder: rec}
			r := dispatch(t, d, "crash", "{}")
			wantError(t, r, quiver.CodePanic, tt.want, "crash")
			if r.Stack == "" || !strings.Contains(r.Stack, "goroutine") {
				t.Errorf("stack %q", r.Stack)
			}
			mt := r.ModelText()
			for _, bad := range []string{"goroutine", ".go:", "runtime/debug", "panic.go"} {
				if strings.Contains(mt, bad) {
					t.Errorf("ModelText shows the stack (%q): %s", bad, mt)
				}
			}
			if got := rec.all(); len(got) != 1 || got[0].Result.Code != quiver.CodePanic {
				t.Errorf("recorded %+v", got)
			}
			// The dispatcher survives: the next call works.
			wantError(t, dispatch(t, d, "crash", "{}"), quiver.CodePanic)
		})
	}
}

func TestTimeoutsAndCancellation(t *testing.T) {
	const short = 50 * time.Millisecond
	type behaviour int
	const (
		ignores  behaviour = iota // blocks until the test ends
		respects                  // returns ctx.Err() when its context ends
		finishes                  // waits for its context to end, then succeeds anyway
		fast                      // returns at once
	)
	tests := []struct {
		name         string
		behaviour    behaviour
		toolTimeout  time.Duration
		dispTimeout  time.Duration
		cancelCaller bool
		callerLimit  time.Duration
		code         quiver.Code // "" for success
		has          []string
	}{
		{name: "ignores ctx, tool timeout", behaviour: ignores, toolTimeout: short, code: quiver.CodeTimeout,
			has: []string{"timed out after 50ms", "did not stop within 50ms and was abandoned"}},
		{name: "respects ctx, tool timeout", behaviour: respects, toolTimeout: short, code: quiver.CodeTimeout,
			has: []string{"timed out after 50ms"}},
		{name: "dispatcher default timeout", behaviour: respects, dispTimeout: short, code: quiver.CodeTimeout,
			has: []string{"timed out after 50ms"}},
		{name: "tool timeout beats dispatcher's", behaviour: respects, toolTimeout: short, dispTimeout: time.Hour, code: quiver.CodeTimeout,
			has: []string{"timed out after 50ms"}},
		{name: "ignores ctx, caller cancels", behaviour: ignores, cancelCaller: true, code: quiver.CodeCancelled,
			has: []string{"was cancelled", "abandoned"}},
		{name: "respects ctx, caller cancels", behaviour: respects, cancelCaller: true, code: quiver.CodeCancelled,
			has: []string{"was cancelled"}},
		{name: "respects ctx, caller deadline", behaviour: respects, callerLimit: short, code: quiver.CodeTimeout,
			has: []string{"caller's deadline"}},
		{name: "ignores ctx, caller deadline", behaviour: ignores, callerLimit: short, code: quiver.CodeTimeout,
			has: []string{"caller's deadline", "abandoned"}},
		{name: "work done after timeout stands", behaviour: finishes, toolTimeout: short},
		{name: "fast handler within timeout", behaviour: fast, toolTimeout: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			started := make(chan struct{})
			tool := quiver.Func("work", "Works.", func(ctx context.Context, _ struct{}) (string, error) {
				close(started)
				switch tt.behaviour {
				case ignores:
					<-release
					return "too late", nil
				case respects:
					<-ctx.Done()
					return "", ctx.Err()
				case finishes:
					<-ctx.Done()
					return "finished anyway", nil
				}
				return "quick", nil
			}, quiver.WithTimeout(tt.toolTimeout))
			rec := &memRecorder{}
			d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Timeout: tt.dispTimeout, Grace: short, Recorder: rec}
			ctx := context.Background()
			var cancel context.CancelFunc = func() {}
			switch {
			case tt.cancelCaller:
				ctx, cancel = context.WithCancel(ctx)
				go func() { <-started; cancel() }()
			case tt.callerLimit > 0:
				ctx, cancel = context.WithTimeout(ctx, tt.callerLimit)
			}
			defer cancel()
			done := make(chan *quiver.Result, 1)
			go func() {
				r, _ := d.Dispatch(ctx, quiver.Call{Name: "work"})
				done <- r
			}()
			var r *quiver.Result
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Dispatch hung")
			}
			if tt.code == "" {
				wantSuccess(t, r)
			} else {
				wantError(t, r, tt.code, tt.has...)
				if tt.behaviour == respects && strings.Contains(r.Error, "abandoned") {
					t.Errorf("a handler that stopped was reported abandoned: %s", r.Error)
				}
			}
			if got := rec.all(); len(got) != 1 || got[0].Result.Code != tt.code {
				t.Errorf("recorded %+v", got)
			}
		})
	}
}

func TestClientToolIsNotExecuted(t *testing.T) {
	ran := false
	tool := quiver.Func("pick_file", "Lets the user pick a file in the browser.", func(context.Context, struct{}) (string, error) {
		ran = true
		return "", nil
	}, quiver.WithTarget(quiver.TargetClient))
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	wantError(t, dispatch(t, d, "pick_file", "{}"), quiver.CodeClientTool, "runs in the client")
	if ran {
		t.Error("a client tool ran on the server")
	}
}

func TestDisabledToolRefused(t *testing.T) {
	tool, err := quiver.NewTool(quiver.Spec{Name: "old", Description: "Old.", Disabled: true}, returning("ran", nil))
	if err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool, textTool("new", "n"))}
	wantError(t, dispatch(t, d, "old", "{}"), quiver.CodePolicyDenied, "disabled", "Available tools: new.")
	if got := names(d.Tools()); len(got) != 1 || got[0] != "new" {
		t.Errorf("Tools %v", got)
	}
}

func TestMiddlewareOrder(t *testing.T) {
	var trace []string
	mw := func(label string) quiver.Middleware {
		return func(next quiver.Handler) quiver.Handler {
			return func(ctx context.Context, c *quiver.Call) *quiver.Result {
				trace = append(trace, label+" in "+string(c.Args))
				r := next(ctx, c)
				trace = append(trace, label+" out "+r.Text)
				return r
			}
		}
	}
	tool := quiver.Func("hello", "Greets.", func(_ context.Context, a struct {
		Name string `json:"name,omitempty" default:"world"`
	}) (string, error) {
		trace = append(trace, "handler")
		return "hello " + a.Name, nil
	})
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Middleware: []quiver.Middleware{mw("outer"), mw("inner")}}
	wantSuccess(t, dispatch(t, d, "hello", `{"_reasoningForCall":"greet"}`))
	want := []string{`outer in {"name":"world"}`, `inner in {"name":"world"}`, "handler", "inner out hello world", "outer out hello world"}
	if !reflect.DeepEqual(trace, want) {
		t.Errorf("trace %q\nwant %q", trace, want)
	}
	// Middleware does not see calls refused before execution.
	trace = nil
	wantError(t, dispatch(t, d, "hello", `{"name":5}`), quiver.CodeInvalidArguments)
	if len(trace) != 0 {
		t.Errorf("middleware saw an invalid call: %q", trace)
	}
}

func TestDispatcherCall(t *testing.T) {
	type args struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	add := quiver.Func("add", "Adds.", func(_ context.Context, a args) (int, error) { return a.A + a.B, nil })
	d := &quiver.Dispatcher{Registry: newRegistry(t, add)}
	tests := []struct {
		name string
		args any
		want string
		code quiver.Code
	}{
		{"struct", args{A: 2, B: 3}, "5", ""},
		{"map", map[string]int{"a": 1, "b": 1}, "2", ""},
		{"raw", json.RawMessage(`{"a":4,"b":4}`), "8", ""},
		{"invalid", map[string]any{"a": "x", "b": 1}, "", quiver.CodeInvalidArguments},
		{"missing", nil, "", quiver.CodeInvalidArguments},
		{"unencodable", make(chan int), "", quiver.CodeInvalidArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := d.Call(context.Background(), "add", tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if tt.code != "" {
				wantError(t, r, tt.code)
				return
			}
			wantSuccess(t, r)
			if string(r.Value) != tt.want {
				t.Errorf("value %s, want %s", r.Value, tt.want)
			}
		})
	}
}

// The caller's Call is not modified by dispatch (it is passed by value).
func TestDispatchLeavesCallerCallAlone(t *testing.T) {
	tool := quiver.Func("hello", "Greets.", func(_ context.Context, a struct {
		Name string `json:"name,omitempty" default:"world"`
	}) (string, error) {
		return "hello " + a.Name, nil
	})
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	c := quiver.Call{Name: "hello", Args: json.RawMessage(`{"_reasoningForCall":"x"}`)}
	wantSuccess(t, dispatchCall(t, context.Background(), d, c))
	if string(c.Args) != `{"_reasoningForCall":"x"}` || c.Reasoning != "" || c.Tool() != nil {
		t.Errorf("caller's call changed: %+v", c)
	}
}
