// The threads page: the workspace's threads, newest first, a page at a time (GET /v1/threads
// with limit and cursor: each page costs the same however many threads there are), filtered by
// agent, tag, status and a text in the name. A member also gets a form to create a thread.
//
// The filters and the page stay in this module while the tab lives, so that coming back from a
// thread shows the same list.
import { api, ApiError } from "../api.js";
import { h, clear, when } from "../dom.js";
import { standInTitle, wantsFirstMessage, firstAsked } from "../titles.js";

const PAGE = 50;
const TITLES = 4; // the first messages read at a time, for the titles of threads without a name

// view is what the list shows: the filters, and the cursors of the pages seen so far (the
// first page's is ""), the last one being the page shown.
const view = { agent: "", tag: "", status: "", name: "", cursors: [""] };

export async function render(main, ctx) {
  let left = false;
  let timer = 0;
  let seq = 0; // the latest list request; the answers of older ones are dropped
  ctx.onLeave(() => { left = true; clearTimeout(timer); });

  const agents = h("datalist", { id: "threads-agents" }); // the agents seen, to pick one
  const seenAgents = new Set();
  const noteAgents = (threads) => {
    for (const t of threads) {
      if (t.agent_id && !seenAgents.has(t.agent_id)) {
        seenAgents.add(t.agent_id);
        agents.append(h("option", { value: t.agent_id }));
      }
    }
  };

  const agentIn = h("input", { id: "f-agent", name: "agent", list: "threads-agents", value: view.agent, maxlength: 128, autocomplete: "off", placeholder: "any agent", "data-test": "filter-agent" });
  const tagIn = h("input", { id: "f-tag", name: "tag", value: view.tag, maxlength: 1024, autocomplete: "off", placeholder: "tag", "data-test": "filter-tag" });
  const statusIn = h("select", { id: "f-status", name: "status", "data-test": "filter-status" },
    ["", "idle", "running", "waiting", "failed", "terminated"].map((s) => h("option", { value: s, selected: view.status === s }, s || "any")));
  const nameIn = h("input", { id: "f-name", name: "name", type: "search", value: view.name, maxlength: 128, autocomplete: "off", placeholder: "text in the name", "data-test": "filter-name" });

  const body = h("tbody", { "data-test": "threads" });
  const info = h("p", { class: "muted threads-info", "aria-live": "polite" });
  const newer = h("button", { type: "button", class: "secondary", "data-test": "newer", onclick: () => { view.cursors.pop(); load(); } }, "← Newer");
  const older = h("button", { type: "button", class: "secondary", "data-test": "older" }, "Older →");
  const pager = h("div", { class: "row pager" }, newer, older);
  const problem = h("div", { class: "threads-problem" });

  // refilter starts the list again from its first page with the filters as the form has them.
  const refilter = () => {
    clearTimeout(timer);
    const next = { agent: agentIn.value.trim(), tag: tagIn.value.trim(), status: statusIn.value, name: nameIn.value.trim() };
    if (next.agent === view.agent && next.tag === view.tag && next.status === view.status && next.name === view.name) return;
    Object.assign(view, next, { cursors: [""] });
    load();
  };
  const soon = () => { clearTimeout(timer); timer = setTimeout(refilter, 300); };
  nameIn.addEventListener("input", soon);
  agentIn.addEventListener("change", refilter);
  tagIn.addEventListener("change", refilter);
  statusIn.addEventListener("change", refilter);

  const filters = h("form", { class: "filters", role: "search", "data-test": "filters", onsubmit: (e) => { e.preventDefault(); refilter(); } },
    h("div", {}, h("label", { for: "f-name" }, "Name"), nameIn),
    h("div", {}, h("label", { for: "f-agent" }, "Agent"), agentIn),
    h("div", {}, h("label", { for: "f-tag" }, "Tag"), tagIn),
    h("div", {}, h("label", { for: "f-status" }, "Status"), statusIn),
    h("button", { type: "submit" }, "Filter"),
    h("button", { type: "button", class: "secondary", onclick: () => {
      agentIn.value = tagIn.value = nameIn.value = ""; statusIn.value = ""; refilter();
    } }, "Clear"));

  async function load() {
    const mine = ++seq;
    const q = new URLSearchParams({ limit: String(PAGE) });
    for (const k of ["agent", "tag", "status", "name"]) if (view[k]) q.set(k, view[k]);
    const cursor = view.cursors[view.cursors.length - 1];
    if (cursor) q.set("cursor", cursor);
    info.textContent = "Loading…";
    older.disabled = newer.disabled = true;
    let data;
    try {
      data = await api("GET", "/threads?" + q);
    } catch (e) {
      if (left || mine !== seq) return;
      if (e instanceof ApiError && e.status === 400 && cursor) {
        view.cursors = [""]; // a cursor of a list that changed under it: start again
        return load();
      }
      clear(problem).append(h("p", { class: "error", role: "alert" }, String(e.message || e)));
      info.textContent = "";
      if (e instanceof ApiError && e.status === 401) ctx.error(e);
      return;
    }
    if (left || mine !== seq) return;
    clear(problem);
    noteAgents(data.threads);
    titles.clear();
    clear(body).append(...data.threads.map(row));
    titleRows(data.threads, () => left || mine !== seq);
    const page = view.cursors.length;
    const filtered = view.agent || view.tag || view.status || view.name;
    info.textContent = data.threads.length === 0
      ? (filtered ? "No thread matches these filters." : "No threads yet.")
      : `Page ${page}: ${data.threads.length} thread${data.threads.length === 1 ? "" : "s"}${data.next_cursor ? "" : ", the last page"}.`;
    newer.disabled = page === 1;
    older.disabled = !data.next_cursor;
    older.onclick = data.next_cursor ? () => { view.cursors.push(data.next_cursor); load(); } : null;
    pager.hidden = page === 1 && !data.next_cursor;
  }

  main.append(h("div", { class: "threads-page", "data-test": "threads-page" },
    h("div", { class: "row threads-head" }, h("h1", {}, "Threads")),
    ctx.can("member") ? newThreadForm(ctx) : null,
    filters, agents, problem,
    h("table", { class: "threads" },
      h("thead", {}, h("tr", {}, h("th", {}, "Thread"), h("th", {}, "Agent"), h("th", {}, "Status"), h("th", {}, "Created"))),
      body),
    info, pager));
  await load();
}

