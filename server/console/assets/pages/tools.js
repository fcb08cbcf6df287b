// The tools page: the tools the workspace is served now (GET /v1/tools/served: the server's
// own and the workspace's stored ones, as the dispatcher serves them), each with its flags
// (where it runs, whether a call waits for a person); the workspace's stored tools with their
// filters (GET /v1/tools, a page at a time: disabled and deleted ones too); and its functions
// with their versions. Each served tool links to its page (#/tools/NAME).
import { api, ApiError } from "../api.js";
import { h, clear, when, toolName } from "../dom.js";
import { errorBox } from "../schemaform.js";

const PAGE = 50;
const DETAILS = 4; // the tool pages read at a time for the flags the served list lacks

export async function render(main, ctx) {
  let left = false;
  ctx.onLeave(() => { left = true; });
  const page = h("div", { class: "con-page tools-page" }, h("h1", {}, "Tools"));
  main.append(page);

  const [served, functions] = await Promise.all([
    api("GET", "/tools/served"),
    api("GET", "/functions").catch((e) => (e instanceof ApiError && e.status === 503 ? { functions: [] } : Promise.reject(e))),
  ]);
  if (left) return;
  const fnByID = new Map((functions.functions || []).map((f) => [f.id, f]));
  const servedNames = new Set(served.tools.map((t) => t.name));

  // ---- served
  const filter = h("input", { type: "search", id: "served-filter", placeholder: "name or words of the description", autocomplete: "off", "data-test": "served-filter" });
  const rows = new Map(); // name → {tr, flags}
  const body = h("tbody", { "data-test": "served-tools" });
  for (const t of [...served.tools].sort((a, b) => a.name.localeCompare(b.name))) {
    const flags = h("td", { class: "tool-flags" }, flagsOf(t));
    const tr = h("tr", { "data-test": "served-tool", "data-tool": t.name },
      h("td", {}, h("a", { class: "mono", href: "#/tools/" + encodeURIComponent(t.name) }, toolName(t.name))),
      h("td", { class: "tool-desc" }, firstLine(t.description)),
      h("td", { class: "tool-params" }, params(t.input_schema)),
      flags);
    rows.set(t.name, { tr, flags, t });
    body.append(tr);
  }
  filter.addEventListener("input", () => {
    const q = filter.value.trim().toLowerCase();
    for (const { tr, t } of rows.values()) tr.hidden = q !== "" && !(t.name.toLowerCase().includes(q) || (t.description || "").toLowerCase().includes(q));
  });
  page.append(
    h("h2", {}, `Served now (${served.tools.length})`),
    h("p", { class: "muted" }, "What the workspace's agents, MCP clients and API calls may call: the server's own tools and the workspace's enabled stored tools."),
    h("div", { class: "filters" }, h("label", { for: "served-filter" }, "Find"), filter),
    served.tools.length === 0 ? h("p", { class: "muted" }, "No tools are served.") :
      h("table", { class: "tools" }, h("thead", {}, h("tr", {}, h("th", {}, "Tool"), h("th", {}, "Description"), h("th", {}, "Arguments"), h("th", {}, "Flags"))), body));

  // The served list says no more than name, description and schemas: the flags come from
  // each tool's page, a few at a time.
  const queue = served.tools.filter((t) => t.target === undefined).map((t) => t.name);
  const worker = async () => {
    while (queue.length && !left) {
      const name = queue.shift();
      try {
        const d = await api("GET", "/tools/served/" + encodeURIComponent(name));
        const r = rows.get(name);
        if (r && !left) clear(r.flags).append(...flagsOf(d));
      } catch { /* the flags stay unknown */ }
    }
  };
  for (let i = 0; i < DETAILS; i++) worker();

  // ---- stored
  const stored = storedSection(ctx, servedNames, fnByID, () => left);
  page.append(stored.el);

  // ---- functions
  page.append(h("h2", {}, `Functions (${fnByID.size})`),
    h("p", { class: "muted" }, "The JavaScript code stored tools run, each with its versions; a tool runs its pinned version, or the function's default."),
    fnByID.size === 0 ? h("p", { class: "muted" }, "The workspace has no functions.") :
      h("div", { class: "functions", "data-test": "functions" }, [...fnByID.values()].map((f) => functionBox(f))));

  await stored.load();
}

