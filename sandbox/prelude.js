// The prelude runs before any code of the run, in the run's own fresh interpreter. It takes the
// two host functions off the global object (so the code can never call them), installs
// console and a frozen Date, sets the globals, imports the main module and calls its entry
// export. It returns finish, which the host calls again, with a little more memory, when the
// run ran out of memory before it could report.
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
			settle("error", ...describe(failure));
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
