package quiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
)

type wxArgs struct {
	City  string   `json:"city" description:"City name, capitalised" pattern:"^[A-Z][a-z]+$"`
	Days  int      `json:"days,omitempty" description:"How many days" minimum:"1" maximum:"14" default:"3"`
	Unit  string   `json:"unit,omitempty" enum:"celsius,fahrenheit" default:"celsius"`
	Start string   `json:"start,omitempty" format:"date"`
	Tags  []string `json:"tags,omitempty" maxItems:"3"`
}

// wxTool records the arguments its handler receives.
func wxTool(t testing.TB, got *wxArgs) *quiver.Tool {
	t.Helper()
	tool, err := quiver.NewFunc("get_forecast", "Returns the weather forecast for a city.",
		func(_ context.Context, a wxArgs) (string, error) {
			*got = a
			return "sunny in " + a.City, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestFuncInfersSchemaFromTags(t *testing.T) {
	var got wxArgs
	in := wxTool(t, &got).Spec().InputSchema
	if in == nil {
		t.Fatal("no input schema inferred")
	}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	root := toMap(t, raw)
	if root["type"] != "object" {
		t.Fatalf("root type = %v, want object", root["type"])
	}
	if req := root["required"]; !reflect.DeepEqual(req, []any{"city"}) {
		t.Errorf("required = %v, want [city]", req)
	}
	props := root["properties"].(map[string]any)
	tests := []struct {
		prop, key string
		want      any
	}{
		{"city", "type", "string"},
		{"city", "description", "City name, capitalised"},
		{"city", "pattern", "^[A-Z][a-z]+$"},
		{"days", "type", "integer"},
		{"days", "description", "How many days"},
		{"days", "minimum", 1.0},
		{"days", "maximum", 14.0},
		{"days", "default", 3.0},
		{"unit", "enum", []any{"celsius", "fahrenheit"}},
		{"unit", "default", "celsius"},
		{"start", "format", "date"},
		{"tags", "type", "array"},
		{"tags", "maxItems", 3.0},
	}
	for _, tt := range tests {
		t.Run(tt.prop+"."+tt.key, func(t *testing.T) {
			p, ok := props[tt.prop].(map[string]any)
			if !ok {
				t.Fatalf("property %s missing from %s", tt.prop, raw)
			}
			if !reflect.DeepEqual(p[tt.key], tt.want) {
				t.Errorf("%s.%s = %#v, want %#v", tt.prop, tt.key, p[tt.key], tt.want)
			}
		})
	}
}

func TestFuncAppliesDefaultsBeforeHandler(t *testing.T) {
	tests := []struct {
		name string
		args string
		want wxArgs
	}{
		{"all defaults", `{"city":"Paris"}`, wxArgs{City: "Paris", Days: 3, Unit: "celsius"}},
		{"given values win", `{"city":"Oslo","days":7,"unit":"fahrenheit"}`, wxArgs{City: "Oslo", Days: 7, Unit: "fahrenheit"}},
		{"one default", `{"city":"Rome","days":1,"start":"2024-05-01","tags":["a"]}`,
			wxArgs{City: "Rome", Days: 1, Unit: "celsius", Start: "2024-05-01", Tags: []string{"a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got wxArgs
			d := &quiver.Dispatcher{Registry: newRegistry(t, wxTool(t, &got))}
			r := dispatch(t, d, "get_forecast", tt.args)
			wantSuccess(t, r)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("handler got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestFuncTagsAreEnforced(t *testing.T) {
	tests := []struct {
		args    string
		pointer string
		message string
	}{
		{`{"city":"paris"}`, "/city", "must match pattern"},
		{`{"city":"Paris","days":0}`, "/days", "minimum 1, got 0"},
		{`{"city":"Paris","days":15}`, "/days", "maximum 14, got 15"},
		{`{"city":"Paris","unit":"kelvin"}`, "/unit", `must be one of "celsius", "fahrenheit", got "kelvin"`},
		{`{"city":"Paris","start":"yesterday"}`, "/start", "must be a valid date"},
		{`{"city":"Paris","tags":["a","b","c","d"]}`, "/tags", "at most 3 items, got 4"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			called := false
			var got wxArgs
			tool := wxTool(t, &got)
			d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Middleware: []quiver.Middleware{
				func(next quiver.Handler) quiver.Handler {
					return func(ctx context.Context, c *quiver.Call) *quiver.Result { called = true; return next(ctx, c) }
				}}}
			r := dispatch(t, d, "get_forecast", tt.args)
			wantError(t, r, quiver.CodeInvalidArguments, tt.pointer+": "+tt.message)
			if !hasProblem(r.Problems, tt.pointer, tt.message) {
				t.Errorf("problems %v lack {%s, %s...}", r.Problems, tt.pointer, tt.message)
			}
			if called {
				t.Error("handler ran on invalid arguments")
			}
		})
	}
}

func hasProblem(ps []schema.Problem, pointer, message string) bool {
	for _, p := range ps {
		if p.Pointer == pointer && strings.Contains(p.Message, message) {
			return true
		}
	}
	return false
}

func TestWithInputSchemaReplacesInferred(t *testing.T) {
	hand := mustSchema(t, `{"type":"object","properties":{"q":{"type":"string","maxLength":3}},"required":["q"],"additionalProperties":false}`)
	var got map[string]any
	tool := quiver.Func("search", "Searches.", func(_ context.Context, a map[string]any) (string, error) {
		got = a
		return "ok", nil
	}, quiver.WithInputSchema(hand))
	if got, _ := json.Marshal(tool.Spec().InputSchema); !jsonEqual(t, got, mustJSON(t, hand)) {
		t.Fatalf("Spec().InputSchema = %s, not the hand-written schema", got)
	}
	// The tool owns a copy: changing the caller's schema afterwards changes nothing.
	hand.Properties["q"].MaxLength = nil
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	tests := []struct {
		args string
		code quiver.Code // "" for success
	}{
		{`{"q":"abc"}`, ""},
		{`{"q":"abcd"}`, quiver.CodeInvalidArguments},
		{`{}`, quiver.CodeInvalidArguments},
		{`{"q":"a","other":1}`, quiver.CodeInvalidArguments},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			got = nil
			r := dispatch(t, d, "search", tt.args)
			if tt.code == "" {
				wantSuccess(t, r)
				if got["q"] != "abc" {
					t.Errorf("handler got %v", got)
				}
				return
			}
			wantError(t, r, tt.code)
			if got != nil {
				t.Errorf("handler ran with %v", got)
			}
		})
	}

	// The typed struct's own tags are ignored once a schema is given.
	tool2 := quiver.Func("forecast2", "Forecast.", func(_ context.Context, a wxArgs) (string, error) { return a.City, nil },
		quiver.WithInputSchema(mustSchema(t, `{"type":"object","properties":{"city":{"type":"string"}}}`)))
	d2 := &quiver.Dispatcher{Registry: newRegistry(t, tool2)}
	r := dispatch(t, d2, "forecast2", `{"city":"lowercase","days":99}`)
	wantSuccess(t, r)
	if r.Text != "lowercase" {
		t.Errorf("text = %q", r.Text)
	}
}

func TestNoArgumentTool(t *testing.T) {
	runs := 0
	tool := quiver.Func("ping", "Answers pong.", func(context.Context, struct{}) (string, error) {
		runs++
		return "pong", nil
	})
	if s := tool.Spec().InputSchema; s != nil {
		t.Fatalf("a struct{} tool has input schema %v, want nil", s)
	}
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	tests := []struct {
		args string
		ok   bool
	}{
		{"", true},
		{"null", true},
		{"{}", true},
		{"  { }\n", true},
		{`{"_reasoningForCall":"because"}`, true},
		{`{"x":1}`, false},
		{`{"a":1,"b":2}`, false},
		{`[]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			before := runs
			r := dispatch(t, d, "ping", tt.args)
			if tt.ok {
				wantSuccess(t, r)
				if r.Text != "pong" || runs != before+1 {
					t.Errorf("text %q runs %d", r.Text, runs-before)
				}
				return
			}
			wantError(t, r, quiver.CodeInvalidArguments)
			if runs != before {
				t.Error("handler ran")
			}
		})
	}
	r := dispatch(t, d, "ping", `{"x":1}`)
	wantError(t, r, quiver.CodeInvalidArguments, "takes no arguments", `"x"`)
}

func TestHandlerContext(t *testing.T) {
	type seen struct {
		scope     quiver.Scope
		exec      quiver.Execution
		execOK    bool
		callID    string
		callName  string
		reasoning string
		apiKey    string
		apiKeyOK  bool
		other     bool
		ctxErr    error
	}
	var got seen
	tool := quiver.Func("inspect", "Inspects its context.", func(ctx context.Context, _ struct{}) (string, error) {
		got.scope = quiver.ScopeFrom(ctx)
		got.exec, got.execOK = quiver.ExecutionFrom(ctx)
		if c := quiver.CallFrom(ctx); c != nil {
			got.callID, got.callName, got.reasoning = c.ID, c.Name, c.Reasoning
		}
		got.apiKey, got.apiKeyOK = quiver.Var(ctx, "api_key")
		_, got.other = quiver.Var(ctx, "undeclared")
		got.ctxErr = ctx.Err()
		return "ok", nil
	}, quiver.WithVariables(quiver.Variable{Name: "api_key", Type: quiver.VarSecret, Required: true}))

	// The resolver sees the scope from the context, and only declared variables are asked.
	var asked []string
	var mu sync.Mutex
	resolver := resolverFunc(func(_ context.Context, s quiver.Scope, v quiver.Variable) (string, bool, error) {
		mu.Lock()
		asked = append(asked, v.Name)
		mu.Unlock()
		if s.UserID != "u1" {
			return "", false, nil
		}
		return map[string]string{"api_key": "k-123", "undeclared": "nope"}[v.Name], true, nil
	})
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Resolver: resolver}

	scope := quiver.Scope{AgentID: "a1", UserID: "u1", WorkspaceID: "w1", ThreadID: "t1"}
	exec := quiver.Execution{StepCount: 4, Side: "side_b"}
	ctx := quiver.WithExecution(quiver.WithScope(context.Background(), scope), exec)
	r := dispatchCall(t, ctx, d, quiver.Call{ID: "call_1", Name: "inspect", Args: json.RawMessage(`{"_reasoningForCall":"to check"}`)})
	wantSuccess(t, r)
	// The run's execution state, with the call's id and attempt (a first: ctx names no other).
	wantExec := quiver.Execution{StepCount: 4, Side: "side_b", CallID: "call_1", Attempt: 1}
	want := seen{scope: scope, exec: wantExec, execOK: true, callID: "call_1", callName: "inspect", reasoning: "to check",
		apiKey: "k-123", apiKeyOK: true}
	if got != want {
		t.Errorf("handler saw %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(asked, []string{"api_key"}) {
		t.Errorf("resolver asked for %v, want only the declared api_key", asked)
	}

	// Outside a run: zero scope, no execution, no call, no variables.
	if s := quiver.ScopeFrom(context.Background()); s != (quiver.Scope{}) {
		t.Errorf("ScopeFrom(background) = %+v", s)
	}
	if _, ok := quiver.ExecutionFrom(context.Background()); ok {
		t.Error("ExecutionFrom(background) reports a run")
	}
	if quiver.CallFrom(context.Background()) != nil {
		t.Error("CallFrom(background) is not nil")
	}
	if _, ok := quiver.Var(context.Background(), "api_key"); ok {
		t.Error("Var outside a call found a value")
	}
}

func TestHandlerSeesCancellation(t *testing.T) {
	started := make(chan struct{})
	var ctxErr error
	tool := quiver.Func("wait", "Waits for cancellation.", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		ctxErr = ctx.Err()
		return "", ctx.Err()
	})
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Grace: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	r := dispatchCall(t, ctx, d, quiver.Call{Name: "wait"})
	wantError(t, r, quiver.CodeCancelled, "cancelled")
	if !errors.Is(ctxErr, context.Canceled) {
		t.Errorf("handler's ctx.Err() = %v, want context.Canceled", ctxErr)
	}
}

type resolverFunc func(ctx context.Context, s quiver.Scope, v quiver.Variable) (string, bool, error)

func (f resolverFunc) ResolveVariable(ctx context.Context, s quiver.Scope, v quiver.Variable) (string, bool, error) {
	return f(ctx, s, v)
}

func TestDefinitionErrors(t *testing.T) {
	type badMin struct {
		N int `json:"n" minimum:"abc"`
	}
	type badEnum struct {
		N int `json:"n" enum:"1,x"`
	}
	type badDefault struct {
		N int `json:"n" maximum:"5" default:"9"`
	}
	noop := func(context.Context, struct{ A string }) (string, error) { return "", nil }
	tests := []struct {
		name string
		make func() error
		want string
	}{
		{"empty name", func() error { _, err := quiver.NewFunc("", "Does.", noop); return err }, "name is empty"},
		{"empty description", func() error { _, err := quiver.NewFunc("x", "", noop); return err }, "description is empty"},
		{"nil function", func() error {
			_, err := quiver.NewFunc[struct{}, string]("x", "Does.", nil)
			return err
		}, "nil function"},
		{"bad minimum tag", func() error {
			_, err := quiver.NewFunc("x", "Does.", func(context.Context, badMin) (string, error) { return "", nil })
			return err
		}, "minimum"},
		{"bad enum tag", func() error {
			_, err := quiver.NewFunc("x", "Does.", func(context.Context, badEnum) (string, error) { return "", nil })
			return err
		}, "enum"},
		{"default violates bound", func() error {
			_, err := quiver.NewFunc("x", "Does.", func(context.Context, badDefault) (string, error) { return "", nil })
			return err
		}, "default"},
		{"non-struct arguments", func() error {
			_, err := quiver.NewFunc("x", "Does.", func(context.Context, int) (string, error) { return "", nil })
			return err
		}, "arguments must be a struct"},
		{"non-object input schema", func() error {
			_, err := quiver.NewFunc("x", "Does.", noop, quiver.WithInputSchema(&schema.Schema{Type: "string"}))
			return err
		}, `root must have type "object"`},
		{"uncompilable input schema", func() error {
			_, err := quiver.NewFunc("x", "Does.", noop, quiver.WithInputSchema(&schema.Schema{Type: "object", Pattern: "("}))
			return err
		}, "input schema"},
		{"example args invalid", func() error {
			_, err := quiver.NewFunc("x", "Does.", noop, quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{"A":5}`)}))
			return err
		}, "example 0: args"},
		{"example args not JSON", func() error {
			_, err := quiver.NewFunc("x", "Does.", noop, quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{`)}))
			return err
		}, "example 0"},
		{"example result violates output", func() error {
			_, err := quiver.NewFunc("x", "Does.", noop,
				quiver.WithOutputSchema(mustSchema(t, `{"type":"object","required":["n"]}`)),
				quiver.WithExamples(quiver.Example{Args: json.RawMessage(`{"A":"a"}`), Result: json.RawMessage(`{}`)}))
			return err
		}, "example 0: result"},
		{"negative timeout", func() error {
			_, err := quiver.NewFunc("x", "Does.", noop, quiver.WithTimeout(-time.Second))
			return err
		}, "negative timeout"},
		{"bad target", func() error {
			_, err := quiver.NewFunc("x", "Does.", noop, quiver.WithTarget("browser"))
			return err
		}, "neither server nor client"},
		{"variable without name", func() error {
			_, err := quiver.NewFunc("x", "Does.", noop, quiver.WithVariables(quiver.Variable{}))
			return err
		}, "no name"},
		{"variable declared twice", func() error {
			_, err := quiver.NewFunc("x", "Does.", noop, quiver.WithVariables(quiver.Variable{Name: "a"}, quiver.Variable{Name: "a"}))
			return err
		}, "declared twice"},
		{"variable of unknown type", func() error {
			_, err := quiver.NewFunc("x", "Does.", noop, quiver.WithVariables(quiver.Variable{Name: "a", Type: "number"}))
			return err
		}, "neither text nor secret"},
		{"NewTool empty name", func() error { _, err := quiver.NewTool(quiver.Spec{Description: "d"}, nil); return err }, "name is empty"},
		{"NewTool empty description", func() error { _, err := quiver.NewTool(quiver.Spec{Name: "n"}, nil); return err }, "description is empty"},
		{"NewTool array input", func() error {
			_, err := quiver.NewTool(quiver.Spec{Name: "n", Description: "d", InputSchema: &schema.Schema{Type: "array"}}, nil)
			return err
		}, `root must have type "object"`},
		{"As without name", func() error { _, err := quiver.Func("x", "Does.", noop).As("", "d"); return err }, "name is empty"},
		{"As without description", func() error { _, err := quiver.Func("x", "Does.", noop).As("y", ""); return err }, "description is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.make()
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestFuncPanicsOnDefinitionError(t *testing.T) {
	defer func() {
		p := recover()
		if p == nil {
			t.Fatal("Func did not panic on an empty description")
		}
		if err, ok := p.(error); !ok || !strings.Contains(err.Error(), "description is empty") {
			t.Errorf("panic value %v", p)
		}
	}()
	quiver.Func("x", "", func(context.Context, struct{}) (string, error) { return "", nil })
}

func TestSpecAccessors(t *testing.T) {
	v := quiver.Variable{Name: "token", Type: quiver.VarSecret}
	ex := quiver.Example{Args: json.RawMessage(`{"A":"a"}`)}
	tool := quiver.Func("acc", "Accessors.", func(context.Context, struct{ A string }) (string, error) { return "", nil },
		quiver.WithVariables(v), quiver.WithExamples(ex), quiver.WithTimeout(time.Second), quiver.WithConfirmation(),
		quiver.WithTarget(quiver.TargetClient))
	s := tool.Spec()
	if tool.Name() != "acc" || tool.Description() != "Accessors." || tool.SchemaOnly() {
		t.Errorf("name %q desc %q schemaOnly %v", tool.Name(), tool.Description(), tool.SchemaOnly())
	}
	if s.Timeout != time.Second || !s.RequiresConfirmation || s.Target != quiver.TargetClient || len(s.Examples) != 1 || len(s.Variables) != 1 {
		t.Errorf("spec %+v", s)
	}
	// The copy is the caller's: changing it does not change the tool.
	s.Variables[0].Name = "changed"
	s.Examples[0].Args = nil
	if again := tool.Spec(); again.Variables[0].Name != "token" || again.Examples[0].Args == nil {
		t.Error("Spec() shares its slices with the tool")
	}
	// The default target is the server.
	if tgt := quiver.Func("srv", "S.", func(context.Context, struct{}) (string, error) { return "", nil }).Spec().Target; tgt != quiver.TargetServer {
		t.Errorf("default target %q", tgt)
	}
}

func TestMetaFieldsNeverReachHandler(t *testing.T) {
	tests := []struct {
		name      string
		args      string
		wantArgs  string
		reasoning string
		output    string
		meta      map[string]string
	}{
		{"none", `{"q":"x"}`, `{"q":"x"}`, "", "", nil},
		{"reasoning", `{"q":"x","_reasoningForCall":"need data"}`, `{"q":"x"}`, "need data", "", nil},
		{"non-string reasoning", `{"q":"x","_reasoningForCall":{"why":1}}`, `{"q":"x"}`, `{"why":1}`, "", nil},
		{"output", `{"q":"x","_output":{"answer":42}}`, `{"q":"x"}`, "", `{"answer":42}`, nil},
		// Meta-fields Quiver does not act on are kept in Meta for middleware and hooks; the
		// stateful ones (_outputPath, ...) must be enabled (meta_test.go).
		{"other meta-fields", `{"q":"x","_trace":"/a/b","_tenant":"i1","_hint":{"request":"r"}}`, `{"q":"x"}`, "", "",
			map[string]string{"_trace": `"/a/b"`, "_tenant": `"i1"`, "_hint": `{"request":"r"}`}},
		// _activity is refused (activity_refusal_test.go); _tool is the call's name, dropped.
		{"tool dropped", `{"q":"x","_tool":"other"}`, `{"q":"x"}`, "", "", nil},
		{"all", `{"_reasoningForCall":"r","q":"y","_output":"o","_trace":"p"}`, `{"q":"y"}`, "r", `"o"`,
			map[string]string{"_trace": `"p"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var handlerArgs json.RawMessage
			var call quiver.Call
			tool := rawTool(t, "meta", `{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":false}`,
				func(ctx context.Context, a json.RawMessage) (any, error) {
					handlerArgs = append(json.RawMessage(nil), a...)
					call = *quiver.CallFrom(ctx)
					return "ok", nil
				})
			var typed map[string]any
			typedTool := quiver.Func("typed_meta", "Typed.", func(_ context.Context, a struct {
				Q string `json:"q"`
			}) (map[string]any, error) {
				typed = map[string]any{"q": a.Q}
				return typed, nil
			})
			d := &quiver.Dispatcher{Registry: newRegistry(t, tool, typedTool)}
			r := dispatch(t, d, "meta", tt.args)
			wantSuccess(t, r)
			if !jsonEqual(t, handlerArgs, []byte(tt.wantArgs)) {
				t.Errorf("handler args %s, want %s", handlerArgs, tt.wantArgs)
			}
			if strings.Contains(string(handlerArgs), `"_`) {
				t.Errorf("a meta-field reached the handler: %s", handlerArgs)
			}
			if call.Reasoning != tt.reasoning {
				t.Errorf("Reasoning = %q, want %q", call.Reasoning, tt.reasoning)
			}
			if tt.output == "" && len(call.Output) != 0 || tt.output != "" && !jsonEqual(t, call.Output, []byte(tt.output)) {
				t.Errorf("Output = %s, want %s", call.Output, tt.output)
			}
			if len(call.Meta) != len(tt.meta) {
				t.Errorf("Meta = %v, want %v", call.Meta, tt.meta)
			}
			for k, v := range tt.meta {
				if !jsonEqual(t, call.Meta[k], []byte(v)) {
					t.Errorf("Meta[%s] = %s, want %s", k, call.Meta[k], v)
				}
			}
			// A typed tool with additionalProperties false accepts the same call.
			wantSuccess(t, dispatch(t, d, "typed_meta", tt.args))
		})
	}
}

// Arguments the schema accepts but the Go type cannot hold are the caller's mistake, reported
// as invalid arguments, not as a failure of the tool.
func TestFuncArgumentsThatDoNotFitGoType(t *testing.T) {
	ran := false
	tool := quiver.Func("count", "Counts.", func(_ context.Context, a struct {
		N int `json:"n"`
	}) (int, error) {
		ran = true
		return a.N, nil
	})
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool)}
	tests := []string{`{"n":99999999999999999999}`, `{"n":-99999999999999999999}`}
	for _, args := range tests {
		t.Run(args, func(t *testing.T) {
			wantError(t, dispatch(t, d, "count", args), quiver.CodeInvalidArguments, "do not fit the tool's Go type")
			if ran {
				t.Error("handler ran")
			}
		})
	}
	wantSuccess(t, dispatch(t, d, "count", `{"n":9223372036854775807}`))
}
