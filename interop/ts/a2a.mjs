// A2A with the official JavaScript SDK (@a2a-js/sdk 1.3.0), both ways.
//
// node a2a.mjs client BASE KEY MODE   drives Quiver's agents (quiver serve at BASE, its key):
//   MODE v1 is the SDK at its defaults (A2A 1.0, the card's supportedInterfaces); MODE legacy
//   is the SDK with legacyCompat reading the card as a 0.3 client does (its 0.3 fields), so
//   that it speaks 0.3. Prints one line per check and exits non-zero on the first failure.
// node a2a.mjs server MODE            serves an agent of the SDK's own on a free 127.0.0.1
//   port, its card offering JSON-RPC in MODE: v1 (1.0, the SDK's default), legacy (0.3, with
//   legacyCompat), both (1.0 and 0.3), grpc (only gRPC 1.0: an interface Quiver cannot use).
//   Prints "listening on URL", then "request VERSION METHOD" for each JSON-RPC request.
//   Its agent answers "hi" with "Hello from the JS SDK: hi", a follow-up in the same context
//   with what was said before, "need input" with input-required ("Which city?") and the answer
//   to that with the weather, and "break" with a failed task.
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";

const ROLE_USER = 1, ROLE_AGENT = 2;
const SUBMITTED = 1, WORKING = 2, COMPLETED = 3, FAILED = 4, INPUT_REQUIRED = 6;
const textPart = (value) => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "" });
const textOf = (parts) => (parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
const message = (role, text, extra = {}) => ({ messageId: crypto.randomUUID(), contextId: "", taskId: "", role, parts: [textPart(text)],
  metadata: undefined, extensions: [], referenceTaskIds: [], ...extra });


function check(what, ok, detail) {
  console.log(`${ok ? "ok" : "FAILED"} ${what}${ok ? "" : ": " + detail}`);
  if (!ok) process.exit(1);
}
const show = (v) => JSON.stringify(v, (k, x) => (typeof x === "bigint" ? String(x) : x)).slice(0, 600);

async function drive(base, key, mode) {
  const fetchImpl = (url, init = {}) => fetch(url, { ...init, headers: { ...(init.headers ?? {}), Authorization: `Bearer ${key}` } });
  const legacyCompat = mode === "legacy" ? { legacyCompat: { enabled: true } } : {};
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl, ...legacyCompat })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl, ...legacyCompat }),
  }));
  const connect = async (name) => {
    if (mode === "legacy") {
      // The card as a 0.3 client reads it: 0.3's fields, none of 1.0's.
      const card = await (await fetch(`${base}/a2a/${name}/.well-known/agent-card.json`)).json();
      check(`${name}'s card offers 1.0 and 0.3`, card.supportedInterfaces?.map((i) => i.protocolVersion).join() === "1.0,0.3" &&
        card.protocolVersion === "0.3.0", show(card));
      delete card.supportedInterfaces;
      delete card.securityRequirements;
      for (const s of Object.values(card.securitySchemes ?? {})) delete s.httpAuthSecurityScheme;
      return factory.createFromAgentCard(card);
    }
    return factory.createFromUrl(`${base}/a2a/${name}/`);
  };
  const want = mode === "legacy" ? "0.3" : "1.0";
  const client = await connect("forecaster");
  check(`the client speaks ${want}`, client.protocolVersion === want, client.protocolVersion);
  if (mode === "v1") {
    // The card is at the agent's URL itself too, with or without the trailing slash.
    for (const url of [`${base}/a2a/forecaster`, `${base}/a2a/forecaster/`]) {
      const c = await factory.createFromUrl(url, "");
      check(`the card at ${url}`, c.protocolVersion === "1.0", c.protocolVersion);
    }
  }

  // send
  let task = await client.sendMessage({ message: message(ROLE_USER, "Weather?") });
  check("SendMessage completes", task.id && task.status?.state === COMPLETED && textOf(task.artifacts?.[0]?.parts) === "It is sunny in Oslo.", show(task));
  // get
  const got = await client.getTask({ id: task.id });
  check("GetTask reads it", got.id === task.id && got.status?.state === COMPLETED && textOf(got.status.message?.parts) === "It is sunny in Oslo.", show(got));
  // follow-up: the same context, a new task
  const next = await client.sendMessage({ message: message(ROLE_USER, "And now?", { contextId: task.contextId }) });
  check("a follow-up in the context", next.id !== task.id && next.contextId === task.contextId && next.status?.state === COMPLETED &&
    textOf(next.status.message?.parts) === "Still sunny.", show(next));
  // stream
  const states = [];
  for await (const ev of client.sendMessageStream({ message: message(ROLE_USER, "Streaming?") })) {
    const v = ev.payload?.value;
    states.push(ev.payload?.$case === "task" ? v.status?.state : v?.status?.state);
  }
  check("SendStreamingMessage ends completed", states.length >= 2 && states[states.length - 1] === COMPLETED &&
    states.slice(0, -1).every((s) => s === SUBMITTED || s === WORKING), show(states));
  // cancel refused
  try {
    await client.cancelTask({ id: task.id });
    check("CancelTask is refused", false, "it was not");
  } catch (e) {
    check("CancelTask is refused (TaskNotCancelable)", /cancel/i.test(`${e?.name} ${e?.message}`) && e?.name !== "TypeError", `${e?.name}: ${e?.message}`);
  }
  try {
    await client.getTask({ id: "thr_nope:1" });
    check("an unknown task is not found", false, "it was found");
  } catch (e) {
    check("an unknown task is not found", /not ?found/i.test(`${e?.name} ${e?.message}`), `${e?.name}: ${e?.message}`);
  }
  // input-required: a call waiting on a person's confirmation
  const payer = await connect("payer");
  task = await payer.sendMessage({ message: message(ROLE_USER, "pay") });
  check("input-required", task.status?.state === INPUT_REQUIRED && textOf(task.status.message?.parts).includes("charge"), show(task));
  // failed
  const broken = await connect("broken");
  task = await broken.sendMessage({ message: message(ROLE_USER, "try") });
  check("failed", task.status?.state === FAILED && textOf(task.status.message?.parts).includes("vanished_tool"), show(task));
  process.exit(0);
}

