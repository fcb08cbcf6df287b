// The keys page (admins): the workspace's API keys, newest first (their records: a key itself
// is shown once, when it is made, and never again: the server keeps only its hash); making a
// key for a member with a role no higher than the member's; revoking one, after a second
// click.
import { api, ApiError } from "../api.js";
import { h, clear, when } from "../dom.js";
import { schemaForm, errorBox } from "../schemaform.js";

export async function render(main, ctx) {
  const page = h("div", { class: "con-page keys-page" }, h("h1", {}, "API keys"));
  main.append(page);
  if (!ctx.can("admin")) {
    page.append(h("p", { class: "muted", "data-test": "not-admin" }, "Only a workspace admin's key manages keys."));
    return;
  }
  let left = false;
  ctx.onLeave(() => { left = true; });
  const me = ctx.session?.user_id || "";
  const [keys, members] = await Promise.all([api("GET", "/keys"), api("GET", "/members").catch(() => ({ members: [] }))]);
  if (left) return;
  const who = new Map(members.members.map((m) => [m.user_id, m]));

  const fresh = h("div", { "aria-live": "polite", "data-test": "new-key-box" });
  const body = h("tbody", { "data-test": "keys" });
  const list = async () => {
    const { keys } = await api("GET", "/keys");
    if (!left) fill(keys);
  };
  const fill = (ks) => {
    clear(body);
    if (ks.length === 0) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No keys.")));
    for (const k of ks) body.append(row(k));
  };

  function row(k) {
    const m = who.get(k.user_id);
    const revoked = Boolean(k.revoked_at);
    const expired = !revoked && k.expires_at && new Date(k.expires_at) <= new Date();
    const actions = h("td", { class: "key-actions" });
    const tr = h("tr", { "data-test": "key", "data-key-id": k.id, class: revoked || expired ? "key-dead" : null },
      h("td", {}, h("strong", {}, k.name), h("div", { class: "muted mono small-text" }, `${k.prefix}… · ${k.id}`)),
      h("td", {}, h("span", { class: "flag role-" + k.role }, k.role)),
      h("td", {}, m ? `${m.name || m.email}` : h("span", { class: "mono" }, k.user_id), k.user_id === me ? h("span", { class: "muted" }, " (you)") : null),
      h("td", {}, when(k.created_at), k.expires_at ? h("div", { class: "muted small-text" }, (expired ? "expired " : "expires ") + when(k.expires_at)) : null),
      h("td", {}, revoked ? h("span", { class: "status error", "data-test": "revoked" }, "revoked " + when(k.revoked_at))
        : k.last_used_at ? when(k.last_used_at) : h("span", { class: "muted" }, "never used")),
      actions);
    if (!revoked) {
      const revoke = h("button", { type: "button", class: "secondary", "data-test": "revoke" }, "Revoke");
      revoke.onclick = () => {
        clear(actions).append(
          h("span", { class: "small-text" }, ctx.session?.key_id === k.id ? "This is the key you are signed in with. Revoke it for good? " : "Revoke for good? "),
          h("button", { type: "button", class: "danger", "data-test": "revoke-confirm", onclick: async (e) => {
            e.target.disabled = true;
            try {
              await api("DELETE", `/keys/${encodeURIComponent(k.id)}`);
              if (ctx.session?.key_id === k.id) return ctx.error(new ApiError(401, { detail: "This key was revoked." }));
              await list();
            } catch (err) {
              if (err instanceof ApiError && err.status === 401) return ctx.error(err);
              clear(actions).append(errorBox(err, "Not revoked"));
            }
          } }, "Revoke"),
          h("button", { type: "button", class: "secondary", onclick: () => clear(actions).append(revoke) }, "Cancel"));
      };
      actions.append(revoke);
    }
    return tr;
  }

  // The form: a name, a role, the member it acts as (the admin by default), an expiry.
  const memberIDs = members.members.map((m) => m.user_id);
  const form = schemaForm({
    type: "object",
    properties: {
      name: { title: "Name", type: "string", minLength: 1, maxLength: 100, "x-hint": false, description: "What the key is for, to recognise it in this list (at most 100 characters)." },
      role: { title: "Role", type: "string", enum: ["viewer", "member", "admin"], "x-hint": false, description: "viewer reads; member also calls tools, runs agents and decides; admin also manages the workspace. No higher than the member's own role." },
      ...(memberIDs.length ? { user_id: { title: "Member", type: "string", enum: memberIDs, "x-hint": false, description: "The member the key acts as." } } : {}),
      expires_at: { title: "Expires", type: "string", format: "date", "x-hint": false, description: "The day the key stops working (optional; never when empty)." },
    },
    required: ["name", "role", ...(memberIDs.length ? ["user_id"] : [])],
  }, { value: { role: "member", ...(memberIDs.includes(me) ? { user_id: me } : {}) }, prefix: "body" });
  // The members' ids are listed by name.
  const sel = form.el.querySelector('[data-field="user_id"] select');
  if (sel) {
    for (const o of sel.options) {
      const m = /^\d+$/.test(o.value) ? who.get(memberIDs[Number(o.value)]) : null;
      if (m) o.textContent = `${m.name || m.email} (${m.role})${m.user_id === me ? " · you" : ""}`;
    }
  }

  const submit = h("button", { type: "submit", "data-test": "key-create" }, "Make the key");
  page.append(
    h("p", { class: "muted" }, "Keys sign clients in: the API, MCP clients and this console. A key is shown once, when it is made."),
    fresh,
    h("table", { class: "keys-table" }, h("thead", {}, h("tr", {}, h("th", {}, "Key"), h("th", {}, "Role"), h("th", {}, "Member"), h("th", {}, "Made"), h("th", {}, "Last used"), h("th", {}, ""))), body),
    h("form", { class: "key-create", "data-test": "key-form", novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      const read = form.read();
      if (!read.ok) return;
      const b = { ...read.value };
      if (b.expires_at) {
        const d = new Date(b.expires_at + "T23:59:59");
        if (isNaN(d) || d <= new Date()) { form.showErrors([{ location: "body.expires_at", message: "a day in the future" }]); return; }
        b.expires_at = d.toISOString();
      }
      submit.disabled = true;
      clear(fresh);
      try {
        const made = await api("POST", "/keys", b);
        showOnce(made);
        await list();
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return ctx.error(err);
        if (err instanceof ApiError) form.showErrors(err.errors);
        fresh.append(errorBox(err, "No key was made"));
      } finally {
        submit.disabled = false;
      }
    } }, h("h2", {}, "Make a key"), form.el, h("div", { class: "row" }, submit)));
  fill(keys.keys);

  // showOnce shows the new key, with a way to copy it: it is not shown again.
  function showOnce(made) {
    const secret = h("input", { type: "text", readonly: true, value: made.secret, class: "mono key-secret", "data-test": "new-key", "aria-label": "The new key", spellcheck: "false" });
    const copied = h("span", { class: "muted", "aria-live": "polite" });
    const copy = h("button", { type: "button", class: "secondary", "data-test": "copy-key", onclick: async () => {
      secret.select();
      try {
        await navigator.clipboard.writeText(made.secret);
        copied.textContent = "Copied.";
      } catch {
        copied.textContent = "Selected: copy it with Ctrl+C (⌘C).";
      }
    } }, "Copy");
    fresh.append(h("div", { class: "new-key", role: "status" },
      h("p", {}, h("strong", {}, `Key “${made.key.name}” (${made.key.role}) made. `), "Copy it now: it is shown this once, and the server keeps only its hash."),
      h("div", { class: "row" }, secret, copy, copied),
      h("button", { type: "button", class: "link", onclick: () => clear(fresh) }, "I have copied it: hide it")));
    secret.focus();
    secret.select();
  }
}
