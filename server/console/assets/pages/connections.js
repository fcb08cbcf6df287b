// The connections page: the person's own accounts at the providers the workspace declares
// (GET /v1/connection-providers), which tools that act as them call with their token. Each
// provider is a card: what it is, the scopes it offers, and whether the person is connected
// (GET /v1/connections: the scopes granted, when, the token's expiry; never a token). Connect
// starts the flow bound to this browser (POST /v1/connections/{provider}, bind_browser) and
// sends the whole window to the provider's page; the provider sends it back to the callback,
// which returns here with ?connected=NAME. Disconnect, after a second click, revokes the token
// at the provider (DELETE /v1/connections/{provider}).
//
// A tool that needs a connection the caller lacks answers with a link here,
// #/connections?connect=NAME&scopes=A%20B: the page marks that provider's card and asks for
// those scopes when the person clicks Connect. It never connects by itself: the click is the
// person's consent. A viewer's key reads its connections, and is offered no button.
//
// An admin also edits the providers document as JSON, saved with the version read (PUT
// /v1/connection-providers, after), so that another admin's change made meanwhile is refused
// (409) rather than overwritten; the API's refusal names the part at fault
// (body.document.providers[0].token_url).
import { api, ApiError } from "../api.js";
import { h, clear, when } from "../dom.js";
import { errorBox } from "../schemaform.js";

// RETURN_TO is where the callback sends the browser once connected: this page.
const RETURN_TO = "/console/#/connections";

