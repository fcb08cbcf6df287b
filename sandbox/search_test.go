package sandbox

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The string and array searches that compare more than searchWork characters run in steps
// (see prelude.js). Those steps must give what the builtins give: each case below is large
// enough to take them, and its expected value comes from Go's strings package (the strings are
// ASCII, so JavaScript's indexes are Go's).
//
// These check results, not speed: under the race detector on a busy machine one case has
// taken over a minute, so the sandbox's time limit is set where only a hang reaches it.
func TestLargeSearchesKeepTheirResults(t *testing.T) {
	p := strings.Repeat("a", 49) + "b" // almost matches everywhere in s
	s := strings.Repeat("a", 100_000) + p + strings.Repeat("a", 50_000) + p + strings.Repeat("c", 50_000)
	i1, i2 := strings.Index(s, p), strings.LastIndex(s, p)
	m := len(p)
	if len(s)*m <= 1<<22 {
		t.Fatalf("s is too short (%d) to take the guarded path", len(s))
	}
	quote := func(v string) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	lengths := func(parts []string) string {
		n := make([]string, len(parts))
		for i, x := range parts {
			n[i] = strconv.Itoa(len(x))
		}
		return "[" + strings.Join(n, ",") + "]"
	}
	const aa = 1_500_000 // a string of as many "a"s, where "aaa" overlaps itself everywhere
	// Matches on both sides of, and across, the guards' step of 65536 positions.
	u := strings.Repeat("a", 65_530) + p + strings.Repeat("a", 65_500) + p + p + strings.Repeat("c", 70_000) + p
	tests := []struct{ expr, want string }{
		{`s.indexOf(p)`, strconv.Itoa(i1)},
		{`s.indexOf(p, i1 + 1)`, strconv.Itoa(i2)},
		{`s.indexOf(p, -5)`, strconv.Itoa(i1)},
		{`s.indexOf(p, NaN)`, strconv.Itoa(i1)},
		{`s.indexOf(p, 1e9)`, `-1`},
		{`s.indexOf(p + "x")`, `-1`},
		{`s.lastIndexOf(p)`, strconv.Itoa(i2)},
		{`s.lastIndexOf(p, i2 - 1)`, strconv.Itoa(i1)},
		{`s.lastIndexOf(p, i2)`, strconv.Itoa(i2)},
		{`s.lastIndexOf(p, -1)`, `-1`},
		{`s.lastIndexOf(p, NaN)`, strconv.Itoa(i2)},
		{`[s.includes(p), s.includes(p + "x"), s.includes(p, i2 + 1), s.includes(p, i2)]`, `[true,false,false,true]`},
		{`s.split(p).map(x => x.length)`, lengths(strings.Split(s, p))},
		{`s.split(p, 1).map(x => x.length)`, lengths(strings.Split(s, p)[:1])},
		{`s.split(p, 0)`, `[]`},
		{`(s.slice(0, 60000) + p + p).split(p).map(x => x.length)`, `[60000,0,0]`},
		{`s.replace(p, "[$&|$$|$1|$<x>|$]")`, quote(s[:i1] + "[" + p + "|$|$1|$<x>|$]" + s[i1+m:])},
		{`s.replace(p, "<$` + "`" + `>")`, quote(s[:i1] + "<" + s[:i1] + ">" + s[i1+m:])},
		{`s.replaceAll(p, "($')")`, quote(s[:i1] + "(" + s[i1+m:] + ")" + s[i1+m:i2] + "(" + s[i2+m:] + ")" + s[i2+m:])},
		{`s.replace(p, (m, i, all) => m.length + "@" + i + "/" + all.length)`, quote(s[:i1] + fmt.Sprintf("%d@%d/%d", m, i1, len(s)) + s[i1+m:])},
		{`s.replaceAll(p, (m, i) => "#" + i)`, quote(s[:i1] + fmt.Sprintf("#%d", i1) + s[i1+m:i2] + fmt.Sprintf("#%d", i2) + s[i2+m:])},
		{`s.replace(p + "x", "y") === s`, `true`},
		{`(a => [a.indexOf("aaa", 5), a.lastIndexOf("aaa"), a.replaceAll("aaa", "b").length, a.split("aaa").length, a.split("aaa", 7).length])("a".repeat(` + strconv.Itoa(aa) + `))`,
			fmt.Sprintf(`[5,%d,%d,%d,7]`, aa-3, aa/3, aa/3+1)},
		{`u.split(p).map(x => x.length)`, lengths(strings.Split(u, p))},
		{`u.split(p, 3).map(x => x.length)`, lengths(strings.Split(u, p)[:3])},
		{`u.replaceAll(p, "=")`, quote(strings.ReplaceAll(u, p, "="))},
		{`u.replaceAll(p, "<$&>")`, quote(strings.ReplaceAll(u, p, "<"+p+">"))},
		{`[u.indexOf(p, 65_531), u.lastIndexOf(p, 65_529)]`, fmt.Sprintf(`[%d,-1]`, strings.Index(u[65_531:], p)+65_531)},
		{`String.prototype.indexOf.call({toString() { return s }}, {toString() { return p }})`, strconv.Itoa(i1)},
		{`String.prototype.indexOf.call(123456, 34)`, `2`},
		{`(() => { try { s.includes(/a/) } catch (e) { return e.name } })()`, `"TypeError"`},
		{`(() => { try { s.replaceAll(/a/, "") } catch (e) { return e.name } })()`, `"TypeError"`},
		{`(() => { try { String.prototype.indexOf.call(null, "a") } catch (e) { return e.name } })()`, `"TypeError"`},
		{`(() => { try { s.indexOf(Symbol()) } catch (e) { return e.name } })()`, `"TypeError"`},
		{`s.replace(/a+b/, "x").length`, strconv.Itoa(len(s) - (i1 + m) + 1)},
		{`s.split(/b/).length`, `3`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			r := run(t, Options{
				Source:      `export default (s, p, i1, i2, u) => ` + tt.expr,
				Execute:     Execute{Args: []any{s, p, i1, i2, u}},
				Timeout:     correctnessTimeout,
				MemoryLimit: 64 << 20,
			})
			wantValue(t, r, tt.want)
		})
	}
}

