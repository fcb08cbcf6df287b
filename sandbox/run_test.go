package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRunValues(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"default export gets the args", Options{Source: `export default (a, b) => ({sum: a.x + b})`,
			Execute: Execute{Args: []any{map[string]int{"x": 2}, 3}}}, `{"sum":5}`},
		{"async entry is awaited", Options{Source: `export default async (n) => { await null; return n * 2 }`,
			Execute: Execute{Args: []any{21}}}, `42`},
		{"top-level await", Options{Source: `const v = await Promise.resolve(7); export default () => v`}, `7`},
		{"named entry", Options{Source: `export function main(s) { return s.toUpperCase() }`,
			Execute: Execute{Fn: "main", Args: []any{"abc"}}}, `"ABC"`},
		{"an entry that is not a function is the value", Options{Source: `export default {a: [1, 2]}`}, `{"a":[1,2]}`},
		{"no default export runs for effect", Options{Source: `export const x = 1; console.log(x)`}, `null`},
		{"undefined is null", Options{Source: `export default () => undefined`}, `null`},
		{"functions are dropped like JSON.stringify does", Options{Source: `export default () => ({f() {}, n: 1})`}, `{"n":1}`},
		{"globals", Options{Source: `export default () => [limit, user.name]`,
			Globals: map[string]any{"limit": 10, "user": map[string]string{"name": "ada"}}}, `[10,"ada"]`},
		{"imports, default and named", Options{Source: `import cfg, {region, "api-url" as url} from "config"; export default () => [cfg.region, region, url]`,
			Imports: map[string]any{"config": map[string]string{"region": "eu", "api-url": "https://x"}}}, `["eu","eu","https://x"]`},
		{"import of a scalar", Options{Source: `import n from "answer"; export default () => n`,
			Imports: map[string]any{"answer": 42}}, `42`},
		{"modules, relative and nested", Options{Source: `import {twice} from "./lib/math.js"; export default () => twice(4)`,
			Modules: map[string]string{
				"./lib/math.js": `import {one} from "../one.js"; export const twice = (n) => n * 2 * one`,
				"one.js":        `export const one = 1`,
			}}, `8`},
		{"module without extension", Options{Source: `import u from "./util"; export default () => u`,
			Modules: map[string]string{"./util.js": `export default "found"`}}, `"found"`},
		{"TypeScript", Options{Language: TypeScript, Source: `
			interface In { a: number; b: number }
			enum Op { Add = "add" }
			export default function (x: In): { op: Op; r: number } { return { op: Op.Add, r: x.a + x.b } }`,
			Execute: Execute{Args: []any{map[string]int{"a": 1, "b": 2}}}}, `{"op":"add","r":3}`},
		{"TypeScript modules", Options{Language: TypeScript, Source: `import {sq} from "./sq"; export default (): number => sq(3)`,
			Modules: map[string]string{"./sq.ts": `export const sq = (n: number): number => n * n`}}, `9`},
		{"the clock is frozen at Now", Options{Source: `export default () => [Date.now(), new Date().toISOString(), typeof Date()]`,
			Now: time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)}, `[1710072000000,"2024-03-10T12:00:00.000Z","string"]`},
		{"without Now the clock reads the epoch", Options{Source: `export default () => Date.now()`}, `0`},
		{"local time is UTC, whatever the host's zone", Options{Source: `export default () => {
			const d = new Date(2024, 0, 2, 3, 4, 5);
			return [d.getTimezoneOffset(), d.toISOString(), d.getHours(), d.toString(), new Date(0).toDateString(), Date()] }`},
			`[0,"2024-01-02T03:04:05.000Z",3,"Tue, 02 Jan 2024 03:04:05 GMT","Thu, 01 Jan 1970","Thu, 01 Jan 1970 00:00:00 GMT"]`},
		{"dates from arguments still work", Options{Source: `
			class Day extends Date {}
			export default () => [new Date(Date.UTC(2020, 0, 2)).getUTCDate(), new Day(0) instanceof Date, new Date(5).getTime()]`}, `[2,true,5]`},
		{"JSON and big numbers", Options{Source: `let s = 0; for (let i = 1; i <= 1e5; i++) s += i; export default () => JSON.stringify({s})`}, `"{\"s\":5000050000}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantValue(t, run(t, tt.opts), tt.want)
		})
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		status Status
		has    []string
	}{
		{"thrown error with its stack", Options{Filename: "tool.js", Source: "function fail() { throw new RangeError('too far') }\nexport default () => fail()"},
			StatusError, []string{"RangeError: too far", "at fail (tool.js:1:", "tool.js:2:"}},
		{"thrown string", Options{Source: `export default () => { throw "nope" }`}, StatusError, []string{"uncaught exception: nope"}},
		{"rejected promise", Options{Source: `export default async () => { throw new TypeError("bad") }`}, StatusError, []string{"TypeError: bad"}},
		{"error while loading the module", Options{Source: `null.x; export default 1`}, StatusError, []string{"TypeError", "main.js:1"}},
		{"syntax error", Options{Source: `export default () => {`}, StatusError, []string{"SyntaxError", "main.js:1"}},
		{"TypeScript syntax error says where", Options{Language: TypeScript, Source: "const a: number = ;\nexport default a"},
			StatusError, []string{"SyntaxError", "main.ts:1:19"}},
		{"cyclic result", Options{Source: `export default () => { const o = {}; o.self = o; return o }`},
			StatusError, []string{"cannot be converted to JSON", "circular"}},
		{"BigInt result", Options{Source: `export default () => 10n`}, StatusError, []string{"cannot be converted to JSON", "BigInt"}},
		{"promise that never settles", Options{Source: `export default () => new Promise(() => {})`}, StatusError, []string{"never settled"}},
		{"result over the output limit", Options{Source: `export default () => "x".repeat(2000)`, MaxOutputBytes: 1000},
			StatusError, []string{"OutputLimitError", "2002 bytes", "limit of 1000 bytes"}},
		{"the stack shows no sandbox frames", Options{Source: `export default () => { throw new Error("e") }`}, StatusError, []string{"main.js"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.opts)
			wantFailure(t, r, tt.status, tt.has...)
			if strings.Contains(r.Stack, "<eval>") {
				t.Errorf("stack shows the prelude: %s", r.Stack)
			}
		})
	}
}

func TestLinkErrors(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		has  []string
	}{
		{"node module", Options{Source: `import fs from "fs"; export default () => fs`}, []string{`import "fs" in main.js is not available`, "no file system", "provides no imports"}},
		{"node: scheme", Options{Source: `import {exec} from "node:child_process"; export default 1`}, []string{`"node:child_process"`}},
		{"QuickJS std", Options{Source: `import * as std from "std"; export default 1`}, []string{`"std"`}},
		{"QuickJS os", Options{Source: `import * as os from "os"; export default 1`}, []string{`"os"`}},
		{"dynamic import of os", Options{Source: `export default async () => (await import("os")).exec`}, []string{`"os"`}},
		{"what the host provides is listed", Options{Source: `import x from "db"; export default 1`, Imports: map[string]any{"config": 1}},
			[]string{`the host provides "config"`}},
		{"missing relative module lists the modules", Options{Source: `import x from "./nope.js"; export default 1`, Modules: map[string]string{"./a.js": ""}},
			[]string{`module "./nope.js" imported by main.js does not exist`, "./a.js, ./main.js"}},
		{"bare name of an existing module", Options{Source: `import x from "util.js"; export default 1`, Modules: map[string]string{"./util.js": ""}},
			[]string{`did you mean "./util.js"?`}},
		{"absolute path", Options{Source: `import x from "/etc/passwd"; export default 1`}, []string{"absolute paths are not available"}},
		{"escaping the root", Options{Source: `import x from "../../etc/passwd"; export default 1`}, []string{"leaves the run's root"}},
		{"missing named export", Options{Source: `import {nope} from "./a.js"; export default 1`, Modules: map[string]string{"./a.js": "export const yes = 1"}},
			[]string{"nope"}},
		{"missing entry function", Options{Source: `export const a = 1, b = 2`, Execute: Execute{Fn: "main"}},
			[]string{`main.js has no export named "main"`, "it exports a, b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantFailure(t, run(t, tt.opts), StatusLinkError, tt.has...)
		})
	}
}

func TestOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		has  string
	}{
		{"unknown language", Options{Language: "python"}, `language "python" is not supported; use "js" or "ts"`},
		{"memory limit too small", Options{MemoryLimit: 1000}, "below the minimum of 1048576 bytes"},
		{"negative timeout", Options{Timeout: -time.Second}, "timeout -1s is negative"},
		{"negative output limit", Options{MaxOutputBytes: -1}, "must not be negative"},
		{"global that is not an identifier", Options{Globals: map[string]any{"a-b": 1}}, `"a-b" is not a JavaScript identifier`},
		{"global the sandbox reserves", Options{Globals: map[string]any{"console": 1}}, `"console" is reserved`},
		{"global that is not JSON", Options{Globals: map[string]any{"ch": make(chan int)}}, "must be JSON-encodable"},
		{"argument that is not JSON", Options{Execute: Execute{Args: []any{func() {}}}}, "must be JSON-encodable"},
		{"absolute module", Options{Modules: map[string]string{"/abs.js": ""}}, `"/abs.js" must be a relative path`},
		{"module outside the root", Options{Modules: map[string]string{"../up.js": ""}}, `"../up.js" leaves the run's root`},
		{"module named like the main file", Options{Modules: map[string]string{"./main.js": ""}}, `names the same module`},
		{"relative import key", Options{Imports: map[string]any{"./cfg": 1}}, `"./cfg" is not a bare specifier`},
		{"import named like a module", Options{Imports: map[string]any{"util.js": 1}, Modules: map[string]string{"./util.js": ""}}, `is also the name of a module`},
		{"import that is not JSON", Options{Imports: map[string]any{"x": make(chan int)}}, `"x": not JSON-encodable`},
		{"bad filename", Options{Filename: "../main.js"}, "filename"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Start(context.Background(), tt.opts)
			if err == nil {
				h.Wait()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.has) {
				t.Errorf("error %q does not contain %q", err, tt.has)
			}
		})
	}
}

