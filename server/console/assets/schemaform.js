// A form made from a JSON Schema: one field per property of an object schema (a text box for
// a string, a list for an enum, a number box with its bounds, a checkbox for a boolean, and a
// JSON text area for arrays, objects and anything the simple fields cannot say), with the
// required ones marked and the defaults filled in. read() checks what was typed against the
// schema (required, types, enums, bounds, lengths, patterns, JSON that parses) and shows each
// problem next to its field; showErrors() does the same with a problem the API answered
// (errors[].location like body.args.amount: the field "amount"), showProblems() with a tool
// result's problems (JSON pointers like /amount).
//
// Every name, description and value from the schema or the arguments goes in as text (h()
// and .value), never as HTML.
import { h, pretty } from "./dom.js";

let forms = 0; // for unique element ids

// schemaForm builds the form. opts:
//   value     the initial value (an object): what is edited; defaults fill what it lacks
//   readOnly  show the schema as a form to read: nothing can be typed, each field says its
//             type and constraints
//   prefix    where the value sits in a request, for showErrors: "body.args" (the default)
//             for a tool's arguments, "body" for a request's own fields
//   test      the form's data-test ("schema-form" by default)
// It returns {el, read(), showErrors(errors), showProblems(problems), clearErrors(), mode},
// where read() returns {ok, value} and, when not ok, shows why next to the fields.
export function schemaForm(schema, opts = {}) {
  const id = `sf${++forms}`;
  const prefix = opts.prefix ?? "body.args";
  const initial = isObject(opts.value) ? opts.value : undefined;
  const root = schema;
  const top = deref(root, schema);
  const el = h("div", { class: "schema-form" + (opts.readOnly ? " read-only" : ""), "data-test": opts.test || "schema-form" });
  const general = h("div", { class: "field-error form-error", role: "alert", hidden: true });

  // A tool without an input schema takes no arguments.
  if (schema === undefined || schema === null) {
    if (!initial || Object.keys(initial).length === 0) {
      el.append(h("p", { class: "muted" }, "This tool takes no arguments."), general);
      return finish({ mode: "none", el, general, fields: [], read: () => ({ ok: true, value: {} }) });
    }
  }

  const props = isObject(top) && isObject(top.properties) ? top.properties : null;
  if (!props || Object.keys(props).length === 0) {
    // Free-form, or a shape the fields cannot say: the whole value as JSON.
    const f = jsonField(`${id}-all`, "", { type: "object" }, initial ?? (isObject(top) && top.default !== undefined ? top.default : {}), true, opts.readOnly, top);
    f.whole = true;
    el.append(f.wrap, general);
    return finish({ mode: "json", el, general, fields: [f], read: () => readFields([f]) });
  }

  const required = new Set(Array.isArray(top.required) ? top.required : []);
  const fields = [];
  let i = 0;
  for (const [name, raw] of Object.entries(props)) {
    const s = deref(root, raw);
    const has = initial && Object.hasOwn(initial, name);
    const value = has ? initial[name] : (isObject(s) && s.default !== undefined ? s.default : undefined);
    fields.push(field(`${id}-${i++}`, name, s, value, has, required.has(name), opts.readOnly, root));
  }
  // Arguments the schema does not name are kept, as JSON, rather than dropped.
  let extra = null;
  if (initial && !opts.readOnly) {
    const rest = Object.fromEntries(Object.entries(initial).filter(([k]) => !Object.hasOwn(props, k)));
    if (Object.keys(rest).length > 0) {
      extra = jsonField(`${id}-extra`, "", { type: "object" }, rest, false, false, null);
      extra.label.textContent = "Other arguments (not in the schema)";
      extra.extra = true;
      fields.push(extra);
    }
  }
  const formEl = h("div", { class: "schema-fields" }, fields.map((f) => f.wrap));
  el.append(formEl, general);
  return finish({ mode: "fields", el, general, fields, read: () => readFields(fields) });

  // finish adds the error display to a form.
  function finish(form) {
    const byName = new Map(form.fields.filter((f) => !f.extra && !f.whole).map((f) => [f.name, f]));
    form.clearErrors = () => {
      for (const f of form.fields) setError(f, "");
      showFieldError(general, "");
    };
    const place = (name, message, where) => {
      const f = name === null ? null : (form.mode === "json" ? form.fields[0] : byName.get(name));
      if (f) {
        setError(f, f.error.textContent ? f.error.textContent + "; " + message : message);
      } else {
        general.append(h("div", {}, where ? `${where}: ${message}` : message));
        general.hidden = false;
        general.setAttribute("data-test", "field-error");
      }
    };
    const names = [...byName.keys()].sort((a, b) => b.length - a.length); // the longest first
    // showErrors shows a problem's errors[] next to their fields; the ones of no field of
    // this form go under it.
    form.showErrors = (errors) => {
      for (const e of errors || []) {
        const loc = String(e?.location ?? "");
        const msg = String(e?.message ?? "invalid");
        if (loc === prefix) { place(form.mode === "json" ? "" : null, msg, ""); continue; }
        if (!loc.startsWith(prefix + ".") && !loc.startsWith(prefix + "[")) { place(null, msg, loc); continue; }
        const rest = loc.slice(prefix.length + (loc[prefix.length] === "." ? 1 : 0));
        if (form.mode === "json") { place("", `${rest}: ${msg}`, ""); continue; }
        const name = names.find((n) => rest === n || rest.startsWith(n + ".") || rest.startsWith(n + "["));
        const where = name !== undefined && rest !== name ? ` (${rest.slice(name.length).replace(/^\./, "")})` : "";
        place(name ?? null, msg + where, rest);
      }
    };
    // showProblems shows a tool result's problems ({pointer, message}) next to their fields.
    form.showProblems = (problems) => {
      for (const p of problems || []) {
        const tokens = String(p?.pointer ?? "").split("/").slice(1).map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
        const msg = String(p?.message ?? "invalid");
        if (tokens.length === 0) { place(form.mode === "json" ? "" : null, msg, ""); continue; }
        if (form.mode === "json") { place("", `${tokens.join(".")}: ${msg}`, ""); continue; }
        const deeper = tokens.length > 1 ? ` (${tokens.slice(1).join(".")})` : "";
        place(byName.has(tokens[0]) ? tokens[0] : null, msg + deeper, tokens.join("."));
      }
    };
    const read = form.read;
    form.read = () => {
      form.clearErrors();
      const out = read();
      if (!out.ok) form.fields.find((f) => f.error.textContent)?.input?.focus();
      return out;
    };
    return form;
  }
}