// flagsOf shows a tool's flags: where it runs, whether a call waits for a person, whether it
// is enabled (a served tool is), whether the model writes its result itself.
export function flagsOf(t) {
  const out = [];
  const target = t.target ?? t.Target;
  if (target) out.push(h("span", { class: "flag target-" + target, "data-test": "flag-target" }, target === "client" ? "client tool" : "server"));
  const confirm = t.requires_confirmation;
  if (confirm) out.push(h("span", { class: "flag confirm", "data-test": "flag-confirmation" }, "needs confirmation"));
  if (t.enabled === false) out.push(h("span", { class: "flag off", "data-test": "flag-disabled" }, "disabled"));
  if (t.latent) out.push(h("span", { class: "flag", title: "no code runs it: the model writes its result" }, "latent"));
  if (t.system) out.push(h("span", { class: "flag" }, "system"));
  if (t.deleted_at) out.push(h("span", { class: "flag off" }, "deleted"));
  // The MCP hints the tool declares true (a hint left out says nothing, and is not shown).
  const hints = t.annotations || {};
  for (const [key, label] of [["readOnlyHint", "read-only"], ["destructiveHint", "destructive"], ["idempotentHint", "idempotent"], ["openWorldHint", "open world"]]) {
    if (hints[key] === true) {
      out.push(h("span", { class: "flag hint", "data-test": "flag-hint", title: "declared by the tool: a hint for clients, never a rule Quiver enforces" }, label));
    }
  }
  if (out.length === 0) out.push(h("span", { class: "muted" }, "…"));
  return out;
}

function firstLine(s) {
  const text = String(s ?? "");
  const line = text.split("\n")[0];
  return line.length > 160 ? line.slice(0, 160) + "…" : line;
}

// params lists a schema's properties: "city*, days" (* required).
function params(schema) {
  const props = schema && typeof schema === "object" && schema.properties && typeof schema.properties === "object" ? Object.keys(schema.properties) : [];
  if (props.length === 0) return h("span", { class: "muted" }, schema ? "—" : "none");
  const req = new Set(Array.isArray(schema.required) ? schema.required : []);
  return h("span", { class: "mono small-text" }, props.map((p) => p + (req.has(p) ? "*" : "")).join(", "));
}

// storedSection is the workspace's stored tools, filtered and paged as GET /v1/tools allows.
function storedSection(ctx, servedNames, fnByID, gone) {
  const cursors = [""];
  const name = h("input", { id: "st-name", type: "search", maxlength: 512, autocomplete: "off", "data-test": "stored-name" });
  const prefix = h("input", { id: "st-prefix", type: "checkbox", checked: true });
  const target = h("select", { id: "st-target", "data-test": "stored-target" }, [["", "any"], ["server", "server"], ["client", "client"]].map(([v, l]) => h("option", { value: v }, l)));
  const confirm = h("select", { id: "st-confirm", "data-test": "stored-confirmation" }, [["", "any"], ["true", "needs confirmation"], ["false", "runs at once"]].map(([v, l]) => h("option", { value: v }, l)));
  const deleted = h("select", { id: "st-deleted", "data-test": "stored-deleted" }, [["false", "active"], ["true", "active and deleted"], ["only", "deleted only"]].map(([v, l]) => h("option", { value: v }, l)));
  const system = h("input", { id: "st-system", type: "checkbox" });
  const fn = h("select", { id: "st-fn", "data-test": "stored-function" }, h("option", { value: "" }, "any"),
    [...fnByID.values()].map((f) => h("option", { value: f.id }, f.name)));
  const body = h("tbody", { "data-test": "stored-tools" });
  const problem = h("div");
  const newer = h("button", { type: "button", class: "secondary", onclick: () => { cursors.pop(); load(); } }, "← Previous");
  const older = h("button", { type: "button", class: "secondary" }, "Next →");
  const pager = h("div", { class: "row con-pager" }, newer, older);
  let timer = 0;
  const again = () => { cursors.length = 1; load(); };
  for (const el of [target, confirm, deleted, system, fn, prefix]) el.addEventListener("change", again);
  name.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(again, 300); });

  const label = (input, text) => h("div", {}, h("label", { for: input.id }, text), input);
  const el = h("section", { class: "stored-tools" },
    h("h2", {}, "Stored tools"),
    h("p", { class: "muted" }, "The workspace's own tools (quiver tools, POST /v1/tools): disabled and deleted ones are not served."),
    h("div", { class: "filters" }, label(name, "Name"), h("div", { class: "check" }, prefix, h("label", { for: prefix.id }, "starts with")),
      label(target, "Runs on"), label(confirm, "Confirmation"), label(fn, "Function"), label(deleted, "Show"),
      h("div", { class: "check" }, system, h("label", { for: system.id }, "system tools"))),
    problem,
    h("table", { class: "tools" }, h("thead", {}, h("tr", {}, h("th", {}, "Tool"), h("th", {}, "Description"), h("th", {}, "Function"), h("th", {}, "Flags"), h("th", {}, "Updated"))), body),
    pager);

  async function load() {
    const q = new URLSearchParams({ limit: String(PAGE), include_deleted: deleted.value });
    if (name.value.trim()) { q.set("name", name.value.trim()); if (prefix.checked) q.set("name_prefix", "true"); }
    if (target.value) q.set("target", target.value);
    if (confirm.value) q.set("requires_confirmation", confirm.value);
    if (fn.value) q.set("function_id", fn.value);
    if (system.checked) q.set("include_system", "true");
    if (cursors.at(-1)) q.set("cursor", cursors.at(-1));
    clear(problem);
    let page;
    try {
      page = await api("GET", "/tools?" + q.toString());
    } catch (e) {
      if (gone()) return;
      if (e instanceof ApiError && e.status === 503) { clear(body); problem.append(h("p", { class: "muted" }, "This server's store keeps no tools of its own.")); return; }
      problem.append(errorBox(e, "The stored tools could not be read"));
      return;
    }
    if (gone()) return;
    clear(body);
    if (page.tools.length === 0) body.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No stored tools match.")));
    for (const t of page.tools) {
      const f = t.function_id ? fnByID.get(t.function_id) : null;
      body.append(h("tr", { "data-test": "stored-tool", "data-tool": t.name },
        h("td", {}, servedNames.has(t.name) && !t.deleted_at
          ? h("a", { class: "mono", href: "#/tools/" + encodeURIComponent(t.name) }, toolName(t.name))
          : h("span", { class: "mono" }, toolName(t.name)), h("div", { class: "muted mono small-text" }, t.id)),
        h("td", { class: "tool-desc" }, firstLine(t.description)),
        h("td", {}, t.function_id ? h("span", { class: "mono" }, f ? f.name : t.function_id) : h("span", { class: "muted" }, "—"),
          t.function_version_id ? h("div", { class: "muted small-text" }, "pinned ", h("span", { class: "mono" }, t.function_version_id)) : null),
        h("td", { class: "tool-flags" }, flagsOf(t)),
        h("td", {}, when(t.updated_at))));
    }
    newer.hidden = cursors.length <= 1;
    older.hidden = !page.next_cursor;
    older.onclick = () => { cursors.push(page.next_cursor); load(); };
    pager.hidden = newer.hidden && older.hidden;
  }
  return { el, load };
}

