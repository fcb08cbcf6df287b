// The limits page: how often the workspace's callers may call which tools, how many calls may
// run at once, and the budgets of their agent runs: model tokens per minute and day, cost per
// day and month (GET /v1/limits, docs/guides/limits.md). The limits say what every caller may
// do, so only an admin reads them: the API refuses anyone else, and the page tells them so.
// An admin sees the document in force as a table, and edits it a card per limit; saving sends
// the whole document with the version read (PUT /v1/limits, after), so that another admin's
// change made meanwhile is refused (409) rather than overwritten. The API names the part at
// fault (body.document.limits[3].calls.per_minute): it is shown on the limit's card, beside
// its field. While the fleet's configuration file has a limits block, the API refuses every
// change (409 naming the document): the page says so and where to change them.
import { api, ApiError } from "../api.js";
import { h, clear, when } from "../dom.js";
import { errorBox } from "../schemaform.js";

// RATES are a limit's calls bounds, with the words a column or a field says.
const RATES = [["per_second", "per second", "/ s"], ["per_minute", "per minute", "/ min"], ["per_hour", "per hour", "/ h"], ["per_day", "per day", "/ day"]];
// BUDGET are a limit's bounds of its runs' model requests: the object and field, the words a
// field says, and those the table says. Cost is in the price table's unit, and may be fractional.
const BUDGET = [
  ["tokens", "input_per_minute", "Input tokens per minute", "input tokens / min"],
  ["tokens", "input_per_day", "Input tokens per day", "input tokens / day"],
  ["tokens", "output_per_minute", "Output tokens per minute", "output tokens / min"],
  ["tokens", "output_per_day", "Output tokens per day", "output tokens / day"],
  ["cost", "per_day", "Cost per day", "cost / day"],
  ["cost", "per_month", "Cost per month (30 days)", "cost / month"],
];
// PER is what a limit may count separately.
const PER = ["key", "user", "agent", "toolset", "tool"];
// WHO is the callers' fields a limit's who sets as "field:value" (claim as claim:NAME=VALUE).
const WHO = ["key", "role", "user", "agent", "toolset"];
// SHOWN are the fields of a limit its card edits.
const SHOWN = ["name", "description", "who", "tools", "per", "calls", "concurrent", "tokens", "cost"];
const HINTS = [["readOnlyHint", "read-only"], ["destructiveHint", "destructive"], ["idempotentHint", "idempotent"], ["openWorldHint", "open world"]];

export async function render(main, ctx) {
  let left = false;
  ctx.onLeave(() => { left = true; });
  const page = h("div", { class: "con-page limits-page", "data-test": "limits-page" },
    h("h1", {}, "Limits"),
    h("p", { class: "muted" }, "How often this workspace's callers may call which tools, per second, minute, hour and day, and how many of their calls " +
      "may run at once. A call over a limit is answered without running: rate_limited (or quota_exhausted for a daily bound) with when to try again. " +
      "Every limit that selects a call applies; among those that count the same way, the most specific alone."),
    h("p", { class: "muted" }, "A limit may also set a budget for its callers' agent runs: model tokens per minute and day, and their cost by the price table " +
      "per day and month. A run over its budget pauses before its next model request (budget_exhausted), and goes on by itself when the budget " +
      "has room again, or as soon as an admin raises the limit."));
  main.append(page);
  if (!ctx.can("admin")) {
    page.append(h("p", { class: "muted", "data-test": "not-admin" }, "Only a workspace admin's key reads and changes the limits: they say what every caller may do."));
    return;
  }
  const l = await api("GET", "/limits");
  if (left) return;
  const version = h("p", { class: "muted", "data-test": "limits-version" });
  const table = h("div");
  const showInForce = (doc) => {
    version.textContent = doc.version === 0
      ? "None set yet: nothing is limited."
      : `Version ${doc.version}, changed ${doc.updated_by ? "by " + doc.updated_by + " " : ""}on ${when(doc.updated_at)}.`;
    clear(table).append(...[limitTable(doc.document.limits || []), priceTable(doc.document.prices || [])].filter(Boolean));
  };
  page.append(h("h2", {}, "In force"), version, table);
  showInForce(l);
  const box = h("div");
  page.append(h("h2", {}, "Edit the limits"), box);
  editor(box, ctx, l, showInForce);
}

