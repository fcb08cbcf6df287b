// The thread page: the thread's conversation as people read it (messages, each tool call with
// its arguments and its result under it, attachments), its children, variables and files, and
// the live part: a member starts a run, and the page follows the thread's event stream as it
// happens (model text as it streams, each message once, the state with the call it waits on).
//
// Paged: the page shows the newest messages and loads earlier ones on request (before=<first
// seq>), so a thread of thousands of messages opens as fast as one of a hundred. Every value a
// model, a tool or a person wrote goes in as text (h() and textContent).
import { api, blob, events, ApiError } from "../api.js";
import { h, clear, fold, pretty, when, toolName } from "../dom.js";
import { standInTitle, wantsFirstMessage, firstAsked, isSession, plural } from "../titles.js";
import { decisionEl } from "../decision.js";
import { traceView } from "../trace.js";

const PAGE = 100; // messages per page
const CHILDREN_SHOWN = 100; // children listed at a time
const FILES_LISTED = 200;

// Images shown inline; any other type (SVG too: it is a document) is a download.
const INLINE_IMAGE = /^image\/(png|jpeg|gif|webp|avif|bmp)$/i;

// threadName is the value of the thread's name:<value> tag, or "".
function threadName(t) {
  const tag = (t.tags || []).find((x) => x.startsWith("name:"));
  return tag ? tag.slice(5) : "";
}

// currentAgent is the agent that has the thread now, as the server reads its state: after a
// handoff the one it was handed to.
function currentAgent(t) {
  const st = t.state && typeof t.state === "object" ? t.state : {};
  return st.agent || st.spawn?.agent || t.agent_id || st.ran_by || "";
}

const threadHref = (id) => "#/threads/" + encodeURIComponent(id);

// filePath is the API path of a file of the thread: /threads/ID/files/a/b.png.
function filePath(threadID, path) {
  return `/threads/${encodeURIComponent(threadID)}/files/` +
    String(path).replace(/^\/+/, "").split("/").map(encodeURIComponent).join("/");
}

