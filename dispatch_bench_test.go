package quiver_test

import (
	"context"
	"encoding/json"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
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
	runDispatch(b, context.Background(), reg, benchArgs)
}

// BenchmarkDispatchCancellable is BenchmarkDispatch with a context that can be cancelled, as
// in an agent run: the handler then runs on its own goroutine so that it can be abandoned.
func BenchmarkDispatchCancellable(b *testing.B) {
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("get_forecast", "Weather forecast for a city.", getForecast))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDispatch(b, ctx, reg, benchArgs)
}

// runDispatch dispatches get_forecast with args once per iteration and fails on an error
// result, so that no benchmark measures an error path.
func runDispatch(b *testing.B, ctx context.Context, reg *quiver.Registry, args json.RawMessage) {
	d := &quiver.Dispatcher{Registry: reg}
	call := quiver.Call{Name: "get_forecast", Args: args}
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

type forecastFromArgs struct {
	City string `json:"city" description:"city name" minLength:"1"`
	Days int    `json:"days" description:"days ahead" minimum:"1" maximum:"14"`
	From string `json:"from" description:"first day" format:"date"`
}

// BenchmarkDispatchWithFormat adds a date field: formats are checked on the fast path too.
func BenchmarkDispatchWithFormat(b *testing.B) {
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("get_forecast", "Weather forecast for a city.",
		func(_ context.Context, a forecastFromArgs) (forecast, error) {
			return forecast{City: a.City, Days: a.Days, Summary: "sunny"}, nil
		}))
	runDispatch(b, context.Background(), reg, json.RawMessage(`{"city":"Paris","days":3,"from":"2026-11-22"}`))
}

// BenchmarkDispatchFullValidation uses a schema the fast path does not cover (a union), so
// every call is decoded into a value tree and checked by the full JSON Schema validator.
func BenchmarkDispatchFullValidation(b *testing.B) {
	var in schema.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{
		"city":{"type":"string","minLength":1},
		"days":{"anyOf":[{"type":"integer","minimum":1,"maximum":14},{"type":"string","enum":["week"]}]}},
		"required":["city","days"],"additionalProperties":false}`), &in); err != nil {
		b.Fatal(err)
	}
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("get_forecast", "Weather forecast for a city.",
		func(_ context.Context, a struct {
			City string `json:"city"`
			Days any    `json:"days"`
		}) (forecast, error) {
			return forecast{City: a.City, Summary: "sunny"}, nil
		}, quiver.WithInputSchema(&in)))
	runDispatch(b, context.Background(), reg, benchArgs)
}

// BenchmarkDispatchObserved is BenchmarkDispatch with spans and metrics switched on (the SDK's
// providers, spans to a recorder, metrics to a reader): what observability costs a call when
// it is wanted. BenchmarkDispatch is the cost when it is not.
func BenchmarkDispatchObserved(b *testing.B) {
	reg := &quiver.Registry{}
	reg.Register(quiver.Func("get_forecast", "Weather forecast for a city.", getForecast))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	d := &quiver.Dispatcher{Registry: reg, TracerProvider: tp, MeterProvider: mp}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := d.Dispatch(ctx, quiver.Call{Name: "get_forecast", Args: benchArgs})
		if err != nil || r.IsError() {
			b.Fatal(err, r)
		}
	}
}