// fieldOf is the property a problem's location names under prefix: body.args.amount → amount,
// body.args.items[0].name → items; "" for the prefix itself, null for a location elsewhere.
export function fieldOf(location, prefix = "body.args") {
  const loc = String(location ?? "");
  if (loc === prefix) return "";
  if (!loc.startsWith(prefix + ".")) return null;
  const m = loc.slice(prefix.length + 1).match(/^[^.[]+/);
  return m ? m[0] : "";
}

// showFieldError shows a message in a field's error element, or hides it when message is
// empty; only a shown one is data-test="field-error", so that a test finds the errors shown.
export function showFieldError(el, message) {
  el.textContent = message || "";
  el.hidden = !message;
  if (message) el.setAttribute("data-test", "field-error");
  else el.removeAttribute("data-test");
}

// errorBox is an API error as the page shows it: its words, and the fields it names.
export function errorBox(err, what) {
  const box = h("div", { class: "error", role: "alert", "data-test": "error" }, (what ? what + ": " : "") + String(err?.message || err));
  const list = (err?.errors || []).filter((e) => e && (e.location || e.message));
  if (list.length) box.append(h("ul", { class: "error-fields" }, list.map((e) => h("li", {}, `${e.location || ""}${e.location ? ": " : ""}${e.message || ""}`))));
  return box;
}

// ---- fields

function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }

// deref follows a local $ref (#/$defs/x, #/definitions/x), at most a few times.
function deref(root, s) {
  for (let n = 0; n < 8 && isObject(s) && typeof s.$ref === "string"; n++) {
    const ref = s.$ref;
    if (!ref.startsWith("#")) return s;
    let cur = root;
    for (const tok of ref.slice(1).split("/").filter(Boolean)) {
      const key = decodeURIComponent(tok).replace(/~1/g, "/").replace(/~0/g, "~");
      cur = isObject(cur) ? cur[key] : undefined;
    }
    if (!isObject(cur)) return s;
    s = Object.keys(s).length > 1 ? { ...cur, ...Object.fromEntries(Object.entries(s).filter(([k]) => k !== "$ref")) } : cur;
  }
  return s;
}