// correctnessTimeout is the time limit of a run whose result a test checks, not its speed: a
// hang reaches it, a slow machine does not (go test's own -timeout is the last backstop).
const correctnessTimeout = time.Hour

func TestLargeArraySearchesKeepTheirResults(t *testing.T) {
	const prelude = `
		const long = "a".repeat(5000), needle = "a".repeat(4999) + "b";
		const a = new Array(2000).fill(long);
		a[1500] = "a".repeat(4999) + "b";`
	tests := []struct{ expr, want string }{
		{`[a.indexOf(needle), a.includes(needle), a.lastIndexOf(needle)]`, `[1500,true,1500]`},
		{`[a.indexOf(needle, 1501), a.indexOf(needle, -500), a.indexOf(needle, -499), a.includes(needle, 1501)]`, `[-1,1500,-1,false]`},
		{`[a.lastIndexOf(needle, 1499), a.lastIndexOf(needle, -500), a.lastIndexOf(needle, -501), a.lastIndexOf(needle, 1e9)]`, `[-1,1500,-1,1500]`},
		{`a.indexOf(long)`, `0`},
		{`(delete a[1500], [a.indexOf(needle), a.includes(needle), a.lastIndexOf(needle)])`, `[-1,false,-1]`},
		{`Array.prototype.indexOf.call({length: 2000, 1999: needle}, needle)`, `1999`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			wantValue(t, run(t, Options{Source: prelude + `export default () => ` + tt.expr, MemoryLimit: 64 << 20, Timeout: correctnessTimeout}), tt.want)
		})
	}
}

