package quiver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

const benchSecret = "sk-live-4f9a2b7c1d8e"

// BenchmarkDispatchSecret is BenchmarkDispatch for a tool with a secret variable: the secret
// is resolved, and the result and the arguments are searched for every form of it.
func BenchmarkDispatchSecret(b *testing.B) {
	for _, bc := range []struct {
		name    string
		summary string
	}{
		{"absent", "sunny"}, // the common case: nothing to mask
		{"present", "sunny; fetched with " + benchSecret}, // the secret is masked in the value
	} {
		b.Run(bc.name, func(b *testing.B) {
			reg := &quiver.Registry{}
			reg.Register(quiver.Func("get_forecast", "Weather forecast for a city.",
				func(ctx context.Context, a forecastArgs) (forecast, error) {
					if k, _ := quiver.Var(ctx, "api_key"); k != benchSecret {
						return forecast{}, quiver.Fail(quiver.CodeToolError, "no key")
					}
					return forecast{City: a.City, Days: a.Days, Summary: bc.summary}, nil
				}, quiver.WithVariables(quiver.Variable{Name: "api_key", Type: quiver.VarSecret, Required: true})))
			d := &quiver.Dispatcher{Registry: reg, Resolver: quiver.Vars{"api_key": benchSecret}}
			call := quiver.Call{Name: "get_forecast", Args: benchArgs}
			ctx := context.Background()
			if r, _ := d.Dispatch(ctx, call); strings.Contains(string(r.Value), "[REDACTED]") != (bc.name == "present") {
				b.Fatalf("value %s", r.Value)
			}
			b.ReportAllocs()
			for b.Loop() {
				r, err := d.Dispatch(ctx, call)
				if err != nil || r.IsError() {
					b.Fatal(r.Error, err)
				}
			}
		})
	}
}
