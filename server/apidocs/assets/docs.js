// The API reference: reads the server's OpenAPI document and lays it out for people. Every
// text from the document goes in through textContent (h below), never as HTML, so a
// description can never become markup or script.

const METHODS = ["get", "post", "put", "patch", "delete"];
const MAX_DEPTH = 4; // nested schemas shown inline; deeper ones link to their component

// h makes an element with attributes and children (strings become text nodes).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

let components = {};

function refName(ref) {
  return decodeURIComponent(String(ref).split("/").pop());
}

// resolve follows a $ref to its component; it returns the schema and the component's name.
function resolve(s) {
  if (s && typeof s === "object" && typeof s.$ref === "string") {
    const name = refName(s.$ref);
    return { schema: components[name] || {}, name };
  }
  return { schema: s, name: "" };
}

function schemaLink(name) {
  return h("a", { href: "#schema-" + name, class: "ref" }, name);
}

// typeText says what a schema admits, in a few words: "string", "array of Thread",
// "integer (int64) | null".
function typeText(s) {
  if (s === true || s === undefined || s === null) return "any";
  if (s === false) return "nothing";
  if (s.$ref) return refName(s.$ref);
  for (const k of ["oneOf", "anyOf"]) {
    if (Array.isArray(s[k])) return s[k].map(typeText).join(" | ");
  }
  if (Array.isArray(s.allOf)) return s.allOf.map(typeText).join(" & ");
  let types = Array.isArray(s.type) ? s.type.slice() : s.type ? [s.type] : [];
  const nullable = types.includes("null");
  types = types.filter((t) => t !== "null");
  let text;
  if (types.length === 1 && types[0] === "array") {
    text = "array of " + typeText(s.items);
  } else if (types.length === 1 && types[0] === "object" && !s.properties && s.additionalProperties && s.additionalProperties !== true) {
    text = "map of " + typeText(s.additionalProperties);
  } else if (types.length) {
    text = types.join(" | ");
  } else {
    text = s.properties ? "object" : "any";
  }
  if (s.format) text += " (" + s.format + ")";
  return nullable ? text + " | null" : text;
}

// typeNode is typeText with the components it names as links.
function typeNode(s) {
  if (s && s.$ref) return schemaLink(refName(s.$ref));
  if (s && typeof s === "object") {
    let types = Array.isArray(s.type) ? s.type.filter((t) => t !== "null") : [s.type];
    const nullable = Array.isArray(s.type) && s.type.includes("null");
    if (types.length === 1 && types[0] === "array" && s.items && s.items.$ref) {
      return h("span", {}, "array of ", schemaLink(refName(s.items.$ref)), nullable ? " | null" : "");
    }
  }
  return h("span", {}, typeText(s));
}

// constraints lists what else a schema requires of a value: its enum, bounds, pattern, default.
function constraints(s) {
  if (!s || typeof s !== "object") return [];
  const out = [];
  if (Array.isArray(s.enum)) out.push("one of: " + s.enum.map((v) => JSON.stringify(v)).join(", "));
  if (s.const !== undefined) out.push("always " + JSON.stringify(s.const));
  const bounds = [["minimum", "≥ "], ["exclusiveMinimum", "> "], ["maximum", "≤ "], ["exclusiveMaximum", "< "],
    ["minLength", "at least {} character"], ["maxLength", "at most {} character"],
    ["minItems", "at least {} item"], ["maxItems", "at most {} item"]];
  for (const [k, words] of bounds) {
    if (s[k] === undefined) continue;
    out.push(words.includes("{}") ? words.replace("{}", s[k]) + (s[k] === 1 ? "" : "s") : words + s[k]);
  }
  if (s.pattern) out.push("matches " + s.pattern);
  if (s.default !== undefined) out.push("default " + JSON.stringify(s.default));
  return out;
}

function describe(s) {
  const parts = [];
  if (s && typeof s === "object" && s.description) parts.push(h("span", { class: "desc" }, s.description));
  const c = constraints(s);
  if (c.length) parts.push(h("span", { class: "constraints" }, c.join("; ")));
  return parts;
}

// hasInside says whether a schema has more to show than its type: properties, alternatives,
// or items or values that do.
function hasInside(s, depth) {
  const { schema } = resolve(s);
  if (!schema || typeof schema !== "object" || depth > MAX_DEPTH) return false;
  if (schema.properties || schema.oneOf || schema.anyOf || schema.allOf) return true;
  if (schema.items) return hasInside(schema.items, depth + 1);
  if (schema.additionalProperties && typeof schema.additionalProperties === "object") return hasInside(schema.additionalProperties, depth + 1);
  return false;
}