func TestLogs(t *testing.T) {
	var seen []LogEntry
	r := run(t, Options{Source: `
		console.log("a", 1, {b: [2]}, null, undefined, 3n, Symbol("s"));
		console.info("i"); console.warn("w"); console.error(new TypeError("boom")); console.debug(() => 1);
		export default () => "done"`,
		OnLog: func(e LogEntry) { seen = append(seen, e) }})
	wantValue(t, r, `"done"`)
	want := []LogEntry{
		{"log", `a 1 {"b":[2]} null undefined 3n Symbol(s)`},
		{"info", "i"}, {"warn", "w"}, {"error", "TypeError: boom\n    at <anonymous> (main.js:3:"}, {"debug", "[Function anonymous]"},
	}
	if len(r.Logs) != len(want) || len(seen) != len(want) {
		t.Fatalf("logs %q (OnLog saw %d), want %q", r.Logs, len(seen), want)
	}
	for i, w := range want {
		if r.Logs[i].Level != w.Level || !strings.HasPrefix(r.Logs[i].Text, w.Text) {
			t.Errorf("log %d = %q, want prefix %q", i, r.Logs[i], w)
		}
	}
}

func TestLogLimit(t *testing.T) {
	r := run(t, Options{MaxLogBytes: 100, Source: `
		for (let i = 0; i < 1e4; i++) console.log("line " + i);
		export default () => "finished"`})
	wantValue(t, r, `"finished"`)
	if !r.LogsTruncated {
		t.Error("LogsTruncated not set")
	}
	total := 0
	for _, l := range r.Logs {
		total += len(l.Text)
	}
	if total > 100 || len(r.Logs) == 0 {
		t.Errorf("kept %d entries, %d bytes; want some, at most 100 bytes", len(r.Logs), total)
	}
}
