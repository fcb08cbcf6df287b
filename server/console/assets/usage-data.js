// Usage, shaped for drawing: GET /v1/usage answers rows (a bucket's start, the group's keys
// and its figures), ordered by start, only the buckets that saw a call. A chart wants one value
// per bucket, zero where nothing happened, and a series per agent or model; a ranking wants
// each tool's or caller's figures summed. Nothing here touches the page, so that what the
// charts show is decided in one place.

// PERIODS are the spans the page offers, each with the bucket that gives a readable number of
// bars (60 minutes, 24 hours, 7 or 30 days).
export const PERIODS = [
  { id: "1h", label: "Last hour", seconds: 3600, bucket: "minute" },
  { id: "24h", label: "Last 24 hours", seconds: 86400, bucket: "hour" },
  { id: "7d", label: "Last 7 days", seconds: 7 * 86400, bucket: "day" },
  { id: "30d", label: "Last 30 days", seconds: 30 * 86400, bucket: "day" },
];

// STEP is a bucket's length in seconds.
export const STEP = { minute: 60, hour: 3600, day: 86400 };

// FIGURES are the figures a row has that add up across rows (p50_ms and p95_ms do not).
export const FIGURES = ["calls", "errors", "refusals", "requests", "input_tokens", "output_tokens", "cost"];

// span is a period's from and to (RFC 3339) ending at now (milliseconds).
export function span(period, now = Date.now()) {
  const to = new Date(Math.ceil(now / 1000) * 1000);
  const from = new Date(to.getTime() - period.seconds * 1000);
  return { from: from.toISOString(), to: to.toISOString() };
}

// seconds is an RFC 3339 time as Unix seconds (the charts' x).
export function seconds(t) {
  return Math.floor(Date.parse(t) / 1000);
}

// starts are the starts (Unix seconds) of the buckets of step seconds that [from, to) covers,
// the first at or before from, as the API's buckets fall (whole minutes, hours, UTC days).
export function starts(from, to, step) {
  const out = [];
  const end = seconds(to);
  for (let t = Math.floor(seconds(from) / step) * step; t < end && out.length < 10000; t += step) out.push(t);
  return out;
}

// place is the index of the bucket a row's start falls in, or -1 outside.
function place(xs, step, start) {
  if (!xs.length) return -1;
  const i = Math.floor((seconds(start) - xs[0]) / step);
  return i >= 0 && i < xs.length ? i : -1;
}

// overTime sums value(row) per bucket: an array as long as xs, 0 where no row fell.
export function overTime(rows, xs, step, value) {
  const out = new Array(xs.length).fill(0);
  for (const r of rows) {
    const i = place(xs, step, r.start);
    if (i >= 0) out[i] += value(r) || 0;
  }
  return out;
}

// OTHERS names the series the smaller groups are folded into.
export const OTHERS = "others";

// seriesBy splits rows by their dim (agent, model) into a series per group of value(row) per
// bucket, the largest total first; past max groups, the smaller ones are summed as OTHERS.
// Groups whose total is 0 (the calls no model made, for tokens) are left out. label names the
// group whose key is empty.
export function seriesBy(rows, dim, value, xs, step, { max = 6, label = "none" } = {}) {
  const groups = new Map();
  for (const r of rows) {
    const name = r[dim] || label;
    if (!groups.has(name)) groups.set(name, []);
    groups.get(name).push(r);
  }
  let series = [...groups].map(([name, rs]) => {
    const values = overTime(rs, xs, step, value);
    return { name, values, total: values.reduce((a, b) => a + b, 0) };
  }).filter((s) => s.total > 0).sort((a, b) => b.total - a.total || a.name.localeCompare(b.name));
  if (series.length > max) {
    const rest = series.slice(max - 1);
    const values = xs.map((_, i) => rest.reduce((a, s) => a + s.values[i], 0));
    series = [...series.slice(0, max - 1), { name: OTHERS, values, total: rest.reduce((a, s) => a + s.total, 0) }];
  }
  return series;
}

// stacked is the series' values to draw as stacked bars, drawn in order: each series' bar is
// the sum of it and every series after it, so that the first (the largest) is drawn first and
// tallest and shows above the others, and each shows its own value's height.
export function stacked(series) {
  const out = series.map((s) => s.values.slice());
  for (let k = out.length - 2; k >= 0; k--) {
    for (let i = 0; i < out[k].length; i++) out[k][i] += out[k + 1][i];
  }
  return out;
}

// ranked sums rows by key(row) (a tool, a caller) and returns the groups that saw something,
// most by (a figure) first, at most max: each {name, calls, errors, …, p50_ms, p95_ms}. The percentiles are the
// largest row's (rows asked with bucket=all have one row a group).
export function ranked(rows, key, by = "calls", max = 10) {
  const groups = new Map();
  for (const r of rows) {
    const name = key(r);
    let g = groups.get(name);
    if (!g) {
      g = { name, p50_ms: r.p50_ms || 0, p95_ms: r.p95_ms || 0, _calls: -1 };
      for (const f of FIGURES) g[f] = 0;
      groups.set(name, g);
    }
    for (const f of FIGURES) g[f] += r[f] || 0;
    if ((r.calls || 0) > g._calls) {
      g._calls = r.calls || 0;
      g.p50_ms = r.p50_ms || 0;
      g.p95_ms = r.p95_ms || 0;
    }
  }
  return [...groups.values()].map(({ _calls, ...g }) => g)
    .filter((g) => FIGURES.some((f) => g[f] > 0)) // a group with requests and no calls (an agent) is there
    .sort((a, b) => b[by] - a[by] || a.name.localeCompare(b.name))
    .slice(0, max);
}

// callerName is who made a row's calls: the key, with its user when the row has both, or the
// user (an access token's calls have no key). names maps ids to what people call them (a
// key's name, a user's name or email), when known.
export function callerName(r, names = new Map()) {
  const name = (id) => names.get(id) || id;
  if (r.key && r.user) return `${name(r.key)} (${name(r.user)})`;
  return r.key ? name(r.key) : r.user ? name(r.user) : "(no key or user: the operator)";
}

// closeness orders limits by how close each is to its bound (used/max, the closest first).
export function closeness(limits) {
  const share = (l) => (l.max > 0 ? l.used / l.max : 0);
  return limits.slice().sort((a, b) => share(b) - share(a) || a.name.localeCompare(b.name));
}

// Numbers as people read them.
export const fmt = {
  int: (n) => Math.round(n || 0).toLocaleString("en"),
  // compact is a count short enough for an axis: 1.2k, 3.4M.
  compact: (n) => {
    const a = Math.abs(n || 0);
    if (a >= 1e9) return (n / 1e9).toFixed(1).replace(/\.0$/, "") + "G";
    if (a >= 1e6) return (n / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
    if (a >= 1e3) return (n / 1e3).toFixed(1).replace(/\.0$/, "") + "k";
    return String(Math.round((n || 0) * 100) / 100);
  },
  cost: (c) => {
    const v = c || 0;
    if (v === 0) return "0";
    return v >= 1 ? v.toFixed(2) : v >= 0.01 ? v.toFixed(3) : v.toPrecision(2);
  },
  ms: (m) => (m >= 1000 ? (m / 1000).toFixed(m >= 10000 ? 0 : 1) + " s" : Math.round(m || 0) + " ms"),
  pct: (x) => Math.round(x * 100) + "%",
};