// Sorts without a comparator past sortAlone elements take a comparator in the guard (see
// prelude.js); the order must be the builtin's, which Go computes here: numbers by their
// decimal strings, equal strings in their first order, undefined then holes last; typed arrays
// by number, -0 before +0, NaN last. The test lowers sortAlone so that the guard's comparator
// sorts a few thousand elements: at the real threshold an array sort makes about a million
// calls into the interpreter, which takes over a minute under the race detector on a slow
// core, and the comparator's order does not depend on the array's length.
func TestLargeSortsKeepTheirOrder(t *testing.T) {
	defer func(was int64) { sortAlone = was }(sortAlone)
	sortAlone = 1 << 10
	const n = 5 * (1 << 10)
	ints := make([]int, n)
	for i := range ints {
		ints[i] = (i*7919)%n - n/2
	}
	// Array.prototype.sort and toSorted: numbers compared as strings; a[5] undefined, a[6] a hole.
	byString := slices.Clone(ints[7:])
	byString = append(byString, ints[:5]...)
	slices.SortStableFunc(byString, func(x, y int) int { return strings.Compare(strconv.Itoa(x), strconv.Itoa(y)) })
	wantStrings, _ := json.Marshal(byString)
	wantArray := strings.TrimSuffix(string(wantStrings), "]") + ",null,null]"
	// Typed arrays: with NaN at 3 and 9, -0 at 4, 0 at 5.
	floats := make([]string, 0, n)
	var nums []int
	for i, v := range ints {
		if i != 3 && i != 4 && i != 5 && i != 9 {
			nums = append(nums, v)
		}
	}
	nums = append(nums, 0)
	slices.Sort(nums)
	zero := false
	for _, v := range nums {
		if v == 0 && !zero {
			floats = append(floats, `"-0"`)
			zero = true
		}
		floats = append(floats, strconv.Itoa(v))
	}
	floats = append(floats, `"NaN"`, `"NaN"`)
	wantTyped := "[" + strings.Join(floats, ",") + "]"
	sortedInts := slices.Sorted(slices.Values(ints))
	wantBig, _ := json.Marshal(sortedInts)
	show := `Array.from(s, x => Object.is(x, -0) ? "-0" : Number.isNaN(x) ? "NaN" : x)`
	// Stability: objects whose strings repeat keep their first order among equals.
	keys := make([]int, n)
	for i := range keys {
		keys[i] = i
	}
	slices.SortStableFunc(keys, func(x, y int) int { return strings.Compare(strconv.Itoa(x%97), strconv.Itoa(y%97)) })
	wantStable, _ := json.Marshal(keys)
	const stableObjects = `const a = ints.map((_, i) => ({ i, toString() { return String(i % 97) } }));`
	tests := []struct{ name, expr, want string }{
		{"Array sort", `const a = ints.slice(); a[5] = undefined; delete a[6]; const s = a.sort(); return s`, wantArray},
		{"Array toSorted", `const a = ints.slice(); a[5] = undefined; delete a[6]; const s = a.toSorted(); return [s, a[0] === ints[0]]`, "[" + wantArray + ",true]"},
		{"Float64Array sort", `const s = new Float64Array(ints); s[3] = NaN; s[4] = -0; s[5] = 0; s[9] = NaN; s.sort(); return ` + show, wantTyped},
		{"Float64Array toSorted", `const a = new Float64Array(ints); a[3] = NaN; a[4] = -0; a[5] = 0; a[9] = NaN; const s = a.toSorted(); return ` + show, wantTyped},
		{"BigInt64Array sort", `const s = new BigInt64Array(ints.map(BigInt)).sort(); return Array.from(s, Number)`, string(wantBig)},
		{"Int32Array sort", `return Array.from(new Int32Array(ints).sort())`, string(wantBig)},
		{"Array sort is stable", stableObjects + `return a.sort().map(o => o.i)`, string(wantStable)},
		{"Array toSorted is stable", stableObjects + `return a.toSorted().map(o => o.i)`, string(wantStable)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantValue(t, run(t, Options{Source: `export default (ints) => { ` + tt.expr + ` }`, Execute: Execute{Args: []any{ints}},
				MemoryLimit: 64 << 20, Timeout: time.Minute}), tt.want)
		})
	}
}
