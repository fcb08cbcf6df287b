// The usage page: what the workspace's callers called and what it cost, over a period
// (GET /v1/usage, docs/guides/console.md#usage). Charts over time: the calls, with the errors
// and refusals among them; model tokens by model; cost by agent. Tables: tokens and cost by
// agent and by model, the top tools and the top callers (keys and users), each with a bar
// scaled to the first; an admin's only, as the API's. And, when the server says (GET /v1/limits/status), each limit and how
// close it is to its bound. usage-data.js shapes the API's rows, charts.js draws them.
import { api, blob, ApiError } from "../api.js";
import { h, clear, toolName } from "../dom.js";
import { barChart, COLORS } from "../charts.js";
import { PERIODS, STEP, span, starts, overTime, seriesBy, stacked, ranked, callerName, closeness, fmt } from "../usage-data.js";

const NO_AGENT = "(no agent: MCP and API calls)";
const EACH = { minute: "a minute's", hour: "an hour's", day: "a day's" };

export async function render(main, ctx) {
  let left = false;
  let undraw = [];
  const removeCharts = () => { undraw.forEach((f) => f()); undraw = []; };
  ctx.onLeave(() => { left = true; removeCharts(); });
  let period = PERIODS[1];
  const buttons = PERIODS.map((p) => h("button", { type: "button", class: "secondary", "data-test": "usage-period", "data-period": p.id,
    "aria-pressed": String(p === period), onclick: () => { period = p; load(); } }, p.label));
  const csv = h("button", { type: "button", class: "secondary", "data-test": "usage-csv", onclick: () => download(ctx, period, csv) }, "Download CSV");
  const body = h("div", { "aria-live": "polite" });
  const page = h("div", { class: "con-page usage-page", "data-test": "usage-page" },
    h("h1", {}, "Usage"),
    h("p", { class: "muted" }, "What this workspace's callers called and what it cost: calls, errors and refusals, model tokens and their cost " +
      "(from the price table of the limits), by agent, model, tool and caller."),
    h("div", { class: "row usage-periods", role: "group", "aria-label": "Period" }, buttons, csv),
    body);
  main.append(page);
  if (!ctx.can("admin")) {
    clear(page).append(h("h1", {}, "Usage"),
      h("p", { class: "muted", "data-test": "not-admin" }, "Only a workspace admin's key reads the workspace's usage."));
    return;
  }

  let asked = 0; // the last load's number: an earlier period's answer that comes later is dropped
  async function load() {
    const mine = ++asked;
    for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.period === period.id));
    removeCharts();
    clear(body).append(h("p", { class: "loading" }, "Loading…"));
    let got;
    try {
      got = await fetchUsage(period);
    } catch (err) {
      if (left || mine !== asked) return;
      if (err instanceof ApiError && err.status === 401) return ctx.error(err);
      clear(body).append(h("p", { class: "error", role: "alert", "data-test": "usage-error" }, err instanceof ApiError && err.status === 403
        ? "Your key may not read the workspace's usage: " + err.message
        : "The usage could not be read: " + err.message));
      return;
    }
    if (left || mine !== asked) return;
    clear(body);
    undraw = draw(body, got);
  }
  await load();
}

// fetchUsage asks for the period's usage: over time, in all and by model and by agent; in all
// for the whole period by tool and by caller; and the limits' state, when the server has it.
async function fetchUsage(period) {
  const { from, to } = span(period);
  const q = (bucket, groupBy) => {
    const p = new URLSearchParams({ from, to, bucket });
    if (groupBy) p.set("group_by", groupBy);
    return api("GET", "/usage?" + p);
  };
  const [all, byModel, byAgent, byTool, byCaller, limits, keys, members] = await Promise.all([
    q(period.bucket), q(period.bucket, "model"), q(period.bucket, "agent"), q("all", "tool"), q("all", "key,user"),
    api("GET", "/limits/status").catch(() => null), // not every server says: no panel then
    api("GET", "/keys").catch(() => null), api("GET", "/members").catch(() => null), // the callers' names
  ]);
  const names = new Map();
  for (const k of keys?.keys || []) names.set(k.id, k.name || k.id);
  for (const m of members?.members || []) names.set(m.user_id, m.name || m.email || m.user_id);
  return { period, from, to, all, byModel, byAgent, byTool, byCaller, limits, names };
}

