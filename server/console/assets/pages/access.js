// The access page: which of the workspace's tools each caller may see and call (its
// entitlements). Everyone sees the toolsets, each with the tools of it they may call and the
// MCP address that serves it (GET /v1/toolsets), and may ask whether they may call a tool
// (GET /v1/entitlements/explain). An admin also sees the rules (GET /v1/entitlements), edits
// the whole document as JSON and saves it with the version read (PUT /v1/entitlements, after),
// so that another admin's change made meanwhile is refused (409) rather than overwritten; the
// API's refusal names the part at fault (body.document.rules[3].tools[0]), its warnings what
// the document names that the workspace lacks now. An admin asks about any subject.
import { api, ApiError } from "../api.js";
import { h, clear, when, toolName } from "../dom.js";
import { errorBox } from "../schemaform.js";

const HINTS = [["readOnlyHint", "read-only"], ["destructiveHint", "destructive"], ["idempotentHint", "idempotent"], ["openWorldHint", "open world"]];

export async function render(main, ctx) {
  const admin = ctx.can("admin");
  let left = false;
  ctx.onLeave(() => { left = true; });
  const page = h("div", { class: "con-page access-page", "data-test": "access-page" },
    h("h1", {}, "Access"),
    h("p", { class: "muted" }, "Which of this workspace's tools each caller may see and call. A tool a caller may not call is not offered to them " +
      "at any door (MCP, the API, agent runs) and its call is refused. Deny always wins; an allow rule that names callers lets them call only what " +
      "such rules allow; a toolset is a named set of tools served at its own MCP address."));
  main.append(page);
  const [sets, doc] = await Promise.all([api("GET", "/toolsets"), admin ? api("GET", "/entitlements") : null]);
  if (left) return;

  const setsBox = h("div");
  page.append(h("h2", {}, "Toolsets"), setsBox);
  showToolsets(setsBox, sets.toolsets);

  page.append(h("h2", {}, admin ? "May a caller call a tool?" : "May I call a tool?"), explainForm(ctx, admin));

  if (!admin) {
    page.append(h("p", { class: "muted", "data-test": "not-admin" }, "Only a workspace admin's key reads and changes the rules."));
    return;
  }
  const rulesBox = h("div");
  page.append(h("h2", {}, "The rules"), rulesBox);
  editor(rulesBox, ctx, doc, async () => {
    const fresh = await api("GET", "/toolsets");
    showToolsets(setsBox, fresh.toolsets);
  });
}

// showToolsets lists the toolsets, each with its MCP address and the tools of it the caller
// may call.
function showToolsets(box, sets) {
  clear(box);
  if (!sets.length) {
    box.append(h("p", { class: "muted", "data-test": "toolsets-empty" }, "None: every caller's tools are served at " + location.origin + "/mcp."));
    return;
  }
  box.append(h("table", { "data-test": "toolsets" },
    h("thead", {}, h("tr", {}, h("th", {}, "Toolset"), h("th", {}, "MCP address"), h("th", {}, "Tools you may call"))),
    h("tbody", {}, sets.map((s) => h("tr", { "data-test": "toolset" },
      h("td", {}, h("strong", { class: "mono" }, s.name), s.description ? h("div", { class: "muted small-text" }, s.description) : null),
      h("td", { class: "mono small-text", "data-test": "toolset-address" }, location.origin + "/mcp/" + encodeURIComponent(s.name)),
      h("td", { "data-test": "toolset-tools" }, s.tools.length
        ? s.tools.map((t, i) => [i ? ", " : "", toolName(t)])
        : h("span", { class: "muted" }, "none")))))));
}

// explainForm asks whether a subject (an admin's choice; the caller otherwise) may call a tool.
function explainForm(ctx, admin) {
  const subject = admin ? h("input", { type: "text", id: "explain-subject", name: "subject", class: "mono", autocomplete: "off", spellcheck: "false",
    placeholder: "role:viewer, key:key_…, user:usr_…, claim:groups=support, agent:NAME, toolset:NAME", "data-test": "explain-subject", size: 48 }) : null;
  const tool = h("input", { type: "text", id: "explain-tool", name: "tool", class: "mono", autocomplete: "off", spellcheck: "false", required: true,
    placeholder: "refund_payment", "data-test": "explain-tool" });
  const answer = h("div", { "aria-live": "polite", "data-test": "explain-answer" });
  const ask = h("button", { type: "submit", "data-test": "explain-ask" }, "Explain");
  return h("form", { class: "explain-form", novalidate: true, "data-test": "explain-form", onsubmit: async (e) => {
    e.preventDefault();
    clear(answer);
    if (!tool.value.trim()) {
      answer.append(h("p", { class: "field-error" }, "Name a tool."));
      return;
    }
    const q = new URLSearchParams({ tool: tool.value.trim() });
    if (subject?.value.trim()) q.set("subject", subject.value.trim());
    ask.disabled = true;
    try {
      const x = await api("GET", "/entitlements/explain?" + q);
      answer.append(h("p", { "data-test": "explain-decision" },
        h("span", { class: x.allowed ? "status success" : "status error", "data-test": "explain-allowed" }, x.allowed ? "allowed" : "not allowed"),
        " ", x.subject, " → ", toolName(x.tool),
        x.rule >= 0 ? h("span", { class: "muted", "data-test": "explain-rule" }, ` (rules[${x.rule}])`) : null,
        x.agent ? h("span", { class: "muted" }, ` for agent ${x.agent}`) : null),
      h("p", { class: "muted", "data-test": "explain-reason" }, x.reason));
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return ctx.error(err);
      answer.append(errorBox(err, "Not explained"));
    } finally {
      ask.disabled = false;
    }
  } },
  admin ? h("p", { class: "muted" }, "The subject: comma-separated key:ID, user:ID, role:ROLE, claim:NAME=VALUE, agent:NAME (again for a sub-agent) " +
    "and toolset:NAME (the address the request comes through). Empty: you.") : null,
  h("div", { class: "row" },
    subject ? h("label", { for: "explain-subject" }, "Subject") : null, subject,
    h("label", { for: "explain-tool" }, "Tool"), tool, ask),
  answer);
}