function size(n) {
  if (typeof n !== "number" || !(n >= 0)) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / (1 << 20)).toFixed(1)} MB`;
}

function problemText(e) {
  return String(e?.message || e);
}

export async function render(main, ctx, id) {
  let left = false;
  const cleanups = [];
  ctx.onLeave(() => {
    left = true;
    for (const f of cleanups.splice(0)) { try { f(); } catch { /* gone */ } }
  });
  // fail shows a section's problem in it; a refused key signs out.
  const fail = (box, e) => {
    if (left) return;
    clear(box).append(h("p", { class: "error", role: "alert" }, problemText(e)));
    if (e instanceof ApiError && e.status === 401) ctx.error(e);
  };

  const base = "/threads/" + encodeURIComponent(id);
  // All at once: the thread, its newest messages, its children and its variables.
  const pMessages = api("GET", `${base}/messages?limit=${PAGE}`);
  const pChildren = api("GET", `${base}/children`);
  const pVariables = api("GET", `${base}/variables`);
  for (const p of [pMessages, pChildren, pVariables]) p.catch(() => {}); // handled where awaited
  const thread = await api("GET", base);
  if (left) return;

  const files = new Files(id, cleanups);

  // ---- the header

  const name = threadName(thread);
  const statusEl = h("span", { class: "status", "data-test": "status" });
  // A waiting thread links to the approvals, where its call is decided; one whose run waits for
  // its budget says which, and when it goes on.
  const waitingEl = h("a", { class: "small", href: "#/approvals", "data-test": "waiting", hidden: true }, "approvals →");
  const budgetEl = h("div", { class: "budget-wait", "data-test": "budget", role: "status", hidden: true });
  const setStatus = (status, run) => {
    statusEl.className = "status " + (status || "idle");
    statusEl.textContent = status || "idle";
    const budget = status === "waiting" && run?.reason === "budget_exhausted" ? run.budget || {} : null;
    waitingEl.hidden = status !== "waiting" || budget !== null;
    showBudget(budgetEl, budget);
  };
  setStatus(thread.status, thread.run);
  const agentNow = currentAgent(thread);
  const tags = (thread.tags || []).filter((t) => !t.startsWith("name:"));
  // The title: the thread's name, else the first thing asked of it, else what it is.
  const titleEl = h("h1", { "data-test": "thread-title" }, name || standInTitle(thread));
  if (wantsFirstMessage(thread)) {
    firstAsked(id).then((t) => { if (t && !left) titleEl.textContent = t; }, () => { /* the stand-in stays */ });
  }
  // A thread no model works on (an MCP session's, calls made at a door) has no steps: it is
  // counted by its calls, those of the messages shown ("+" while earlier ones are not).
  const byCalls = !thread.step_count && (isSession(thread) || !thread.agent_id);
  let calls = 0;
  const countEl = h("span", { "data-test": "thread-count" }, byCalls ? "" : plural(thread.step_count || 0, "step"));
  const showCount = () => {
    countEl.textContent = !byCalls ? plural(thread.step_count || 0, "step")
      : firstSeq > 1 ? `${calls}+ calls` : plural(calls, "call");
  };
  const header = h("header", { class: "thread-head", "data-test": "thread-header" },
    h("p", { class: "crumbs" }, h("a", { href: "#/threads" }, "Threads"),
      thread.parent_id ? [" / ", h("a", { href: threadHref(thread.parent_id), "data-test": "parent-link" }, "parent thread")] : null),
    titleEl,
    h("div", { class: "row thread-meta" },
      statusEl, waitingEl,
      h("span", {}, "agent ", h("strong", { "data-test": "thread-agent" }, thread.agent_id || "none")),
      agentNow && agentNow !== thread.agent_id ? h("span", { class: "muted" }, "now with ", h("strong", {}, agentNow)) : null,
      h("code", { class: "muted small", "data-test": "thread-id" }, thread.id),
      h("span", { class: "muted small" }, `created ${when(thread.created_at)} · `, countEl),
      thread.parent_id ? h("span", { class: "small" }, "child of ", h("a", { href: threadHref(thread.parent_id) }, thread.parent_id)) : null),
    budgetEl,
    tags.length ? h("ul", { class: "tags", "data-test": "tags" }, tags.map((t) => h("li", { class: "tag" }, t))) : null,
    stateEl(thread));

  // ---- the conversation

  const conv = h("div", { class: "conversation", "data-test": "conversation" });
  const earlier = h("button", { type: "button", class: "secondary", "data-test": "load-earlier", hidden: true }, "Load earlier messages");
  const convProblem = h("div", {});
  const seen = new Set(); // the seqs shown
  let firstSeq = 0; // the first seq shown (0: none yet)
  let lastSeq = 0; // the last
  const slots = new Map(); // call id -> the box of its results, under the call
  const callEls = new Map(); // call id -> the call's element
  const orphans = new Map(); // call id -> {wrap, el}: a result shown before its call is loaded

  // place renders message m and returns what goes into the conversation: its element, or null
  // for a result that went under its call.
  const place = (m) => {
    seen.add(m.seq);
    if (m.role !== "tool") calls += (m.tool_calls || []).length;
    if (m.role === "tool") {
      const el = resultEl(m, files);
      const slot = slots.get(m.tool_call_id);
      if (slot) { slot.append(el); return null; }
      // The call is on a page not loaded yet: the result stands alone until it is.
      const wrap = h("div", { class: "msg tool orphan" + (m.result?.status === "error" ? " error" : "") },
        h("div", { class: "role" }, `result of ${m.tool_name || "a call"} `, h("span", { class: "muted" }, `(${m.tool_call_id || "no call id"})`)), el);
      if (m.tool_call_id) orphans.set(m.tool_call_id, { wrap, el });
      return wrap;
    }
    const el = messageEl(m, files);
    for (const c of m.tool_calls || []) {
      const call = callEl(c);
      el.append(call);
      if (!c.id) continue;
      callEls.set(c.id, call);
      const slot = h("div", { class: "results" });
      call.append(slot);
      slots.set(c.id, slot);
      const o = orphans.get(c.id);
      if (o) { orphans.delete(c.id); slot.append(o.el); o.wrap.remove(); }
    }
    return el;
  };

  const nearBottom = () => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 200;

  // append adds a message of the stream: each once, in order (the stream replays from its
  // Last-Event-ID after a reconnection, and may start before the page's last message).
  const append = (m) => {
    if (!m || typeof m.seq !== "number" || m.seq <= lastSeq || seen.has(m.seq)) return false;
    const follow = nearBottom();
    const el = place(m);
    if (el) conv.append(el);
    lastSeq = m.seq;
    if (!firstSeq) firstSeq = m.seq;
    showCount();
    emptyNote.hidden = true;
    if (follow) window.scrollTo(0, document.documentElement.scrollHeight);
    return true;
  };
  const emptyNote = h("p", { class: "muted", hidden: true, "data-test": "no-messages" }, "No messages yet.");

  earlier.addEventListener("click", async () => {
    earlier.disabled = true;
    try {
      const data = await api("GET", `${base}/messages?limit=${PAGE}&before=${firstSeq}`);
      if (left) return;
      const anchor = conv.firstElementChild;
      const frag = document.createDocumentFragment();
      for (const m of data.messages) {
        if (seen.has(m.seq) || m.seq >= firstSeq) continue;
        const el = place(m);
        if (el) frag.append(el);
      }
      conv.prepend(frag);
      if (data.messages.length) firstSeq = Math.min(firstSeq, data.messages[0].seq);
      showCount();
      earlier.hidden = data.messages.length < PAGE || firstSeq <= 1;
      clear(convProblem);
      anchor?.scrollIntoView({ block: "start" });
    } catch (e) {
      fail(convProblem, e);
    } finally {
      earlier.disabled = false;
    }
  });

  // ---- the live part

  const streamEl = h("span", { class: "status", "data-test": "stream-status" }, "connecting");
  const typingText = document.createTextNode("");
  const typing = h("div", { class: "msg assistant typing", "data-test": "typing", hidden: true, "aria-live": "polite" },
    h("div", { class: "role" }, "assistant · typing…"), h("div", { class: "text" }, typingText));
  let typingStep = null;
  const stopTyping = () => { typing.hidden = true; typingText.data = ""; typingStep = null; };
  const pendingBox = h("div", { class: "pending", "data-test": "pending", hidden: true });
  const outcomeBox = h("div", { class: "outcome", "data-test": "run-outcome", hidden: true });
  let waitingMark = null; // the mark on the call the thread waits on

  // showOutcome shows how the last run ended; a failed one says why (its reason and the
  // server's words for it), as does a try that failed and is tried again (retrying: its text).
  const showOutcome = (o, retrying) => {
    outcomeBox.hidden = false;
    const failed = o?.status === "failed";
    outcomeBox.className = "outcome" + (failed || retrying ? " error" : "");
    clear(outcomeBox);
    if (retrying) { outcomeBox.append(h("span", { "data-test": "run-retrying" }, retrying)); return; }
    if (!o) return;
    const steps = typeof o.steps === "number" ? `, ${plural(o.steps, "step")} in all` : "";
    if (failed) {
      outcomeBox.append(h("strong", {}, "The last run failed"), " (", h("code", { "data-test": "run-failure-reason" }, o.reason || "?"), ")",
        o.error ? ": " : "", o.error ? h("span", { "data-test": "run-failure" }, o.error) : "",
        h("p", { class: "muted small" }, "A new run on the thread replaces this outcome."));
      return;
    }
    outcomeBox.append("Last run: ", h("strong", {}, o.status || "?"), o.reason ? ` (${o.reason})` : "", steps);
  };

  if (thread.run) showOutcome(thread.run); // the stream's first state says it again

  const showPending = (p) => {
    waitingMark?.remove();
    waitingMark = null;
    clear(pendingBox);
    pendingBox.hidden = !p;
    if (!p) return;
    const call = p.call || {};
    const what = p.reason === "client_tool" ? "waits for a client's result" : "waits for a person's decision";
    pendingBox.append(
      h("div", { class: "row" }, h("strong", {}, call.name || "a call"), h("span", {}, what),
        h("a", { href: "#/approvals", "data-test": "pending-link" }, "Open approvals →")),
      p.description ? h("p", { class: "muted" }, p.description) : null,
      call.args !== undefined ? fold(pretty(call.args)) : null,
      h("p", { class: "muted small" }, "call ", call.id || ""));
    const el = call.id && callEls.get(call.id);
    if (el) {
      waitingMark = h("a", { class: "status waiting", href: "#/approvals", "data-test": "call-waiting" }, what);
      el.querySelector(".call-head")?.append(waitingMark);
    }
  };

  let shownStatus = thread.status;
  let refreshTrace = () => {}; // set with the trace view below
  const onEvent = ({ event, data }) => {
    if (left || !data || typeof data !== "object") return;
    switch (event) {
      case "message":
        if (append(data) && data.role === "assistant") stopTyping();
        break;
      case "delta":
        if (data.step !== typingStep) { typingText.data = ""; typingStep = data.step; }
        typingText.appendData(String(data.text ?? ""));
        if (typing.hidden) {
          const follow = nearBottom();
          typing.hidden = false;
          if (follow) window.scrollTo(0, document.documentElement.scrollHeight);
        }
        break;
      case "state":
        setStatus(data.status, data.run);
        showPending(data.pending);
        if (data.run) showOutcome(data.run);
        if (data.status !== "running") stopTyping();
        if (data.status !== shownStatus) { shownStatus = data.status; refreshChildren(); refreshTrace(); }
        updateRunButton(data);
        break;
      case "run":
        stopTyping();
        if (data.type === "retrying") showOutcome(null, data.error || "retrying");
        else if (data.outcome) showOutcome(data.outcome);
        else if (data.type === "failed") showOutcome({ status: "failed", reason: "", error: data.error || "see the server's log" });
        if (data.outcome?.status === "failed") setStatus("failed");
        refreshChildren();
        refreshTrace();
        break;
    }
  };

  // ---- the run form (members)

  let runForm = null;
  let updateRunButton = () => {};
  if (ctx.can("member")) {
    const agentIn = h("input", { id: "run-agent", name: "agent", required: true, maxlength: 128, autocomplete: "off", value: agentNow, list: "run-agents" });
    const agentList = h("datalist", { id: "run-agents" },
      [...new Set([agentNow, thread.agent_id].filter(Boolean))].map((a) => h("option", { value: a })));
    const msgIn = h("textarea", { id: "run-message", name: "message", rows: 3, maxlength: 1000000, placeholder: "The message the run answers (empty: resume the thread)" });
    const agentErr = h("span", { class: "field-error", "data-field": "body.agent" });
    const msgErr = h("span", { class: "field-error", "data-field": "body.message" });
    const formErr = h("div", { "data-test": "run-error" });
    const sent = h("p", { class: "muted small", "data-test": "run-sent", "aria-live": "polite" });
    const submit = h("button", { type: "submit", "data-test": "run-submit" }, "Run");
    const hint = h("p", { class: "muted small", hidden: true }, "");
    updateRunButton = (st) => {
      hint.hidden = !(st.status === "running" || st.pending);
      hint.textContent = st.status === "running" ? "A run is going on this thread: a new one waits until it ends."
        : st.pending ? "The thread waits on a call: decide it (Approvals) before sending a message." : "";
    };
    const send = async () => {
      agentErr.textContent = msgErr.textContent = sent.textContent = "";
      clear(formErr);
      submit.disabled = true;
      try {
        const body = { agent: agentIn.value.trim() };
        if (msgIn.value.trim()) body.message = msgIn.value;
        const r = await api("POST", `${base}/runs`, body);
        if (left) return;
        msgIn.value = "";
        sent.textContent = `Run started (job ${r?.job_id ?? "?"}); it shows here as it goes.`;
      } catch (e) {
        const fields = (e instanceof ApiError && e.errors) || [];
        for (const f of fields) {
          if (f.location === "body.agent") agentErr.textContent = f.message;
          else if (f.location === "body.message") msgErr.textContent = f.message;
        }
        fail(formErr, e);
      } finally {
        submit.disabled = false;
      }
    };
    msgIn.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); if (!submit.disabled) send(); }
    });
    runForm = h("form", { class: "run-form", "data-test": "run-form", onsubmit: (e) => { e.preventDefault(); send(); } },
      h("div", { class: "run-agent" }, h("label", { for: "run-agent" }, "Agent"), agentIn, agentList, agentErr),
      h("div", { class: "run-message" }, h("label", { for: "run-message" }, "Message"), msgIn, msgErr),
      h("div", { class: "row" }, submit, h("span", { class: "muted small" }, "Ctrl+Enter sends")),
      hint, sent, formErr);
  }

  // ---- the views: the conversation, or the trace of the runs (read when shown, again as runs end)

  const trace = traceView(id, fail);
  const convView = h("div", { class: "conv-view", "data-test": "conversation-view" });
  const tabs = h("div", { class: "view-tabs", role: "tablist", "aria-label": "View" });
  let traceTimer = 0;
  cleanups.push(() => clearTimeout(traceTimer));
  const showView = (which) => {
    convView.hidden = which !== "conversation";
    trace.el.hidden = which !== "trace";
    for (const b of tabs.children) b.setAttribute("aria-selected", String(b.dataset.view === which));
    if (which === "trace") trace.load();
  };
  for (const [view, label] of [["conversation", "Conversation"], ["trace", "Trace"]]) {
    tabs.append(h("button", { type: "button", role: "tab", class: "view-tab", "data-view": view, "data-test": "view-" + view,
      onclick: () => showView(view) }, label));
  }
  refreshTrace = () => {
    if (trace.el.hidden) return;
    clearTimeout(traceTimer);
    traceTimer = setTimeout(trace.load, 300);
  };
  showView("conversation");

  // ---- the side: children, variables, files

  const childrenBox = h("div", { "data-test": "children" }, h("p", { class: "loading" }, "Loading…"));
  const variablesBox = h("div", { "data-test": "variables" }, h("p", { class: "loading" }, "Loading…"));
  const filesBox = h("div", { "data-test": "files" });
  const filesDetails = h("details", { class: "files-box" }, h("summary", {}, "Files"), filesBox);
  filesDetails.addEventListener("toggle", () => {
    if (filesDetails.open && !filesBox.firstChild) listFiles(id, filesBox, files, fail);
  });

  let childrenTimer = 0;
  cleanups.push(() => clearTimeout(childrenTimer));
  const showChildren = (data) => {
    if (left) return;
    clear(childrenBox);
    if (thread.parent_id) {
      childrenBox.append(h("p", { class: "small" }, "Parent: ", h("a", { href: threadHref(thread.parent_id), "data-test": "parent" }, thread.parent_id)));
    }
    childrenBox.append(childList(data.children || [], fail));
  };
  function refreshChildren() {
    clearTimeout(childrenTimer);
    childrenTimer = setTimeout(() => {
      api("GET", `${base}/children`).then(showChildren, () => { /* the list shown stays */ });
    }, 300);
  }

  main.append(h("div", { class: "thread-page", "data-test": "thread-page", "data-id": thread.id },
    header,
    h("div", { class: "thread-layout" },
      h("section", { class: "thread-main", "aria-label": "Thread" },
        tabs, convView, trace.el,
        h("section", { class: "live", "aria-label": "Live", "data-test": "live" },
          h("div", { class: "row live-head" }, h("h2", {}, "Live"), streamEl),
          pendingBox, outcomeBox, runForm)),
      h("aside", { class: "thread-side" },
        h("section", { "aria-label": "Children" }, h("h2", {}, "Children"), childrenBox),
        h("section", { "aria-label": "Variables" }, h("h2", {}, "Variables"), variablesBox),
        h("section", { "aria-label": "Files" }, filesDetails)))));

  convView.append(h("h2", {}, "Conversation"), earlier, convProblem, conv, emptyNote, typing);
  pChildren.then(showChildren, (e) => fail(childrenBox, e));
  pVariables.then((data) => { if (!left) clear(variablesBox).append(variableList(data.variables || [])); }, (e) => fail(variablesBox, e));

  let page;
  try {
    page = await pMessages;
  } catch (e) {
    fail(convProblem, e);
    streamEl.textContent = "not following";
    return; // without the page there is no place to follow from
  }
  if (left) return;
  for (const m of page.messages) {
    const el = place(m);
    if (el) conv.append(el);
  }
  if (page.messages.length) {
    firstSeq = page.messages[0].seq;
    lastSeq = page.messages[page.messages.length - 1].seq;
  }
  emptyNote.hidden = page.messages.length > 0;
  earlier.hidden = page.messages.length < PAGE || firstSeq <= 1;
  showCount();

  // Follow the stream from the page's last message. (The options argument tells events() where
  // to start; one that does not take it replays from the first message, and append drops what
  // is shown already.)
  const stop = events(id, onEvent, (s) => {
    if (left) return;
    streamEl.textContent = s;
    streamEl.className = "status " + s;
  }, { lastEventID: lastSeq ? String(lastSeq) : "" });
  cleanups.push(stop);
}

// showBudget shows in el what a run paused for its budget waits on (b: the run's budget): the
// limit's words, and when the run goes on by itself; b null: nothing.
function showBudget(el, b) {
  clear(el);
  el.hidden = !b;
  if (!b) return;
  const limit = b.limit ? [" (", h("code", { "data-test": "budget-limit" }, b.limit), ")"] : null;
  const goesOn = b.retry_at
    ? ["It goes on by itself on ", h("time", { datetime: b.retry_at, "data-test": "budget-retry" }, when(b.retry_at)), ", or as soon as an admin raises the limit."]
    : "It goes on as soon as an admin raises the limit.";
  el.append(h("div", {}, h("strong", {}, "The run waits for its budget"), limit, b.message ? [": ", b.message, "."] : "."),
    h("div", { class: "muted small" }, goesOn));
}

// ---- messages

function messageEl(m, files) {
  const role = m.role || "message";
  // A two-sided dual-AI agent's turns say which side spoke: side A and side B read apart.
  const side = m.side === "side_a" || m.side === "side_b" ? m.side : "";
  const who = side ? `${role} · ${side === "side_a" ? "side A" : "side B"}` : role;
  return h("article", { class: "msg " + role + (side ? " " + side.replace("_", "-") : ""), "data-test": "message", "data-seq": m.seq,
    "data-role": role, "data-side": side, id: "m" + m.seq },
    h("div", { class: "role" }, who, h("span", { class: "muted small msg-meta" }, ` #${m.seq} · ${when(m.created_at)}`)),
    m.content ? h("div", { class: "text" }, m.content) : null);
}

