package sandbox

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/quickjs"
)

// Memory bombs of every shape end with StatusMemory at the run's limit.
func TestMemoryBombs(t *testing.T) {
	tests := []struct{ name, src string }{
		{"array of strings", `export default () => { const a = []; for (let i = 0; ; i++) a.push("item " + i) }`},
		{"array of objects", `export default () => { const a = []; for (;;) a.push({x: 1, y: [1, 2]}) }`},
		{"object with many keys", `export default () => { const o = {}; for (let i = 0; ; i++) o["k" + i] = i }`},
		{"nested arrays", `export default () => { let a = []; for (;;) a = [a, new Array(1000).fill(a)] }`},
		{"huge array at once", `export default () => new Array(1e8).fill(0).length`},
		{"string repeat", `export default () => "x".repeat(1e9).length`},
		{"string doubling", `export default () => { let s = "x"; for (;;) s += s }`},
		{"string building", `export default () => { let s = ""; for (let i = 0; ; i++) s = s + String(i) + s.slice(0, 100) }`},
		{"typed array", `export default () => new Float64Array(1e8).length`},
		{"map growth", `export default () => { const m = new Map(); for (let i = 0; ; i++) m.set(i, {i}) }`},
		{"top-level bomb", `const a = []; for (;;) a.push([1, 2, 3]); export default 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, Options{Source: tt.src, Timeout: 20 * time.Second})
			wantFailure(t, r, StatusMemory, "memory limit of 8388608 bytes")
		})
	}
}

func TestRunawayCode(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		status Status
		has    []string
	}{
		{"infinite loop", Options{Source: `export default () => { for (;;) {} }`, Timeout: 50 * time.Millisecond},
			StatusTerminated, []string{"timed out after 50ms"}},
		{"infinite loop at top level", Options{Source: `while (true) {} export default 1`, Timeout: 50 * time.Millisecond},
			StatusTerminated, []string{"timed out"}},
		{"loop that catches and loops again", Options{Timeout: 50 * time.Millisecond,
			Source: `export default () => { for (;;) { try { for (;;) {} } catch (e) {} finally { for (;;) {} } } }`},
			StatusTerminated, []string{"timed out"}},
		{"endless microtasks", Options{Source: `export default () => { const spin = () => { Promise.resolve().then(spin) }; spin(); return new Promise(() => {}) }`,
			Timeout: 50 * time.Millisecond}, StatusTerminated, []string{"timed out"}},
		{"async loop", Options{Source: `export default async () => { for (;;) await null }`, Timeout: 50 * time.Millisecond},
			StatusTerminated, []string{"timed out"}},
		{"memory errors caught and retried stay within the limit", Options{Timeout: 200 * time.Millisecond,
			Source: `export default () => { for (;;) { try { const a = []; for (;;) a.push({}) } catch (e) {} } }`},
			StatusTerminated, []string{"timed out"}},
		{"deep recursion", Options{Source: `function f(n) { return f(n + 1) + 1 } export default () => f(0)`},
			StatusError, []string{"InternalError: stack overflow", "at f (main.js:1:"}},
		{"mutual recursion through getters", Options{Source: `const o = { get a() { return this.b }, get b() { return this.a } }; export default () => o.a`},
			StatusError, []string{"stack overflow"}},
		{"recursion in toJSON", Options{Source: `const o = { toJSON() { return JSON.stringify(this) } }; export default () => o`},
			StatusError, []string{"stack overflow"}},
		// The race detector makes building and encoding 5 MB take ~3 s, close to the default
		// timeout on a loaded machine: these cases are about the output limit, so give them
		// time (the array's timed out at 5 s in CI on a machine busy with benchmarks).
		{"huge return value", Options{Source: `export default () => "x".repeat(5e6)`, MemoryLimit: 32 << 20, Timeout: 30 * time.Second},
			StatusError, []string{"OutputLimitError", "over the limit of 1048576 bytes"}},
		{"huge array returned", Options{Source: `export default () => new Array(3e5).fill("abcdef")`, MemoryLimit: 32 << 20, Timeout: 30 * time.Second},
			StatusError, []string{"OutputLimitError"}},
		{"log flood", Options{Source: `export default () => { for (;;) console.log("spam".repeat(100)) }`, Timeout: 50 * time.Millisecond},
			StatusTerminated, []string{"timed out"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantFailure(t, run(t, tt.opts), tt.status, tt.has...)
		})
	}
}

// catchRecursion recurses, and catches its own stack overflow only to recurse again: every
// overflow builds an error with a stack of thousands of frames, so it gets slower the deeper
// it goes, and it never ends on its own.
const catchRecursion = `const f = n => { try { return f(n + 1) } catch (e) { return f(n + 1) } }`

// Code that makes the engine do a great deal of work between two of its interrupt checks still
// ends at its timeout (see interrupt.go), and its interpreter stops, so it uses no more CPU.
// With a 200 ms timeout, before a terminated run's countdown was set to zero, the recursions
// took 8 to 11 s (generators 0.8 s), the loop around indexOf 15 s; async recursion and regular
// expressions were already stopped in time. Single builtin calls ran to their end after the
// deadline: a string search for a near match 9 s (far longer with more memory), an array search
// for a long string an hour, JSON.stringify of a sparse array 0.6 s. Now each stops within
// milliseconds of its timeout. The bound is generous, for a loaded machine.
func TestDeadlineHolds(t *testing.T) {
	const nearMatch = `const s = "a".repeat(1e6), p = "a".repeat(1e4) + "b";`
	tests := []struct{ name, src string }{
		{"recursion that catches its overflow", `export default () => { ` + catchRecursion + `; return f(0) }`},
		{"nested try/catch", `export default () => {
			const f = n => { try { try { return f(n + 1) } catch (e) { return f(n + 1) } } catch (e) { return f(n + 1) } }
			return f(0) }`},
		{"finally", `export default () => { const f = n => { try { return f(n + 1) } finally { return f(n + 1) } }; return f(0) }`},
		{"generators", `function* g(n) { try { yield* g(n + 1) } catch (e) { yield* g(n + 1) } } export default () => [...g(0)]`},
		{"inside a generator", `export default () => { ` + catchRecursion + `; function* g() { yield f(0) } return [...g()] }`},
		{"async recursion", `const f = async n => { try { return await f(n + 1) } catch (e) { return await f(n + 1) } }
			export default () => f(0)`},
		{"after an await", `export default async () => { await null; ` + catchRecursion + `; return f(0) }`},
		{"in a promise chain", `export default () => Promise.resolve(0).then(function f(n) { try { return f(n + 1) } catch (e) { return f(n + 1) } })`},
		{"regex backtracking", `export default () => /(a+)+$/.test("a".repeat(40) + "b")`},
		{"a loop around a builtin over a large array", `const a = new Array(3e5).fill(0); export default () => { for (;;) a.indexOf(1) }`},
		{"String indexOf of a near match", nearMatch + `export default () => s.indexOf(p)`},
		{"String includes of a near match", nearMatch + `export default () => s.includes(p)`},
		{"String lastIndexOf of a near match", nearMatch + `export default () => s.lastIndexOf(p)`},
		{"String split at a near match", nearMatch + `export default () => s.split(p)`},
		{"String replace of a near match", nearMatch + `export default () => s.replace(p, "")`},
		{"String replaceAll of a near match", nearMatch + `export default () => s.replaceAll(p, "$&")`},
		{"String search through an object's toString", nearMatch + `export default () => s.indexOf({ toString: () => p })`},
		{"Array indexOf of a long string", `const s = "a".repeat(1e6), t = "a".repeat(1e6 - 1) + "b", a = new Array(1e6).fill(s);
			export default () => a.indexOf(t)`},
		{"Array includes of a long string", `const s = "a".repeat(1e6), t = "a".repeat(1e6 - 1) + "b", a = new Array(1e6).fill(s);
			export default () => a.includes(t)`},
		{"Array lastIndexOf of a long string", `const s = "a".repeat(1e6), t = "a".repeat(1e6 - 1) + "b", a = new Array(1e6).fill(s);
			export default () => a.lastIndexOf(t)`},
		{"JSON.stringify of a sparse array", `export default () => JSON.stringify(new Array(2e6))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			h, err := Start(context.Background(), Options{Source: tt.src, Timeout: 200 * time.Millisecond, MemoryLimit: 32 << 20})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-h.Stopped():
			case <-time.After(5 * time.Second):
				t.Fatal("the interpreter still runs 5s after the start of a run with a 200ms timeout")
			}
			took := time.Since(start)
			wantFailure(t, h.Wait(), StatusTerminated, "timed out after 200ms")
			if took > 2*time.Second {
				t.Errorf("a run with a 200ms timeout stopped after %s", took)
			}
		})
	}
}

