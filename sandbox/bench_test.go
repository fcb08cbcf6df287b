package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// latencies records the time of each operation and reports the median and the 99th
// percentile beside ns/op, which a few slow runs (a GC) would otherwise hide.
type latencies []time.Duration

func (l *latencies) time(f func()) {
	t := time.Now()
	f()
	*l = append(*l, time.Since(t))
}

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(l[len(l)*99/100].Microseconds()), "p99-µs")
}

const (
	trivialScript = `export default () => 1`
	sumScript     = `export default () => { let s = 0; for (let i = 1; i <= 1e6; i++) s += i; return JSON.stringify({ sum: s, items: [1, 2, 3], nested: { ok: true } }) }`
)

func benchRun(b *testing.B, src string) { benchRunIn(b, Run, src) }

// benchWorkers is benchRun in worker processes: kept between runs (the pool's default), or a
// new one per run (cold).
func benchWorkers(b *testing.B, cold bool, src string) {
	cfg := WorkerConfig{}
	if cold {
		cfg.MaxIdle = -1
	}
	w, err := NewWorkers(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	benchRunIn(b, w.Run, src)
}

func benchRunIn(b *testing.B, run func(context.Context, Options) (*Result, error), src string) {
	var l latencies
	for b.Loop() {
		l.time(func() {
			r, err := run(context.Background(), Options{Source: src})
			if err != nil || r.Status != StatusSuccess {
				b.Fatalf("%v %+v", err, r)
			}
		})
	}
	l.report(b)
}

// nodeScript is the same work as a script for node -e: the process sandbox many runtimes use.
func benchNode(b *testing.B, body string) {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("node is not on PATH: no process sandbox to compare with")
	}
	var l latencies
	for b.Loop() {
		l.time(func() {
			out, err := exec.Command(node, "-e", body).Output()
			if err != nil || len(out) == 0 {
				b.Fatalf("node: %v %q", err, out)
			}
		})
	}
	l.report(b)
}

// guardedCallsScript makes 4e4 calls of guarded builtins on short values.
const guardedCallsScript = `export default () => {
	const s = "key=value; other=thing", a = ["x", "y", "z"];
	let n = 0;
	for (let i = 0; i < 1e4; i++) n += s.indexOf("other") + s.split(";").length + s.replace("key", "k").length + a.indexOf("z");
	return n }`

// BenchmarkRun is a fresh interpreter per run, side by side with a fresh node process per run.
func BenchmarkRun(b *testing.B) {
	b.Run("sandbox/trivial", func(b *testing.B) { benchRun(b, trivialScript) })
	b.Run("worker/trivial", func(b *testing.B) { benchWorkers(b, false, trivialScript) })
	b.Run("worker-cold/trivial", func(b *testing.B) { benchWorkers(b, true, trivialScript) })
	b.Run("node-process/trivial", func(b *testing.B) { benchNode(b, `console.log(JSON.stringify(1))`) })
	b.Run("sandbox/sum-1e6-stringify", func(b *testing.B) { benchRun(b, sumScript) })
	b.Run("worker/sum-1e6-stringify", func(b *testing.B) { benchWorkers(b, false, sumScript) })
	b.Run("node-process/sum-1e6-stringify", func(b *testing.B) {
		benchNode(b, `let s = 0; for (let i = 1; i <= 1e6; i++) s += i; console.log(JSON.stringify({ sum: s, items: [1, 2, 3], nested: { ok: true } }))`)
	})
	// The string searches and array searches the prelude guards (see prelude.js), called on
	// short values as most code does: what each guarded call costs.
	b.Run("sandbox/guarded-calls-4e4", func(b *testing.B) { benchRun(b, guardedCallsScript) })
	b.Run("sandbox/typescript", func(b *testing.B) {
		var l latencies
		for b.Loop() {
			l.time(func() {
				r, err := Run(context.Background(), Options{Language: TypeScript, Source: `export default (a: number): number => a + 1`, Execute: Execute{Args: []any{1}}})
				if err != nil || r.Status != StatusSuccess {
					b.Fatalf("%v %+v", err, r)
				}
			})
		}
		l.report(b)
	})
}

// BenchmarkParallelRuns is throughput with every core busy.
func BenchmarkParallelRuns(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r, err := Run(context.Background(), Options{Source: trivialScript}); err != nil || r.Status != StatusSuccess {
				b.Fatalf("%v %+v", err, r)
			}
		}
	})
}

// BenchmarkCancelToStop is the time from Terminate to the end of a run stuck in a loop.
func BenchmarkCancelToStop(b *testing.B) {
	for _, loop := range []struct{ name, src string }{
		{"busy-loop", `console.log("go"); export default () => { for (;;) {} }`},
		{"allocating-loop", `console.log("go"); export default () => { for (;;) { const a = [1, 2, 3].map(x => ({x})) } }`},
		{"promise-loop", `console.log("go"); export default async () => { for (;;) await null }`},
		{"catch-recursion", `console.log("go"); export default () => { ` + catchRecursion + `; return f(0) }`},
	} {
		b.Run(loop.name, func(b *testing.B) {
			var l latencies
			for b.Loop() {
				h, err := Start(context.Background(), Options{Source: loop.src, Timeout: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				for len(h.Logs()) == 0 {
					runtime.Gosched()
				}
				l.time(func() {
					h.Terminate("benchmark")
					h.Wait()
				})
			}
			l.report(b)
		})
	}
}

// BenchmarkMemoryPerRun holds n runs open at once (each stuck in a loop after building some
// data) and reports the resident memory they add, per run.
func BenchmarkMemoryPerRun(b *testing.B) {
	for _, tc := range []struct {
		name, src string
	}{
		{"empty", `console.log("up"); export default () => { for (;;) {} }`},
		{"1000-objects", `const data = Array.from({length: 1000}, (_, i) => ({i, name: "item " + i})); console.log("up"); export default () => { for (;;) {} }`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 32
			var perRun float64
			for b.Loop() {
				runtime.GC()
				before := resident(b)
				handles := make([]*Handle, n)
				for i := range handles {
					h, err := Start(context.Background(), Options{Source: tc.src, Timeout: time.Minute})
					if err != nil {
						b.Fatal(err)
					}
					handles[i] = h
				}
				for _, h := range handles {
					for len(h.Logs()) == 0 {
						runtime.Gosched()
					}
				}
				perRun = float64(resident(b)-before) / n
				var wg sync.WaitGroup
				for _, h := range handles {
					wg.Go(func() { h.Terminate("done"); h.Wait() })
				}
				wg.Wait()
			}
			b.ReportMetric(perRun/1024, "KiB/run")
		})
	}
}

func resident(b *testing.B) int64 {
	b.Helper()
	out, err := exec.Command("ps", "-o", "rss=", "-p", strconv.Itoa(pid())).Output()
	if err != nil {
		b.Skipf("cannot read resident memory: %v", err)
	}
	var kib int64
	if _, err := fmt.Sscan(string(out), &kib); err != nil {
		b.Fatal(err)
	}
	return kib * 1024
}

func pid() int { return os.Getpid() }
