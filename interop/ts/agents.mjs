// Drives a Quiver server with the OpenAI Agents SDK for JavaScript's MCP servers (no model is
// called): list the tools and call them with valid, invalid and unknown arguments.
//
// node agents.mjs stdio QUIVER_BINARY
// node agents.mjs http URL KEY
import { MCPServerStdio, MCPServerStreamableHttp } from "@openai/agents-core";

const [kind, target, key] = process.argv.slice(2);
const server = kind === "stdio"
  ? new MCPServerStdio({ name: "quiver", command: target, args: ["mcp", "stdio"], env: { ...process.env } })
  : new MCPServerStreamableHttp({ name: "quiver", url: target, requestInit: { headers: { Authorization: `Bearer ${key}` } } });

function check(what, ok, detail) {
  console.log(`${ok ? "ok" : "FAILED"} agents ${kind}: ${what}${ok ? "" : ": " + detail}`);
  if (!ok) process.exit(1);
}
const text = (r) => (Array.isArray(r) ? r : r?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");

try {
  await server.connect();
  const tools = await server.listTools();
  check("listTools", tools.some((t) => t.name === "get_current_time"), JSON.stringify(tools).slice(0, 300));
  let r = await server.callTool("get_current_time", { timezone: "UTC" });
  check("a valid call", text(r).includes("UTC"), JSON.stringify(r).slice(0, 300));
  r = await server.callTool("get_current_time", { timezone: 5 });
  check("invalid arguments", text(r).includes("timezone"), JSON.stringify(r).slice(0, 300));
  r = await server.callTool("no_such_tool", {});
  check("an unknown tool", text(r).includes("get_current_time"), JSON.stringify(r).slice(0, 300));
  await server.close();
  process.exit(0);
} catch (e) {
  check("no error", false, String(e?.stack ?? e).slice(0, 1000));
}
