// A tool's page (#/tools/NAME): its description and flags, its input schema as a form to read
// and as JSON, its output schema, examples and variables, how each provider is offered it
// (GET /v1/tools/served/{name}: OpenAI, OpenAI strict, Anthropic, Gemini, MCP), the stored
// record and the function versions behind it, and, for a member, a form that calls it through
// the API (POST /v1/tools/{name}/call) and shows the result as text.
import { api, ApiError } from "../api.js";
import { h, clear, fold, pretty, when, toolName } from "../dom.js";
import { schemaForm, errorBox, showFieldError } from "../schemaform.js";
import { flagsOf, versionsTable } from "./tools.js";

const DIALECTS = { "openai": "OpenAI", "openai-strict": "OpenAI (strict)", "anthropic": "Anthropic", "gemini": "Gemini", "mcp": "MCP" };

export async function render(main, ctx, name) {
  let left = false;
  ctx.onLeave(() => { left = true; });
  const page = h("div", { class: "con-page tool-page" },
    h("p", { class: "crumbs" }, h("a", { href: "#/tools" }, "Tools"), " / "),
    h("h1", { class: "mono", "data-test": "tool-title" }, toolName(name)));
  main.append(page);

  let tool = null;
  try {
    tool = await api("GET", "/tools/served/" + encodeURIComponent(name));
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 404)) throw e;
  }
  const record = await storedRecord(name);
  if (left) return;

  if (!tool) {
    page.append(h("p", { class: "error", "data-test": "not-served" }, record
      ? "This tool is stored but not served now: it is disabled or deleted."
      : "The workspace is served no tool of this name."));
    if (record) page.append(recordSection(record), await functionSection(record));
    return;
  }

  page.append(
    h("div", { class: "row tool-flags", "data-test": "tool-flags" }, flagsOf({ ...tool, enabled: record ? record.enabled : undefined })),
    h("p", { class: "tool-description", "data-test": "tool-description" }, tool.description || ""));
  if (tool.requires_confirmation) {
    page.append(h("p", { class: "muted" }, "Each call waits for a person's decision, in the approvals inbox."));
  }
  if (tool.target === "client") {
    page.append(h("p", { class: "muted" }, "A client tool: the client that runs the agent executes it and posts the result."));
  }

  // ---- the schemas
  const readForm = schemaForm(tool.input_schema, { readOnly: true, test: "schema-view" });
  page.append(h("h2", {}, "Arguments"),
    h("div", { class: "schema-views" },
      h("section", {}, h("h3", {}, "As a form"), readForm.el),
      h("section", {}, h("h3", {}, "As JSON Schema"), h("pre", { class: "value", "data-test": "schema-json" }, tool.input_schema ? pretty(tool.input_schema) : "none: the tool takes no arguments"))));
  if (tool.output_schema) {
    page.append(h("h2", {}, "Result"), h("pre", { class: "value", "data-test": "output-schema" }, pretty(tool.output_schema)));
  }
  if (tool.examples?.length) {
    page.append(h("h2", {}, "Examples"), h("ul", { class: "examples" }, tool.examples.map((ex) => h("li", {},
      h("div", {}, h("span", { class: "muted" }, "arguments "), fold(pretty(ex.args), 400)),
      ex.result !== undefined ? h("div", {}, h("span", { class: "muted" }, "result "), fold(pretty(ex.result), 400)) : null))));
  }
  if (tool.variables?.length) {
    page.append(h("h2", {}, "Variables it reads"),
      h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Type"), h("th", {}, "Required"), h("th", {}, "Description"))),
        h("tbody", {}, tool.variables.map((v) => h("tr", {},
          h("td", { class: "mono" }, v.name), h("td", {}, v.type || "text"), h("td", {}, v.required ? "yes" : "no"), h("td", {}, v.description || ""))))),
      h("p", { class: "muted" }, "Values are set on threads, agents, users or the instance (the Variables page); secrets are never shown."));
  }

  // ---- the dialects
  page.append(h("h2", {}, "As providers see it"), dialects(tool.dialects || [], tool.name));

  // ---- try it
  if (ctx.can("member")) page.append(tryIt(tool, ctx));

  // ---- stored record and function
  if (record) page.append(recordSection(record), await functionSection(record));
}