function callEl(c) {
  return h("div", { class: "call", "data-test": "tool-call", "data-call-id": c.id || "", "data-name": c.name || "" },
    h("div", { class: "row call-head" }, h("span", { class: "call-icon", "aria-hidden": "true" }, "⚙"),
      h("strong", { class: "call-name" }, toolName(c.name || "?")), c.id ? h("span", { class: "muted small" }, c.id) : null),
    c.reasoning ? h("p", { class: "muted reasoning" }, "Why: ", c.reasoning) : null,
    c.args !== undefined && c.args !== null ? fold(pretty(c.args)) : h("p", { class: "muted small" }, "no arguments"));
}

// resultEl is a tool message: its result with its status; an error stands out.
function resultEl(m, files) {
  const r = m.result || null;
  const status = r?.status || "success";
  const isError = status === "error";
  const el = h("div", { class: "result" + (isError ? " error" : ""), "data-test": "tool-result", "data-seq": m.seq,
    "data-call-id": m.tool_call_id || "", "data-status": status },
    h("div", { class: "row result-head" },
      h("span", { class: "status " + status }, status),
      h("span", { class: "muted small" }, m.tool_name ? toolName(m.tool_name) : "result", ` · #${m.seq}`),
      r?.code ? h("code", { class: "small" }, r.code) : null));
  if (!r) {
    if (m.content) el.append(fold(m.content));
    return el;
  }
  // A person's decision first: it says why the call ran (or did not) as it did.
  const decided = decisionEl(r.meta?.decision);
  if (decided) el.append(decided);
  if (r.error) el.append(h("div", { class: "error-text" }, fold(r.error)));
  if (Array.isArray(r.problems) && r.problems.length) {
    el.append(h("ul", { class: "problems" }, r.problems.map((p) => h("li", {}, h("code", {}, p.pointer || "/"), " ", p.message || ""))));
  }
  if (r.result) el.append(fold(r.result));
  if (r.value !== undefined && r.value !== null) {
    el.append(h("div", { class: "muted small" }, "value"), fold(pretty(r.value)));
  }
  if (r.meta && typeof r.meta === "object") {
    // How the call ran (run_code's duration and console output): for people, folded.
    el.append(h("details", { class: "stack", "data-test": "result-meta" }, h("summary", {}, "how it ran"), h("pre", { class: "value" }, pretty(r.meta))));
  }
  for (const c of Array.isArray(r.content) ? r.content : []) el.append(contentEl(c));
  const atts = Array.isArray(r.attachments) ? r.attachments : [];
  if (atts.length) {
    el.append(h("div", { class: "attachments", "data-test": "attachments" }, atts.map((a) => files.attachment(a))));
  }
  if (r.stack) el.append(h("details", { class: "stack" }, h("summary", {}, "stack"), h("pre", { class: "value" }, r.stack)));
  return el;
}

