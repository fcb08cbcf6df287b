package quiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/internal/schemastat"
	"github.com/quiverhq/quiver/schema"
)

type onceArgs struct {
	City  string   `json:"city" minLength:"1" pattern:"^[A-Z]"`
	Days  int      `json:"days,omitempty" minimum:"1" maximum:"14" default:"3"`
	Units string   `json:"units,omitempty" enum:"metric,imperial" default:"metric"`
	When  string   `json:"when,omitempty" format:"date"`
	Tags  []string `json:"tags,omitempty" maxItems:"4"`
	Where *struct {
		Lat float64 `json:"lat" minimum:"-90" maximum:"90"`
		Lon float64 `json:"lon" minimum:"-180" maximum:"180"`
	} `json:"where,omitempty"`
}

type onceOut struct {
	Summary string `json:"summary" minLength:"1"`
	Days    int    `json:"days" minimum:"1"`
}

// S5: every schema is compiled when its tool is made, never by a call. Calls of every kind
// (valid, with defaults to apply, invalid, not JSON, a latent tool's _output, a structured
// result checked against the output schema, a union the fast path leaves to the full
// validator) run through the dispatcher many times, and the count of compilations stays what
// it was once the tools were registered.
func TestCallsCompileNoSchema(t *testing.T) {
	reg := &quiver.Registry{}
	forecast := quiver.Func("forecast", "Forecasts the weather.", func(_ context.Context, in onceArgs) (onceOut, error) {
		if in.City == "Nowhere" {
			return onceOut{}, nil // fails the output schema (S4)
		}
		return onceOut{Summary: "sunny in " + in.City, Days: in.Days}, nil
	})
	latent, err := quiver.ParseSchemaTool([]byte(`{"type":"object","description":"Rates a text.",
		"properties":{"_tool":{"const":"rate"},"text":{"type":"string","maxLength":100},
		"_output":{"type":"object","required":["score"],"properties":{"score":{"type":"integer","minimum":0,"maximum":5}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	union, err := quiver.NewTool(quiver.Spec{Name: "pick", Description: "Picks a value.",
		InputSchema: &schema.Schema{Type: "object", Required: []string{"v"}, Properties: map[string]*schema.Schema{
			"v": {AnyOf: []*schema.Schema{{Type: "string", Format: "email"}, {Type: "integer", Minimum: new(float64)}}}}}},
		func(_ context.Context, args json.RawMessage) (any, error) { return string(args), nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(forecast, latent, union); err != nil {
		t.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	registered := schemastat.Compilations.Load()

	cases := []struct {
		name, tool, args string
		output           string // a latent call's _output
		wantError        bool
	}{
		{name: "valid", tool: "forecast", args: `{"city":"Paris","days":5,"units":"imperial","when":"2025-06-01"}`},
		{name: "defaults applied", tool: "forecast", args: `{"city":"Paris"}`},
		{name: "nested", tool: "forecast", args: `{"city":"Oslo","where":{"lat":59.9,"lon":10.7},"tags":["a"]}`},
		{name: "invalid", tool: "forecast", args: `{"city":"paris","days":30}`, wantError: true},
		{name: "bad format", tool: "forecast", args: `{"city":"Paris","when":"tomorrow"}`, wantError: true},
		{name: "not JSON", tool: "forecast", args: `{"city":`, wantError: true},
		{name: "output schema refuses", tool: "forecast", args: `{"city":"Nowhere"}`, wantError: true},
		{name: "latent", tool: "rate", args: `{"text":"fine"}`, output: `{"score":4}`},
		{name: "latent output refused", tool: "rate", args: `{"text":"fine"}`, output: `{"score":9}`, wantError: true},
		{name: "union string", tool: "pick", args: `{"v":"a@example.com"}`},
		{name: "union integer", tool: "pick", args: `{"v":7}`},
		{name: "union refused", tool: "pick", args: `{"v":"not an email"}`, wantError: true},
	}
	const rounds = 50
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range rounds {
				r, err := d.Dispatch(context.Background(), quiver.Call{ID: c.name, Name: c.tool, Args: json.RawMessage(c.args), Output: json.RawMessage(c.output)})
				if err != nil {
					t.Fatal(err)
				}
				if r.IsError() != c.wantError {
					t.Fatalf("round %d: result %+v, want error %v", i, r, c.wantError)
				}
			}
			if n := schemastat.Compilations.Load() - registered; n != 0 {
				t.Fatalf("%d calls compiled %d schemas; schemas are compiled when a tool is made (S5)", rounds, n)
			}
		})
	}
	// The counter does count: making one more tool compiles its schemas.
	if _, err := quiver.NewFunc("again", "Forecasts again.", func(_ context.Context, in onceArgs) (onceOut, error) {
		return onceOut{}, errors.New("unused")
	}); err != nil {
		t.Fatal(err)
	}
	if schemastat.Compilations.Load() == registered {
		t.Fatal("making a tool compiled nothing: the counter does not see compilations, and this test proves nothing")
	}
}

// A tool made with WithSchemasCompiledOnUse compiles its schemas when it is made, to check
// them, and keeps none of it: its first use compiles each once more, and nothing compiles
// after, however many calls come and from however many goroutines at once. A schema that
// does not compile is refused when the tool is made, as without the option.
func TestSchemasCompiledOnUse(t *testing.T) {
	ctx := quiver.WithSchemasCompiledOnUse(context.Background())
	in := &schema.Schema{Type: "object", Required: []string{"city"}, Properties: map[string]*schema.Schema{
		"city": {Type: "string", MinLength: new(int)}, "days": {Type: "integer", Default: json.RawMessage("3")}}}
	out := &schema.Schema{Type: "object", Required: []string{"summary"}, Properties: map[string]*schema.Schema{
		"summary": {Type: "string"}}}
	fn := func(_ context.Context, args json.RawMessage) (any, error) {
		if string(args) == `{"city":"Nowhere","days":3}` {
			return map[string]any{"summary": 7}, nil // fails the output schema
		}
		return map[string]any{"summary": "sunny, " + string(args)}, nil
	}
	cases := []struct {
		name           string
		spec           quiver.Spec
		atMake, atCall int64 // compilations when made, and at the first call
		call           string
		wantError      bool
	}{
		{name: "input and output", spec: quiver.Spec{InputSchema: in, OutputSchema: out}, atMake: 2, atCall: 2, call: `{"city":"Oslo"}`},
		{name: "output refuses", spec: quiver.Spec{InputSchema: in, OutputSchema: out}, atMake: 2, atCall: 2, call: `{"city":"Nowhere"}`, wantError: true},
		{name: "input refuses", spec: quiver.Spec{InputSchema: in, OutputSchema: out}, atMake: 2, atCall: 1, call: `{"days":2}`, wantError: true},
		{name: "input only", spec: quiver.Spec{InputSchema: in}, atMake: 1, atCall: 1, call: `{"city":"Oslo"}`},
		{name: "advisory output, left to its first use", spec: quiver.Spec{InputSchema: in, OutputSchema: out, OutputAdvisory: true}, atMake: 1, atCall: 2, call: `{"city":"Oslo"}`},
		{name: "examples checked when made", spec: quiver.Spec{InputSchema: in, OutputSchema: out, OutputAdvisory: true,
			Examples: []quiver.Example{{Args: json.RawMessage(`{"city":"Rome"}`), Result: json.RawMessage(`{"summary":"hot"}`)}}}, atMake: 2, atCall: 2, call: `{"city":"Oslo"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Name, c.spec.Description = "forecast", "Forecasts the weather."
			before := schemastat.Compilations.Load()
			tool, err := quiver.NewToolContext(ctx, c.spec, fn)
			if err != nil {
				t.Fatal(err)
			}
			made := schemastat.Compilations.Load()
			if made-before != c.atMake {
				t.Fatalf("making the tool compiled %d schemas, want %d (each checked)", made-before, c.atMake)
			}
			d := &quiver.Dispatcher{Registry: &quiver.Registry{}}
			if err := d.Registry.Register(tool); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range 8 { // first calls at once: each schema compiles once all the same
				wg.Go(func() {
					for range 20 {
						r, err := d.Dispatch(context.Background(), quiver.Call{Name: "forecast", Args: json.RawMessage(c.call)})
						if err != nil || r.IsError() != c.wantError {
							t.Errorf("result %+v, %v; want an error: %v", r, err, c.wantError)
							return
						}
					}
				})
			}
			wg.Wait()
			if n := schemastat.Compilations.Load() - made; n != c.atCall {
				t.Fatalf("160 calls compiled %d schemas, want %d: each schema once, at its first use", n, c.atCall)
			}
			first := tool.CompiledInput()
			if first == nil || tool.CompiledInput() != first {
				t.Fatal("CompiledInput is not the one compiled schema, kept")
			}
			if n := schemastat.Compilations.Load() - made; n != c.atCall {
				t.Fatalf("CompiledInput compiled again (%d in all)", n)
			}
		})
	}
	t.Run("a schema over the bounds is refused when made", func(t *testing.T) {
		props := make(map[string]*schema.Schema, schema.MaxSchemaNodes+1)
		for i := range schema.MaxSchemaNodes + 1 {
			props[fmt.Sprintf("p%d", i)] = &schema.Schema{Type: "string"}
		}
		huge := quiver.Spec{Name: "huge", Description: "Is refused.", InputSchema: &schema.Schema{Type: "object", Properties: props}}
		_, err := quiver.NewToolContext(ctx, huge, fn)
		if err == nil || !strings.Contains(err.Error(), "10000") {
			t.Fatalf("a schema of %d nodes made with the option: %v; want it refused, naming the bound", schema.MaxSchemaNodes+2, err)
		}
	})
	t.Run("a bad schema is refused when made", func(t *testing.T) {
		bad := quiver.Spec{Name: "bad", Description: "Is refused.", InputSchema: &schema.Schema{Type: "object",
			Properties: map[string]*schema.Schema{"when": {Type: "string", Pattern: "(unclosed"}}}}
		_, lazyErr := quiver.NewToolContext(ctx, bad, fn)
		_, eagerErr := quiver.NewTool(bad, fn)
		if lazyErr == nil || eagerErr == nil || lazyErr.Error() != eagerErr.Error() {
			t.Fatalf("made with the option: %v; without: %v; want the same refusal", lazyErr, eagerErr)
		}
	})
}
