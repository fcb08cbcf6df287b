// The console: sign-in, the navigation and the routes (#/threads, #/threads/ID, #/approvals,
// #/tools, #/tools/NAME, #/variables, #/governance, #/access, #/connections, #/keys, #/limits, #/usage). Each page is a module of pages/
// exporting render(main, ctx, ...params), where ctx = {session, can(role), go(hash), error(err)}.

import { api, session, ApiError } from "./api.js";
import { h, clear } from "./dom.js";
import * as sso from "./sso.js";

const routes = [
  [/^#\/threads\/([^/]+)$/, () => import("./pages/thread.js")],
  [/^#\/threads$/, () => import("./pages/threads.js")],
  [/^#\/approvals$/, () => import("./pages/approvals.js")],
  [/^#\/tools\/([^/]+)$/, () => import("./pages/tool.js")],
  [/^#\/tools$/, () => import("./pages/tools.js")],
  [/^#\/variables$/, () => import("./pages/variables.js")],
  [/^#\/governance$/, () => import("./pages/governance.js")],
  [/^#\/access$/, () => import("./pages/access.js")],
  // #/connections?connect=NAME&scopes=A%20B and ?connected=NAME: the page reads its query itself.
  [/^#\/connections(?:\?.*)?$/, () => import("./pages/connections.js")],
  [/^#\/keys$/, () => import("./pages/keys.js")],
  [/^#\/limits$/, () => import("./pages/limits.js")],
  [/^#\/usage$/, () => import("./pages/usage.js")],
];

const ranks = { viewer: 1, member: 2, admin: 3 };
let me = null; // GET /v1/session, once signed in
let signin = { api_key: true }; // GET /console/signin.json: how people may sign in
let leave = null; // what the current page runs when the route changes (closes its streams)

const main = document.getElementById("main");

function ctx() {
  return {
    session: me,
    // can says whether the key may act with role's rights: pages show no button a key may
    // not use (the API would refuse it anyway).
    can: (role) => me && ranks[me.role] >= ranks[role],
    go: (hash) => { location.hash = hash; },
    error: showError,
    onLeave: (fn) => { leave = fn; },
  };
}

// showError puts an error at the top of the page, as text.
export function showError(err) {
  const box = h("div", { class: "error", role: "alert" }, err instanceof ApiError && err.status === 401
    ? "You were signed out (the key or the sign-in was refused, or it expired): sign in again."
    : String(err?.message || err));
  main.prepend(box);
  if (err instanceof ApiError && err.status === 401) signOut();
}

async function route() {
  if (leave) { try { leave(); } catch { /* gone */ } leave = null; }
  if (!session.key()) return signInPage();
  if (!me) {
    try {
      me = await api("GET", "/session");
    } catch (e) {
      session.signOut();
      return signInPage(e instanceof ApiError && e.status === 401 ? `That key or sign-in was refused (${e.message}).` : String(e.message || e));
    }
    showSession();
  }
  const hash = location.hash || "#/threads";
  for (const [re, load] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    clear(main);
    main.append(h("p", { class: "loading" }, "Loading…"));
    try {
      const page = await load();
      clear(main);
      await page.render(main, ctx(), ...m.slice(1).map(decodeURIComponent));
    } catch (e) {
      clear(main);
      showError(e);
    }
    return;
  }
  location.hash = "#/threads";
}

function showSession() {
  document.getElementById("nav").hidden = false;
  document.getElementById("signout").hidden = false;
  for (const a of document.querySelectorAll("#nav [data-role]")) {
    a.hidden = !ctx().can(a.dataset.role);
  }
  document.getElementById("who").textContent = `${me.workspace_name || me.workspace_id} · ${me.role}`;
}

function signInPage(message) {
  me = null;
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  document.getElementById("who").textContent = "";
  clear(main);
  const input = h("input", { type: "password", id: "key", name: "key", autocomplete: "off", placeholder: "qvk_…", required: true });
  const provider = signin.provider;
  const withProvider = provider ? h("section", { class: "signin-provider" },
    h("button", { type: "button", id: "signin-provider", onclick: async (e) => {
      e.target.disabled = true;
      try {
        await sso.begin(provider);
      } catch (err) {
        e.target.disabled = false;
        signInPage(String(err.message || err));
      }
    } }, `Sign in with ${new URL(provider.issuer).host}`),
    h("p", {}, "Your organisation's sign-in: you come back here signed in, with what your groups allow.")) : null;
  const form = h("form", { class: "signin", onsubmit: (e) => {
    e.preventDefault();
    session.signIn(input.value.trim());
    route();
  } },
    h("h1", {}, "Sign in"),
    withProvider,
    signin.provider_error ? h("p", { class: "error", role: "alert" }, signin.provider_error) : null,
    h("p", {}, (provider ? "Or paste" : "Paste") + " an API key of your workspace (quiver keys create makes one). It is kept in this tab only, until you sign out or close it."),
    h("label", { for: "key" }, "API key"), input,
    h("button", { type: "submit" }, "Sign in"),
    message ? h("p", { class: "error", role: "alert" }, message) : null);
  main.append(form);
  if (!provider) input.focus();
}

function signOut() {
  session.signOut();
  me = null;
  location.hash = "";
  signInPage();
}

// start learns how people may sign in, finishes a sign-in the identity provider sent this
// page back from, then shows the page the address names.
async function start() {
  try {
    const resp = await fetch("/console/signin.json", { headers: { Accept: "application/json" } });
    if (resp.ok) signin = await resp.json();
  } catch { /* keys only */ }
  try {
    const token = await sso.finish(signin.provider);
    if (token) {
      session.signIn(token);
      me = null;
    }
  } catch (e) {
    return signInPage(String(e.message || e));
  }
  route();
}

document.getElementById("signout").addEventListener("click", signOut);
window.addEventListener("hashchange", route);
start();
