// The prelude runs before any code of the run, in the run's own fresh interpreter. It takes the
// two host functions off the global object (so the code can never call them), installs
// console and a frozen Date, sets the globals, guards the builtins that walk arrays, imports
// the main module and calls its entry export. It returns finish, which the host calls again,
// with a little more memory, when the run ran out of memory before it could report.
(function (input) {
	"use strict";
	const g = globalThis;
	const log = g.__quiver_log, settle = g.__quiver_settle;
	delete g.__quiver_log;
	delete g.__quiver_settle;
	const cfg = JSON.parse(input);
	const stringify = JSON.stringify, RealDate = Date, construct = Reflect.construct;
	const now = cfg.now;

	// No host clock: the code sees the instant it was given, and time does not pass. No host
	// time zone either: local time is UTC, whatever the host's TZ.
	// Plain assignments keep the built-ins' attributes (they are writable, not enumerable) and
	// cost less than defining properties, on a path every run takes.
	const proto = RealDate.prototype, utcString = proto.toUTCString, isoString = proto.toISOString;
	proto.getFullYear = proto.getUTCFullYear; proto.setFullYear = proto.setUTCFullYear;
	proto.getMonth = proto.getUTCMonth; proto.setMonth = proto.setUTCMonth;
	proto.getDate = proto.getUTCDate; proto.setDate = proto.setUTCDate;
	proto.getDay = proto.getUTCDay;
	proto.getHours = proto.getUTCHours; proto.setHours = proto.setUTCHours;
	proto.getMinutes = proto.getUTCMinutes; proto.setMinutes = proto.setUTCMinutes;
	proto.getSeconds = proto.getUTCSeconds; proto.setSeconds = proto.setUTCSeconds;
	proto.getMilliseconds = proto.getUTCMilliseconds; proto.setMilliseconds = proto.setUTCMilliseconds;
	proto.getTimezoneOffset = function getTimezoneOffset() { return 0; };
	proto.toString = proto.toLocaleString = function toString() { return utcString.call(this); };
	proto.toDateString = function toDateString() { return utcString.call(this).slice(0, 16); };
	proto.toTimeString = function toTimeString() { return utcString.call(this).slice(17); };
	proto.toLocaleDateString = function toLocaleDateString() { return isoString.call(this).slice(0, 10); };
	proto.toLocaleTimeString = function toLocaleTimeString() { return isoString.call(this).slice(11, 19); };
	function FrozenDate(...a) {
		if (new.target === undefined) return utcString.call(new RealDate(now));
		if (a.length === 0) a = [now];
		else if (a.length > 1) a = [RealDate.UTC(...a)]; // components are local time, which is UTC
		return construct(RealDate, a, new.target);
	}
	FrozenDate.prototype = RealDate.prototype;
	FrozenDate.now = () => now;
	FrozenDate.parse = RealDate.parse;
	FrozenDate.UTC = RealDate.UTC;
	Object.defineProperty(RealDate.prototype, "constructor", { value: FrozenDate, writable: true, configurable: true });
	Object.defineProperty(g, "Date", { value: FrozenDate, writable: true, configurable: true, enumerable: false });

	const show = (v) => {
		try {
			switch (typeof v) {
				case "string": return v;
				case "undefined": return "undefined";
				case "function": return "[Function " + (v.name || "anonymous") + "]";
				case "bigint": return String(v) + "n";
				case "symbol": return String(v);
				case "object":
					if (v === null) return "null";
					if (v instanceof Error) return String(v.stack ? v.name + ": " + v.message + "\n" + v.stack : v);
					return stringify(v) ?? String(v);
			}
			return String(v);
		} catch (e) {
			return "[unprintable " + typeof v + "]";
		}
	};
	let logging = true;
	const writer = (level) => function (...a) {
		if (logging) logging = log(level, a.map(show).join(" "));
	};
	Object.defineProperty(g, "console", {
		value: { log: writer("log"), info: writer("info"), warn: writer("warn"), error: writer("error"), debug: writer("debug") },
		writable: true, configurable: true, enumerable: false,
	});
	for (const k of Object.keys(cfg.globals ?? {})) g[k] = cfg.globals[k];

	// Builtins that walk an array-like index by index do it inside the engine, which does not
	// look for an interrupt until they return (see interrupt.go). Over holes, or a bare
	// {length: 2 ** 53 - 1}, a walk needs no memory, so the memory limit does not bound it: one
	// call could run for hours past the timeout. A length above the number of values the run's
	// memory could hold (cfg.maxLength) can only be holes, so these walks refuse it. A guard
	// reads length once more than the builtin does, which only a getter could tell.
	//
	// This runs for every run, and each function the prelude holds costs it a few microseconds
	// (to load, create and collect): the guards are proxies of the builtins, which keep their
	// name, length and kind, and share two handlers.
	const maxLength = cfg.maxLength, apply = Reflect.apply, isArray = Array.isArray, isView = ArrayBuffer.isView;
	const refuse = (what, n) => {
		throw new RangeError(what + " would walk " + n + " elements, more than this run's memory could hold (" + maxLength +
			"): the array is sparse or array-like; iterate over its keys (Object.keys, for...in) instead");
	};
	const within = (what, n) => { if (n > maxLength) refuse(what, n); };
	const lengthOf = (o) => (o === null || o === undefined ? 0 : +o.length);
	const isObject = (v) => v !== null && (typeof v === "object" || typeof v === "function");
	// What the guards use is taken now: the code may replace any global or prototype method
	// before it calls a guarded builtin, and must not be able to steer a guard that way.
	const toObject = Object, trunc = Math.trunc, isSpreadable = Symbol.isConcatSpreadable;
	const spread = (x) => {
		const s = isObject(x) ? x[isSpreadable] : false;
		return (s === undefined ? isArray(x) : s) ? +x.length : 0;
	};
	// flat walks nested arrays without coming back to the interpreter: one sparse array
	// repeated a million times is walked a million times. Add up, in script (which an
	// interrupt stops), what it would walk.
	const flatWalk = (o, depth, budget) => {
		const n = +o.length;
		if ((budget -= n) < 0 || depth < 1) return budget;
		for (let i = 0; i < n && budget >= 0; i++) {
			if (i in o && isArray(o[i])) budget = flatWalk(o[i], depth - 1, budget);
		}
		return budget;
	};
	const AP = Array.prototype, TA = Object.getPrototypeOf(Int8Array);
	const { concat, flat, flatMap } = AP, { raw } = String, { stringify: toJSON } = JSON, { from } = TA, { set } = TA.prototype;
	const guard = {
		apply(f, o, args) {
			const v = args[0];
			switch (f) {
			case concat: { // walks every array it spreads
				let n = o === null || o === undefined ? 0 : spread(toObject(o));
				for (let i = 0; i < args.length; i++) n += spread(args[i]);
				within("Array.prototype.concat", n);
				break;
			}
			case flat:
				if (o !== null && o !== undefined) {
					within("Array.prototype.flat", maxLength - flatWalk(toObject(o), v === undefined ? 1 : trunc(+v) || 0, maxLength));
				}
				break;
			case flatMap: // also walks each array its callback returns, between two calls of it
				within("Array.prototype.flatMap", lengthOf(o));
				if (typeof v === "function") {
					const that = args[1];
					return apply(f, o, [(e, i, a) => {
						const r = apply(v, that, [e, i, a]);
						if (isArray(r)) within("Array.prototype.flatMap", r.length);
						return r;
					}]);
				}
				break;
			case raw: // goes on even after running out of memory
				within("String.raw", isObject(v) ? lengthOf(v.raw) : 0);
				break;
			case toJSON: // walks an array replacer
				within("JSON.stringify", isArray(args[1]) ? args[1].length : 0);
				break;
			case from:
			case set: // copy an array-like that is not a typed array
				within(f === from ? "TypedArray.from" : "TypedArray.prototype.set", isObject(v) && !isView(v) ? lengthOf(v) : 0);
				break;
			}
			return apply(f, o, args);
		},
		construct(C, args, nt) {
			const v = args[0];
			within(C.name, isObject(v) && !isView(v) ? lengthOf(v) : 0);
			return construct(C, args, nt);
		},
	};
	// Most walk only their receiver, and run often: they get a handler of their own.
	const walks = {
		apply(f, o, args) {
			if (o !== null && o !== undefined && +o.length > maxLength) refuse("Array.prototype." + f.name, +o.length);
			return apply(f, o, args);
		},
	};
	for (const name of ["indexOf", "lastIndexOf", "includes", "join", "toLocaleString", "forEach", "map", "filter", "every",
		"some", "reduce", "reduceRight", "copyWithin", "reverse", "sort", "slice", "splice", "shift", "unshift"]) {
		AP[name] = new Proxy(AP[name], walks);
	}
	AP.concat = new Proxy(concat, guard);
	AP.flat = new Proxy(flat, guard);
	AP.flatMap = new Proxy(flatMap, guard);
	String.raw = new Proxy(raw, guard);
	JSON.stringify = new Proxy(toJSON, guard);
	TA.from = new Proxy(from, guard);
	TA.prototype.set = new Proxy(set, guard);
	for (const C of [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
		BigInt64Array, BigUint64Array, Float32Array, Float64Array]) {
		g[C.name] = C.prototype.constructor = new Proxy(C, guard);
	}

	// state: 0 running, 1 fulfilled with value, 2 rejected with failure, 3 no such entry. The
	// handlers only assign before reporting, so that what happened survives running out of
	// memory while reporting it.
	let state = 0, value, failure, reported = false;
	const describe = (e) => {
		try {
			if (e instanceof Error) return [String(e.name), String(e.message), String(e.stack ?? "")];
			return ["Error", "uncaught exception: " + show(e), ""];
		} catch (x) {
			return ["Error", "uncaught exception that cannot be described", ""];
		}
	};
	const finish = () => {
		if (reported) return;
		if (state === 1) {
			let s;
			try {
				s = stringify(value);
			} catch (e) {
				state = 2;
				failure = e;
			}
			if (state === 1) {
				reported = true;
				settle("ok", s === undefined ? "null" : s);
				return;
			}
			if (!(failure instanceof Error) || failure.name !== "InternalError") {
				reported = true;
				settle("error", "TypeError", "the result cannot be converted to JSON: " + describe(failure)[1], "");
				return;
			}
		}
		if (state === 2) {
			reported = true;
			// Not spread: the code may have replaced the array iterator.
			const d = describe(failure);
			settle("error", d[0], d[1], d[2]);
		} else if (state === 3) {
			reported = true;
			settle("link", "LinkError", value, "");
		}
	};
	import(cfg.main).then((m) => {
		if (!(cfg.entry in m)) {
			if (!cfg.explicit) return undefined;
			const names = Object.keys(m);
			state = 3;
			value = "module " + cfg.main.slice(2) + " has no export named " + stringify(cfg.entry) +
				(names.length ? "; it exports " + names.join(", ") : "; it exports nothing");
			return undefined;
		}
		const f = m[cfg.entry];
		return typeof f === "function" ? f(...cfg.args) : f;
	}).then((v) => {
		if (state === 0) {
			state = 1;
			value = v;
		}
		finish();
	}, (e) => {
		state = 2;
		failure = e;
		finish();
	});
	return finish;
})