// contentEl is an item of a result's content (MCP's model): text, an image, or what it is.
function contentEl(c) {
  if (!c || typeof c !== "object") return null;
  if (c.type === "text") return fold(c.text ?? "");
  if (c.type === "image" && c.data && INLINE_IMAGE.test(c.mimeType || "") && /^[A-Za-z0-9+/=\s]+$/.test(c.data)) {
    return h("img", { class: "attachment", alt: "image of the result", src: `data:${c.mimeType};base64,${c.data.replace(/\s/g, "")}`, "data-test": "content-image" });
  }
  return h("p", { class: "muted small" }, `${c.type || "content"}${c.mimeType ? " (" + c.mimeType + ")" : ""}${c.uri ? " " + c.uri : ""}`);
}

// Files fetches the thread's files with the key: images when they come into view, other files
// when asked for, each kept as a blob: URL until the page is left.
class Files {
  constructor(threadID, cleanups) {
    this.threadID = threadID;
    this.urls = [];
    this.io = typeof IntersectionObserver === "function"
      ? new IntersectionObserver((entries) => {
        for (const e of entries) {
          if (!e.isIntersecting) continue;
          this.io.unobserve(e.target);
          this.loadImage(e.target);
        }
      }, { rootMargin: "600px" })
      : null;
    cleanups.push(() => {
      this.left = true;
      this.io?.disconnect();
      for (const u of this.urls.splice(0)) URL.revokeObjectURL(u);
    });
  }