// schemaBlock lays out a schema: its properties (name, type, required, what it is), its
// alternatives, or its items. seen holds the components already open on the way here, so a
// recursive schema stops at a link.
function schemaBlock(s, depth = 0, seen = new Set()) {
  const { schema, name } = resolve(s);
  if (name) {
    if (seen.has(name) || depth > MAX_DEPTH) return h("p", { class: "muted" }, "see ", schemaLink(name));
    seen = new Set(seen).add(name);
  }
  if (!schema || typeof schema !== "object") return h("p", { class: "muted" }, typeText(schema));
  const box = h("div", { class: "schema" });
  if (name) box.append(h("p", { class: "schema-name" }, schemaLink(name)));
  if (schema.description && depth > 0 && name) box.append(h("p", { class: "desc" }, schema.description));
  for (const k of ["oneOf", "anyOf", "allOf"]) {
    if (!Array.isArray(schema[k])) continue;
    const words = { oneOf: "One of:", anyOf: "Any of:", allOf: "All of:" }[k];
    box.append(h("p", {}, words), h("ol", { class: "alternatives" },
      schema[k].map((alt) => h("li", {}, hasInside(alt, depth + 1) ? schemaBlock(alt, depth + 1, seen) : [typeNode(alt), " ", describe(alt)]))));
  }
  if (schema.properties) {
    const required = new Set(schema.required || []);
    const rows = Object.entries(schema.properties).map(([prop, ps]) => {
      const row = h("li", { class: "prop" },
        h("code", { class: "prop-name" }, prop), " ", h("span", { class: "type" }, typeNode(ps)),
        required.has(prop) ? h("span", { class: "required" }, "required") : null,
        " ", describe(ps));
      if (hasInside(ps, depth + 1)) {
        row.append(h("details", {}, h("summary", {}, "fields of " + prop), schemaBlock(ps, depth + 1, seen)));
      }
      return row;
    });
    box.append(h("ul", { class: "props" }, rows));
    if (schema.additionalProperties === false) box.append(h("p", { class: "muted small" }, "No other fields."));
  } else if (schema.items) {
    box.append(h("p", {}, "A list of ", typeNode(schema.items), "."));
    if (hasInside(schema.items, depth + 1)) box.append(schemaBlock(schema.items, depth + 1, seen));
  } else if (!schema.oneOf && !schema.anyOf && !schema.allOf) {
    box.append(h("p", {}, typeNode(schema), " ", describe(schema)));
  }
  return box;
}

function content(c) {
  if (!c) return [];
  return Object.entries(c).map(([type, media]) => h("div", { class: "media" },
    h("p", { class: "media-type" }, h("code", {}, type)),
    media.schema ? schemaBlock(media.schema) : null));
}

function parameters(op, pathItem) {
  const params = [...(pathItem.parameters || []), ...(op.parameters || [])].map((p) => (p.$ref ? resolve(p).schema : p));
  if (!params.length) return null;
  return h("section", { class: "params" }, h("h4", {}, "Parameters"),
    h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "In"), h("th", {}, "Type"), h("th", {}, "About"))),
      h("tbody", {}, params.map((p) => h("tr", { "data-test": "parameter" },
        h("td", {}, h("code", {}, p.name), p.required ? h("span", { class: "required" }, "required") : null),
        h("td", {}, p.in),
        h("td", {}, typeNode(p.schema)),
        h("td", {}, p.description ? h("span", { class: "desc" }, p.description) : null, " ", describe(p.schema).filter((x) => x.className === "constraints")))))));
}

function operation(method, path, op, pathItem) {
  const id = op.operationId || method + " " + path;
  const sec = h("section", { class: "operation", id: "op-" + id, "data-test": "operation", "data-operation-id": id },
    h("h3", {}, h("span", { class: "method " + method }, method.toUpperCase()), " ", h("code", { class: "path" }, path)),
    op.summary ? h("p", { class: "summary" }, op.summary) : null,
    op.description && op.description !== op.summary ? h("p", { class: "desc" }, op.description) : null,
    h("p", { class: "muted small" }, "operationId ", h("code", {}, id),
      op.security && op.security.length === 0 ? " · no API key needed" : ""),
    parameters(op, pathItem));
  if (op.requestBody) {
    const rb = resolve(op.requestBody).schema;
    sec.append(h("section", { class: "body" }, h("h4", {}, "Request body", rb.required ? " (required)" : ""),
      rb.description ? h("p", { class: "desc" }, rb.description) : null, content(rb.content)));
  }
  const responses = Object.entries(op.responses || {});
  if (responses.length) {
    sec.append(h("section", { class: "responses" }, h("h4", {}, "Responses"),
      responses.map(([status, r]) => {
        const res = resolve(r).schema;
        return h("details", { class: "response", "data-test": "response", open: status.startsWith("2") },
          h("summary", {}, h("code", { class: "status s" + status[0] }, status), " ", res.description || ""),
          content(res.content));
      })));
  }
  sec.dataset.search = [method, path, id, op.summary || "", op.description || ""].join(" ").toLowerCase();
  return sec;
}

