// A person's decision on a call, as the call's result records it (its meta's "decision": see
// quiver.DecisionRecord): who decided, with what, when, and for an edit what changed between
// the arguments the model asked for and those that ran, field by field. The thread page shows
// it above the result, so a reader sees why the call ran with other arguments than it asked.
import { h, when } from "./dom.js";

// VALUE_MAX is about what one line of the diff holds; a longer value is cut (the full meta is
// under "how it ran").
const VALUE_MAX = 200;

const DECIDED = { approve: "Approved", edit: "Edited and approved", deny: "Denied" };

// decisionEl is the decision d of a result's meta, or null when d is not one.
export function decisionEl(d) {
  if (!d || typeof d !== "object" || !DECIDED[d.action]) return null;
  const by = [];
  if (d.user_id) by.push(" by ", h("code", { "data-test": "decision-by" }, d.user_id));
  if (d.key_id) by.push(h("span", { class: "muted small" }, " with key ", h("code", { "data-test": "decision-key" }, d.key_id)));
  else if (d.access_token) by.push(h("span", { class: "muted small", "data-test": "decision-key" }, " with an access token"));
  const el = h("div", { class: "decision " + d.action, "data-test": "decision", "data-action": d.action },
    h("div", { class: "row" },
      h("strong", {}, DECIDED[d.action]), by,
      d.decided_at ? h("span", { class: "muted small", "data-test": "decision-at", title: String(d.decided_at) }, " · " + when(d.decided_at)) : null),
    d.action === "deny" && d.message ? h("p", { class: "muted small" }, "Told the model: ", d.message) : null);
  if (d.action === "edit") el.append(diffEl(d.asked_args, d.approved_args));
  return el;
}

// diffEl lists what the edit changed: each field changed (old → new), added or removed, in the
// order the call asked for them, then the fields the edit added.
function diffEl(asked, approved) {
  const rows = argsDiff(asked, approved);
  if (rows === null) {
    // Not two objects (an edit that was not JSON): both shown whole.
    return h("ul", { class: "args-diff", "data-test": "args-diff" },
      h("li", { "data-change": "asked" }, "asked ", h("code", {}, show(asked))),
      h("li", { "data-change": "approved" }, "approved ", h("code", {}, show(approved))));
  }
  if (!rows.length) return h("p", { class: "muted small", "data-test": "args-diff" }, "The arguments were approved as asked.");
  return h("ul", { class: "args-diff", "data-test": "args-diff" }, rows.map((r) =>
    h("li", { "data-test": "diff-row", "data-key": r.key, "data-change": r.change },
      h("code", { class: "diff-key" }, r.key), " ", h("span", { class: "muted small" }, r.change), " ",
      r.change === "added" ? null : h("code", { class: "diff-old", "data-test": "diff-old" }, show(r.old)),
      r.change === "changed" ? " → " : null,
      r.change === "removed" ? null : h("code", { class: "diff-new", "data-test": "diff-new" }, show(r.new)))));
}

// argsDiff compares two argument objects a field at a time: [{key, change, old, new}] for each
// field changed, added or removed (equal ones left out), or null when either is no object.
export function argsDiff(asked, approved) {
  if (!isObject(asked) || !isObject(approved)) return null;
  const rows = [];
  for (const key of Object.keys(asked)) {
    if (!(key in approved)) rows.push({ key, change: "removed", old: asked[key] });
    else if (canonical(asked[key]) !== canonical(approved[key])) rows.push({ key, change: "changed", old: asked[key], new: approved[key] });
  }
  for (const key of Object.keys(approved)) {
    if (!(key in asked)) rows.push({ key, change: "added", new: approved[key] });
  }
  return rows;
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

// canonical is a value as JSON with its objects' keys sorted: a nested object the edit only
// reordered is no change.
function canonical(v) {
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  if (isObject(v)) return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
  return JSON.stringify(v);
}

// show is a value as one line of JSON, cut to VALUE_MAX.
function show(v) {
  const s = v === undefined ? "(none)" : JSON.stringify(v);
  return s.length > VALUE_MAX ? s.slice(0, VALUE_MAX) + "…" : s;
}