  // url fetches a file and returns a blob: URL of it, typed as type.
  async url(path, type) {
    const b = await blob(filePath(this.threadID, path));
    if (this.left) throw new Error("left");
    const u = URL.createObjectURL(new Blob([b], { type }));
    this.urls.push(u);
    return u;
  }

  // attachment shows a reference to a file: an image inline, anything else to download.
  attachment(a) {
    const mime = a?.mimeType || a?.mime_type || "";
    const path = a?.path || (a?.name ? "/attachments/" + a.name : "");
    const name = a?.name || String(path).split("/").pop() || "file";
    if (!path) return h("span", { class: "muted" }, name);
    if (INLINE_IMAGE.test(mime)) {
      const img = h("img", { class: "attachment", alt: a.description || name, "data-path": path, "data-mime": mime.toLowerCase(), "data-test": "attachment-image" });
      const fig = h("figure", { class: "attachment-figure" }, img, h("figcaption", { class: "muted small" }, name, " ", this.download(path, name, "download")));
      if (this.io) this.io.observe(img); else this.loadImage(img);
      return fig;
    }
    return h("div", { class: "attachment-file" }, this.download(path, name, `${name}${a.size ? " (" + size(a.size) + ")" : ""}${mime ? " · " + mime : ""}`));
  }