export async function render(main, ctx) {
  const admin = ctx.can("admin");
  const mayConnect = ctx.can("member") && Boolean(ctx.session?.user_id);
  let left = false;
  ctx.onLeave(() => { left = true; });
  const asked = askedOf(location.hash);
  // The mark the callback left is shown once: a reload does not say it again.
  if (asked.connected) history.replaceState(null, "", "#/connections");

  const page = h("div", { class: "con-page connections-page", "data-test": "connections-page" },
    h("h1", {}, "Connections"),
    h("p", { class: "muted" }, "Your own accounts at the services this workspace's tools act at for you. A tool that needs one calls with your " +
      "token there, which no one sees: not the tool's code, not the model, not an admin. Connecting sends you to the service's page and back " +
      "here; disconnecting revokes the token at the service."));
  main.append(page);
  const [providers, mine] = await Promise.all([api("GET", "/connection-providers"), api("GET", "/connections")]);
  if (left) return;

  const notes = h("div", { "aria-live": "polite" });
  const cards = h("div", { class: "connection-cards", "data-test": "providers" });
  const orphans = h("div");
  page.append(notes, h("h2", {}, "Providers"), cards, orphans);
  if (!ctx.session?.user_id) {
    page.insertBefore(h("p", { class: "warning", "data-test": "no-person" }, "This key belongs to no person: connections are a person's, " +
      "made with a key or a sign-in of your own."), notes);
  } else if (!mayConnect) {
    page.insertBefore(h("p", { class: "muted", "data-test": "viewer" }, "A viewer's key reads its connections; connecting and disconnecting " +
      "take a member's."), notes);
  }

  let doc = providers;
  let connections = mine.connections;
  // show draws the cards from the providers and connections last read.
  const show = () => {
    const declared = doc.document.providers || [];
    clear(cards);
    if (!declared.length) {
      cards.append(h("p", { class: "muted", "data-test": "providers-empty" }, "This workspace declares no providers yet" +
        (admin ? ": declare them below." : ": an admin declares them.")));
    }
    for (const p of declared) {
      const c = connections.find((x) => x.provider === p.name);
      cards.append(card(p, c, asked.connect === p.name ? asked.scopes : null));
    }
    // Connections to providers no longer declared stay until their person disconnects.
    const gone = connections.filter((c) => !declared.some((p) => p.name === c.provider));
    clear(orphans);
    if (gone.length) {
      orphans.append(h("h2", {}, "No longer declared"),
        h("p", { class: "muted" }, "The workspace no longer declares these providers: no tool uses these connections. Disconnect to revoke their tokens."),
        h("div", { class: "connection-cards", "data-test": "orphans" }, gone.map((c) => card({ name: c.provider }, c, null, false))));
    }
  };
  const reload = async () => {
    const [p, m] = await Promise.all([api("GET", "/connection-providers"), api("GET", "/connections")]);
    if (left) return;
    doc = p;
    connections = m.connections;
    show();
  };

  // card is a provider, the person's connection to it (or none), and what they may do: the
  // scopes asked by a tool's link when it names this provider. A provider no longer declared
  // is only disconnected.
  function card(p, c, askedScopes, declared = true) {
    const out = h("div", { "aria-live": "polite" });
    const actions = h("div", { class: "row connection-actions" });
    const offered = p.scopes || [];
    // Reconnecting keeps what was granted; a tool's link adds what it asks for. None: every
    // scope the provider offers.
    const keep = (c?.scopes || []).filter((s) => offered.includes(s));
    const scopes = askedScopes ? [...new Set([...askedScopes, ...keep])] : keep;
    const lacking = askedScopes && c ? askedScopes.filter((s) => !(c.scopes || []).includes(s)) : [];
    const el = h("section", { class: askedScopes ? "connection-card asked" : "connection-card", "data-test": "provider", "data-provider": p.name },
      h("div", { class: "row connection-head" },
        h("h3", { class: "mono" }, p.name),
        c ? h("span", { class: "status success", "data-test": "connection-status" }, "connected")
          : h("span", { class: "status", "data-test": "connection-status" }, "not connected"),
        askedScopes ? h("span", { class: "flag confirm", "data-test": "asked" }, "a tool asks for it") : null),
      p.description ? h("p", { class: "connection-desc" }, p.description) : null,
      offered.length ? h("p", { class: "small-text" }, h("span", { class: "muted" }, "Offers "), scopeFlags(offered, "offered-scope")) : null,
      c ? h("dl", { class: "connection-facts", "data-test": "connection" },
        h("dt", {}, "Granted"), h("dd", { "data-test": "granted" }, c.scopes?.length ? scopeFlags(c.scopes, "granted-scope") : h("span", { class: "muted" }, "what the provider chose (it did not say)")),
        h("dt", {}, "Connected"), h("dd", {}, h("time", { datetime: c.connected_at }, when(c.connected_at))),
        c.refreshed_at && c.refreshed_at !== c.connected_at ? [h("dt", {}, "Renewed"), h("dd", {}, h("time", { datetime: c.refreshed_at }, when(c.refreshed_at)))] : null,
        h("dt", {}, "Token"), h("dd", { "data-test": "expiry" }, expiry(c.expires_at))) : null,
      askedScopes ? h("p", { class: "warning small-text", "data-test": "asked-note" },
        c && !lacking.length ? "A tool asked for this account, and it is connected with what it asks for: try the tool again."
          : `A tool asked for your account here${askedScopes.length ? ", with " + askedScopes.join(" ") : ""}. Nothing is connected until you click ${c ? "Reconnect" : "Connect"}.`) : null,
      actions, out);
    const disconnect = c && mayConnect ? h("button", { type: "button", class: "secondary", "data-test": "disconnect" }, "Disconnect") : null;
    if (mayConnect && declared) {
      const label = c ? "Reconnect" : "Connect";
      const go = h("button", { type: "button", "data-test": "connect" }, label);
      go.onclick = () => connect(p, scopes, go, out);
      actions.append(go);
      el.insertBefore(h("p", { class: "muted small-text connection-asks", "data-test": "asks-for" },
        `${label} asks for ${scopes.length ? scopes.join(" ") : "every scope it offers"}.`), out);
    }
    if (disconnect) {
      disconnect.onclick = () => {
        const back = () => { clear(actions).append(...kept); };
        const kept = [...actions.childNodes];
        clear(actions).append(
          h("span", { class: "small-text" }, `Disconnect ${p.name}? Its token is revoked there, and tools that act as you there stop working until you connect again. `),
          h("button", { type: "button", class: "danger", "data-test": "disconnect-confirm", onclick: async (e) => {
            e.target.disabled = true;
            clear(out);
            try {
              await api("DELETE", `/connections/${encodeURIComponent(p.name)}`);
              clear(notes).append(h("p", { class: "ok-text", role: "status", "data-test": "disconnected-note" }, `Disconnected from ${p.name}: its token is revoked.`));
              await reload();
            } catch (err) {
              if (err instanceof ApiError && err.status === 401) return ctx.error(err);
              back();
              out.append(errorBox(err, "Not disconnected"));
            }
          } }, "Disconnect"),
          h("button", { type: "button", class: "secondary", "data-test": "disconnect-cancel", onclick: back }, "Cancel"));
      };
      actions.append(disconnect);
    }
    return el;
  }

  // connect starts the flow in this browser and sends the window to the provider's page.
  async function connect(p, scopes, button, out) {
    clear(out);
    button.disabled = true;
    try {
      const body = { return_to: RETURN_TO, bind_browser: true };
      if (scopes.length) body.scopes = scopes;
      const started = await api("POST", `/connections/${encodeURIComponent(p.name)}`, body);
      const to = new URL(started.authorization_url);
      if (to.protocol !== "https:" && to.protocol !== "http:") throw new Error(`the provider's page is not a web address (${to.protocol})`);
      location.assign(to.href);
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return ctx.error(err);
      button.disabled = false;
      out.append(errorBox(err, "Not connected"));
    }
  }

  show();
  if (asked.connected) {
    const c = connections.find((x) => x.provider === asked.connected);
    notes.append(h("p", { class: "ok-text", role: "status", "data-test": "connected-note" }, `Connected to ${asked.connected}`,
      c?.scopes?.length ? `, with ${c.scopes.join(" ")}` : "", ". Tools that act as you there can now call with your account."));
  }
  if (asked.connect) {
    const target = cards.querySelector(`[data-provider="${CSS.escape(asked.connect)}"]`);
    if (target) {
      target.scrollIntoView({ block: "nearest" });
    } else {
      notes.append(h("p", { class: "warning", "data-test": "asked-unknown" }, `A tool asked for your account at ${asked.connect}, which this workspace ` +
        "does not declare: ask an admin to declare it."));
    }
  }
  if (admin) {
    const box = h("div");
    page.append(h("h2", {}, "The providers document"), box);
    editor(box, ctx, doc, reload);
  }
}

