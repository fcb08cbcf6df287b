// Drives a Quiver server with the official TypeScript MCP SDK (v2, @modelcontextprotocol/client),
// which validates every answer against its schemas for the protocol era it negotiated: the same
// checks that made the OpenAI Agents SDK refuse a tools/list whose cacheScope was empty.
//
// node client.mjs stdio QUIVER_BINARY MODE   (MODE: legacy, auto)
// node client.mjs http URL KEY MODE
// QUIVER_EXPECT_PROTOCOL, when set, is the protocol version the client must negotiate;
// QUIVER_CONFIRM_TOOL names a tool that needs confirmation, which the client's user accepts (an
// elicitation handler), once asked: in the middle of the call, or at 2026-07-28 through a multi
// round-trip request.
// Prints one line per check and exits non-zero on the first failure.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [kind, target, ...rest] = process.argv.slice(2);
const mode = rest[rest.length - 1];
let transport;
if (kind === "stdio") {
  transport = new StdioClientTransport({ command: target, args: ["mcp", "stdio"], env: { ...process.env }, stderr: "ignore" });
} else {
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers: { Authorization: `Bearer ${rest[0]}` } } });
}
const expectProtocol = process.env.QUIVER_EXPECT_PROTOCOL;
const confirmTool = process.env.QUIVER_CONFIRM_TOOL;
const options = mode === "legacy" ? {} : { versionNegotiation: { mode: "auto" } };
if (confirmTool) options.capabilities = { elicitation: { form: {} } };
const client = new Client({ name: "quiver-interop", version: "1" }, options);
let asked = [];
if (confirmTool) {
  client.setRequestHandler("elicitation/create", async (request) => {
    asked.push(request.params?.message ?? "");
    return { action: "accept", content: {} };
  });
}

function check(what, ok, detail) {
  console.log(`${ok ? "ok" : "FAILED"} ${kind} ${mode}: ${what}${ok ? "" : ": " + detail}`);
  if (!ok) process.exit(1);
}
const text = (r) => (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");

try {
  await client.connect(transport);
  const protocol = client.getNegotiatedProtocolVersion?.() ?? "?";
  check(`connected (protocol ${protocol})`, !expectProtocol || protocol === expectProtocol, `want ${expectProtocol}`);
  const tools = await client.listTools();
  check("tools/list", tools.tools.some((t) => t.name === "get_current_time"), JSON.stringify(tools).slice(0, 300));
  let r = await client.callTool({ name: "get_current_time", arguments: { timezone: "UTC" } });
  check("a valid call", !r.isError && text(r).includes("UTC"), JSON.stringify(r).slice(0, 300));
  r = await client.callTool({ name: "get_current_time", arguments: { timezone: 5 } });
  check("invalid arguments", r.isError === true && text(r).includes("timezone"), JSON.stringify(r).slice(0, 300));
  r = await client.callTool({ name: "no_such_tool", arguments: {} });
  check("an unknown tool", r.isError === true && text(r).includes("get_current_time"), JSON.stringify(r).slice(0, 300));
  if (confirmTool) {
    r = await client.callTool({ name: confirmTool, arguments: { text: "hello" } });
    check(`a call confirmed by the user (${confirmTool})`, !r.isError && text(r).includes("hello") && asked.length === 1 && asked[0].includes(confirmTool),
      JSON.stringify(r).slice(0, 300) + " asked " + JSON.stringify(asked));
  }
  await client.close();
  process.exit(0);
} catch (e) {
  check("no error", false, String(e?.stack ?? e).slice(0, 1000));
}