  async loadImage(img) {
    try {
      img.src = await this.url(img.dataset.path, img.dataset.mime);
    } catch (e) {
      if (this.left) return;
      img.replaceWith(h("span", { class: "error small" }, `could not load ${img.dataset.path}: ${problemText(e)}`));
    }
  }

  // download is a button that fetches the file once, then is a link to save it (a blob: URL
  // with a download attribute, typed as bytes so that no browser renders it as a page).
  download(path, name, label) {
    const btn = h("button", { type: "button", class: "link", "data-test": "attachment-download", "data-path": path }, "⤓ ", label);
    btn.addEventListener("click", async () => {
      btn.disabled = true;
      try {
        const u = await this.url(path, "application/octet-stream");
        const a = h("a", { href: u, download: name, class: "download", "data-test": "attachment-link", "data-path": path }, "⤓ ", label);
        btn.replaceWith(a);
        a.click();
      } catch (e) {
        if (this.left) return;
        btn.disabled = false;
        btn.after(h("span", { class: "error small" }, " ", problemText(e)));
      }
    });
    return btn;
  }
}

// listFiles lists the thread's files, each to download.
async function listFiles(threadID, box, files, fail) {
  box.append(h("p", { class: "loading" }, "Loading…"));
  try {
    const data = await api("GET", `/threads/${encodeURIComponent(threadID)}/files?limit=${FILES_LISTED}`);
    const list = (data.files || []).filter((f) => !f.is_dir);
    clear(box).append(list.length
      ? h("ul", { class: "file-list" }, list.map((f) => h("li", { "data-test": "file", "data-path": f.path },
        files.download(f.path, f.original_name || f.name || f.path.split("/").pop(),
          `${f.original_name ? f.original_name + " · " : ""}${f.path}${typeof f.size === "number" ? " (" + size(f.size) + ")" : ""}`))))
      : h("p", { class: "muted" }, "No files."),
    data.truncated ? h("p", { class: "muted small" }, `The first ${FILES_LISTED} entries.`) : null);
  } catch (e) {
    fail(box, e);
  }
}