// storedRecord is the stored tool of that name, if the tool is one (deleted ones too).
async function storedRecord(name) {
  try {
    const page = await api("GET", "/tools?" + new URLSearchParams({ name, include_system: "true", include_deleted: "true", limit: "20" }).toString());
    const all = page.tools.filter((t) => t.name === name);
    return all.find((t) => !t.deleted_at) || all[0] || null;
  } catch {
    return null; // a store without tools of its own
  }
}

// dialects shows the tool as each provider is offered it, one at a time.
function dialects(list, canonical) {
  const view = h("div", { class: "dialect-view" });
  const buttons = [];
  const show = (d, btn) => {
    for (const b of buttons) b.setAttribute("aria-pressed", String(b === btn));
    clear(view);
    if (d.error) {
      view.append(h("p", { class: "error" }, "Cannot be rendered for this provider: " + d.error));
      return;
    }
    const notes = [];
    if (d.name && d.name !== canonical) notes.push(h("p", { class: "muted" }, "The provider sees it as ", h("span", { class: "mono" }, d.name), "."));
    if (d.dialect === "openai-strict") {
      notes.push(h("p", { class: "muted" }, d.strict ? "Strict mode applies: every property required (optional ones nullable), no other properties."
        : "Sent without strict mode" + (d.strict_fallback ? ": " + d.strict_fallback : ".")));
    }
    view.append(...notes, h("pre", { class: "value", "data-test": "dialect-json" }, pretty(d.tools)));
  };
  const bar = h("div", { class: "row dialect-tabs", role: "group", "aria-label": "Provider" });
  for (const d of list) {
    const btn = h("button", { type: "button", class: "secondary", "aria-pressed": "false", "data-test": "dialect-" + d.dialect }, DIALECTS[d.dialect] || d.dialect);
    btn.addEventListener("click", () => show(d, btn));
    buttons.push(btn);
    bar.append(btn);
  }
  if (list.length) show(list[0], buttons[0]);
  return h("div", { class: "dialects", "data-test": "dialects" }, bar, view);
}

// tryIt is the form that calls the tool through the API and shows what it answered.
function tryIt(tool, ctx) {
  const form = schemaForm(tool.input_schema);
  const thread = h("input", { id: "try-thread", name: "thread_id", maxlength: 64, autocomplete: "off", placeholder: "thr_… (empty: a new thread)", "data-test": "try-thread" });
  const threadErr = h("p", { class: "field-error", hidden: true });
  const out = h("div", { class: "try-result", "aria-live": "polite", "data-test": "try-result" });
  const submit = h("button", { type: "submit", "data-test": "tool-try" }, "Call " + tool.name);
  const el = h("section", { class: "try-it" }, h("h2", {}, "Try it"),
    h("p", { class: "muted" }, "Calls the tool through the dispatcher, as any client does, and records the call on a thread."
      + (tool.requires_confirmation ? " This tool needs a person's confirmation: a call made here is not run, and says so." : "")),
    h("form", { "data-test": "try-form", novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      showFieldError(threadErr, "");
      const read = form.read();
      const tid = thread.value.trim();
      if (tid && !/^thr_[A-Za-z0-9_-]+$/.test(tid)) { showFieldError(threadErr, "a thread id: thr_…"); return; }
      if (!read.ok) return;
      submit.disabled = true;
      clear(out).append(h("p", { class: "loading" }, "Calling…"));
      try {
        const res = await api("POST", `/tools/${encodeURIComponent(tool.name)}/call`, { args: read.value, ...(tid ? { thread_id: tid } : {}) });
        clear(out).append(resultView(res.result, res.thread_id));
        if (res.result?.problems?.length) form.showProblems(res.result.problems);
      } catch (err) {
        clear(out);
        if (err instanceof ApiError && err.status === 401) return ctx.error(err);
        if (err instanceof ApiError) {
          form.showErrors(err.errors);
          const t = (err.errors || []).find((x) => x.location === "body.thread_id");
          if (t) showFieldError(threadErr, t.message);
        }
        out.append(errorBox(err, "The call was not made"));
      } finally {
        submit.disabled = false;
      }
    } }, form.el, h("label", { for: thread.id }, "Record on thread"), thread, threadErr, h("div", { class: "row" }, submit)),
    out);
  return el;
}

