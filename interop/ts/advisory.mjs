// An OpenAPI tool whose answer does not match its document's output schema, called with the
// official TypeScript MCP SDK (v2), which refuses a result whose structuredContent does not
// match a declared outputSchema. The source "loose" (advisory schema) must answer without a
// client-side error, the warning in _meta; "strict" must answer an error result.
//
// node advisory.mjs http URL KEY MODE   (MODE: legacy, auto)
// node advisory.mjs stdio QUIVER_BINARY CONFIG MODE
// Prints one line per check and exits non-zero on the first failure.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [kind, target, arg, mode] = process.argv.slice(2);
const transport =
  kind === "stdio"
    ? new StdioClientTransport({ command: target, args: ["mcp", "stdio", "--config", arg], env: { ...process.env }, stderr: "ignore" })
    : new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers: { Authorization: `Bearer ${arg}` } } });
const client = new Client({ name: "quiver-interop", version: "1" }, mode === "legacy" ? {} : { versionNegotiation: { mode: "auto" } });

function check(what, ok, detail) {
  console.log(`${ok ? "ok" : "FAILED"} ${kind} ${mode}: ${what}${ok ? "" : ": " + detail}`);
  if (!ok) process.exit(1);
}
const text = (r) => (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
const show = (v) => JSON.stringify(v).slice(0, 400);

try {
  await client.connect(transport);
  check(`connected (protocol ${client.getNegotiatedProtocolVersion?.() ?? "?"})`, true);
  const { tools } = await client.listTools();
  const loose = tools.find((t) => t.name === "loose.getPet");
  const strict = tools.find((t) => t.name === "strict.getPet");
  check("the advisory tool is listed without an outputSchema", loose && loose.outputSchema === undefined, show(loose));
  check("the strict tool is listed with its outputSchema", strict && strict.outputSchema?.properties?.id !== undefined, show(strict));

  let r = await client.callTool({ name: "loose.getPet", arguments: { petId: 7 } });
  const warning = r._meta?.output_warning ?? "";
  check("the advisory tool's answer is a success", !r.isError, show(r));
  check("with the warning in _meta", warning.includes("does not match the output schema"), show(r));
  check("and the answer itself", r.structuredContent?.id === "seven" && text(r).includes("seven"), show(r));

  r = await client.callTool({ name: "strict.getPet", arguments: { petId: 7 } });
  check("the strict tool's answer is an error result", r.isError === true && text(r).includes("does not match"), show(r));

  // What declaring the advisory schema would do: the SDK validates against a definition the
  // caller gives, as it does against the listed one, and throws.
  let thrown = "";
  try {
    await client.callTool({ name: "loose.getPet", arguments: { petId: 7 } }, { toolDefinition: { ...loose, outputSchema: strict.outputSchema } });
  } catch (e) {
    thrown = String(e?.message ?? e);
  }
  check("the SDK refuses the same answer against a declared schema", thrown.includes("does not match the tool's output schema"), thrown || "no error");
  await client.close();
  process.exit(0);
} catch (e) {
  check("no error", false, String(e?.stack ?? e).slice(0, 1000));
}
