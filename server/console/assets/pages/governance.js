// The governance page: the rules that govern the workspace's tools whatever their source
// (GET /v1/governance). The operator's rules come from the server's configuration: shown,
// never changed here. The workspace's own rules apply after them and may only tighten. An
// admin edits them a row per rule and saves them all with the version read (PUT
// /v1/governance), so that another admin's change made meanwhile is refused (409) rather than
// overwritten. The API checks every rule: what it refuses is shown beside the rule it names
// (rules[i]) and, with its field, at the top. Other keys see both lists, read-only.
import { api, ApiError } from "../api.js";
import { h, clear, when } from "../dom.js";
import { errorBox } from "../schemaform.js";

// HINTS are the annotations a rule's "when" selects tools by, with the words a person reads.
const HINTS = [["readOnlyHint", "read-only"], ["destructiveHint", "destructive"], ["idempotentHint", "idempotent"], ["openWorldHint", "open world"]];

export async function render(main, ctx) {
  const admin = ctx.can("admin");
  let left = false;
  ctx.onLeave(() => { left = true; });
  const page = h("div", { class: "con-page governance-page", "data-test": "governance-page" },
    h("h1", {}, "Governance"),
    h("p", { class: "muted" }, "Rules set, for every tool whatever its source (a stored tool, an OpenAPI operation, a remote MCP tool, an A2A agent, a prompt), " +
      "whether its calls wait for a person's approval, how long a call may run, and whether it may be called at all. " +
      "The operator's rules apply first; this workspace's come after them and may only tighten."));
  main.append(page);
  const g = await api("GET", "/governance");
  if (left) return;

  page.append(h("h2", {}, "The operator's rules"),
    h("p", { class: "muted" }, "From the server's configuration file. They govern every workspace; they are changed there, not here."),
    g.operator.length === 0
      ? h("p", { class: "muted", "data-test": "operator-empty" }, "None.")
      : ruleTable(g.operator, "operator-rules", "operator-rule"));

  const version = h("p", { class: "muted", "data-test": "governance-version" });
  const rulesBox = h("div");
  page.append(h("h2", {}, "This workspace's rules"), version, rulesBox);
  const showVersion = (v) => {
    version.textContent = v.version === 0 ? "None set yet." : `Version ${v.version}, changed by ${v.updated_by || "someone"} on ${when(v.updated_at)}.`;
  };
  showVersion(g);
  if (!admin) {
    rulesBox.append(g.workspace.length === 0
      ? h("p", { class: "muted", "data-test": "workspace-empty" }, "None.")
      : ruleTable(g.workspace, "workspace-rules", "workspace-rule"),
    h("p", { class: "muted", "data-test": "not-admin" }, "Only a workspace admin's key changes them."));
    return;
  }
  editor(rulesBox, ctx, g, showVersion);
}

// ruleTable shows rules as they are, a row each.
function ruleTable(rules, test, rowTest) {
  return h("table", { "data-test": test },
    h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "Tools"), h("th", {}, "Source"), h("th", {}, "When"), h("th", {}, "Sets"))),
    h("tbody", {}, rules.map((r, i) => h("tr", { "data-test": rowTest },
      h("td", {}, String(i + 1)),
      h("td", { class: "mono" }, r.tools?.length ? r.tools.join(", ") : h("span", { class: "muted" }, "any")),
      h("td", { class: "mono" }, r.source || h("span", { class: "muted" }, "any")),
      h("td", {}, whenFlags(r.when)),
      h("td", {}, setFlags(r))))));
}

function whenFlags(w) {
  const flags = HINTS.filter(([k]) => w && typeof w[k] === "boolean").map(([k, words]) => h("span", { class: "flag hint" }, (w[k] ? "" : "not ") + words));
  return flags.length ? flags : h("span", { class: "muted" }, "any tool");
}

function setFlags(r) {
  const out = [];
  if (r.requires_confirmation === true) out.push(h("span", { class: "flag confirm" }, "requires confirmation"));
  if (r.requires_confirmation === false) out.push(h("span", { class: "flag" }, "no confirmation"));
  if (r.timeout) out.push(h("span", { class: "flag" }, "timeout " + r.timeout));
  if (r.access) out.push(h("span", { class: r.access === "deny" ? "flag role-admin" : "flag" }, r.access === "deny" ? "denied" : "allowed"));
  const a = r.annotations || {};
  if (a.title) out.push(h("span", { class: "flag hint" }, "title: " + a.title));
  for (const [k, words] of HINTS) {
    if (typeof a[k] === "boolean") out.push(h("span", { class: "flag hint" }, (a[k] ? "marked " : "marked not ") + words));
  }
  return out;
}

