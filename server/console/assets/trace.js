// The trace of a thread's runs, as the thread page shows it: a timeline of its model requests,
// tool calls, approvals and sub-agents (GET /v1/threads/{id}/trace), each a row with its kind,
// name, duration, tokens and error, and a bar placed by its start and length on one time axis.
//
// Drawn with DOM elements: a bar's place and width are set through its style object (CSSOM),
// which the console's Content-Security-Policy allows where a style attribute is not. Every
// value goes in as text (h()).
import { api } from "./api.js";
import { h, clear, toolName } from "./dom.js";
import { plural } from "./titles.js";

const threadHref = (id) => "#/threads/" + encodeURIComponent(id);

// duration is a length of time in milliseconds as people read it.
export function duration(ms) {
  if (typeof ms !== "number" || !(ms >= 0)) return "";
  if (ms < 1) return "<1 ms";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60000);
  if (m < 60) return `${m} min ${Math.round((ms % 60000) / 1000)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

const count = (n) => Number(n || 0).toLocaleString("en");

// tokens is a model request's tokens, "1,234 in · 56 out", or "".
function tokens(s) {
  if (!s.input_tokens && !s.output_tokens) return "";
  return `${count(s.input_tokens)} in · ${count(s.output_tokens)} out`;
}

// ordered puts each approval and sub-agent right after the call it belongs to, the rest by
// start (the API's order).
function ordered(spans) {
  const under = new Map();
  const calls = new Set(spans.filter((s) => s.kind === "tool" && s.call_id).map((s) => s.call_id));
  const top = [];
  for (const s of spans) {
    if ((s.kind === "approval" || s.kind === "subagent") && s.parent && calls.has(s.parent)) {
      if (!under.has(s.parent)) under.set(s.parent, []);
      under.get(s.parent).push(s);
    } else {
      top.push(s);
    }
  }
  const out = [];
  for (const s of top) {
    out.push({ span: s, nested: false });
    if (s.kind === "tool") for (const c of under.get(s.call_id) || []) out.push({ span: c, nested: true });
  }
  return out;
}

// modelName is a model's name as a row shows it: a name holding a path (a scripted model's
// file) by its provider and the path's last part; the whole name is the row's title.
function modelName(name) {
  const s = String(name || "");
  const i = s.indexOf(":");
  if (i < 0 || !s.includes("/")) return s;
  return s.slice(0, i + 1) + s.slice(s.lastIndexOf("/") + 1);
}

// spanName is what a span's row is called: a sub-agent's links to its thread.
function spanName(s) {
  if (s.kind === "subagent" && s.thread_id) {
    return h("a", { href: threadHref(s.thread_id), "data-test": "span-child" }, s.name || s.thread_id);
  }
  if (s.kind === "tool" || s.kind === "approval") return toolName(s.name || "?");
  if (s.kind === "model") return h("span", { title: s.name || "" }, modelName(s.name) || "model");
  return h("span", {}, s.name || s.kind);
}

// facts is a span's duration, tokens and decision, joined.
function facts(s) {
  const parts = [s.status === "pending" ? "pending" : duration(s.duration_ms)];
  if (s.decision) parts.push(s.decision);
  const t = tokens(s);
  if (t) parts.push(t);
  return parts.filter(Boolean).join(" · ");
}

// spanEl is a span's row: its label (kind, name, facts, error) and its bar on the axis from t0
// lasting total milliseconds.
function spanEl({ span: s, nested }, t0, total) {
  const start = Date.parse(s.start) - t0;
  const end = s.end ? Date.parse(s.end) - t0 : total;
  const bar = h("div", { class: "span-bar", title: `${s.kind} ${s.name || ""}: ${facts(s)}` });
  // A span too short to see is drawn a sliver wide, kept inside the track.
  const width = Math.max(0.4, Math.min(100, ((end - start) / total) * 100));
  bar.style.left = `${Math.max(0, Math.min(100 - width, (start / total) * 100))}%`;
  bar.style.width = `${width}%`;
  const status = s.status || "ok";
  return h("li", { class: `span kind-${s.kind} span-${status}` + (nested ? " nested" : ""), "data-test": "span",
    "data-kind": s.kind, "data-status": status, "data-name": s.name || "", "data-call-id": s.call_id || "" },
    h("div", { class: "span-label" },
      h("div", { class: "span-title" }, h("span", { class: "span-kind" }, s.kind), " ", h("strong", { class: "span-name" }, spanName(s))),
      h("div", { class: "span-facts muted small", "data-test": "span-facts" }, facts(s)),
      s.status === "error" ? h("div", { class: "span-err-text small", "data-test": "span-error" },
        s.error_code ? h("code", {}, s.error_code) : null, s.error_code && s.error ? " " : "", s.error || "") : null),
    h("div", { class: "span-track" }, bar));
}

// summary is the trace in one line: how many of each, the errors, the tokens and the length.
function summary(t) {
  const spans = t.spans || [];
  const n = (kind) => spans.filter((s) => s.kind === kind).length;
  const errors = spans.filter((s) => s.status === "error").length;
  const parts = [plural(n("model"), "model request"), plural(n("tool"), "tool call")];
  if (n("approval")) parts.push(plural(n("approval"), "approval"));
  if (n("subagent")) parts.push(plural(n("subagent"), "sub-agent"));
  parts.push(plural(errors, "error"));
  if (t.input_tokens || t.output_tokens) parts.push(`${count(t.input_tokens)} tokens in · ${count(t.output_tokens)} out`);
  parts.push(duration(Date.parse(t.end) - Date.parse(t.start)));
  return parts.join(" · ");
}

// axis is the time scale above the bars: its start, middle and end.
function axis(total) {
  return h("div", { class: "trace-axis", "aria-hidden": "true" },
    h("div", { class: "span-label" }),
    h("div", { class: "trace-ticks muted small" }, h("span", {}, "0"), h("span", {}, duration(total / 2)), h("span", {}, duration(total))));
}

// traceView is the trace of a thread: an element, and load() to (re)read and draw it.
// onError(box, e) shows a failed read.
export function traceView(threadID, onError) {
  const body = h("div", { class: "trace-body" }, h("p", { class: "loading" }, "Loading…"));
  const said = h("p", { class: "muted small", "data-test": "trace-summary" });
  const refresh = h("button", { type: "button", class: "secondary small", "data-test": "trace-refresh" }, "Refresh");
  const el = h("section", { class: "trace", "aria-label": "Trace", "data-test": "trace" },
    h("div", { class: "row trace-head" }, said, refresh), body);
  let loading = null;
  const load = () => {
    if (loading) return loading;
    refresh.disabled = true;
    loading = api("GET", `/threads/${encodeURIComponent(threadID)}/trace`)
      .then((t) => { said.textContent = summary(t); draw(body, t); }, (e) => onError(body, e))
      .finally(() => { loading = null; refresh.disabled = false; });
    return loading;
  };
  refresh.addEventListener("click", load);
  return { el, load };
}

function draw(body, t) {
  clear(body);
  const spans = t.spans || [];
  if (t.truncated) {
    body.append(h("p", { class: "muted small", "data-test": "trace-truncated" }, "The thread's newest 2,000 messages: older ones are left out."));
  }
  if (t.run?.status === "failed") {
    body.append(h("p", { class: "error", "data-test": "trace-run-failed" }, `The last run failed (${t.run.reason || "?"})`, t.run.error ? ": " + t.run.error : ""));
  }
  if (!spans.length) {
    body.append(h("p", { class: "muted", "data-test": "trace-empty" }, "Nothing has run on this thread yet."));
    return;
  }
  const t0 = Date.parse(t.start);
  const total = Math.max(1, Date.parse(t.end) - t0);
  body.append(axis(total), h("ol", { class: "trace-spans", "data-test": "trace-spans" }, ordered(spans).map((r) => spanEl(r, t0, total))));
}