// ---- children and variables

// childList is the thread's children registry, a level at a time: each child's own children
// load when opened.
function childList(children, fail) {
  if (!children.length) return h("p", { class: "muted" }, "No children.");
  const ul = h("ul", { class: "children" });
  let shown = 0;
  const more = h("button", { type: "button", class: "secondary small" });
  const showMore = () => {
    const next = children.slice(shown, shown + CHILDREN_SHOWN);
    ul.append(...next.map((c) => childEl(c, fail)));
    shown += next.length;
    more.hidden = shown >= children.length;
    more.textContent = `Show ${Math.min(CHILDREN_SHOWN, children.length - shown)} more of ${children.length - shown}`;
  };
  more.addEventListener("click", showMore);
  showMore();
  return h("div", {}, ul, more);
}

function childEl(c, fail) {
  const sub = h("div", { class: "subtree" });
  const details = h("details", { class: "child-kids" }, h("summary", { class: "small muted" }, "its children"), sub);
  details.addEventListener("toggle", async () => {
    if (!details.open || sub.firstChild) return;
    sub.append(h("p", { class: "loading small" }, "Loading…"));
    try {
      const data = await api("GET", `/threads/${encodeURIComponent(c.ref)}/children`);
      clear(sub).append(childList(data.children || [], fail));
    } catch (e) {
      fail(sub, e);
    }
  });
  return h("li", { class: "child", "data-test": "child", "data-id": c.ref, "data-status": c.status || "" },
    h("div", { class: "row" },
      h("a", { href: threadHref(c.ref) }, c.name || c.ref),
      h("span", { class: "status " + (c.status || "idle") }, c.status || "idle")),
    h("div", { class: "muted small" }, [c.agent ? "agent " + c.agent : "no agent",
      c.blocking ? "blocking" : "non-blocking", c.resumable ? "resumable" : null].filter(Boolean).join(" · ")),
    c.name ? h("div", { class: "muted small" }, c.ref) : null,
    details);
}

