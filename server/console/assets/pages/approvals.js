// The approvals inbox: every call in the workspace that waits for a person's decision or a
// client's result (GET /v1/pending), newest thread first, a page at a time. A member approves a
// call, edits its arguments in a form made from the tool's input schema (checked here, then by
// the server against the schema, each problem shown next to its field, before the decision is
// sent), or denies it with a message; a client tool's call is answered with a result. The run
// then continues in the background: the item says so and links to the thread, where it can be
// watched. A viewer sees the calls and no button.
import { api, ApiError } from "../api.js";
import { h, clear, fold, pretty, toolName } from "../dom.js";
import { schemaForm, errorBox, showFieldError } from "../schemaform.js";

const PAGE = 20;
const POLL = 3000; // how often the page looks for calls that arrived since it was loaded

export async function render(main, ctx) {
  const member = ctx.can("member");
  const cursors = [""];
  const schemas = new Map(); // tool name → GET /v1/tools/served/{name} (or null: not served)
  let shown = new Set(); // the call ids the page shows
  let left = false;
  let timer = 0;

  const list = h("div", { class: "pending-list", "data-test": "pending-list", "aria-live": "polite" });
  const problem = h("div");
  const newer = h("button", { type: "button", class: "secondary", "data-test": "newer", onclick: () => { cursors.pop(); load(); } }, "← Newer");
  const older = h("button", { type: "button", class: "secondary", "data-test": "older" }, "Older →");
  const refresh = h("button", { type: "button", class: "secondary", "data-test": "refresh", onclick: () => load() }, "Refresh");
  const pager = h("div", { class: "row con-pager" }, newer, older);

  main.append(h("div", { class: "con-page approvals-page" },
    h("div", { class: "row con-head" }, h("h1", {}, "Approvals"), refresh),
    h("p", { class: "muted" }, member
      ? "Calls waiting for a decision or a client's result, newest thread first. Deciding lets the run go on in the background."
      : "Calls waiting for a decision or a client's result, newest thread first. Your key is a viewer's: it may look, not decide."),
    problem, list, pager));

  ctx.onLeave(() => { left = true; clearTimeout(timer); });

  async function load() {
    clearTimeout(timer);
    clear(problem);
    let page;
    try {
      page = await api("GET", `/pending?limit=${PAGE}` + (cursors.at(-1) ? "&cursor=" + encodeURIComponent(cursors.at(-1)) : ""));
    } catch (e) {
      if (left) return;
      if (e instanceof ApiError && e.status === 401) return ctx.error(e);
      problem.append(errorBox(e, "The waiting calls could not be read"));
      return;
    }
    if (left) return;
    clear(list);
    shown = new Set(page.calls.map((c) => c.pending?.call?.id));
    if (page.calls.length === 0) {
      list.append(h("p", { class: "muted empty", "data-test": "pending-empty" }, cursors.length > 1 ? "No more waiting calls." : "Nothing waits for anyone."));
    }
    for (const c of page.calls) list.append(item(c));
    newer.hidden = cursors.length <= 1;
    older.hidden = !page.next_cursor;
    older.onclick = () => { cursors.push(page.next_cursor); load(); };
    pager.hidden = newer.hidden && older.hidden;
    poll();
  }

  // poll looks again at the first page and puts the calls that arrived since at the top; the
  // items shown stay as they are (a person may be deciding on one).
  function poll() {
    if (cursors.length > 1) return;
    timer = setTimeout(async () => {
      if (left) return;
      try {
        const page = await api("GET", `/pending?limit=${PAGE}`);
        if (left || cursors.length > 1) return;
        const fresh = page.calls.filter((c) => !shown.has(c.pending?.call?.id));
        if (fresh.length > 0) {
          list.querySelector(".empty")?.remove();
          const first = list.firstChild;
          for (const c of fresh) {
            shown.add(c.pending?.call?.id);
            list.insertBefore(item(c), first);
          }
        }
      } catch { /* the next look may do better */ }
      poll();
    }, POLL);
  }

  // waitsFor says what a pending call waits for.
  function waitsFor(p) {
    if (p.authorization) return "waits for a connection to " + p.authorization.provider;
    return p.reason === "confirmation" ? "waits for a decision" : "waits for the client's result";
  }

  // connectHref is the connections page, the provider highlighted, asking for the scopes.
  function connectHref(a) {
    const q = new URLSearchParams({ connect: a.provider });
    if (a.scopes?.length) q.set("scopes", a.scopes.join(" "));
    return "#/connections?" + q.toString();
  }

  // item is one waiting call, with what a member may do about it.
  function item(w) {
    const p = w.pending || {};
    const call = p.call || {};
    const threadHref = "#/threads/" + encodeURIComponent(w.thread_id);
    const confirmation = p.reason === "confirmation";
    const actions = h("div", { class: "pending-actions" });
    const outcome = h("div", { class: "pending-outcome", "aria-live": "polite", "data-test": "pending-outcome" });
    const el = h("article", { class: "pending-item", "data-test": "pending-item", "data-call-id": call.id, "data-thread-id": w.thread_id, "data-reason": p.reason },
      h("div", { class: "row pending-meta" },
        h("span", { class: "status waiting" }, waitsFor(p)),
        h("a", { href: threadHref, "data-test": "thread-link" }, w.thread_name || w.thread_id),
        w.agent ? h("span", { class: "muted" }, "agent ", h("span", { class: "mono" }, w.agent)) : null),
      h("h2", { class: "pending-tool mono", "data-test": "tool-name" }, toolName(call.name || "?")),
      p.description ? h("p", { class: "pending-desc" }, p.description) : null,
      h("div", { class: "pending-args" }, h("span", { class: "muted" }, "Arguments"), fold(pretty(call.args ?? {}), 1200)),
      actions, outcome);
    if (p.authorization) {
      // Only the person whose account it is can connect it: the call runs once they have.
      actions.append(h("p", { class: "muted", "data-test": "pending-authorization" }, "The run goes on, and runs this call, once ",
        "its person connects ", h("strong", {}, p.authorization.provider), ". ",
        h("a", { href: connectHref(p.authorization) }, "Connect it →")));
      return el;
    }
    if (!member) return el;

    // done replaces the actions with what happened.
    const done = (what) => {
      clear(actions);
      clear(outcome);
      el.classList.add("done");
      el.setAttribute("data-test", "pending-done"); // no longer waiting
      outcome.append(h("p", { class: "ok-text" }, what + " The run continues in the background. ",
        h("a", { href: threadHref, "data-test": "watch" }, "Watch it on the thread →")));
    };
    const failed = (e, what) => {
      clear(outcome);
      if (e instanceof ApiError && e.status === 409) {
        outcome.append(errorBox(e, "Not waiting any more (decided elsewhere?)"));
      } else {
        outcome.append(errorBox(e, what));
      }
    };
    const busy = (on) => { for (const b of actions.querySelectorAll("button")) b.disabled = on; };

    if (confirmation) {
      const decide = async (body, what, form) => {
        busy(true);
        clear(outcome);
        try {
          await api("POST", `/threads/${encodeURIComponent(w.thread_id)}/decisions`, { call_id: call.id, ...body });
          done(what);
        } catch (e) {
          busy(false);
          if (e instanceof ApiError && e.status === 401) return ctx.error(e);
          if (form && e instanceof ApiError) form.showErrors(e.errors);
          failed(e, "The decision was not recorded");
        }
      };
      // While the arguments are being edited, Approve sends the edited ones.
      let editing = null;
      const approve = h("button", { type: "button", "data-test": "approve", onclick: () => {
        if (editing) editing.requestSubmit();
        else decide({ action: "approve" }, "Approved.");
      } }, "Approve");
      const closePanel = () => { clear(panel); editing = null; approve.textContent = "Approve"; };
      const edit = h("button", { type: "button", class: "secondary", "data-test": "edit" }, "Edit…");
      const deny = h("button", { type: "button", class: "danger", "data-test": "deny" }, "Deny…");
      const panel = h("div", { class: "pending-panel" });
      actions.append(h("div", { class: "row" }, approve, edit, deny), panel);

      deny.onclick = () => {
        closePanel();
        const msg = h("textarea", { id: `deny-${call.id}`, rows: 2, maxlength: 10000, "data-test": "deny-message", placeholder: "Why (told to the model; optional)" });
        const err = h("p", { class: "field-error", hidden: true });
        panel.append(h("form", { class: "deny-form", "data-test": "deny-form", novalidate: true, onsubmit: (e) => {
          e.preventDefault();
          showFieldError(err, "");
          if ([...msg.value].length > 10000) { showFieldError(err, "at most 10000 characters"); return; }
          decide({ action: "deny", ...(msg.value.trim() ? { message: msg.value } : {}) }, "Denied.", { showErrors: (errs) => {
            const m = (errs || []).find((x) => x.location === "body.message");
            if (m) showFieldError(err, m.message);
          } });
        } },
        h("label", { for: msg.id }, "Message to the model"), msg, err,
        h("div", { class: "row" },
          h("button", { type: "submit", class: "danger", "data-test": "deny-confirm" }, "Deny the call"),
          h("button", { type: "button", class: "secondary", onclick: closePanel }, "Cancel"))));
        msg.focus();
      };

      edit.onclick = async () => {
        closePanel();
        panel.append(h("p", { class: "loading" }, "Loading the tool's schema…"));
        const tool = await servedTool(call.name);
        if (left) return;
        clear(panel);
        const note = tool ? null : h("p", { class: "muted" }, "This tool's schema is not available here: edit the arguments as JSON.");
        const form = tool
          ? schemaForm(tool.input_schema, { value: isObject(call.args) ? call.args : {}, prefix: "body.args" })
          : schemaForm({}, { value: isObject(call.args) ? call.args : {}, prefix: "body.args" });
        const submit = h("button", { type: "submit", "data-test": "edit-confirm" }, "Run with these arguments");
        let sending = false;
        editing = h("form", { class: "edit-form", "data-test": "edit-form", novalidate: true, onsubmit: async (e) => {
          e.preventDefault();
          if (sending) return;
          const read = form.read();
          if (!read.ok) return;
          clear(outcome);
          sending = true;
          busy(true);
          if (tool) {
            // The server checks them against the tool's schema first: each problem is shown
            // next to its field, and nothing is decided.
            try {
              await api("POST", `/tools/served/${encodeURIComponent(call.name)}/validate`, { args: read.value });
            } catch (err) {
              sending = false;
              busy(false);
              if (err instanceof ApiError && err.status === 401) return ctx.error(err);
              if (err instanceof ApiError && err.status === 400) { form.showErrors(err.errors); return; }
              if (!(err instanceof ApiError && err.status === 404)) { failed(err, "The arguments could not be checked"); return; }
            }
          }
          await decide({ action: "edit", args: read.value }, "Edited and approved.", form);
          sending = false;
        } }, h("h3", {}, "Edit the arguments"), note, form.el,
        h("div", { class: "row" }, submit, h("button", { type: "button", class: "secondary", onclick: closePanel }, "Cancel")));
        panel.append(editing);
        approve.textContent = "Approve as edited";
        panel.querySelector("input, select, textarea")?.focus();
      };
    } else {
      // A client tool's call: answered with the result the client would have sent.
      const answer = h("button", { type: "button", "data-test": "answer" }, "Answer with a result…");
      const panel = h("div", { class: "pending-panel" });
      actions.append(h("div", { class: "row" }, answer), panel);
      answer.onclick = () => {
        clear(panel);
        const form = schemaForm({
          type: "object",
          properties: {
            status: { title: "Status", type: "string", enum: ["success", "error"], "x-hint": false, description: "success: the tool did its work; error: it failed." },
            text: { title: "Result", type: "string", "x-multiline": true, maxLength: 1000000, "x-hint": false, description: "The result as the model reads it (success)." },
            value: { title: "Value (JSON)", "x-hint": false, description: "The structured result, as JSON (success; optional)." },
            error: { title: "Error", type: "string", "x-multiline": true, maxLength: 10000, "x-hint": false, description: "What went wrong, worded for the model (error)." },
          },
          required: ["status"],
        }, { value: { status: "success" }, prefix: "body" });
        const submit = h("button", { type: "submit", "data-test": "answer-confirm" }, "Send the result");
        panel.append(h("form", { class: "result-form", "data-test": "result-form", novalidate: true, onsubmit: async (e) => {
          e.preventDefault();
          const read = form.read();
          if (!read.ok) return;
          const r = read.value;
          if (r.status === "error" && !r.error) { form.showErrors([{ location: "body.error", message: "say what went wrong" }]); return; }
          submit.disabled = true;
          clear(outcome);
          try {
            await api("POST", `/threads/${encodeURIComponent(w.thread_id)}/results`, { call_id: call.id, ...r });
            done(r.status === "error" ? "Answered with an error." : "Answered.");
          } catch (err) {
            submit.disabled = false;
            if (err instanceof ApiError && err.status === 401) return ctx.error(err);
            if (err instanceof ApiError) form.showErrors(err.errors);
            failed(err, "The result was not recorded");
          }
        } }, h("h3", {}, "The client's result"), form.el,
        h("div", { class: "row" }, submit, h("button", { type: "button", class: "secondary", onclick: () => clear(panel) }, "Cancel"))));
      };
    }
    return el;
  }

  // servedTool is the tool as the workspace is served it, for its input schema; null when it
  // is not served (any more) or cannot be read.
  async function servedTool(name) {
    if (schemas.has(name)) return schemas.get(name);
    let tool = null;
    try {
      tool = await api("GET", `/tools/served/${encodeURIComponent(name)}`);
    } catch { /* the arguments are edited as JSON */ }
    schemas.set(name, tool);
    return tool;
  }

  await load();
}

function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