// editor shows an admin the rules and lets them change the whole document.
function editor(box, ctx, doc, changed) {
  let current = doc;
  const version = h("p", { class: "muted", "data-test": "access-version" });
  const rules = h("div");
  const warnings = h("div", { "data-test": "access-warnings" });
  const text = h("textarea", { id: "access-document", name: "document", rows: 18, spellcheck: "false", "aria-label": "The entitlements document (JSON)",
    "data-test": "access-document" });
  const problem = h("div", { "aria-live": "polite" });
  const saved = h("p", { class: "ok-text", role: "status", "data-test": "access-saved", hidden: true });
  const save = h("button", { type: "submit", "data-test": "access-save" }, "Save the document");
  const show = (e) => {
    current = e;
    version.textContent = e.version === 0
      ? "None set yet: every caller may call every tool."
      : `Version ${e.version}, changed ${e.updated_by ? "by " + e.updated_by + " " : ""}on ${when(e.updated_at)}.`;
    clear(rules).append(ruleTable(e.document));
    text.value = JSON.stringify(e.document, null, 2);
    clear(warnings);
    if (e.warnings?.length) {
      warnings.append(h("div", { class: "warning", role: "status" },
        h("p", {}, "Kept, though the workspace has none of these now (tools come and go):"),
        h("ul", {}, e.warnings.map((w) => h("li", { class: "mono small-text", "data-test": "access-warning" }, w)))));
    }
  };
  box.append(version, rules, warnings, h("form", { novalidate: true, "data-test": "access-form", onsubmit: async (e) => {
    e.preventDefault();
    clear(problem);
    saved.hidden = true;
    let parsed;
    try {
      parsed = JSON.parse(text.value);
    } catch (err) {
      problem.append(h("div", { class: "error", role: "alert", "data-test": "error" }, "The document is not JSON: " + err.message));
      return;
    }
    save.disabled = true;
    try {
      show(await api("PUT", "/entitlements", { document: parsed, after: current.version }));
      saved.textContent = `Saved: version ${current.version}.`;
      saved.hidden = false;
      await changed();
    } catch (err) {
      refused(err);
    } finally {
      save.disabled = false;
    }
  } },
  h("h3", {}, "Edit the document"),
  h("p", { class: "muted" }, "default (allow or deny), rules (each: who — key, role, user, claim and value, agent, toolset; which tools — tools, source, " +
    "when, toolset; access allow or deny; description) and toolsets (each: name, description, include: selectors of tools). " +
    "A quiver.yaml with an entitlements block sets this document when the server serves it."),
  text,
  h("div", { class: "row" }, save),
  saved, problem));
  show(doc);

  // refused shows why the API refused the document: every part at fault by its place
  // (body.document.rules[0].access); a conflict offers the document now in force.
  function refused(err) {
    if (err instanceof ApiError && err.status === 401) return ctx.error(err);
    problem.append(errorBox(err, "The document was not saved"));
    if (err instanceof ApiError && err.status === 409) {
      problem.append(h("button", { type: "button", class: "secondary", "data-test": "access-reload", onclick: async () => {
        show(await api("GET", "/entitlements"));
        clear(problem);
      } }, "Load the document now in force (your changes are lost)"));
    }
  }
}

// ruleTable shows a document's default and rules, a row each.
function ruleTable(d) {
  const rows = d.rules || [];
  return h("div", {},
    h("p", { "data-test": "access-default" }, "A tool no rule decides is ",
      h("strong", {}, d.default === "deny" ? "denied" : "allowed"), "."),
    rows.length === 0 ? h("p", { class: "muted", "data-test": "access-rules-empty" }, "No rules.") :
      h("table", { "data-test": "access-rules" },
        h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "Who"), h("th", {}, "Which tools"), h("th", {}, "Access"), h("th", {}, "Why"))),
        h("tbody", {}, rows.map((r, i) => h("tr", { "data-test": "access-rule" },
          h("td", {}, String(i)),
          h("td", { class: "mono small-text" }, who(r.who)),
          h("td", {}, which(r)),
          h("td", {}, h("span", { class: r.access === "deny" ? "flag role-admin" : "flag" }, r.access === "deny" ? "deny" : "allow")),
          h("td", { class: "small-text" }, r.description || ""))))));
}

// who is a rule's callers as explain's subject names them.
function who(w) {
  if (!w) return h("span", { class: "muted" }, "every caller");
  const parts = [];
  for (const k of ["key", "role", "user", "agent", "toolset"]) if (w[k]) parts.push(`${k}:${w[k]}`);
  if (w.claim) parts.push(`claim:${w.claim}=${w.value}`);
  return parts.length ? parts.join(", ") : h("span", { class: "muted" }, "every caller");
}

// which is a rule's tools: names, source, annotations, toolset.
function which(r) {
  const out = [];
  if (r.tools?.length) out.push(h("span", { class: "mono" }, r.tools.join(", ")));
  if (r.source) out.push(h("span", { class: "flag" }, "source " + r.source));
  if (r.toolset) out.push(h("span", { class: "flag" }, "toolset " + r.toolset));
  for (const [k, words] of HINTS) {
    if (typeof r.when?.[k] === "boolean") out.push(h("span", { class: "flag hint" }, (r.when[k] ? "" : "not ") + words));
  }
  return out.length ? out : h("span", { class: "muted" }, "every tool");
}