// A terminated run is answered within stopGrace of its termination even while its interpreter
// is still inside one builtin call (here a walk over four million holes, which allocates
// nothing and takes about 250 ms, far longer under the race detector), and Stopped tells when
// that call has ended. Before, the answer waited for it.
func TestDeadlineAnswersBeforeABuiltinEnds(t *testing.T) {
	h, err := Start(context.Background(), Options{Source: `export default () => new Array(4e6).includes(1)`,
		Timeout: 100 * time.Millisecond, MemoryLimit: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	r := h.Wait()
	select {
	case <-h.Stopped():
		t.Fatal("the interpreter had stopped when the answer came: the answer waited for the builtin")
	default:
	}
	wantFailure(t, r, StatusTerminated, "timed out after 100ms")
	<-h.Stopped()
	if h.Wait() != r {
		t.Error("the result changed after the interpreter stopped")
	}
}

// A run whose caller has gone (its context cancelled, as when the dispatcher gives up on a
// call) stops at once. Stopped is closed only after the interpreter has returned and closed, so
// once it is, the run uses no more CPU.
func TestAbandonedRunStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h, err := Start(ctx, Options{Source: `console.log("deep"); export default () => { ` + catchRecursion + `; return f(0) }`,
		Timeout: time.Minute, MemoryLimit: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	waitLogs(t, h, 1)
	time.Sleep(100 * time.Millisecond) // into the overflows, where an interrupt used to wait seconds
	cancel()
	select {
	case <-h.Stopped():
	case <-time.After(2 * time.Second):
		t.Fatal("the interpreter still runs 2s after its context was cancelled")
	}
	wantFailure(t, h.Wait(), StatusTerminated, "cancelled")
}

// The sandbox finds the engine's interrupt countdown: without it a terminated run would wait
// for the engine's own countdown again (see interrupt.go).
func TestDeadlineInterruptReachesTheEngine(t *testing.T) {
	vm, err := quickjs.NewVM()
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	countdown := interruptCountdown(vm)
	if countdown == nil {
		t.Fatal("the interpreter's interrupt countdown was not found: modernc.org/quickjs changed; see interrupt.go")
	}
	loop := func() int32 {
		if _, err := vm.Eval("for (let i = 0; i < 100; i++) {}", quickjs.EvalGlobal); err != nil {
			t.Fatal(err)
		}
		return atomic.LoadInt32(countdown)
	}
	// The countdown starts at 0 and is set to its full count at the first check.
	if before, after := loop(), loop(); after >= before {
		t.Fatalf("the countdown went from %d to %d over a loop of 100: it is not the engine's", before, after)
	}
}

// Builtins that walk an array-like index by index do it inside the engine, where no interrupt
// reaches them (see prelude.js). Over holes, or a bare length, a walk needs no memory: with a
// length of 3e7 or 4e7 each of these went on for 1 to 6 s past a 100 ms timeout, over an Array of
// 2 ** 32 - 1 for minutes and over {length: 2 ** 53 - 1} for years. A length longer than the
// run's memory could hold is now refused at once, well before the 1 s timeout.
func TestDeadlineRefusesHoleWalks(t *testing.T) {
	walks := []string{"indexOf(1)", "lastIndexOf(1)", "includes(1)", "join('')", "toLocaleString()", "forEach(x => x)",
		"map(x => x)", "filter(x => x)", "every(x => true)", "some(x => false)", "reduce((a, b) => a, 0)",
		"reduceRight((a, b) => a, 0)", "copyWithin(1, 0)", "reverse()", "sort()", "slice()", "splice(0)",
		"splice(0, 0, 1)", "shift()", "unshift(1)", "flat()", "flatMap(x => x)"}
	type walk struct{ name, src, what string }
	var tests []walk
	for _, target := range []string{"new Array(2 ** 32 - 1)", "({length: 2 ** 53 - 1})"} {
		for _, w := range walks {
			name, args, _ := strings.Cut(w, "(")
			if args != ")" {
				args = ", " + args
			}
			tests = append(tests, walk{target + "." + w,
				fmt.Sprintf("export default () => Array.prototype.%s.call(%s%s", name, target, args), "Array.prototype." + name})
		}
	}
	tests = append(tests, []walk{
		{"toString of a sparse array", `export default () => String(new Array(2 ** 32 - 1))`, "Array.prototype.join"},
		{"concat of a sparse array", `export default () => [].concat(new Array(2 ** 32 - 1))`, "Array.prototype.concat"},
		{"concat of many sparse arrays, each within the limit", `export default () => [].concat(...Array(1000).fill(new Array(1e5)))`, "Array.prototype.concat"},
		{"concat of a spreadable array-like", `export default () => [].concat({length: 2 ** 53 - 1, [Symbol.isConcatSpreadable]: true})`, "Array.prototype.concat"},
		{"flat of one sparse array repeated", `export default () => Array(1e4).fill(new Array(1e5)).flat()`, "Array.prototype.flat"},
		{"flat of nested sparse arrays", `export default () => [[[new Array(2 ** 32 - 1)]]].flat(Infinity)`, "Array.prototype.flat"},
		{"flatMap returning a sparse array", `export default () => [1, 2].flatMap(() => new Array(2 ** 32 - 1))`, "Array.prototype.flatMap"},
		{"concat, with Symbol and the array iterator replaced", `const S = Symbol.isConcatSpreadable; globalThis.Symbol = {};
			Array.prototype[S.constructor.iterator] = function* () {};
			export default () => [].concat({length: 2 ** 53 - 1, [S]: true})`, "Array.prototype.concat"},
		{"flat, with Math.trunc and Object replaced", `Math.trunc = () => 0; globalThis.Object = () => [];
			export default () => Array(1e4).fill(new Array(1e5)).flat(1)`, "Array.prototype.flat"},
		{"String.raw of an array-like", `export default () => String.raw({raw: {length: 2 ** 53 - 1}})`, "String.raw"},
		{"JSON.stringify with a sparse replacer", `export default () => JSON.stringify({}, new Array(2 ** 32 - 1))`, "JSON.stringify"},
		{"a typed array from an array-like", `export default () => new Uint8Array({length: 6e7})`, "Uint8Array would walk"},
		{"a subclass of a typed array from an array-like", `class B extends Float32Array {} export default () => new B({length: 1e7})`, "Float32Array would walk"},
		{"TypedArray.from an array-like", `export default () => Uint8Array.from({length: 6e7})`, "TypedArray.from"},
		{"TypedArray.prototype.set from an array-like", `export default () => new Uint8Array(3e7).set({length: 3e7})`, "TypedArray.prototype.set"},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			r := run(t, Options{Source: tt.src, Timeout: time.Second, MemoryLimit: 64 << 20})
			took := time.Since(start)
			wantFailure(t, r, StatusError, "RangeError", tt.what, "more than this run's memory could hold (4194304)")
			if took > 2*time.Second {
				t.Errorf("refusing took %s", took)
			}
		})
	}
}

// The guards leave the builtins as they were for everything else: names, lengths, results,
// species, typed array constructors and the errors they throw (values from Node 20).
func TestDeadlineGuardsKeepBuiltins(t *testing.T) {
	tests := []struct{ name, expr, want string }{
		{"names and lengths", `["indexOf","lastIndexOf","includes","join","toLocaleString","forEach","map","filter","every","some","reduce","reduceRight","copyWithin","reverse","sort","slice","splice","shift","unshift","concat","flat","flatMap"].map(n => n + "/" + Array.prototype[n].length + "/" + Array.prototype[n].name).join(" ")`,
			`"indexOf/1/indexOf lastIndexOf/1/lastIndexOf includes/1/includes join/1/join toLocaleString/0/toLocaleString forEach/1/forEach map/1/map filter/1/filter every/1/every some/1/some reduce/1/reduce reduceRight/1/reduceRight copyWithin/2/copyWithin reverse/0/reverse sort/1/sort slice/2/slice splice/2/splice shift/0/shift unshift/1/unshift concat/1/concat flat/0/flat flatMap/1/flatMap"`},
		{"not constructors", `(() => { try { new [].indexOf(); return "constructed" } catch (e) { return e instanceof TypeError } })()`,
			`true`},
		{"not enumerable", `Object.keys(Array.prototype).length + Object.keys(Object.getPrototypeOf(Int8Array)).length`,
			`0`},
		{"array methods", `[[3,1,2].sort(), [1,2,3].indexOf(2), [1,2,3].lastIndexOf(3), [NaN].includes(NaN), [1,[2]].join("-"), [1,2,3].map(x => x * 2), [1,2,3].filter(x => x & 1), [1,2].every(x => x > 0), [1,2].some(x => x > 1), [1,2,3].reduce((a, b) => a + b), ["a","b"].reduceRight((a, b) => a + b), [1,2,3,4].copyWithin(0, 2), [1,2,3].reverse(), [1,2,3].slice(1), (() => { const a = [1,2,3]; return [a.splice(1, 1), a] })(), (() => { const a = [1,2]; return [a.shift(), a.unshift(0, 9), a] })()]`,
			`[[1,2,3],1,2,true,"1-2",[2,4,6],[1,3],true,true,6,"ba",[3,4,3,4],[3,2,1],[2,3],[[2],[1,3]],[1,3,[0,9,2]]]`},
		{"this and arguments reach the builtin", `[[1, 2].map(function (x) { return x + this.k }, {k: 10}), Array.prototype.indexOf.call("abc", "b"), Array.prototype.join.call({length: 2, 0: "x", 1: "y"}, "+"), [1, 2, 3].indexOf(1, 1)]`,
			`[[11,12],1,"x+y",-1]`},
		{"concat", `[[1].concat([2], 3, [[4]]), [].concat({length: 2, 0: "a", 1: "b", [Symbol.isConcatSpreadable]: true}), Array.prototype.concat.call(1, 2).length]`,
			`[[1,2,3,[4]],["a","b"],2]`},
		{"flat and flatMap", `[[1, [2, [3, [4]]]].flat(), [1, [2, [3, [4]]]].flat(Infinity), [1, [2]].flat(0), [1, 2].flatMap(function (x) { return [x, this.k] }, {k: 0}), [[1], [2]].flatMap(x => x)]`,
			`[[1,2,[3,[4]]],[1,2,3,4],[1,[2]],[1,0,2,0],[1,2]]`},
		{"sparse arrays within the limit", `[new Array(1000).indexOf(undefined), new Array(1000).includes(undefined), (() => { const a = []; a[500] = 1; let n = 0; a.forEach(() => n++); return n })(), new Array(3).join("-")]`,
			`[-1,true,1,"--"]`},
		{"species", `(() => { class A extends Array {} const a = A.from([1, 2, 3]); return [a.map(x => x) instanceof A, a.filter(Boolean) instanceof A, a.slice() instanceof A, a.concat([4]) instanceof A, a.flat() instanceof A] })()`,
			`[true,true,true,true,true]`},
		{"typed arrays", `(() => { class U extends Uint8Array {} const u = new U(2); const b = new Uint8Array(4); b.set([1, 2], 1); return [Array.from(new Uint8Array([1, 2, 300])), Array.from(Uint16Array.from({length: 2, 0: 7})), new Float64Array(new ArrayBuffer(16)).length, new Int32Array(3).length, u instanceof U, u instanceof Uint8Array, new Uint8Array(2).constructor === Uint8Array, Object.getPrototypeOf(Uint8Array) === Object.getPrototypeOf(Int8Array), Uint8Array.name, Uint8Array.BYTES_PER_ELEMENT, Array.from(b), Array.from(new Uint8Array(2).map(x => x + 1)), new BigInt64Array(1).length, typeof Uint8Array] })()`,
			`[[1,2,44],[7,0],2,3,true,true,true,true,"Uint8Array",1,[0,1,2,0],[1,1],1,"function"]`},
		{"String.raw and JSON.stringify", `[String.raw.length, String.raw.name, JSON.stringify.length, JSON.stringify.name, String.raw({raw: ["a","b"]}, 1), JSON.stringify({a:1,b:2,c:3}, ["a","c"], 1), String.raw` + "`x${1}y`" + `]`,
			`[1,"raw",3,"stringify","a1b","{\n \"a\": 1,\n \"c\": 3\n}","x1y"]`},
		{"errors keep their kind", `(() => { const r = []; for (const f of [() => [].forEach(1), () => Array.prototype.map.call(null, x => x), () => new Uint8Array(-1), () => Uint8Array(2), () => [].flatMap(null)]) { try { f(); r.push("none") } catch (e) { r.push(e.name) } } return r })()`,
			`["TypeError","TypeError","RangeError","TypeError","TypeError"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantValue(t, run(t, Options{Source: "export default () => " + tt.expr}), tt.want)
		})
	}
}

// The code reaches nothing of the host: no module loader for files, no require, process,
// environment, file or network API, and eval only evaluates more sandboxed code.
func TestNoHostCapabilities(t *testing.T) {
	absent := []string{
		"require", "process", "module", "exports", "std", "os", "print", "scriptArgs", "fetch", "XMLHttpRequest",
		"WebSocket", "setTimeout", "setInterval", "queueMicrotask", "performance", "Deno", "Bun", "WebAssembly",
		"__quiver_log", "__quiver_settle", "__dirname", "navigator", "Worker", "importScripts",
	}
	for _, name := range absent {
		t.Run(name, func(t *testing.T) {
			wantValue(t, run(t, Options{Source: fmt.Sprintf(`export default () => [typeof %s, %q in globalThis]`, name, name)}), `["undefined",false]`)
		})
	}
	smuggled := []struct{ name, src, want string }{
		{"eval", `export default () => eval("typeof process + typeof require")`, `"undefinedundefined"`},
		{"indirect eval", `export default () => (0, eval)("typeof this.std")`, `"undefined"`},
		{"Function constructor", `export default () => Function("return typeof this.os")()`, `"undefined"`},
		{"constructor chain", `export default () => ({}).constructor.constructor("return Object.getOwnPropertyNames(globalThis).filter(n => /quiver|std|os|require|process/.test(n))")()`, `[]`},
		{"eval of an import", `export default async () => { try { await eval('import("std")'); return "loaded" } catch (e) { return e.message.includes("not available") } }`, `true`},
		{"import.meta carries nothing", `export default () => Object.keys(import.meta)`, `[]`},
		{"the clock does not move", `export default () => { const a = Date.now(); for (let i = 0; i < 1e5; i++); return Date.now() - a }`, `0`},
	}
	for _, tt := range smuggled {
		t.Run(tt.name, func(t *testing.T) {
			wantValue(t, run(t, Options{Source: tt.src}), tt.want)
		})
	}
}

// A run changes anything it likes; the next one, sequential or concurrent, starts clean.
func TestNoSharedState(t *testing.T) {
	const polluter = `
		Object.prototype.polluted = "yes";
		Array.prototype.map = () => "hijacked";
		JSON.stringify = () => '"forged"';
		globalThis.leak = 42;
		Math.random = () => 4;
		export default () => 1`
	const probe = `export default () => [({}).polluted ?? null, [1].map(x => x + 1), typeof leak, Math.random() < 1]`
	const clean = `[null,[2],"undefined",true]`
	wantValue(t, run(t, Options{Source: polluter}), `1`)
	wantValue(t, run(t, Options{Source: probe}), clean)

	var wg sync.WaitGroup
	results := make([]*Result, 16)
	for i := range results {
		wg.Go(func() {
			src := probe
			if i%2 == 0 {
				src = polluter
			}
			r, err := Run(context.Background(), Options{Source: src, MemoryLimit: testMemory})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = r
		})
	}
	wg.Wait()
	for i, r := range results {
		if i%2 == 1 && r != nil {
			wantValue(t, r, clean)
		}
	}
}

// Many runs at once from many goroutines, of every kind, each get their own result (run with
// -race). Bounded: 8 goroutines of 6 runs.
func TestConcurrentRuns(t *testing.T) {
	kinds := []struct {
		src    string
		status Status
		opts   Options
	}{
		{`export default (id) => "run " + id`, StatusSuccess, Options{}},
		{`export default () => { const a = []; for (;;) a.push({}) }`, StatusMemory, Options{MemoryLimit: MinMemoryLimit, Timeout: time.Minute}},
		{`export default () => { for (;;) {} }`, StatusTerminated, Options{Timeout: 20 * time.Millisecond}},
		{`import x from "fs"; export default 1`, StatusLinkError, Options{}},
		{`export default () => { throw new Error("x") }`, StatusError, Options{}},
		{`Object.prototype.p = 1; export default (id) => "run " + id`, StatusSuccess, Options{}},
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k, kind := range kinds {
				id := strconv.Itoa(g*100 + k)
				o := kind.opts
				o.Source, o.Execute = kind.src, Execute{Args: []any{id}}
				if o.MemoryLimit == 0 {
					o.MemoryLimit = testMemory
				}
				r, err := Run(context.Background(), o)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status != kind.status {
					t.Errorf("goroutine %d kind %d: status %s (%s), want %s", g, k, r.Status, r.Err(), kind.status)
				}
				if kind.status == StatusSuccess && string(r.Value) != `"run `+id+`"` {
					t.Errorf("goroutine %d: value %s, want run %s", g, r.Value, id)
				}
			}
		})
	}
	wg.Wait()
}

// After bombs, loops and terminations the host has the goroutines it had, and its memory
// comes back: the interpreters' heaps are released when runs end.
func TestHostStaysHealthy(t *testing.T) {
	runtime.GC()
	goroutines := runtime.NumGoroutine()
	rss0 := residentBytes(t)
	bombs := []Options{
		{Source: `export default () => { const a = []; for (;;) a.push("s" + a.length) }`, MemoryLimit: testMemory, Timeout: time.Minute},
		{Source: `export default () => { for (;;) {} }`, Timeout: 10 * time.Millisecond, MemoryLimit: testMemory},
		{Source: `export default () => "x".repeat(2e6)`, MemoryLimit: testMemory, Timeout: time.Minute},
	}
	for range 6 {
		for _, o := range bombs {
			if _, err := Run(context.Background(), o); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Goroutines of finished runs exit once their result is out; wait for the scheduler to
	// retire them rather than for a fixed time.
	for i := 0; runtime.NumGoroutine() > goroutines && i < 1000; i++ {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines after the runs, %d before", n, goroutines)
	}
	runtime.GC()
	// 12 of the runs fill 8 MiB each: had their heaps stayed, the process would have grown by
	// 96 MiB.
	grown := residentBytes(t) - rss0
	t.Logf("resident memory grew by %.1f MiB over 18 runs", float64(grown)/(1<<20))
	if grown > 48<<20 {
		t.Errorf("resident memory grew by %d MiB over 18 runs", grown>>20)
	}
}

// residentBytes reads the process's resident set size (Linux); the test is about the
// interpreters' memory, which is outside the Go heap.
func residentBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm (%v): resident memory cannot be measured on this system", err)
	}
	fields := strings.Fields(string(b))
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}