// askedOf reads the route's query: ?connect=NAME&scopes=A%20B (a tool's link), ?connected=NAME
// (the callback's mark).
function askedOf(hash) {
  const i = hash.indexOf("?");
  const q = new URLSearchParams(i < 0 ? "" : hash.slice(i + 1));
  return {
    connect: q.get("connect") || "",
    scopes: (q.get("scopes") || "").split(/\s+/).filter(Boolean),
    connected: q.get("connected") || "",
  };
}

function scopeFlags(scopes, test) {
  return scopes.map((s) => h("span", { class: "flag mono", "data-test": test }, s));
}

// expiry says when a connection's access token expires: it is renewed before, when the
// provider gave a refresh token.
function expiry(t) {
  if (!t) return h("span", { class: "muted" }, "the provider set no expiry");
  const past = new Date(t) <= new Date();
  return [past ? "expired " : "expires ", h("time", { datetime: t }, when(t)),
    h("span", { class: "muted" }, past ? " (renewed when a tool next uses it)" : " (renewed before)")];
}

// editor shows an admin the providers document and lets them change it.
function editor(box, ctx, doc, changed) {
  let current = doc;
  const version = h("p", { class: "muted", "data-test": "providers-version" });
  const text = h("textarea", { id: "providers-document", name: "document", rows: 16, spellcheck: "false", "aria-label": "The providers document (JSON)",
    "data-test": "providers-document" });
  const problem = h("div", { "aria-live": "polite" });
  const saved = h("p", { class: "ok-text", role: "status", "data-test": "providers-saved", hidden: true });
  const save = h("button", { type: "submit", "data-test": "providers-save" }, "Save the providers");
  const show = (d) => {
    current = d;
    version.textContent = d.version === 0
      ? "None declared yet."
      : `Version ${d.version}, changed ${d.updated_by ? "by " + d.updated_by + " " : ""}on ${when(d.updated_at)}.`;
    text.value = JSON.stringify(d.version === 0 ? { providers: [] } : d.document, null, 2);
    text.removeAttribute("aria-invalid");
  };
  box.append(version, h("form", { novalidate: true, "data-test": "providers-form", onsubmit: async (e) => {
    e.preventDefault();
    clear(problem);
    saved.hidden = true;
    text.removeAttribute("aria-invalid");
    let parsed;
    try {
      parsed = JSON.parse(text.value);
    } catch (err) {
      text.setAttribute("aria-invalid", "true");
      problem.append(h("div", { class: "error", role: "alert", "data-test": "error" }, "The document is not JSON: " + err.message));
      return;
    }
    save.disabled = true;
    try {
      show(await api("PUT", "/connection-providers", { document: parsed, after: current.version }));
      saved.textContent = `Saved: version ${current.version}.`;
      saved.hidden = false;
      await changed();
    } catch (err) {
      refused(err);
    } finally {
      save.disabled = false;
    }
  } },
  h("p", { class: "muted" }, "providers, each: name (a-z, 0-9, _ and -), description, authorization_url, token_url, revocation_url (https; http " +
    "on loopback alone; or issuer, to read those left out from the issuer's metadata), client_id, client_secret_variable (the name of the workspace's secret variable holding the client's secret; none: a public " +
    "client) and scopes (those on offer). Register ", h("span", { class: "mono", "data-test": "redirect-uri" }, location.origin + "/connections/callback"),
  " (the server's public URL and /connections/callback) as the client's redirect URI at each provider."),
  text,
  h("div", { class: "row" }, save),
  saved, problem));
  show(doc);

  // refused shows why the API refused the document: every part at fault by its place
  // (body.document.providers[0].token_url); a conflict offers the document now in force.
  function refused(err) {
    if (err instanceof ApiError && err.status === 401) return ctx.error(err);
    if (err?.errors?.some((f) => String(f.location || "").startsWith("body.document"))) text.setAttribute("aria-invalid", "true");
    problem.append(errorBox(err, "The providers were not saved"));
    if (err instanceof ApiError && err.status === 409) {
      problem.append(h("button", { type: "button", class: "secondary", "data-test": "providers-reload", onclick: async () => {
        show(await api("GET", "/connection-providers"));
        clear(problem);
        await changed();
      } }, "Load the document now in force (your changes are lost)"));
    }
  }
}
