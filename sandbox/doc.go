// Package sandbox runs model- or user-authored JavaScript and TypeScript in a fresh, isolated
// interpreter per run: runCode.
//
// Each run gets its own QuickJS runtime (modernc.org/quickjs, pure Go): its own heap with a
// real memory cap, its own global object and prototypes, nothing shared with the host or with
// other runs. The code sees no file system, network, process, environment or module the host
// did not hand it; Date is frozen at [Options.Now] and local time is UTC; console output is
// captured. A run ends
// with a [Result] whose status is success, error, memory, link_error or terminated, and it can
// be ended at any time with [Handle.Terminate], by its timeout or by its context. So that a
// single builtin call cannot outlast those, a builtin that would walk an array-like longer
// than the run's memory could hold (a sparse array, or {length: 2 ** 53 - 1}) throws a
// RangeError instead.
//
// The code is an ES module. Its entry export (the default export unless [Execute].Fn names
// another) is called with [Execute].Args and what it returns, awaited if it is a promise,
// becomes [Result].Value as JSON:
//
//	export default function (args) {
//		console.log("adding", args.a, "and", args.b)
//		return { sum: args.a + args.b }
//	}
//
// A module without the default entry export runs for its side effects (its console output)
// and returns null; an entry export that is not a function is itself the value.
//
// The code reaches the host only through the functions [Options].Host names: the entry
// function gets them as one more argument, an object whose functions take a JSON value and
// return the host's answer (or throw its error). Each call blocks the interpreter until the
// [HostFunc] returns; the function sees the run's deadline, and its context ends when the run
// is terminated.
//
// Runs execute in this process unless a program sends them to worker processes ([Workers],
// [UseWorkers]; the program calls [WorkerMain] first in main). A worker can be killed, so a
// terminated run stops using CPU within 50 ms even inside one long builtin call, which in this
// process runs on to its end; and the code is kept out of the program's address space and
// environment. The quiver command does this.
package sandbox