function variableList(vars) {
  if (!vars.length) return h("p", { class: "muted" }, "No variables set on this thread.");
  return h("ul", { class: "variables" }, vars.map((v) => h("li", { class: "variable", "data-test": "variable", "data-name": v.name },
    h("div", { class: "row" }, h("code", { class: "var-name" }, v.name),
      v.secret ? h("span", { class: "status secret", "data-test": "secret" }, v.set ? "secret · set" : "secret · not set") : null,
      v.scoped ? h("span", { class: "status" }, "scoped") : null),
    v.secret ? null : (v.set === false ? h("span", { class: "muted" }, "not set") : fold(v.value ?? "", 300)),
    v.updated_at ? h("div", { class: "muted small" }, "set " + when(v.updated_at)) : null)));
}

// stateEl shows the thread's state (what calls wrote with _outputPath) and each instance's,
// folded; nothing when all are empty.
function stateEl(thread) {
  const empty = (d) => d == null || (typeof d === "object" && !Array.isArray(d) && Object.keys(d).length === 0);
  const parts = [];
  if (!empty(thread.data)) parts.push(h("div", {}, h("strong", {}, "thread"), fold(pretty(thread.data))));
  for (const [name, doc] of Object.entries(thread.instances || {})) {
    parts.push(h("div", {}, h("strong", {}, `instance ${name}`), empty(doc) ? h("span", { class: "muted" }, " empty") : fold(pretty(doc))));
  }
  if (!parts.length) return null;
  return h("details", { class: "state", "data-test": "thread-state" }, h("summary", {}, "State"), parts);
}