// draw shows the usage in box and returns the charts' removers.
function draw(box, u) {
  const step = STEP[u.period.bucket];
  const xs = starts(u.from, u.to, step);
  const t = u.all.totals || {};
  const undraw = [];
  box.append(totals(t));
  if (!t.calls && !t.requests) {
    box.append(h("p", { class: "muted", "data-test": "usage-empty" }, "No calls and no model requests in this period."));
  }

  const calls = chartBox(box, "Calls", "usage-calls", `Each bar is ${EACH[u.period.bucket]} calls, with the errors and the refusals (calls refused before they ran) among them drawn inside it.`);
  const rows = u.all.rows || [];
  undraw.push(barChart(calls, { xs, step, integer: true, series: [
    { name: "calls", values: overTime(rows, xs, step, (r) => r.calls), color: COLORS[0] },
    { name: "errors", values: overTime(rows, xs, step, (r) => r.errors), color: COLORS[3], size: 0.45 },
    { name: "refusals", values: overTime(rows, xs, step, (r) => r.refusals), color: COLORS[1], size: 0.2 },
  ] }));

  const models = seriesBy(u.byModel.rows || [], "model", (r) => (r.input_tokens || 0) + (r.output_tokens || 0), xs, step);
  const tokens = chartBox(box, "Model tokens by model", "usage-tokens", "Input and output tokens of the model requests, a colour per model.");
  undraw.push(stackedChart(tokens, xs, step, models, fmt.compact, true, "No model requests in this period."));

  const agents = seriesBy(u.byAgent.rows || [], "agent", (r) => r.cost, xs, step, { label: NO_AGENT });
  const cost = chartBox(box, "Cost by agent", "usage-cost", "What the model requests cost, a colour per agent, at the prices of the limits document.");
  undraw.push(stackedChart(cost, xs, step, agents, fmt.cost, false, "No cost in this period: no model requests, or no prices for their models."));

  box.append(h("div", { class: "usage-tables" },
    table("By agent", "usage-agents", "Agent", ranked(u.byAgent.rows || [], (r) => r.agent || NO_AGENT, "calls"), AGENT_COLUMNS),
    table("By model", "usage-models", "Model", ranked(u.byModel.rows || [], (r) => r.model, "requests").filter((g) => g.name), MODEL_COLUMNS),
    table("Top tools", "usage-tools", "Tool", ranked(u.byTool.rows || [], (r) => r.tool, "calls").filter((g) => g.name), TOOL_COLUMNS),
    table("Top callers", "usage-callers", "Key (user)", ranked(u.byCaller.rows || [], (r) => callerName(r, u.names), "calls"), CALLER_COLUMNS)));
  if (u.limits) box.append(limitsPanel(u.limits.limits || []));
  return undraw.filter(Boolean);
}

// totals are the period's figures in a row of tiles.
function totals(t) {
  const tile = (label, value, test) => h("div", { class: "usage-tile", "data-test": test }, h("div", { class: "muted small-text" }, label), h("strong", {}, value));
  return h("div", { class: "usage-tiles", "data-test": "usage-totals" },
    tile("Calls", fmt.int(t.calls), "total-calls"),
    tile("Errors", fmt.int(t.errors), "total-errors"),
    tile("Refusals", fmt.int(t.refusals), "total-refusals"),
    tile("p50 / p95", `${fmt.ms(t.p50_ms)} / ${fmt.ms(t.p95_ms)}`, "total-latency"),
    tile("Model requests", fmt.int(t.requests), "total-requests"),
    tile("Tokens in / out", `${fmt.compact(t.input_tokens)} / ${fmt.compact(t.output_tokens)}`, "total-tokens"),
    tile("Cost", fmt.cost(t.cost), "total-cost"));
}

// chartBox is a titled section with a box for a chart.
function chartBox(box, title, test, note) {
  const el = h("div", { class: "usage-chart", "data-test": test + "-chart" });
  box.append(h("section", { class: "usage-section", "data-test": test }, h("h2", {}, title), h("p", { class: "muted small-text" }, note), el));
  return el;
}

// stackedChart draws series as stacked bars, or says there is nothing to draw.
function stackedChart(el, xs, step, series, format, integer, none) {
  if (!series.length) {
    el.append(h("p", { class: "muted", "data-test": "chart-empty" }, none));
    return null;
  }
  const sums = stacked(series);
  return barChart(el, { xs, step, format, integer,
    series: series.map((s, k) => ({ name: s.name, values: sums[k] })),
    shown: (k, i) => series[k].values[i] });
}

// A table's columns: heading, the figure, how it is written; the first figure gets the bar.
const AGENT_COLUMNS = [["Calls", "calls", fmt.int], ["Requests", "requests", fmt.int], ["Tokens in", "input_tokens", fmt.compact],
  ["Tokens out", "output_tokens", fmt.compact], ["Cost", "cost", fmt.cost]];
const MODEL_COLUMNS = [["Requests", "requests", fmt.int], ["Tokens in", "input_tokens", fmt.compact], ["Tokens out", "output_tokens", fmt.compact],
  ["Cost", "cost", fmt.cost]];
