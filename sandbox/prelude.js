// The prelude runs before any code of the run, in the run's own fresh interpreter. It takes the
// host's functions off the global object (so the code can never call them), installs
// console and a frozen Date, sets the globals, guards the builtins that walk arrays, imports
// the main module and calls its entry export. It returns finish, which the host calls again,
// with a little more memory, when the run ran out of memory before it could report.
(function (input) {
	"use strict";
	const g = globalThis;
	const log = g.__quiver_log, settle = g.__quiver_settle, host = g.__quiver_host;
	delete g.__quiver_log;
	delete g.__quiver_settle;
	delete g.__quiver_host;
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
	// Searching compares, inside the engine, up to (length searched) × (length sought)
	// characters: a pattern of 1e4 characters that almost matches everywhere in a string of
	// 1e6 took 9 s in String.prototype.indexOf, a string of 1e7 sought in an array of 1e5
	// references to one that differs in its last character took a minute in
	// Array.prototype.indexOf, and memory allows far worse. Past searchWork compares, the
	// guards search in steps that each compare at most about that much, in script, where the
	// interrupt stops a run between two steps.
	const searchWork = 1 << 22, max = Math.max, min = Math.min;
	const SP = String.prototype;
	const { indexOf: sIndexOf, lastIndexOf: sLastIndexOf, includes: sIncludes, split: sSplit, replace: sReplace,
		replaceAll: sReplaceAll, slice: sSlice } = SP;
	const { indexOf: aIndexOf, includes: aIncludes, lastIndexOf: aLastIndexOf, join: aJoin } = AP;
	const symMatch = Symbol.match, symSplit = Symbol.split, symReplace = Symbol.replace;
	const toStr = (v) => `${v}`; // ToString: throws for a symbol, as the builtins do
	const toInt = (v) => { const x = +v; return x !== x ? 0 : trunc(x); }; // ToIntegerOrInfinity
	// small reports whether searching n characters for m costs the builtin little: at most
	// searchWork compares, or a pattern of one character, which is a plain scan.
	const small = (n, m) => n * m <= searchWork || m <= 1;
	// find is s.indexOf(p, from) for from in [0, s.length], in steps: each native search gets a
	// slice that holds the next w starting positions, so compares at most about w × m
	// characters. w starts small and doubles up to searchWork / m, so that a match close by
	// costs little copying and a long search few steps.
	const find = (s, p, from) => {
		const n = s.length, m = p.length;
		if (small(n - from, m)) return apply(sIndexOf, s, [p, from]);
		const most = max(1, trunc(searchWork / m));
		for (let i = from, w = min(most, 256); i + m <= n; i += w, w = min(2 * w, most)) {
			const j = apply(sIndexOf, apply(sSlice, s, [i, i + w + m - 1]), [p]);
			if (j >= 0) return i + j;
		}
		return -1;
	};
	// findLast is s.lastIndexOf(p, from) for from in [0, s.length], in steps, backwards.
	const findLast = (s, p, from) => {
		const n = s.length, m = p.length;
		if (small(from + 1, m)) return apply(sLastIndexOf, s, [p, from]);
		const most = max(1, trunc(searchWork / m));
		for (let e = min(from, n - m), w = min(most, 256); e >= 0; e -= w, w = min(2 * w, most)) {
			const lo = max(0, e - w + 1);
			const j = apply(sLastIndexOf, apply(sSlice, s, [lo, e + m]), [p]);
			if (j >= 0) return lo + j;
		}
		return -1;
	};
	// eachStep splits s at the matches of p from `from` on, left to right and not overlapping (as
	// split and replaceAll find them), a step at a time. A step hands one native split a slice
	// that holds the next `most` starting positions (few enough that the pieces stay small) and
	// calls step(i, next, pieces, at): the matches it found all lie in [i, next), which no match
	// crosses, and pieces are the slice split at them (the last one runs on past next); at is
	// where the last of those matches ends (i when there is none). It stops when step returns
	// false, and returns where the unsearched rest of s begins.
	const eachStep = (s, p, from, step) => {
		const n = s.length, m = p.length, most = min(max(1, trunc(searchWork / m)), 1 << 16);
		let i = from;
		while (i + m <= n) {
			const pieces = apply(sSplit, apply(sSlice, s, [i, i + most + m - 1]), [p]);
			let at = i;
			for (let k = 0; k < pieces.length - 1; k++) at += pieces[k].length + m;
			// No match starts between the last one found and the slice's last position.
			const next = min(max(at, i + most), n);
			if (step(i, next, pieces, at) === false) return -1;
			i = next;
		}
		return i;
	};
	// substitute is GetSubstitution for a match of a plain string (no captures).
	const substitute = (s, matched, pos, replacement) => {
		let out = "", from = 0, i;
		while ((i = apply(sIndexOf, replacement, ["$", from])) >= 0 && i + 1 < replacement.length) {
			const c = replacement[i + 1];
			const by = c === "$" ? "$" : c === "&" ? matched : c === "`" ? apply(sSlice, s, [0, pos]) :
				c === "'" ? apply(sSlice, s, [pos + matched.length]) : undefined;
			if (by === undefined) {
				out += apply(sSlice, replacement, [from, i + 1]);
				from = i + 1;
			} else {
				out += apply(sSlice, replacement, [from, i]) + by;
				from = i + 2;
			}
		}
		return out + apply(sSlice, replacement, [from]);
	};
	const isRegExp = (v) => {
		if (!isObject(v)) return false;
		const m = v[symMatch];
		return m !== undefined ? !!m : v instanceof RegExp;
	};
	// Each string guard converts its receiver and arguments the way the builtin does, once, and
	// hands the builtin the converted values when the search is small, so that nothing is
	// converted twice.
	const strings = {
		apply(f, o, args) {
			const v = args[0];
			// Most calls search a short string for a string: nothing to convert, nothing to fear.
			if (typeof o === "string" && typeof v === "string" && o.length * v.length <= searchWork) return apply(f, o, args);
			if (o === null || o === undefined) return apply(f, o, args); // the builtin's TypeError
			switch (f) {
			case sIndexOf: case sIncludes: {
				const s = toStr(o);
				if (f === sIncludes && isRegExp(v)) return apply(f, s, args);
				const p = toStr(v), from = min(max(toInt(args[1]), 0), s.length);
				if (small(s.length - from, p.length)) return apply(f, s, [p, from]);
				const i = find(s, p, from);
				return f === sIncludes ? i >= 0 : i;
			}
			case sLastIndexOf: {
				const s = toStr(o), p = toStr(v), x = +args[1];
				const from = min(max(x !== x ? Infinity : trunc(x), 0), s.length);
				return findLast(s, p, from);
			}
			case sSplit: {
				if (v !== null && v !== undefined && v[symSplit] != null) return apply(f, o, args);
				const s = toStr(o), limit = args[1], lim = limit === undefined ? 4294967295 : limit >>> 0, p = toStr(v);
				if (lim === 0 || v === undefined || small(s.length, p.length)) return apply(f, s, [v === undefined ? v : p, lim]);
				// carry is the text since the last match, which the next piece continues.
				const parts = [];
				let carry = "";
				const rest = eachStep(s, p, 0, (i, next, pieces, at) => {
					const k = pieces.length - 1;
					if (k === 0) {
						carry += apply(sSlice, s, [i, next]);
						return true;
					}
					for (let j = 0; j < k && parts.length < lim; j++) parts[parts.length] = j === 0 ? carry + pieces[0] : pieces[j];
					carry = apply(sSlice, s, [at, next]);
					return parts.length < lim;
				});
				if (rest >= 0) parts[parts.length] = carry + apply(sSlice, s, [rest]);
				return parts;
			}
			case sReplace: case sReplaceAll: {
				if (v !== null && v !== undefined) {
					if (f === sReplaceAll && isRegExp(v) || v[symReplace] != null) return apply(f, o, args);
				}
				const s = toStr(o), p = toStr(v), r = args[1], call = typeof r === "function", by = call ? r : toStr(r);
				if (small(s.length, p.length)) return apply(f, s, [p, by]);
				const replacement = (i) => call ? toStr(apply(r, undefined, [p, i, s])) : substitute(s, p, i, by);
				if (f === sReplace) {
					const i = find(s, p, 0);
					return i < 0 ? s : apply(sSlice, s, [0, i]) + replacement(i) + apply(sSlice, s, [i + p.length]);
				}
				// A plain replacement is the builtin's, a step at a time. Otherwise each match is
				// replaced here; the pieces are joined a few thousand at a time, since a string
				// built by thousands of += costs memory for each.
				const plain = !call && apply(sIndexOf, by, ["$"]) < 0;
				let out = "", seg = [];
				const flush = () => { out += apply(aJoin, seg, [""]); seg = []; };
				const rest = eachStep(s, p, 0, (i, next, pieces) => {
					if (plain) {
						out += apply(sReplaceAll, apply(sSlice, s, [i, next]), [p, by]);
						return true;
					}
					let at = i;
					for (let k = 0; k < pieces.length - 1; k++) {
						at += pieces[k].length;
						seg[seg.length] = pieces[k];
						seg[seg.length] = replacement(at);
						at += p.length;
					}
					seg[seg.length] = apply(sSlice, s, [at, next]);
					if (seg.length > 4096) flush();
				});
				seg[seg.length] = apply(sSlice, s, [rest]);
				flush();
				return out;
			}
			}
			return apply(f, o, args);
		},
	};
	// The array searches compare strings as long as the one sought: past searchWork, they walk
	// in script.
	const searchArray = (f, o, x, args) => {
		const a = toObject(o), n = +a.length;
		if (f === aLastIndexOf) {
			const k0 = args.length > 1 ? toInt(args[1]) : n - 1;
			for (let k = k0 >= 0 ? min(k0, n - 1) : n + k0; k >= 0; k--) if (k in a && a[k] === x) return k;
			return -1;
		}
		const k0 = toInt(args[1]);
		for (let k = k0 >= 0 ? k0 : max(n + k0, 0); k < n; k++) {
			if (f === aIncludes ? a[k] === x : k in a && a[k] === x) return f === aIncludes ? true : k;
		}
		return f === aIncludes ? false : -1;
	};

	// A sort without a comparator compares inside the engine: 6e5 strings took 0.3 s, and more
	// memory allows more. Past sortAlone elements the guard passes a comparator that orders as
	// the builtin does (by ToString, by code units), so that the interrupt reaches every
	// comparison; an array sort needs no more memory with one. (A typed array sort does: it
	// would copy the array twice, so typed arrays keep the builtin's sort; see SECURITY.md.)
	// sortAlone comes from the host (interrupt.go).
	const sortAlone = cfg.sortAlone, { sort: aSort, toSorted: aToSorted } = AP;
	const byString = (x, y) => { const a = `${x}`, b = `${y}`; return a < b ? -1 : a > b ? 1 : 0; };

	// Most walk only their receiver, and run often: they get a handler of their own.
	const walks = {
		apply(f, o, args) {
			if (o !== null && o !== undefined) {
				const n = +o.length;
				if (n > maxLength) refuse("Array.prototype." + f.name, n);
				const v = args[0];
				if (typeof v === "string" && n * v.length > searchWork && (f === aIndexOf || f === aIncludes || f === aLastIndexOf)) {
					return searchArray(f, o, v, args);
				}
				if (v === undefined && n > sortAlone && (f === aSort || f === aToSorted)) return apply(f, o, [byString]);
			}
			return apply(f, o, args);
		},
	};
	for (const name of ["indexOf", "lastIndexOf", "includes", "join", "toLocaleString", "forEach", "map", "filter", "every",
		"some", "reduce", "reduceRight", "copyWithin", "reverse", "sort", "toSorted", "slice", "splice", "shift", "unshift"]) {
		AP[name] = new Proxy(AP[name], walks);
	}
	for (const name of ["indexOf", "lastIndexOf", "includes", "split", "replace", "replaceAll"]) {
		SP[name] = new Proxy(SP[name], strings);
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

	// The host's functions (Options.Host), an object given to the entry function after its
	// arguments. Each call crosses to the host with its argument as JSON and comes back with
	// "v" and the answer's JSON, or "e" and an error message. They run after the code, which
	// may have replaced any global: they use only what the prelude holds.
	if (cfg.host) {
		const parse = JSON.parse, Err = Error, fns = {};
		for (let i = 0; i < cfg.host.length; i++) {
			const name = cfg.host[i];
			fns[name] = function (arg) {
				const s = stringify(arg);
				const r = host(name, s === undefined ? "null" : s), body = apply(sSlice, r, [1]);
				if (r[0] !== "v") throw new Err(body);
				return parse(body);
			};
		}
		cfg.args[cfg.args.length] = Object.freeze(fns);
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
