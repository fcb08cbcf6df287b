package quiver_test

import (
	"context"
	"encoding/json"
	"errors"
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
