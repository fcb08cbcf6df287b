package quiver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/quiverhq/quiver"
)

const traceSecret = "sk-live-5f3a9c2e71d04b88"

type greetIn struct {
	Name string `json:"name"`
}

// tracedDispatcher is a dispatcher whose spans go to the returned recorder: a tool that
// greets, one that fails, one that returns its secret, and one that calls greet itself.
func tracedDispatcher(t *testing.T, content bool) (*quiver.Dispatcher, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	d := &quiver.Dispatcher{TracerProvider: tp, TraceContent: content, Resolver: quiver.Vars{"token": traceSecret}}
	d.Registry = newRegistry(t,
		quiver.Func("greet", "Greets.", func(_ context.Context, in greetIn) (string, error) { return "Hello, " + in.Name, nil }),
		quiver.Func("fail", "Fails.", func(context.Context, struct{}) (string, error) { return "", context.DeadlineExceeded }),
		quiver.Func("leak", "Returns its secret.", func(ctx context.Context, in greetIn) (string, error) {
			v, _ := quiver.Var(ctx, "token")
			return in.Name + " " + v, nil
		}, quiver.WithVariables(quiver.Variable{Name: "token", Type: quiver.VarSecret})),
		quiver.Func("outer", "Calls greet.", func(ctx context.Context, in greetIn) (string, error) {
			r, err := d.Dispatch(ctx, quiver.Call{Name: "greet", Args: json.RawMessage(`{"name":"inner"}`)})
			if err != nil {
				return "", err
			}
			return r.Text, nil
		}))
	return d, rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

// Every call makes one span named and described as the GenAI conventions say, with an error
// status for an error result; arguments and results stay out of it by default.
func TestCallSpans(t *testing.T) {
	d, rec := tracedDispatcher(t, false)
	ctx := context.Background()
	if _, err := d.Dispatch(ctx, quiver.Call{ID: "call_1", Name: "greet", Args: json.RawMessage(`{"name":"Ada"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dispatch(ctx, quiver.Call{ID: "call_2", Name: "fail"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dispatch(ctx, quiver.Call{Name: "nope"}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	tests := []struct {
		name, want string
		attrs      map[attribute.Key]string
		err        bool
	}{
		{"greet", "execute_tool greet", map[attribute.Key]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "greet",
			"gen_ai.tool.call.id": "call_1", "gen_ai.tool.type": "function"}, false},
		{"fail", "execute_tool fail", map[attribute.Key]string{"gen_ai.tool.name": "fail", "gen_ai.tool.call.id": "call_2",
			"error.type": string(quiver.CodeTimeout)}, true},
		{"unknown tool", "execute_tool nope", map[attribute.Key]string{"gen_ai.tool.name": "nope", "error.type": string(quiver.CodeUnknownTool)}, true},
	}
	for i, tt := range tests {
		s := spans[i]
		got := attrs(s)
		if s.Name() != tt.want {
			t.Errorf("%s: span %q, want %q", tt.name, s.Name(), tt.want)
		}
		for k, v := range tt.attrs {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q (all: %v)", tt.name, k, got[k], v, got)
			}
		}
		if _, ok := got["gen_ai.tool.call.arguments"]; ok {
			t.Errorf("%s: arguments recorded without TraceContent", tt.name)
		}
		if _, ok := got["gen_ai.tool.call.result"]; ok {
			t.Errorf("%s: result recorded without TraceContent", tt.name)
		}
		if (s.Status().Code == codes.Error) != tt.err {
			t.Errorf("%s: status %v, want error %v", tt.name, s.Status(), tt.err)
		}
	}
}

// With TraceContent, arguments and results are on the span with secrets masked, as in every
// other place a result goes.
func TestCallSpansRecordContentMasked(t *testing.T) {
	d, rec := tracedDispatcher(t, true)
	if _, err := d.Dispatch(context.Background(), quiver.Call{Name: "leak", Args: json.RawMessage(`{"name":"` + traceSecret + `"}`)}); err != nil {
		t.Fatal(err)
	}
	got := attrs(rec.Ended()[0])
	args, result := got["gen_ai.tool.call.arguments"], got["gen_ai.tool.call.result"]
	if args == "" || result == "" || !strings.Contains(result, "[REDACTED]") {
		t.Fatalf("arguments %q, result %q: want both, masked", args, result)
	}
	for k, v := range got {
		if strings.Contains(v, traceSecret) {
			t.Errorf("%s holds the secret: %s", k, v)
		}
	}
}

// A call made from inside a tool is a child of that tool's span.
func TestCallSpansNest(t *testing.T) {
	d, rec := tracedDispatcher(t, false)
	if _, err := d.Dispatch(context.Background(), quiver.Call{Name: "outer", Args: json.RawMessage(`{"name":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 2 || spans[0].Name() != "execute_tool greet" || spans[1].Name() != "execute_tool outer" {
		t.Fatalf("spans %v", spans)
	}
	if spans[0].Parent().SpanID() != spans[1].SpanContext().SpanID() {
		t.Errorf("the inner call's span is not a child of the outer one")
	}
}

// A dispatcher with the API's no-op provider, or none set, makes no spans and runs as before.
func TestCallSpansOff(t *testing.T) {
	for _, tp := range []*quiver.Dispatcher{{}, {TracerProvider: noop.NewTracerProvider()}} {
		tp.Registry = newRegistry(t, quiver.Func("greet", "Greets.", func(_ context.Context, in greetIn) (string, error) { return "Hello, " + in.Name, nil }))
		r, err := tp.Dispatch(context.Background(), quiver.Call{Name: "greet", Args: json.RawMessage(`{"name":"Ada"}`)})
		if err != nil || r.Text != "Hello, Ada" {
			t.Fatalf("%v %+v", err, r)
		}
	}
}