// functionBox is a function, its versions read when opened.
export function functionBox(f, pinned) {
  const list = h("div", { class: "versions" });
  let loaded = false;
  const box = h("details", { class: "function", "data-test": "function", "data-function": f.id },
    h("summary", {}, h("span", { class: "mono" }, f.name), " ", h("span", { class: "muted small-text" }, f.id)), list);
  box.addEventListener("toggle", async () => {
    if (!box.open || loaded) return;
    loaded = true;
    clear(list).append(h("p", { class: "loading" }, "Loading the versions…"));
    try {
      const { versions } = await api("GET", `/functions/${encodeURIComponent(f.id)}/versions`);
      clear(list).append(versionsTable(f, versions, pinned));
    } catch (e) {
      loaded = false;
      clear(list).append(errorBox(e, "The versions could not be read"));
    }
  });
  return box;
}

// versionsTable lists a function's versions, the default and the pinned one marked, each
// version's code folded.
export function versionsTable(f, versions, pinned) {
  if (!versions.length) return h("p", { class: "muted" }, "No versions yet.");
  return h("table", { class: "versions-table", "data-test": "versions" },
    h("thead", {}, h("tr", {}, h("th", {}, "Version"), h("th", {}, "Created"), h("th", {}, "Code"))),
    h("tbody", {}, [...versions].reverse().map((v) => h("tr", { "data-test": "version", "data-version": v.id, class: v.id === f.default_version_id ? "default" : null },
      h("td", {}, h("strong", {}, "v" + v.version), " ", h("span", { class: "muted mono small-text" }, v.id),
        v.id === f.default_version_id ? h("span", { class: "flag default", "data-test": "default-version" }, "default") : null,
        pinned && v.id === pinned ? h("span", { class: "flag confirm", "data-test": "pinned-version" }, "pinned by this tool") : null),
      h("td", {}, when(v.created_at)),
      h("td", {}, h("details", { class: "fold" }, h("summary", {}, ((n) => `${n} line${n === 1 ? "" : "s"}`)((v.code || "").split("\n").length)), h("pre", { class: "value" }, v.code || "")))))));
}