// kindOf says which field a schema gets, and whether null is allowed.
function kindOf(root, s) {
  s = deref(root, s);
  if (!isObject(s)) return { kind: "json", nullable: false, s: isObject(s) ? s : {} };
  const simple = (v) => v === null || ["string", "number", "boolean"].includes(typeof v);
  if (Array.isArray(s.enum) && s.enum.length > 0 && s.enum.every(simple)) return { kind: "enum", values: s.enum, nullable: s.enum.includes(null), s };
  if (Object.hasOwn(s, "const") && simple(s.const)) return { kind: "enum", values: [s.const], nullable: false, s };
  let t = s.type;
  let nullable = false;
  if (Array.isArray(t)) {
    const non = t.filter((x) => x !== "null");
    nullable = non.length < t.length;
    t = non.length === 1 ? non[0] : undefined;
    if (non.length !== 1) return { kind: "json", nullable, s };
  }
  if (t === undefined) {
    // anyOf/oneOf of one type and null: that type, nullable.
    const alts = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : null;
    if (alts && alts.length === 2) {
      const nul = alts.findIndex((a) => isObject(a) && a.type === "null");
      if (nul >= 0) {
        const other = kindOf(root, alts[1 - nul]);
        if (other.kind !== "json") return { ...other, nullable: true, s: { ...other.s, description: other.s.description ?? s.description, default: s.default ?? other.s.default } };
      }
    }
    return { kind: "json", nullable, s };
  }
  if (t === "string" || t === "number" || t === "integer" || t === "boolean") return { kind: t, nullable, s };
  return { kind: "json", nullable, s };
}

// hints are a schema's constraints in words: "integer · 1 to 1000 · default 5".
function hints(k) {
  const s = k.s;
  const out = [];
  const type = Array.isArray(s.type) ? s.type.join(" or ") : s.type;
  if (k.kind === "json") {
    if (type === "array" && isObject(s.items) && s.items.type) out.push(`array of ${s.items.type}`);
    else out.push(type ? `${type}, as JSON` : "any JSON value");
  } else if (k.kind === "enum") {
    out.push("one of " + k.values.map((v) => JSON.stringify(v)).join(", "));
  } else {
    out.push(k.kind);
  }
  const lo = typeof s.exclusiveMinimum === "number" ? `more than ${s.exclusiveMinimum}` : s.minimum !== undefined ? `at least ${s.minimum}` : "";
  const hi = typeof s.exclusiveMaximum === "number" ? `less than ${s.exclusiveMaximum}` : s.maximum !== undefined ? `at most ${s.maximum}` : "";
  if (s.minimum !== undefined && s.maximum !== undefined && typeof s.exclusiveMinimum !== "number" && typeof s.exclusiveMaximum !== "number") out.push(`${s.minimum} to ${s.maximum}`);
  else { if (lo) out.push(lo); if (hi) out.push(hi); }
  if (s.multipleOf !== undefined) out.push(`a multiple of ${s.multipleOf}`);
  if (s.minLength !== undefined && s.maxLength !== undefined) out.push(`${s.minLength} to ${s.maxLength} characters`);
  else if (s.minLength !== undefined) out.push(`at least ${s.minLength} characters`);
  else if (s.maxLength !== undefined) out.push(`at most ${s.maxLength} characters`);
  if (s.minItems !== undefined) out.push(`at least ${s.minItems} items`);
  if (s.maxItems !== undefined) out.push(`at most ${s.maxItems} items`);
  if (s.pattern !== undefined) out.push(`matching ${s.pattern}`);
  if (s.format !== undefined) out.push(`format ${s.format}`);
  if (k.nullable) out.push("may be null");
  if (s.default !== undefined) out.push(`default ${JSON.stringify(s.default)}`);
  return out.join(" · ");
}

function labelFor(inputId, name, required) {
  return h("label", { for: inputId }, name, required ? h("span", { class: "req", title: "required" }, " *") : null,
    required ? h("span", { class: "visually-hidden" }, " (required)") : null);
}

function frame(fid, name, k, required, input, readOnly, extraEl) {
  const error = h("p", { class: "field-error", id: fid + "-err", role: "alert", hidden: true });
  // A schema's title names the field for people; else the property's own name.
  const label = labelFor(fid, typeof k.s.title === "string" && k.s.title ? k.s.title : name, required);
  const desc = k.s.description ? h("p", { class: "field-desc muted", id: fid + "-desc" }, String(k.s.description)) : null;
  // The console's own forms may leave the constraints unsaid ("x-hint": false).
  const hint = k.s["x-hint"] === false ? null : h("p", { class: "field-hint muted" }, hints(k));
  const wrap = h("div", { class: "field field-" + k.kind, "data-field": name, "data-test": "field" }, label, desc, input, extraEl, hint, error);
  if (desc) input.setAttribute("aria-describedby", fid + "-desc");
  if (readOnly) input.setAttribute("aria-readonly", "true");
  return { wrap, label, error, input };
}