const TOOL_COLUMNS = [["Calls", "calls", fmt.int], ["Errors", "errors", fmt.int], ["Refusals", "refusals", fmt.int],
  ["p50", "p50_ms", fmt.ms], ["p95", "p95_ms", fmt.ms]];
const CALLER_COLUMNS = [["Calls", "calls", fmt.int], ["Errors", "errors", fmt.int], ["Refusals", "refusals", fmt.int],
  ["Tokens", (g) => g.input_tokens + g.output_tokens, fmt.compact], ["Cost", "cost", fmt.cost]];

// table ranks groups, a row each, the first figure with a bar scaled to the largest.
function table(title, test, first, groups, columns) {
  const value = (g, f) => (typeof f === "function" ? f(g) : g[f]);
  const top = Math.max(...groups.map((g) => value(g, columns[0][1])), 1);
  const section = h("section", { class: "usage-section", "data-test": test }, h("h2", {}, title));
  if (!groups.length) {
    section.append(h("p", { class: "muted" }, "None in this period."));
    return section;
  }
  section.append(h("table", { class: "usage-rank" },
    h("thead", {}, h("tr", {}, h("th", {}, first),
      columns.map(([name]) => h("th", { class: "num" }, name)))),
    h("tbody", {}, groups.map((g) => h("tr", { "data-test": test + "-row" },
      h("td", { class: "usage-name" }, test === "usage-tools" ? toolName(g.name) : h("span", { class: "mono" }, g.name),
        h("div", { class: "usage-bar", "aria-hidden": "true" }, h("span", { dataset: { share: String(value(g, columns[0][1]) / top) } }))),
      columns.map(([name, f, write]) => h("td", { class: "num" }, write(value(g, f)), h("span", { class: "muted unit" }, " " + name.toLowerCase()))))))));
  // The bars' widths are set through the DOM (the policy allows no style attribute in HTML).
  for (const bar of section.querySelectorAll(".usage-bar span")) bar.style.width = (Number(bar.dataset.share) * 100).toFixed(1) + "%";
  return section;
}

// boundText says how much of a bound is used: "3 of 5 calls a minute", "1.2 of 5 in cost a
// day" (a cost comes in millionths of the price table's unit).
function boundText(l) {
  const per = l.period === "concurrent" ? "at once" : "a " + l.period;
  if (l.measure === "cost") return `${fmt.cost(l.used / 1e6)} of ${fmt.cost(l.max / 1e6)} in cost ${per}`;
  const what = { input_tokens: "input tokens", output_tokens: "output tokens" }[l.measure] || "calls";
  return `${fmt.int(l.used)} of ${fmt.int(l.max)} ${what} ${per}`;
}

// limitsPanel shows each limit and how close it is to its bound, the closest first.
function limitsPanel(limits) {
  const section = h("section", { class: "usage-section", "data-test": "usage-limits" }, h("h2", {}, "Limits: how close each is"));
  if (!limits.length) {
    section.append(h("p", { class: "muted" }, "No limits: nothing is bounded."));
    return section;
  }
  section.append(h("ul", { class: "usage-limits" }, closeness(limits).map((l) => {
    const share = l.max > 0 ? Math.min(l.used / l.max, 1) : 0;
    const bar = h("span", {});
    bar.style.width = (share * 100).toFixed(1) + "%";
    return h("li", { "data-test": "usage-limit", class: share >= 0.9 ? "near" : share >= 0.6 ? "half" : "" },
      h("div", { class: "row usage-limit-head" }, h("strong", { class: "mono" }, l.name),
        h("span", {}, `${boundText(l)} (${fmt.pct(share)})`)),
      h("div", { class: "usage-bar", role: "meter", "aria-valuemin": "0", "aria-valuemax": String(l.max), "aria-valuenow": String(l.used), "aria-label": l.name }, bar),
      l.counters > 1 ? h("div", { class: "muted small-text", "data-test": "usage-limit-counters" }, `the fullest of ${fmt.int(l.counters)} counters (one per caller or tool it counts per)`) : null);
  })));
  return section;
}

// download fetches the period's usage as CSV (with the key, as every request) and saves it.
async function download(ctx, period, button) {
  const { from, to } = span(period);
  button.disabled = true;
  try {
    const p = new URLSearchParams({ from, to, bucket: period.bucket, group_by: "agent,model,tool", format: "csv" });
    const url = URL.createObjectURL(await blob("/usage?" + p));
    const a = h("a", { href: url, download: `usage-${period.id}.csv` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    ctx.error(err);
  } finally {
    button.disabled = false;
  }
}
