// What a thread is called where people pick it: its name (a name:<value> tag) when it has one,
// else the first thing asked of it (its first user message, shortened), else what it is: an
// MCP client's session, or the agent it belongs to. An id alone says nothing to a person.
import { api } from "./api.js";

// TITLE_MAX is about what one line of the threads list holds.
const TITLE_MAX = 80;

// named is the value of a thread's name:<value> tag, or "".
export function named(t) {
  const tag = (t.tags || []).find((x) => x.startsWith("name:"));
  return tag ? tag.slice(5) : "";
}

// isSession reports a thread an MCP session's calls are recorded in (no model asks anything of
// it, so it has no user message to be called by).
export function isSession(t) {
  return (t.tags || []).includes("mcp");
}

// standInTitle is the title a thread has before (or without) its first user message.
export function standInTitle(t) {
  const name = named(t);
  if (name) return name;
  if (isSession(t)) {
    const client = (t.tags || []).find((x) => x.startsWith("mcp-client:"));
    return client ? `MCP session of ${client.slice("mcp-client:".length)}` : "MCP session";
  }
  return t.agent_id ? `${t.agent_id} thread` : "Thread";
}

// wantsFirstMessage reports whether the first user message would title t better than its
// stand-in: it has no name and is not a session.
export function wantsFirstMessage(t) {
  return !named(t) && !isSession(t);
}

// shorten is text on one line, cut at a word before max characters (mid-word only for a word
// longer than that) and marked as cut.
export function shorten(text, max = TITLE_MAX) {
  const s = String(text ?? "").replace(/\s+/g, " ").trim();
  if (s.length <= max) return s;
  const cut = s.slice(0, max - 1);
  const space = cut.lastIndexOf(" ");
  return (space > max / 2 ? cut.slice(0, space) : cut) + "…";
}

// firstAsked is a thread's first user message, shortened, or "" when its first messages hold
// none (messages are numbered from 1, so before=11 is its first ten).
export async function firstAsked(id) {
  const data = await api("GET", `/threads/${encodeURIComponent(id)}/messages?limit=10&before=11`);
  const m = (data.messages || []).find((x) => x.role === "user" && String(x.content || "").trim());
  return m ? shorten(m.content) : "";
}

// plural is "1 step", "2 steps": a count with its noun.
export function plural(n, noun) {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}