function setError(f, message) {
  showFieldError(f.error, message);
  if (f.input) {
    if (message) {
      f.input.setAttribute("aria-invalid", "true");
      f.input.setAttribute("aria-errormessage", f.error.id);
    } else {
      f.input.removeAttribute("aria-invalid");
      f.input.removeAttribute("aria-errormessage");
    }
  }
}

function field(fid, name, raw, value, had, required, readOnly, root) {
  const k = kindOf(root, raw);
  const s = k.s;
  let f;
  switch (k.kind) {
    case "enum": {
      const sel = h("select", { id: fid, name, disabled: readOnly, "data-test": "input-" + name },
        required && value !== undefined ? null : h("option", { value: "" }, "(not set)"),
        k.values.map((v, i) => h("option", { value: String(i), selected: value !== undefined && v === value }, v === null ? "null" : String(v))));
      if (value !== undefined && !k.values.includes(value)) {
        // A value the schema does not list (the model's): kept, and flagged when read.
        sel.append(h("option", { value: "other", selected: true }, `${JSON.stringify(value)} (not allowed)`));
      }
      f = frame(fid, name, k, required, sel, readOnly);
      f.get = () => {
        if (sel.value === "") return { missing: true };
        if (sel.value === "other") return { error: "not one of the allowed values", value };
        return { value: k.values[Number(sel.value)] };
      };
      break;
    }
    case "boolean": {
      const box = h("input", { id: fid, name, type: "checkbox", checked: value === true, disabled: readOnly, "data-test": "input-" + name });
      let touched = false;
      box.addEventListener("change", () => { touched = true; });
      f = frame(fid, name, k, required, box, readOnly);
      f.wrap.classList.add("field-check");
      // Unticked means false when it was given, is required or has a default; otherwise it
      // is left out unless the person ticked and unticked it.
      f.get = () => (box.checked || had || required || s.default !== undefined || touched ? { value: box.checked } : { missing: true });
      break;
    }
    case "string":
    case "number":
    case "integer": {
      const text = value === undefined || value === null ? "" : typeof value === "string" ? value : String(value);
      const long = k.kind === "string" && (s["x-multiline"] || text.includes("\n") || text.length > 120);
      const attrs = { id: fid, name, readonly: readOnly, disabled: readOnly, autocomplete: "off", "data-test": "input-" + name };
      let input;
      if (long) {
        input = h("textarea", { ...attrs, rows: 3 });
        input.value = text;
      } else {
        input = h("input", { ...attrs, type: s["x-secret"] ? "password" : s.format === "date" ? "date" : "text", value: text,
          inputmode: k.kind === "integer" ? "numeric" : k.kind === "number" ? "decimal" : undefined });
      }
      if (value !== undefined && typeof value !== "string" && k.kind === "string" && value !== null) input.value = JSON.stringify(value);
      f = frame(fid, name, k, required, input, readOnly);
      f.get = () => readScalar(k, input.value);
      break;
    }
    default:
      return jsonField(fid, name, s, value, required, readOnly, root, k);
  }
  f.name = name;
  f.k = k;
  f.required = required;
  return f;
}

