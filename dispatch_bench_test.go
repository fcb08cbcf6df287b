package quiver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/quiverhq/quiver"
)

// The benchmark tool of issue 2: two fields, city and days (an integer from 1 to 14).
type forecastArgs struct {
	City string `json:"city" description:"city name" minLength:"1"`
	Days int    `json:"days" description:"days ahead" minimum:"1" maximum:"14"`
}

type forecast struct {
	City    string `json:"city"`
	Days    int    `json:"days"`
	Summary string `json:"summary"`
}

func getForecast(_ context.Context, a forecastArgs) (forecast, error) {
	return forecast{City: a.City, Days: a.Days, Summary: "sunny"}, nil
}

var benchArgs = json.RawMessage(`{"city":"Paris","days":3}`)

// BenchmarkDispatch measures the whole pipeline for one call: policy, lookup, decode,
// validate, execute, normalise.
func BenchmarkDispatch(b *testing.B) {
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("get_forecast", "Weather forecast for a city.", getForecast))
	d := &quiver.Dispatcher{Registry: reg}
	ctx := context.Background()
	call := quiver.Call{Name: "get_forecast", Args: benchArgs}
	b.ReportAllocs()
	for b.Loop() {
		r, err := d.Dispatch(ctx, call)
		if err != nil || r.IsError() {
			b.Fatal(r.Error, err)
		}
	}
}

// BenchmarkDispatchCancellable is BenchmarkDispatch with a context that can be cancelled, as
// in an agent run: the handler then runs on its own goroutine so that it can be abandoned.
func BenchmarkDispatchCancellable(b *testing.B) {
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("get_forecast", "Weather forecast for a city.", getForecast))
	d := &quiver.Dispatcher{Registry: reg}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	call := quiver.Call{Name: "get_forecast", Args: benchArgs}
	b.ReportAllocs()
	for b.Loop() {
		r, err := d.Dispatch(ctx, call)
		if err != nil || r.IsError() {
			b.Fatal(r.Error, err)
		}
	}
}

// BenchmarkBaseline is the floor: plain encoding/json decode, call, encode, no validation.
func BenchmarkBaseline(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var a forecastArgs
		if err := json.Unmarshal(benchArgs, &a); err != nil {
			b.Fatal(err)
		}
		out, err := getForecast(ctx, a)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(out); err != nil {
			b.Fatal(err)
		}
	}
}
