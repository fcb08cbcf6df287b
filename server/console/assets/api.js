// The /v1 API, as the console calls it: the API key, or the access token of a sign-in with the
// identity provider (sso.js), lives in this tab's session storage (gone when the tab closes or
// on sign-out) and travels in the Authorization header.

const KEY = "quiver.key";

export const session = {
  key: () => sessionStorage.getItem(KEY),
  signIn: (key) => sessionStorage.setItem(KEY, key),
  signOut: () => sessionStorage.removeItem(KEY),
};

// ApiError is a problem the API answered with (RFC 9457): its status, code and the fields at
// fault ({location, message}).
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.code = problem?.code || "";
    this.errors = problem?.errors || [];
  }
}

function headers(extra) {
  const h = { Accept: "application/json", ...extra };
  const key = session.key();
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

// api calls the API: api("GET", "/threads?limit=20"), api("POST", "/threads", {agent: "x"}).
export async function api(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const resp = await fetch("/v1" + path, init);
  if (resp.status === 204) return null;
  let data = null;
  const text = await resp.text();
  if (text) {
    try { data = JSON.parse(text); } catch { data = { detail: text }; }
  }
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

// blob fetches a file of a thread with the key, for an <img> or a download link.
export async function blob(path) {
  const resp = await fetch("/v1" + path, { headers: headers() });
  if (!resp.ok) throw new ApiError(resp.status, null);
  return resp.blob();
}

// events follows a thread's Server-Sent Events (GET /v1/threads/{id}/events) with fetch, since
// EventSource cannot send the Authorization header. onEvent gets {event, id, data}. After a
// dropped connection it reconnects with Last-Event-ID, the last message's sequence number, so
// no message is lost or repeated; opts.lastEventID starts after a message the page already
// shows. It returns a function that stops it.
export function events(threadID, onEvent, onStatus, opts = {}) {
  let stopped = false;
  let lastID = opts.lastEventID || "";
  let ctrl = null;
  const run = async () => {
    let delay = 500;
    while (!stopped) {
      ctrl = new AbortController();
      try {
        const h = headers({ Accept: "text/event-stream" });
        if (lastID) h["Last-Event-ID"] = lastID;
        const resp = await fetch(`/v1/threads/${encodeURIComponent(threadID)}/events`, { headers: h, signal: ctrl.signal });
        if (!resp.ok) throw new ApiError(resp.status, null);
        onStatus?.("live");
        delay = 500;
        const reader = resp.body.getReader();
        const dec = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const raw = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const ev = { event: "message", id: "", data: "" };
            for (const line of raw.split("\n")) {
              if (line.startsWith(":")) continue;
              const c = line.indexOf(":");
              const field = c < 0 ? line : line.slice(0, c);
              const val = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
              if (field === "event") ev.event = val;
              else if (field === "id") ev.id = val;
              else if (field === "data") ev.data += (ev.data ? "\n" : "") + val;
            }
            if (ev.id) lastID = ev.id;
            let data = ev.data;
            try { data = JSON.parse(ev.data); } catch { /* text */ }
            onEvent({ event: ev.event, id: ev.id, data });
          }
        }
      } catch (e) {
        if (stopped) return;
        if (e instanceof ApiError && e.status < 500 && e.status !== 429) { onStatus?.("closed"); return; }
      }
      if (stopped) return;
      onStatus?.("reconnecting");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 5000);
    }
  };
  run();
  return () => { stopped = true; ctrl?.abort(); };
}