// limitTable shows limits as they are, a row each.
function limitTable(limits) {
  if (!limits.length) return h("p", { class: "muted", "data-test": "limits-empty" }, "No limits.");
  return h("table", { class: "limits", "data-test": "limits" },
    h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Who"), h("th", {}, "Tools"), h("th", {}, "Counted per"),
      RATES.map(([, , short]) => h("th", { class: "num" }, "Calls " + short)), h("th", { class: "num" }, "At once"), h("th", {}, "Model budget"))),
    h("tbody", {}, limits.map((l) => h("tr", { "data-test": "limit" },
      h("td", {}, h("strong", { class: "mono" }, l.name), l.description ? h("div", { class: "muted small-text" }, l.description) : null),
      h("td", { class: "mono small-text" }, whoText(l.who) || h("span", { class: "muted" }, "every caller")),
      h("td", {}, l.tools?.length ? h("span", { class: "muted unit" }, "tools ") : null, which(l)),
      h("td", {}, h("span", { class: "muted unit" }, "counted "), l.per?.length ? "per " + l.per.join(", ") : h("span", { class: "muted" }, "all together")),
      RATES.map(([k, , short]) => bound(l.calls?.[k], short, "limit-" + k)),
      bound(l.concurrent, "at once", "limit-concurrent"),
      budgetCell(l)))));
}

// budgetCell is a limit's bounds of tokens and cost, a line each ("2,000,000 input tokens / day",
// "5 cost / month"); none: a dash, not shown on a narrow screen.
function budgetCell(l) {
  const set = BUDGET.filter(([o, k]) => l[o]?.[k]);
  if (!set.length) return h("td", { class: "budget none", "data-test": "limit-budget" }, h("span", { class: "muted" }, "—"));
  return h("td", { class: "budget", "data-test": "limit-budget" },
    set.map(([o, k, , short]) => h("div", { "data-test": "limit-budget-bound" }, l[o][k].toLocaleString("en", { maximumFractionDigits: 6 }) + " " + short)));
}

// priceTable shows the document's price table, which usage's cost reads (none: nothing).
function priceTable(prices) {
  if (!prices.length) return null;
  return h("div", {}, h("h3", {}, "Prices, per million tokens"),
    h("table", { class: "prices", "data-test": "prices" },
      h("thead", {}, h("tr", {}, h("th", {}, "Model"), h("th", { class: "num" }, "Input"), h("th", { class: "num" }, "Output"))),
      h("tbody", {}, prices.map((p) => h("tr", { "data-test": "price" },
        h("td", { class: "mono" }, p.model),
        h("td", { class: "num" }, String(p.input_per_million)),
        h("td", { class: "num" }, String(p.output_per_million)))))),
    h("p", { class: "muted small-text" }, "Saving the limits here keeps the prices as they are."));
}

// bound is the cell of a number with what it bounds, for the narrow screen where a row's cells
// stack without their column's heading (and an empty one is not shown); none: a dash.
function bound(n, unit, test) {
  if (!n) return h("td", { class: "num none", "data-test": test }, h("span", { class: "muted" }, "—"));
  return h("td", { class: "num", "data-test": test }, n.toLocaleString("en"), h("span", { class: "muted unit" }, " " + unit));
}

// whoText is a limit's callers as the editor takes them: key:ID, role:ROLE, claim:NAME=VALUE.
function whoText(w) {
  if (!w) return "";
  const parts = [];
  for (const k of WHO) if (w[k]) parts.push(`${k}:${w[k]}`);
  if (w.claim) parts.push(`claim:${w.claim}=${w.value || ""}`);
  return parts.join(", ");
}

// parseWho reads whoText back: {who} or {error}.
function parseWho(text) {
  const who = {};
  for (const part of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const c = part.indexOf(":");
    const k = c < 0 ? "" : part.slice(0, c).trim();
    const v = c < 0 ? "" : part.slice(c + 1).trim();
    if (k === "claim" && v.includes("=")) {
      who.claim = v.slice(0, v.indexOf("="));
      who.value = v.slice(v.indexOf("=") + 1);
    } else if (WHO.includes(k) && v) {
      who[k] = v;
    } else {
      return { error: `who: "${part}" is none of ${WHO.map((w) => w + ":…").join(", ")}, claim:NAME=VALUE` };
    }
  }
  return { who };
}

// which is a limit's tools: names, source, annotations.
function which(l) {
  const out = [];
  if (l.tools?.length) out.push(h("span", { class: "mono" }, l.tools.join(", ")));
  if (l.source) out.push(h("span", { class: "flag" }, "source " + l.source));
  for (const [k, words] of HINTS) {
    if (typeof l.when?.[k] === "boolean") out.push(h("span", { class: "flag hint" }, (l.when[k] ? "" : "not ") + words));
  }
  return out.length ? out : h("span", { class: "muted" }, "every tool");
}

