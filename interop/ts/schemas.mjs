// Checks every message a Quiver MCP server sent against the official TypeScript SDK's schemas
// for the protocol version its session negotiated: the codec its clients decode and validate
// with (@modelcontextprotocol/client 2.4.0: one for 2026-07-28, one for the earlier versions)
// and the JSON-RPC envelopes of @modelcontextprotocol/core.
//
// node schemas.mjs TRANSCRIPT.json
// TRANSCRIPT is a JSON array of {transport, version, method, kind, message}: kind "result" or
// "error" for the answer to a request of that method, "notification" for a notification.
// A record may name in "expect" the error the specification says the request is answered with
// (and in "uri" the resource a resources/read asked for): its code must be the one of the
// session's version (errorCodes below), and the SDK must read it as that error.
// Prints each failure and a count per kind; exits non-zero when any message fails.
import { readFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { ProtocolError, ResourceNotFoundError } from "@modelcontextprotocol/client";
import { JSONRPCErrorResponseSchema, JSONRPCNotificationSchema, JSONRPCResultResponseSchema } from "@modelcontextprotocol/core";

// The codecs are internal to the client package: find the chunk that defines them (the file
// name is a build hash) and take the function by name from its exports.
async function codecForVersion() {
  const require = createRequire(import.meta.url);
  const dist = dirname(require.resolve("@modelcontextprotocol/client"));
  for (const name of readdirSync(dist).filter((n) => n.endsWith(".mjs"))) {
    if (!readFileSync(join(dist, name), "utf8").includes("function codecForVersion(")) continue;
    const mod = await import(pathToFileURL(join(dist, name)).href);
    const fn = Object.values(mod).find((v) => typeof v === "function" && v.name === "codecForVersion");
    if (fn) return fn;
  }
  throw new Error(`no codecForVersion in ${dist}: has the pinned @modelcontextprotocol/client changed?`);
}

// The code of each error the specification names, per protocol version, as each version's
// schema (schema/VERSION/schema.ts of modelcontextprotocol/modelcontextprotocol) and its
// server pages give it. Resource not found is -32002 up to 2025-11-25 (server/resources,
// "Error Handling"), and -32602, invalid params, from 2026-07-28 on (SEP-2164). The SDK
// itself sends -32602 at every version, so it cannot be the reference here.
const errorCodes = {
  "parse-error": () => -32700,
  "method-not-found": () => -32601,
  "invalid-params": () => -32602,
  "resource-not-found": (version) => (version < "2026-07-28" ? -32002 : -32602),
  // Streamable HTTP from 2026-07-28: a request whose Mcp-Method or Mcp-Name header is missing
  // or differs from its body (SEP-2243).
  "header-mismatch": () => -32020,
};

// expectedError says what is wrong with an error answer r.expect names, or "".
function expectedError(r) {
  const code = errorCodes[r.expect];
  if (!code) return `unknown expected error ${r.expect}`;
  if (r.kind !== "error") return `answered with a ${r.kind} where ${r.version} says ${r.expect}`;
  const { code: got, message, data } = r.message.error;
  if (got !== code(r.version)) return `${r.expect} has code ${got}, where ${r.version} says ${code(r.version)}`;
  if (r.expect === "resource-not-found") {
    if (data?.uri !== r.uri) return `resource not found does not name the URI ${r.uri} in its data`;
    const e = ProtocolError.fromError(got, message, data);
    if (!(e instanceof ResourceNotFoundError) || e.uri !== r.uri) return `the SDK does not read it as resource not found (${e.constructor.name})`;
  }
  return "";
}

const codecFor = await codecForVersion();
const records = JSON.parse(readFileSync(process.argv[2], "utf8"));
const cacheFields = ["resultType", "ttlMs", "cacheScope"];

function problemOf(r) {
  if (r.expect && r.kind !== "error") return expectedError(r);
  const codec = codecFor(r.version);
  const m = r.message;
  switch (r.kind) {
    case "result": {
      const env = JSONRPCResultResponseSchema.safeParse(m);
      if (!env.success) return `not a JSON-RPC result: ${env.error}`;
      if (r.version < "2026-07-28") {
        const extra = cacheFields.filter((f) => f in m.result);
        if (extra.length) return `${extra.join(", ")} sent to a ${r.version} session (they exist from 2026-07-28 on)`;
      }
      const decoded = codec.decodeResult(r.method, m.result);
      if (decoded.kind !== "complete") return String(decoded.error?.message ?? `result kind ${decoded.kind}`);
      const v = codec.validateResult(r.method, decoded.result);
      if (!v.ok) return v.reason === "not-in-era" ? `${r.method} has no result in the ${codec.era} era` : v.message;
      return "";
    }
    case "error": {
      const env = JSONRPCErrorResponseSchema.safeParse(m);
      if (!env.success) return `not a JSON-RPC error: ${env.error}`;
      return r.expect ? expectedError(r) : "";
    }
    case "notification": {
      const env = JSONRPCNotificationSchema.safeParse(m);
      if (!env.success) return `not a JSON-RPC notification: ${env.error}`;
      const v = codec.validateNotification(m.method, m);
      if (!v.ok) return v.reason === "not-in-era" ? `${m.method} is no notification of the ${codec.era} era` : v.message;
      return "";
    }
  }
  return `unknown kind ${r.kind}`;
}

const counts = {};
let failed = 0;
for (const r of records) {
  const problem = problemOf(r);
  const key = `${r.transport} ${r.version} ${r.kind}`;
  counts[key] = (counts[key] ?? 0) + 1;
  if (r.expect) counts[`${r.transport} ${r.version} ${r.expect}`] = (counts[`${r.transport} ${r.version} ${r.expect}`] ?? 0) + 1;
  if (problem) {
    failed++;
    console.log(`FAILED ${r.transport} ${r.version} ${r.kind} ${r.method}: ${problem}\n  ${JSON.stringify(r.message).slice(0, 600)}`);
  }
}
for (const [key, n] of Object.entries(counts)) console.log(`${key}: ${n}`);
console.log(`${records.length - failed} of ${records.length} messages match the official schemas`);
process.exit(failed ? 1 : 0);