// breakable is a path as text with a line-break opportunity after each "/", so that a narrow
// column breaks it between segments rather than inside a word.
function breakable(path) {
  return path.split("/").flatMap((part, i) => (i === 0 ? [part] : [h("wbr"), "/" + part]));
}

// group is where an operation is listed: its first tag, else the resource its path names
// (/v1/threads/{id}/runs: threads).
function group(path, op) {
  if (op.tags && op.tags.length) return op.tags[0];
  const parts = path.split("/").filter(Boolean);
  return (parts[0] === "v1" ? parts[1] : parts[0]) || "other";
}

function render(doc) {
  components = (doc.components && doc.components.schemas) || {};
  document.getElementById("version").textContent = [doc.openapi ? "OpenAPI " + doc.openapi : "", doc.info && doc.info.version ? "version " + doc.info.version : ""].filter(Boolean).join(" · ");
  const groups = new Map();
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const g = group(path, op);
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(operation(method, path, op, item));
    }
  }
  const main = document.getElementById("main");
  const toc = document.getElementById("toc");
  main.replaceChildren();
  toc.replaceChildren();
  const info = doc.info || {};
  main.append(h("h1", {}, (info.title || "The") + " API reference"));
  if (info.description) main.append(h("p", { class: "desc" }, info.description));
  const schemes = (doc.components && doc.components.securitySchemes) || {};
  for (const [name, sc] of Object.entries(schemes)) {
    main.append(h("p", { class: "auth" }, h("strong", {}, "Authentication (" + name + "): "),
      [sc.type, sc.scheme, sc.bearerFormat].filter(Boolean).join(" "), sc.description ? " — " + sc.description : ""));
  }
  const names = [...groups.keys()].sort();
  for (const g of names) {
    const ops = groups.get(g);
    main.append(h("section", { class: "group", id: "group-" + g, "data-test": "group" }, h("h2", {}, g), ops));
    toc.append(h("div", { class: "toc-group" }, h("a", { href: "#group-" + g, class: "toc-title" }, g),
      h("ul", {}, ops.map((sec) => h("li", { "data-for": sec.id },
        h("a", { href: "#" + sec.id }, h("span", { class: "toc-method" }, sec.querySelector(".method").textContent),
          h("span", { class: "toc-path" }, breakable(sec.querySelector(".path").textContent))))))));
  }
  const schemaNames = Object.keys(components).sort();
  if (schemaNames.length) {
    main.append(h("section", { class: "group", id: "schemas" }, h("h2", {}, "Schemas"),
      schemaNames.map((n) => h("section", { class: "component", id: "schema-" + n, "data-test": "schema" },
        h("h3", {}, n), components[n].description ? h("p", { class: "desc" }, components[n].description) : null,
        schemaBlock(components[n], 1, new Set([n]))))));
    toc.append(h("div", { class: "toc-group" }, h("a", { href: "#schemas", class: "toc-title" }, "Schemas")));
  }
  document.body.dataset.rendered = "true";
  if (location.hash) document.getElementById(decodeURIComponent(location.hash.slice(1)))?.scrollIntoView();
}

function filter(text) {
  const q = text.trim().toLowerCase();
  for (const sec of document.querySelectorAll("section.operation")) {
    const show = !q || sec.dataset.search.includes(q);
    sec.hidden = !show;
    const entry = document.querySelector(`#toc li[data-for="${CSS.escape(sec.id)}"]`);
    if (entry) entry.hidden = !show;
  }
  for (const g of document.querySelectorAll("section.group[data-test=group]")) {
    g.hidden = !g.querySelector("section.operation:not([hidden])");
  }
}

async function main() {
  const mainEl = document.getElementById("main");
  try {
    const res = await fetch("/v1/openapi.json", { headers: { Accept: "application/json" } });
    if (!res.ok) throw new Error("GET /v1/openapi.json answered " + res.status);
    render(await res.json());
  } catch (e) {
    mainEl.replaceChildren(h("p", { class: "error", role: "alert" }, "The API's document could not be read: " + e.message));
    return;
  }
  document.getElementById("filter").addEventListener("input", (e) => filter(e.target.value));
}

main();