async function serve(mode) {
  const express = (await import("express")).default;
  const { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } = await import("@a2a-js/sdk/server");
  const { agentCardHandler, jsonRpcHandler, UserBuilder } = await import("@a2a-js/sdk/server/express");
  const app = express();
  const server = await new Promise((resolve) => { const s = app.listen(0, "127.0.0.1", () => resolve(s)); });
  const base = `http://127.0.0.1:${server.address().port}`;
  const iface = (protocolBinding, protocolVersion) => ({ url: `${base}/rpc`, protocolBinding, protocolVersion, tenant: "" });
  const interfaces = { v1: [iface("JSONRPC", "1.0")], legacy: [iface("JSONRPC", "0.3")], both: [iface("JSONRPC", "1.0"), iface("JSONRPC", "0.3")],
    grpc: [iface("GRPC", "1.0")] }[mode];
  const card = { name: "js-agent", description: "An agent of the A2A JavaScript SDK.", supportedInterfaces: interfaces, provider: undefined,
    version: "1", capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ["text/plain"], defaultOutputModes: ["text/plain"],
    skills: [{ id: "echo", name: "echo", description: "Answers.", tags: [], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [] };
  const said = new Map();
  const executor = {
    async execute(rc, bus) {
      const text = textOf(rc.userMessage.parts);
      const before = said.get(rc.contextId);
      said.set(rc.contextId, text);
      const waiting = rc.task?.status?.state === INPUT_REQUIRED;
      bus.publish(AgentEvent.task(rc.task ?? { id: rc.taskId, contextId: rc.contextId, status: { state: SUBMITTED, message: undefined, timestamp: undefined },
        artifacts: [], history: [rc.userMessage], metadata: undefined }));
      const status = (state, words) => bus.publish(AgentEvent.statusUpdate({ taskId: rc.taskId, contextId: rc.contextId, metadata: undefined,
        status: { state, message: words ? message(ROLE_AGENT, words, { taskId: rc.taskId, contextId: rc.contextId }) : undefined, timestamp: new Date().toISOString() } }));
      if (text === "need input") {
        status(INPUT_REQUIRED, "Which city?");
      } else if (text === "break") {
        status(FAILED, "The JS agent broke.");
      } else {
        const answer = waiting ? `The weather in ${text} is fine.` : before ? `You said "${before}" before; now "${text}".` : `Hello from the JS SDK: ${text}`;
        bus.publish(AgentEvent.artifactUpdate({ taskId: rc.taskId, contextId: rc.contextId, append: false, lastChunk: true, metadata: undefined,
          artifact: { artifactId: `answer-${rc.taskId}`, name: "answer", description: "", parts: [textPart(answer)], metadata: undefined, extensions: [] } }));
        status(COMPLETED);
      }
      bus.finished();
    },
    async cancelTask() {},
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  const legacyCompat = mode === "v1" || mode === "grpc" ? undefined : { enabled: true };
  app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: handler, legacyCompat }));
  app.use("/rpc", express.json(), (req, _res, next) => {
    console.log(`request ${req.header("A2A-Version") || "none"} ${req.body?.method}`);
    next();
  }, jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
  console.log(`listening on ${base}`);
}

const [role, ...args] = process.argv.slice(2);
if (role === "server") {
  await serve(args[0]);
} else {
  await drive(...args);
}