// titles are the title links of the rows shown, by thread id, for titleRows.
const titles = new Map();

function row(t) {
  const title = h("a", { href: "#/threads/" + encodeURIComponent(t.id), class: "thread-name", "data-test": "thread-title" }, standInTitle(t));
  titles.set(t.id, title);
  return h("tr", { "data-test": "thread-row", "data-id": t.id },
    h("td", {},
      title,
      h("div", { class: "muted thread-id small" }, t.id),
      t.parent_id ? h("div", { class: "muted small" }, "child of ", h("a", { href: "#/threads/" + encodeURIComponent(t.parent_id) }, t.parent_id)) : null),
    h("td", {}, t.agent_id || h("span", { class: "muted" }, "none")),
    h("td", {}, h("span", { class: "status " + (t.status || "idle"), "data-test": "status", title: statusTitle(t) }, t.status || "idle")),
    h("td", {}, h("time", { datetime: t.created_at || "" }, when(t.created_at))));
}

// statusTitle says what a thread's status means: what a waiting thread waits for (a call's
// decision or result, or its run's budget), why a failed one failed.
function statusTitle(t) {
  if (t.status !== "waiting") return t.run?.error || "";
  if (t.run?.reason === "budget_exhausted") return "The run waits for its budget: " + (t.run.budget?.message || "budget_exhausted");
  return "A call waits for a decision or a client's result";
}

// titleRows titles the rows of threads without a name by their first user message, a few
// threads at a time; stale says the list was left or replaced, and its answers are dropped.
function titleRows(threads, stale) {
  const queue = threads.filter(wantsFirstMessage).map((t) => t.id);
  const worker = async () => {
    while (queue.length && !stale()) {
      const id = queue.shift();
      try {
        const text = await firstAsked(id);
        const el = titles.get(id);
        if (text && el && !stale()) {
          el.textContent = text;
          el.title = text;
        }
      } catch { /* the stand-in stays */ }
    }
  };
  for (let i = 0; i < TITLES; i++) worker();
}

// newThreadForm creates a thread for an agent (and a name, as its name:<value> tag) and opens it.
function newThreadForm(ctx) {
  const agent = h("input", { id: "new-agent", name: "agent", list: "threads-agents", maxlength: 128, autocomplete: "off", placeholder: "agent name" });
  const name = h("input", { id: "new-name", name: "name", maxlength: 200, autocomplete: "off", placeholder: "optional" });
  const agentErr = h("span", { class: "field-error", "data-field": "body.agent" });
  const err = h("div", { class: "new-thread-error" });
  const submit = h("button", { type: "submit" }, "Create");
  const form = h("form", { class: "new-thread", "data-test": "new-thread-form", onsubmit: async (e) => {
    e.preventDefault();
    agentErr.textContent = "";
    clear(err);
    const body = {};
    if (agent.value.trim()) body.agent = agent.value.trim();
    if (name.value.trim()) body.tags = ["name:" + name.value.trim()];
    submit.disabled = true;
    try {
      const t = await api("POST", "/threads", body);
      ctx.go("#/threads/" + encodeURIComponent(t.id));
    } catch (e) {
      const fields = (e instanceof ApiError && e.errors) || [];
      const onAgent = fields.find((f) => f.location === "body.agent");
      if (onAgent) agentErr.textContent = onAgent.message;
      err.append(h("p", { class: "error", role: "alert" }, String(e.message || e)));
      if (e instanceof ApiError && e.status === 401) ctx.error(e);
    } finally {
      submit.disabled = false;
    }
  } },
    h("div", {}, h("label", { for: "new-agent" }, "Agent"), agent, agentErr),
    h("div", {}, h("label", { for: "new-name" }, "Name"), name),
    submit);
  return h("section", { class: "new-thread-box", "aria-label": "New thread" }, h("h2", {}, "New thread"), form, err);
}
