// The variables page: the values set on a thread, an agent or a user of the workspace, which
// the tools that declare them read. Any key lists them (a secret only as set: its value is
// never shown, not even to whoever set it); a member sets and removes them (a user's own, or
// any member's for an admin). A secret is typed in a password box, sent once, encrypted at
// rest by the server.
import { api, ApiError } from "../api.js";
import { h, clear, fold, when } from "../dom.js";
import { errorBox, showFieldError } from "../schemaform.js";

const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
const MAX_VALUE = 65536; // bytes, as the API allows

// view is the layer and owner shown, kept while the tab lives.
const view = { layer: "thread", owner: { thread: "", agent: "", user: "" } };

const LAYERS = {
  thread: { title: "Thread", path: (id) => `/threads/${encodeURIComponent(id)}/variables`, what: "a thread's id (thr_…)" },
  agent: { title: "Agent", path: (id) => `/agents/${encodeURIComponent(id)}/variables`, what: "an agent's name" },
  user: { title: "User", path: (id) => `/users/${encodeURIComponent(id)}/variables`, what: "a user's id (usr_…)" },
};

export async function render(main, ctx) {
  let left = false;
  ctx.onLeave(() => { left = true; });
  const me = ctx.session?.user_id || "";
  const admin = ctx.can("admin");
  const member = ctx.can("member");
  if (!view.owner.user) view.owner.user = me;

  const tabs = h("div", { class: "row layer-tabs", role: "group", "aria-label": "Layer" });
  const picker = h("div", { class: "owner-picker" });
  const listBox = h("div", { class: "variables-box", "aria-live": "polite" });
  const formBox = h("div");
  main.append(h("div", { class: "con-page variables-page" },
    h("h1", {}, "Variables"),
    h("p", { class: "muted" }, "Values the tools that declare a variable read: a thread's first, then its ancestors', the agent's, the prompt's, the user's and the instance's. Secrets are encrypted at rest and never shown."),
    tabs, picker, listBox, formBox));

  // Suggestions: the workspace's recent threads and the agents seen on them.
  const threadsList = h("datalist", { id: "var-threads" });
  const agentsList = h("datalist", { id: "var-agents" });
  main.append(threadsList, agentsList);
  api("GET", "/threads?limit=100").then((page) => {
    const seen = new Set();
    for (const t of page.threads) {
      const name = (t.tags || []).find((x) => x.startsWith("name:"))?.slice(5);
      threadsList.append(h("option", { value: t.id }, name ? `${name}${t.agent_id ? " · " + t.agent_id : ""}` : t.agent_id || ""));
      if (t.agent_id && !seen.has(t.agent_id)) { seen.add(t.agent_id); agentsList.append(h("option", { value: t.agent_id })); }
    }
  }).catch(() => { /* no suggestions */ });

  let members = null; // an admin picks any member
  if (admin) {
    try { members = (await api("GET", "/members")).members; } catch { members = null; }
    if (left) return;
  }

  const buttons = {};
  for (const [layer, l] of Object.entries(LAYERS)) {
    buttons[layer] = h("button", { type: "button", class: "secondary", "aria-pressed": String(view.layer === layer), "data-test": "layer-" + layer,
      onclick: () => { view.layer = layer; for (const [k, b] of Object.entries(buttons)) b.setAttribute("aria-pressed", String(k === layer)); showPicker(); } }, l.title);
    tabs.append(buttons[layer]);
  }

  function showPicker() {
    clear(picker);
    clear(listBox);
    clear(formBox);
    const layer = view.layer;
    if (layer === "user" && !admin) {
      if (!me) { picker.append(h("p", { class: "muted" }, "This key has no user.")); return; }
      view.owner.user = me;
      picker.append(h("p", {}, "Your user's variables (", h("span", { class: "mono" }, me), "): they follow you into every thread of yours."));
      show();
      return;
    }
    let input;
    if (layer === "user" && members) {
      input = h("select", { id: "var-owner", "data-test": "owner" }, members.map((m) =>
        h("option", { value: m.user_id, selected: m.user_id === view.owner.user }, `${m.name || m.email} (${m.role})${m.user_id === me ? " · you" : ""}`)));
      input.addEventListener("change", () => { view.owner.user = input.value; show(); });
    } else {
      input = h("input", { id: "var-owner", value: view.owner[layer], autocomplete: "off", maxlength: layer === "agent" ? 128 : 64,
        list: layer === "thread" ? "var-threads" : layer === "agent" ? "var-agents" : null, placeholder: LAYERS[layer].what, "data-test": "owner" });
    }
    const err = h("p", { class: "field-error", hidden: true });
    picker.append(h("form", { class: "filters", novalidate: true, onsubmit: (e) => {
      e.preventDefault();
      const v = input.value.trim();
      showFieldError(err, "");
      if (!v) { showFieldError(err, "give " + LAYERS[layer].what); return; }
      if (layer === "thread" && !/^thr_[A-Za-z0-9_-]+$/.test(v)) { showFieldError(err, "a thread's id starts with thr_"); return; }
      view.owner[layer] = v;
      show();
    } }, h("div", {}, h("label", { for: "var-owner" }, LAYERS[layer].title), input, err),
    input.tagName === "SELECT" ? null : h("button", { type: "submit", "data-test": "owner-show" }, "Show")));
    if (view.owner[layer]) show();
  }

  // show lists the owner's variables, and offers a member the form that sets one.
  async function show() {
    const layer = view.layer;
    const owner = view.owner[layer];
    const base = LAYERS[layer].path(owner);
    clear(listBox).append(h("p", { class: "loading" }, "Loading…"));
    clear(formBox);
    let vars;
    try {
      vars = (await api("GET", base)).variables;
    } catch (e) {
      if (left) return;
      if (e instanceof ApiError && e.status === 401) return ctx.error(e);
      clear(listBox).append(errorBox(e, "The variables could not be read"));
      return;
    }
    if (left || view.layer !== layer || view.owner[layer] !== owner) return;
    const mayWrite = member && (layer !== "user" || admin || owner === me);
    clear(listBox).append(vars.length === 0
      ? h("p", { class: "muted", "data-test": "variables-empty" }, "No variables are set here.")
      : h("table", { class: "variables-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Value"), h("th", {}, "Updated"), mayWrite ? h("th", {}, "") : null)),
        h("tbody", { "data-test": "variables" }, vars.map((v) => row(v, base, mayWrite)))));
    if (mayWrite) formBox.append(setForm(layer, base));
  }

  function row(v, base, mayWrite) {
    const actions = h("td", { class: "var-actions" });
    const tr = h("tr", { "data-test": "variable", "data-name": v.name },
      h("td", { class: "mono var-name" }, v.name),
      h("td", {}, v.secret
        ? h("span", { class: "status secret", "data-test": "secret-set" }, v.set ? "secret · set" : "secret · not set")
        : fold(v.value ?? "", 300),
      v.scoped ? h("span", { class: "flag", title: "flows down to the thread's descendants" }, "scoped") : null),
      h("td", {}, when(v.updated_at)),
      mayWrite ? actions : null);
    if (mayWrite) {
      const remove = h("button", { type: "button", class: "secondary", "data-test": "remove" }, "Remove");
      remove.onclick = () => {
        clear(actions).append(h("span", {}, `Remove ${v.name}? `),
          h("button", { type: "button", class: "danger", "data-test": "remove-confirm", onclick: async () => {
            try {
              await api("DELETE", `${base}/${encodeURIComponent(v.name)}`);
              show();
            } catch (e) {
              if (e instanceof ApiError && e.status === 401) return ctx.error(e);
              clear(actions).append(errorBox(e, "Not removed"));
            }
          } }, "Remove"),
          h("button", { type: "button", class: "secondary", onclick: () => clear(actions).append(remove) }, "Cancel"));
      };
      actions.append(remove);
    }
    return tr;
  }

  // setForm sets a variable: a name, a value, secret or not (and, on a thread, scoped).
  function setForm(layer, base) {
    const name = h("input", { id: "var-name", maxlength: 128, autocomplete: "off", spellcheck: "false", "data-test": "var-name" });
    const secret = h("input", { id: "var-secret", type: "checkbox", "data-test": "var-secret" });
    const scoped = layer === "thread" ? h("input", { id: "var-scoped", type: "checkbox", "data-test": "var-scoped" }) : null;
    const text = h("textarea", { id: "var-value", rows: 2, spellcheck: "false", "data-test": "var-value" });
    const hidden = h("input", { id: "var-value-secret", type: "password", autocomplete: "new-password", hidden: true, "data-test": "var-value-secret" });
    const errs = { name: errEl(), value: errEl(), general: h("div") };
    const valueLabel = h("label", { for: "var-value" }, "Value");
    secret.addEventListener("change", () => {
      // A secret is typed where it is not shown; switching moves what was typed.
      const [from, to] = secret.checked ? [text, hidden] : [hidden, text];
      to.value = from.value;
      from.value = "";
      text.hidden = secret.checked;
      hidden.hidden = !secret.checked;
      valueLabel.setAttribute("for", to.id);
    });
    const submit = h("button", { type: "submit", "data-test": "var-set" }, "Set");
    const showErr = showFieldError;
    const form = h("form", { class: "set-variable", novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      showErr(errs.name, ""); showErr(errs.value, ""); clear(errs.general);
      const n = name.value.trim();
      const value = secret.checked ? hidden.value : text.value;
      let ok = true;
      if (!n) { showErr(errs.name, "required"); ok = false; }
      else if (n.length > 128 || !NAME.test(n)) { showErr(errs.name, "letters, digits, _, . and -, not starting with . or -; at most 128"); ok = false; }
      const bytes = new TextEncoder().encode(value).length;
      if (bytes > MAX_VALUE) { showErr(errs.value, `${bytes} bytes, over the ${MAX_VALUE} allowed`); ok = false; }
      else if (value.includes("\u0000")) { showErr(errs.value, "text without NUL characters"); ok = false; }
      if (!ok) return;
      submit.disabled = true;
      try {
        await api("PUT", `${base}/${encodeURIComponent(n)}`, { value, secret: secret.checked, ...(scoped?.checked ? { scoped: true } : {}) });
        hidden.value = "";
        text.value = "";
        name.value = "";
        await show();
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return ctx.error(err);
        let placed = false;
        for (const x of err?.errors || []) {
          if (x.location === "path.name") { showErr(errs.name, x.message); placed = true; }
          if (x.location === "body.value") { showErr(errs.value, x.message); placed = true; }
        }
        if (!placed) errs.general.append(errorBox(err, "Not set"));
      } finally {
        submit.disabled = false;
      }
    } },
    h("h2", {}, "Set a variable"),
    h("label", { for: "var-name" }, "Name"), name, errs.name,
    h("div", { class: "check" }, secret, h("label", { for: "var-secret" }, "Secret (encrypted at rest, never shown again)")),
    scoped ? h("div", { class: "check" }, scoped, h("label", { for: "var-scoped" }, "Scoped (flows down to the thread's sub-agents)")) : null,
    valueLabel, text, hidden, errs.value, errs.general,
    h("div", { class: "row" }, submit));
    return form;
  }

  function errEl() { return h("p", { class: "field-error", hidden: true }); }

  showPicker();
}
