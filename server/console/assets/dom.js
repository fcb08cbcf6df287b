// Building the page. Every value goes in as text: h() sets text children with textContent and
// attributes with setAttribute, so a model's or a tool's "<script>" or "onerror=" is shown as
// the characters it is. Nothing here, or in the pages, assigns innerHTML.

// h makes an element: h("a", {href: "#/x", class: "c"}, "text", child, [more children]).
// Attributes starting with "on" take functions (event listeners), never strings.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "dataset") {
      Object.assign(el.dataset, v);
    } else if (k !== "href" || safeHref(v)) {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// Only the console's own routes and blob: URLs are links; anything else a value holds
// (javascript:, another origin) is not made one.
function safeHref(v) {
  const s = String(v);
  return s.startsWith("#/") || s.startsWith("blob:") || s.startsWith("/console/");
}

// toolName is a tool's name as text that wraps only after its separators (_ . - / :), with the
// whole name as its title: a narrow column shows get_current_ / time, never get_curr / ent_time.
// A part wider than the column alone still breaks (style.css, .tool-name), as a last resort.
export function toolName(name, attrs = {}) {
  const s = String(name ?? "");
  const parts = [];
  for (const piece of s.split(/(?<=[_.\-\/:])/)) {
    if (parts.length) parts.push(h("wbr", {}));
    parts.push(piece);
  }
  return h("span", { class: "tool-name", title: s, ...attrs }, parts);
}

// clear empties an element.
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// fold shows a long value folded: its first lines, and the rest behind a <details>.
export function fold(text, max = 600) {
  const s = String(text ?? "");
  if (s.length <= max) return h("pre", { class: "value" }, s);
  return h("details", { class: "fold" }, h("summary", {}, s.slice(0, max) + "…"), h("pre", { class: "value" }, s));
}

// pretty is a JSON value as indented text, or the text as it is.
export function pretty(v) {
  if (typeof v === "string") {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// when is a time as people read it.
export function when(t) {
  if (!t) return "";
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}