// editor lets an admin change the limits: a card per limit, Add, Save.
function editor(box, ctx, l, showInForce) {
  let current = l;
  let configured = false; // the configuration's limits block sets them: nothing here changes them
  const cards = h("div", { class: "limit-cards", "data-test": "limit-cards" });
  const problem = h("div", { "aria-live": "polite" });
  const saved = h("p", { class: "ok-text", role: "status", "data-test": "limits-saved", hidden: true });
  const save = h("button", { type: "submit", "data-test": "limits-save" }, "Save the limits");
  const add = h("button", { type: "button", class: "secondary", "data-test": "limit-add", onclick: () => addCard({}) }, "Add a limit");
  const list = [];
  const addCard = (lim) => {
    const card = limitCard(lim, () => {
      list.splice(list.indexOf(card), 1);
      card.el.remove();
    });
    list.push(card);
    cards.append(card.el);
    return card;
  };
  const fill = (doc) => {
    list.length = 0;
    clear(cards);
    (doc.document.limits || []).forEach(addCard);
  };
  box.append(h("form", { novalidate: true, "data-test": "limits-form", onsubmit: async (e) => {
    e.preventDefault();
    clear(problem);
    saved.hidden = true;
    list.forEach((c) => c.showError(""));
    const read = list.map((c) => c.read());
    const wrong = read.findIndex((r) => r.error);
    if (wrong >= 0) {
      list[wrong].showError(read[wrong].error);
      problem.append(h("div", { class: "error", role: "alert", "data-test": "error" }, `limits[${wrong}]: ${read[wrong].error}`));
      return;
    }
    save.disabled = true;
    try {
      // The rest of the document (the price table, what a later version adds) goes back as read.
      const document = { ...current.document, limits: read.map((r) => r.limit) };
      current = await api("PUT", "/limits", { document, after: current.version });
      fill(current);
      showInForce(current);
      saved.textContent = `Saved: version ${current.version}. Every door of every node follows within a second.`;
      saved.hidden = false;
    } catch (err) {
      refused(err);
    } finally {
      save.disabled = configured;
    }
  } },
  h("p", { class: "muted" }, "A limit selects callers (who: key:ID, role:viewer, user:ID, agent:NAME, toolset:NAME, claim:NAME=VALUE; empty: every caller) " +
    "and tools (names or patterns like refund_*; empty: every tool), counts them separately per key, user, agent, toolset or tool (none: all together), " +
    "and bounds their calls per period and how many run at once. 0 or empty: no bound. A limit with a model budget (tokens, cost) selects by who alone: " +
    "a model request calls no tool, so it has no tools and does not count per tool."),
  cards,
  h("div", { class: "row" }, add, save),
  saved, problem));
  fill(l);

  // refused shows why the API refused the limits: each field at fault on its limit's card, and
  // the whole answer above. A conflict is either another admin's change (the version: offer
  // the limits now in force) or the configuration's limits block (say so: nothing here can
  // change them).
  function refused(err) {
    if (err instanceof ApiError && err.status === 401) return ctx.error(err);
    const fields = err?.errors || [];
    if (err instanceof ApiError && err.status === 409 && fields.some((f) => (f.location || "") === "body.document")) {
      problem.append(h("div", { class: "warning", role: "alert", "data-test": "limits-configured" },
        h("p", {}, h("strong", {}, "These limits come from the fleet's configuration file: they are changed there, not here.")),
        h("p", {}, err.message)));
      configured = true;
      add.disabled = true;
      return;
    }
    problem.append(errorBox(err, "The limits were not saved"));
    for (const f of fields) {
      const m = /limits\[(\d+)\](?:\.(.+))?/.exec(f.location || "");
      const card = m && list[Number(m[1])];
      if (card) card.showError(`${f.location}: ${f.message}`, m[2] || "");
    }
    if (err instanceof ApiError && err.status === 409) {
      problem.append(h("p", { class: "warning", "data-test": "limits-conflict" },
        "Another admin changed the limits after this page read them (version " + current.version + "): yours were not saved."),
      h("button", { type: "button", class: "secondary", "data-test": "limits-reload", onclick: async () => {
        current = await api("GET", "/limits");
        fill(current);
        showInForce(current);
        clear(problem);
      } }, "Load the limits now in force (your changes are lost)"));
    }
  }
}

