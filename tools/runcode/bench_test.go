package runcode

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
)

// BenchmarkRunCode is run_code through the dispatcher: decoding and validation, the sandbox
// run, and the result with its structured output.
func BenchmarkRunCode(b *testing.B) {
	reg := &quiver.Registry{}
	if err := reg.Register(Tool); err != nil {
		b.Fatal(err)
	}
	d := &quiver.Dispatcher{Registry: reg}
	for _, tc := range []struct{ name, args string }{
		{"trivial", `{"code":"export default () => 1"}`},
		{"with-args-and-logs", `{"code":"export default (a) => { console.log('n', a.n); return a.n * 2 }","args":{"n":21}}`},
		{"typescript", `{"code":"export default (a: {n: number}): number => a.n * 2","language":"ts","args":{"n":21}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			call := quiver.Call{Name: Name, Args: json.RawMessage(tc.args)}
			var l []time.Duration
			for b.Loop() {
				t := time.Now()
				r, err := d.Dispatch(context.Background(), call)
				l = append(l, time.Since(t))
				if err != nil || r.IsError() {
					b.Fatalf("%v %+v", err, r)
				}
			}
			slices.Sort(l)
			b.ReportMetric(float64(l[len(l)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(l[len(l)*99/100].Microseconds()), "p99-µs")
		})
	}
}