// resultView shows a tool's result as text: an error stands out, long values fold.
export function resultView(r, threadID) {
  r = r || {};
  const error = r.status === "error";
  const el = h("div", { class: "tool-result" + (error ? " error" : ""), "data-test": error ? "result-error" : "result-success" },
    h("div", { class: "row" }, h("span", { class: "status " + (error ? "error" : "success") }, error ? "error" : "success"),
      r.code ? h("span", { class: "mono" }, r.code) : null,
      threadID ? h("a", { href: "#/threads/" + encodeURIComponent(threadID), "data-test": "result-thread" }, "on thread " + threadID) : null));
  if (error) el.append(h("div", { class: "error-text" }, fold(r.error || "(no message)")));
  if (r.problems?.length) el.append(h("ul", { class: "problems" }, r.problems.map((p) => h("li", {}, `${p.pointer || "/"}: ${p.message}`))));
  if (r.result) el.append(fold(r.result));
  if (r.value !== undefined && r.value !== null) el.append(h("div", {}, h("span", { class: "muted" }, "value"), fold(pretty(r.value))));
  for (const c of r.content || []) {
    if (c.type === "text") el.append(fold(c.text));
    else el.append(h("p", { class: "muted" }, `${c.type} content` + (c.mimeType ? ` (${c.mimeType})` : "")));
  }
  if (r.attachments?.length) {
    el.append(h("ul", { class: "attachments-list" }, r.attachments.map((a) => h("li", {},
      h("span", { class: "mono" }, a.name || a.path || "attachment"), a.mimeType ? h("span", { class: "muted" }, " " + a.mimeType) : null,
      threadID && a.path ? h("span", { class: "muted" }, " — on the thread's page") : null))));
  }
  if (!error && !r.result && (r.value === undefined || r.value === null) && !(r.content || []).length) el.append(h("p", { class: "muted" }, "(an empty result)"));
  return el;
}

function recordSection(t) {
  const row = (k, v) => (v === null || v === undefined || v === "" ? null : h("tr", {}, h("th", {}, k), h("td", {}, v)));
  return h("section", { class: "tool-record", "data-test": "tool-record" }, h("h2", {}, "Stored tool"),
    h("table", { class: "kv" }, h("tbody", {},
      row("Id", h("span", { class: "mono" }, t.id)),
      row("Runs on", t.target),
      row("Enabled", t.enabled ? "yes" : "no (hidden from models, calls refused)"),
      row("Needs confirmation", t.requires_confirmation ? "yes" : "no"),
      row("Runs as", t.runtime_user_id ? h("span", { class: "mono" }, t.runtime_user_id) : "the workspace's default runtime user"),
      row("System", t.system ? "yes (built in)" : null),
      row("Created", when(t.created_at)),
      row("Updated", when(t.updated_at)),
      row("Deleted", t.deleted_at ? when(t.deleted_at) : null))));
}

// functionSection is the function a stored server tool runs, with its versions: the default
// and the one the tool pins (if any) marked.
async function functionSection(t) {
  if (!t.function_id) return h("span");
  const el = h("section", { class: "tool-function", "data-test": "tool-function" }, h("h2", {}, "Function"));
  try {
    const [f, vs] = await Promise.all([
      api("GET", `/functions/${encodeURIComponent(t.function_id)}`),
      api("GET", `/functions/${encodeURIComponent(t.function_id)}/versions`),
    ]);
    const runs = t.function_version_id || f.default_version_id;
    const v = vs.versions.find((x) => x.id === runs);
    el.append(h("p", {}, h("span", { class: "mono" }, f.name), " ", h("span", { class: "muted mono small-text" }, f.id)),
      h("p", { "data-test": "runs-version" }, "This tool runs ", v ? h("strong", {}, "version " + v.version) : h("span", { class: "mono" }, runs || "no version"),
        t.function_version_id ? " (pinned)" : " (the function's default)", "."),
      versionsTable(f, vs.versions, t.function_version_id));
  } catch (e) {
    el.append(errorBox(e, "The function could not be read"));
  }
  return el;
}