// limitCard is the fields of one limit, and a line under them for what the API says of it.
function limitCard(lim, remove) {
  let sentPer = lim.per || []; // what the card last sent as per, which an error's per[i] indexes
  const field = (name, label, input, wide) => h("div", { class: wide ? "limit-field wide" : "limit-field" },
    h("label", { class: "small-text" }, label, input));
  const text = (name, value, placeholder) => h("input", { type: "text", name, value: value || "", placeholder, autocomplete: "off", spellcheck: "false", class: "mono" });
  const count = (name, value) => h("input", { type: "number", name, min: 0, step: 1, value: value || "", placeholder: "—", inputmode: "numeric" });
  const amount = (name, value) => h("input", { type: "number", name, min: 0, step: "any", value: value || "", placeholder: "—", inputmode: "decimal" });
  const name = text("name", lim.name, "each-key");
  const description = text("description", lim.description, "why it is there");
  const who = text("who", whoText(lim.who), "every caller (role:viewer, key:key_…)");
  const tools = text("tools", (lim.tools || []).join(", "), "every tool (refund_*, deploy)");
  const per = PER.map((p) => h("label", { class: "check small-text" },
    h("input", { type: "checkbox", name: "per." + p, checked: (lim.per || []).includes(p) }), p));
  const rates = RATES.map(([k, words]) => field("calls." + k, "Calls " + words, count("calls." + k, lim.calls?.[k])));
  const concurrent = count("concurrent", lim.concurrent);
  const budget = BUDGET.map(([o, k, words]) => field(o + "." + k, words, (o === "cost" ? amount : count)(o + "." + k, lim[o]?.[k])));
  const error = h("p", { class: "field-error", "data-test": "limit-error", hidden: true });
  const other = Object.keys(lim).filter((k) => !SHOWN.includes(k) && k !== "source" && k !== "when");
  const kept = lim.source || lim.when || other.length ? h("p", { class: "muted small-text" }, "Kept as it is (the API sets it): ",
    lim.source || lim.when ? ["tools selected by ", which({ source: lim.source, when: lim.when }), " "] : null,
    other.map((k) => h("span", { class: "flag mono" }, k))) : null;
  const el = h("fieldset", { class: "limit-card", "data-test": "limit-card" },
    h("div", { class: "limit-grid" },
      field("name", "Name", name), field("description", "Why", description, true),
      field("who", "Who", who, true), field("tools", "Tools", tools, true),
      h("div", { class: "limit-field wide" }, h("span", { class: "small-text label" }, "Counted separately per"), h("div", { class: "row" }, per)),
      rates, field("concurrent", "At once", concurrent),
      h("div", { class: "limit-field full" }, h("span", { class: "small-text label" }, "Model budget of the runs it selects (cost by the price table)")),
      budget),
    kept,
    h("div", { class: "row" }, h("button", { type: "button", class: "secondary", "data-test": "limit-remove", onclick: remove }, "Remove"), error));
  return {
    el,
    // showError shows msg on the card and marks the field it names (calls.per_minute, per[1]),
    // if any.
    showError: (msg, at = "") => {
      error.textContent = msg;
      error.hidden = !msg;
      for (const f of el.querySelectorAll("[aria-invalid]")) f.removeAttribute("aria-invalid");
      const target = msg && at ? fieldAt(el, at, sentPer) : null;
      target?.setAttribute("aria-invalid", "true");
    },
    // read is the limit as the fields say ({limit}), or why it cannot be ({error}).
    // What the card does not show (source, when, what a later version adds) is kept as read.
    read: () => {
      const r = { ...lim };
      for (const k of SHOWN) delete r[k];
      r.name = name.value.trim();
      const w = parseWho(who.value);
      if (w.error) return { error: w.error };
      if (Object.keys(w.who).length) r.who = w.who;
      if (description.value.trim()) r.description = description.value.trim();
      const names = tools.value.split(",").map((s) => s.trim()).filter(Boolean);
      if (names.length) r.tools = names;
      sentPer = PER.filter((x) => el.querySelector(`[name="per.${x}"]`).checked);
      if (sentPer.length) r.per = sentPer;
      for (const [o, keys] of [["calls", RATES.map(([k]) => k)], ["tokens", budgetKeys("tokens")], ["cost", budgetKeys("cost")]]) {
        const v = numbers(el, o, keys, lim[o]);
        if (Object.keys(v).length) r[o] = v;
      }
      if (concurrent.value.trim() !== "") r.concurrent = Number(concurrent.value.trim());
      return { limit: r };
    },
  };
}

// budgetKeys are the fields of a limit's tokens or cost the card edits.
function budgetKeys(o) {
  return BUDGET.filter(([x]) => x === o).map(([, k]) => k);
}

// numbers is a limit's object o (calls, tokens, cost) as the card's fields o.KEY say, as numbers,
// an empty field left out; what the card does not edit of it (as read) is kept.
function numbers(el, o, keys, read) {
  const v = { ...read };
  for (const k of keys) {
    delete v[k];
    const text = el.querySelector(`[name="${o}.${k}"]`).value.trim();
    if (text !== "") v[k] = Number(text);
  }
  return v;
}

// fieldAt is the field of a card that an error's location names: calls.per_minute,
// tokens.input_per_day, cost.per_month, tools[0], per[1] (the second counted as sent); or null.
function fieldAt(el, at, per) {
  const p = /^per\[(\d+)\]$/.exec(at);
  if (p) {
    const counted = per[Number(p[1])];
    return counted ? el.querySelector(`[name="per.${counted}"]`) : null;
  }
  const top = at.replace(/\[\d+\]$/, "");
  return el.querySelector(`[name="${top}"]`) || el.querySelector(`[name^="${top}."]`);
}