// editor lets an admin change the workspace's rules: a row per rule, Add, Save.
function editor(box, ctx, g, showVersion) {
  let current = g;
  const body = h("tbody", { "data-test": "workspace-rules" });
  const problem = h("div", { "aria-live": "polite" });
  const saved = h("p", { class: "ok-text", role: "status", "data-test": "saved", hidden: true });
  const rows = [];
  const add = (rule) => {
    const row = ruleRow(rule, () => {
      rows.splice(rows.indexOf(row), 1);
      row.els.forEach((el) => el.remove());
    });
    rows.push(row);
    body.append(...row.els);
  };
  const fill = (rules) => {
    rows.length = 0;
    clear(body);
    rules.forEach(add);
  };
  const save = h("button", { type: "submit", "data-test": "governance-save" }, "Save the rules");
  box.append(h("form", { novalidate: true, "data-test": "governance-form", onsubmit: async (e) => {
    e.preventDefault();
    clear(problem);
    saved.hidden = true;
    rows.forEach((r) => r.showError(""));
    save.disabled = true;
    try {
      current = await api("PUT", "/governance", { rules: rows.map((r) => r.read()), version: current.version });
      fill(current.workspace);
      showVersion(current);
      saved.textContent = `Saved: version ${current.version}.`;
      saved.hidden = false;
    } catch (err) {
      refused(err);
    } finally {
      save.disabled = false;
    }
  } },
  h("p", { class: "muted" }, "A later rule wins over an earlier one. A rule selects tools by name (patterns like payments.*), by source " +
    "(openapi:NAME, mcp:NAME, a2a:NAME, stored, prompt:NAME) and by the hints a tool declares; it sets what it gives. Leave a selector empty to match any tool."),
  h("table", {},
    h("thead", {}, h("tr", {}, h("th", {}, "Tools"), h("th", {}, "Source"), h("th", {}, "When the tool is"), h("th", {}, "Requires confirmation"),
      h("th", {}, "Timeout"), h("th", {}, "Access"), h("th", {}, ""))),
    body),
  h("div", { class: "row" },
    h("button", { type: "button", class: "secondary", "data-test": "rule-add", onclick: () => add({}) }, "Add a rule"),
    save),
  saved, problem));
  fill(g.workspace);

  // refused shows why the API refused the rules: each field at fault beside its rule, and the
  // whole answer above; a conflict offers the rules now in force.
  function refused(err) {
    if (err instanceof ApiError && err.status === 401) return ctx.error(err);
    problem.append(errorBox(err, "The rules were not saved"));
    for (const f of err?.errors || []) {
      const m = /rules\[(\d+)\]/.exec(f.location || "");
      const row = m && rows[Number(m[1])];
      if (row) row.showError(`${f.location}: ${f.message}`);
    }
    if (err instanceof ApiError && err.status === 409) {
      problem.append(h("button", { type: "button", class: "secondary", "data-test": "governance-reload", onclick: async () => {
        current = await api("GET", "/governance");
        fill(current.workspace);
        showVersion(current);
        clear(problem);
      } }, "Load the rules now in force (your changes are lost)"));
    }
  }
}

// ruleRow is the fields of one rule, and a row under them for what the API says of it.
function ruleRow(rule, remove) {
  const text = (name, value, placeholder, label) => h("input", { type: "text", name, value: value || "", placeholder, "aria-label": label, autocomplete: "off", spellcheck: "false", class: "mono" });
  const tools = text("tools", (rule.tools || []).join(", "), "any (refund, payments.*)", "Tools");
  const source = text("source", rule.source, "any (openapi:shop, mcp:*)", "Source");
  const hints = HINTS.map(([k, words]) => {
    const v = rule.when?.[k];
    return h("label", { class: "small-text" }, words + " ", h("select", { name: "when." + k },
      h("option", { value: "", selected: v === undefined }, "any"),
      h("option", { value: "true", selected: v === true }, "yes"),
      h("option", { value: "false", selected: v === false }, "no")));
  });
  const confirm = h("input", { type: "checkbox", name: "requires_confirmation", checked: rule.requires_confirmation === true, "aria-label": "Requires confirmation" });
  const timeout = text("timeout", rule.timeout, "30s", "Timeout");
  timeout.size = 6;
  const access = h("select", { name: "access", "aria-label": "Access" },
    h("option", { value: "", selected: !rule.access }, "—"),
    h("option", { value: "deny", selected: rule.access === "deny" }, "deny"),
    h("option", { value: "allow", selected: rule.access === "allow" }, "allow"));
  const error = h("td", { colspan: 7, class: "field-error", "data-test": "rule-error" });
  const errorRow = h("tr", { hidden: true }, error);
  const tr = h("tr", { "data-test": "workspace-rule" },
    h("td", {}, tools), h("td", {}, source), h("td", {}, hints), h("td", {}, confirm), h("td", {}, timeout), h("td", {}, access),
    h("td", {}, h("button", { type: "button", class: "secondary", "data-test": "rule-remove", onclick: remove }, "Remove")));
  return {
    els: [tr, errorRow],
    showError: (msg) => { error.textContent = msg; errorRow.hidden = !msg; },
    // read is the rule as the fields say; what they do not show (annotations, which the
    // API refuses in a workspace's rule) is kept, so that the API names it.
    read: () => {
      const r = {};
      if (rule.annotations && Object.keys(rule.annotations).length) r.annotations = rule.annotations;
      const names = tools.value.split(",").map((s) => s.trim()).filter(Boolean);
      if (names.length) r.tools = names;
      if (source.value.trim()) r.source = source.value.trim();
      const w = {};
      for (const [k] of HINTS) {
        const v = tr.querySelector(`[name="when.${k}"]`).value;
        if (v) w[k] = v === "true";
      }
      if (Object.keys(w).length) r.when = w;
      if (confirm.checked) r.requires_confirmation = true;
      else if (rule.requires_confirmation === false) r.requires_confirmation = false;
      if (timeout.value.trim()) r.timeout = timeout.value.trim();
      if (access.value) r.access = access.value;
      return r;
    },
  };
}
