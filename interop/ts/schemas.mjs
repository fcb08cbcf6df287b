// Checks every message a Quiver MCP server sent against the official TypeScript SDK's schemas
// for the protocol version its session negotiated: the codec its clients decode and validate
// with (@modelcontextprotocol/client 2.4.0: one for 2026-07-28, one for the earlier versions)
// and the JSON-RPC envelopes of @modelcontextprotocol/core.
//
// node schemas.mjs TRANSCRIPT.json
// TRANSCRIPT is a JSON array of {transport, version, method, kind, message}: kind "result" or
// "error" for the answer to a request of that method, "notification" for a notification.
// Prints each failure and a count per kind; exits non-zero when any message fails.
import { readFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
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

const codecFor = await codecForVersion();
const records = JSON.parse(readFileSync(process.argv[2], "utf8"));
const cacheFields = ["resultType", "ttlMs", "cacheScope"];

function problemOf(r) {
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
      return env.success ? "" : `not a JSON-RPC error: ${env.error}`;
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
  if (problem) {
    failed++;
    console.log(`FAILED ${r.transport} ${r.version} ${r.kind} ${r.method}: ${problem}\n  ${JSON.stringify(r.message).slice(0, 600)}`);
  }
}
for (const [key, n] of Object.entries(counts)) console.log(`${key}: ${n}`);
console.log(`${records.length - failed} of ${records.length} messages match the official schemas`);
process.exit(failed ? 1 : 0);
