// Signing in with the organisation's identity provider: the authorization code flow with PKCE,
// run by this page as a public client (no secret). The provider sends the person back to the
// console's address with a code, which the page exchanges for an access token at the
// provider's token endpoint; the token is then kept and sent as a key is (api.js: this tab's
// session storage, the Authorization header), never in a cookie or a URL. The code is taken
// off the address at once.

const FLOW = "quiver.signin"; // the state, verifier and nonce of a sign-in under way in this tab

function b64url(bytes) {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function random(n) {
  return b64url(crypto.getRandomValues(new Uint8Array(n)));
}

// redirectURI is where the provider sends the person back: the console's own address.
function redirectURI() {
  return location.origin + "/";
}

// begin sends the person to the provider to sign in. provider is /console/signin.json's.
export async function begin(provider) {
  const verifier = random(32);
  const state = random(16);
  // The nonce goes into the ID token the provider issues beside the access token: what marks
  // that token as an ID token to the server, which refuses it as an access token.
  const nonce = random(16);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  sessionStorage.setItem(FLOW, JSON.stringify({ state, verifier, nonce, hash: location.hash }));
  const u = new URL(provider.authorization_endpoint);
  u.searchParams.set("response_type", "code");
  u.searchParams.set("client_id", provider.client_id);
  u.searchParams.set("redirect_uri", redirectURI());
  u.searchParams.set("scope", provider.scopes.join(" "));
  u.searchParams.set("state", state);
  u.searchParams.set("nonce", nonce);
  u.searchParams.set("code_challenge", b64url(new Uint8Array(digest)));
  u.searchParams.set("code_challenge_method", "S256");
  for (const [name, value] of Object.entries(provider.params || {})) u.searchParams.set(name, value);
  location.assign(u.toString());
}

// finish completes a sign-in the provider sent this page back from, and returns the access
// token; null when the page was not opened by the provider. It throws, saying why, when the
// provider refused or the answer is not one this tab asked for.
export async function finish(provider) {
  const q = new URLSearchParams(location.search);
  if (!q.has("code") && !q.has("error")) return null;
  let flow = null;
  try { flow = JSON.parse(sessionStorage.getItem(FLOW) || "null"); } catch { /* none */ }
  history.replaceState(null, "", "/" + (flow?.hash || location.hash || ""));
  // Only the answer to this tab's own sign-in counts: a link that carries a code or an error
  // (to sign someone out, or to show them words of its choosing) is ignored.
  if (!flow || q.get("state") !== flow.state) return null;
  sessionStorage.removeItem(FLOW);
  if (q.has("error")) {
    throw new Error(`The identity provider did not sign you in: ${q.get("error_description") || q.get("error")}.`);
  }
  if (!provider) throw new Error("This server no longer offers signing in with an identity provider.");
  let resp;
  try {
    resp = await fetch(provider.token_endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code: q.get("code"),
        redirect_uri: redirectURI(),
        client_id: provider.client_id,
        code_verifier: flow.verifier,
      }),
    });
  } catch (e) {
    throw new Error(`The identity provider's token endpoint could not be reached: ${e.message || e}.`);
  }
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok || !data.access_token) {
    throw new Error(`The identity provider gave no token: ${data.error_description || data.error || "HTTP " + resp.status}.`);
  }
  // The page uses only the access token, but an ID token that comes with it must answer this
  // sign-in: one with another nonce was issued for another (a code slipped in), so its access
  // token is not taken either. Its signature is the provider's TLS answer's (OpenID Connect
  // Core 3.1.3.7): it came straight from the token endpoint.
  if (data.id_token && idTokenNonce(data.id_token) !== flow.nonce) {
    throw new Error("The identity provider's answer is not for this sign-in (its ID token's nonce differs): sign in again.");
  }
  return data.access_token;
}

// idTokenNonce is the nonce claim of an ID token (a JWT), null when it has none or is no JWT.
function idTokenNonce(idToken) {
  try {
    const payload = idToken.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(payload), (c) => c.charCodeAt(0))));
    return typeof claims.nonce === "string" ? claims.nonce : null;
  } catch {
    return null;
  }
}