function jsonField(fid, name, s, value, required, readOnly, root, k) {
  k = k || { kind: "json", nullable: false, s: isObject(s) ? s : {} };
  let input;
  if (readOnly) {
    // To read: the property's own schema, as JSON.
    input = h("pre", { class: "value schema-json", id: fid }, pretty(k.s));
  } else {
    input = h("textarea", { id: fid, name: name || "json", rows: value !== undefined && JSON.stringify(value).length > 60 ? 6 : 3,
      spellcheck: "false", autocomplete: "off", "data-test": "input-" + (name || "json") });
    input.value = value === undefined ? "" : JSON.stringify(value, null, 2);
  }
  const f = frame(fid, name || "Arguments (JSON)", k, required, input, readOnly);
  f.name = name;
  f.k = k;
  f.required = required;
  f.get = () => {
    const text = input.value.trim();
    if (text === "") return { missing: true };
    let v;
    try { v = JSON.parse(text); } catch (e) { return { error: "not JSON: " + String(e.message || e) }; }
    const t = k.s.type;
    const types = Array.isArray(t) ? t : t ? [t] : [];
    if (types.length && !types.some((x) => typeOk(x, v))) return { error: `want ${types.join(" or ")}, got ${jsonType(v)}` };
    if (Array.isArray(v)) {
      if (k.s.minItems !== undefined && v.length < k.s.minItems) return { error: `at least ${k.s.minItems} items, got ${v.length}` };
      if (k.s.maxItems !== undefined && v.length > k.s.maxItems) return { error: `at most ${k.s.maxItems} items, got ${v.length}` };
    }
    if (isObject(v) && Array.isArray(k.s.required)) {
      const missing = k.s.required.filter((r) => !Object.hasOwn(v, r));
      if (missing.length) return { error: "missing " + missing.map((m) => JSON.stringify(m)).join(", ") };
    }
    return { value: v };
  };
  return f;
}

function jsonType(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function typeOk(t, v) {
  const got = jsonType(v);
  return t === got || t === "number" && got === "integer";
}

const NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

// readScalar checks a typed string, number or integer against its schema.
function readScalar(k, raw) {
  const s = k.s;
  if (k.kind === "string") {
    if (raw === "") return { missing: true };
    const n = [...raw].length;
    if (s.minLength !== undefined && n < s.minLength) return { error: `at least ${s.minLength} characters, got ${n}` };
    if (s.maxLength !== undefined && n > s.maxLength) return { error: `at most ${s.maxLength} characters, got ${n}` };
    if (typeof s.pattern === "string") {
      let re = null;
      try { re = new RegExp(s.pattern, "u"); } catch { /* a pattern this browser cannot read: the server checks it */ }
      if (re && !re.test(raw)) return { error: `must match ${s.pattern}` };
    }
    return { value: raw };
  }
  const text = raw.trim();
  if (text === "") return { missing: true };
  if (!NUMBER.test(text)) return { error: k.kind === "integer" ? "want a whole number" : "want a number" };
  const v = Number(text);
  if (!Number.isFinite(v)) return { error: "want a finite number" };
  if (k.kind === "integer" && !Number.isInteger(v)) return { error: "want a whole number" };
  if (typeof s.minimum === "number" && v < s.minimum) return { error: `at least ${s.minimum}` };
  if (typeof s.maximum === "number" && v > s.maximum) return { error: `at most ${s.maximum}` };
  if (typeof s.exclusiveMinimum === "number" && v <= s.exclusiveMinimum) return { error: `more than ${s.exclusiveMinimum}` };
  if (typeof s.exclusiveMaximum === "number" && v >= s.exclusiveMaximum) return { error: `less than ${s.exclusiveMaximum}` };
  if (s.exclusiveMinimum === true && typeof s.minimum === "number" && v <= s.minimum) return { error: `more than ${s.minimum}` };
  if (s.exclusiveMaximum === true && typeof s.maximum === "number" && v >= s.maximum) return { error: `less than ${s.maximum}` };
  if (typeof s.multipleOf === "number" && s.multipleOf > 0) {
    const q = v / s.multipleOf;
    if (Math.abs(q - Math.round(q)) > 1e-9) return { error: `a multiple of ${s.multipleOf}` };
  }
  return { value: v };
}

// put sets a property as data, whatever its name (a property named __proto__ included).
function put(obj, k, v) {
  Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
}

// readFields reads every field into the value, showing each field's problem.
function readFields(fields) {
  let ok = true;
  let value = {};
  for (const f of fields) {
    const r = f.get();
    if (r.error) {
      ok = false;
      setError(f, r.error);
      continue;
    }
    if (r.missing) {
      if (f.whole) { value = {}; continue; }
      if (f.required) {
        if (f.k?.nullable) { put(value, f.name, null); continue; }
        ok = false;
        setError(f, "required");
      }
      continue;
    }
    if (f.whole) {
      if (!isObject(r.value)) { ok = false; setError(f, "want a JSON object"); continue; }
      value = r.value;
    } else if (f.extra) {
      if (!isObject(r.value)) { ok = false; setError(f, "want a JSON object"); continue; }
      for (const [k, v] of Object.entries(r.value)) if (!Object.hasOwn(value, k)) put(value, k, v);
    } else {
      put(value, f.name, r.value);
    }
  }
  return { ok, value };
}
