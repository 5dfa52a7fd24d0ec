// The API, as the console calls it: the operator's credential from sessionStorage (never a URL, a cookie or a
// log), the API's own origin (the console is served beside it, so every address is relative), and every
// refusal turned into words.

const KEY = "openalice-console-credential";
let authMode = "secret";

export function setAuthMode(mode) {
  authMode = mode;
}

export function getAuthMode() {
  return authMode;
}

export function credential() {
  return sessionStorage.getItem(KEY);
}

export function remember(value) {
  sessionStorage.setItem(KEY, value);
}

export function forget() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, code, message, routeMissing = false) {
    super(message);
    this.status = status;
    this.code = code;
    this.routeMissing = routeMissing;
  }
}

// The API's address for `path` ("v1/leases"): beside /console/, whatever base path the API is served under.
export function apiUrl(path, query = {}) {
  const url = new URL(`../${path}`, document.baseURI);
  for (const [name, value] of Object.entries(query)) {
    if (value !== null && value !== undefined && value !== "") url.searchParams.set(name, String(value));
  }
  return url;
}

function headers(owner) {
  const found = { Accept: "application/json, text/plain" };
  const secret = credential();
  if (secret) {
    if (authMode === "token") found.Authorization = `Bearer ${secret}`;
    else found["X-Internal-Secret"] = secret;
  }
  // Secret mode: owners are asserted, and a lease's logs and release are its owner's.
  if (authMode === "secret" && owner) found["X-Lease-Owner"] = owner;
  return found;
}

let onUnauthorized = () => {};
export function whenUnauthorized(callback) {
  onUnauthorized = callback;
}

// Call the API; answers the parsed JSON (null for 204), or {text, headers} with `asText`. Throws ApiError.
export async function call(path, { method = "GET", query = {}, owner = null, asText = false } = {}) {
  let response;
  try {
    response = await fetch(apiUrl(path, query), {
      method,
      headers: headers(owner),
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer",
    });
  } catch (error) {
    throw new ApiError(0, "network", `the API could not be reached (${error.message})`);
  }
  if (response.ok) {
    if (response.status === 204) return null;
    if (asText) return { text: await response.text(), headers: response.headers };
    return response.json();
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = body && typeof body.error === "object" ? body.error : null;
  // API Gateway's own answers are {"message": ...}; its 404 means no such route (not yet in this API).
  const message = error ? error.message : (body && body.message) || response.statusText || "no answer";
  const routeMissing = response.status === 404 && !error;
  const failure = new ApiError(response.status, error ? error.code : null, message, routeMissing);
  if (response.status === 401) onUnauthorized(failure);
  throw failure;
}

// What went wrong, in words, when the console tried to `verb` `what` ("read", "the live leases").
export function explain(error, what, verb = "read") {
  if (!(error instanceof ApiError)) return `Could not ${verb} ${what}: ${error.message}.`;
  const code = error.code ? ` ${error.code}` : "";
  const detail = `(${error.status}${code}: ${error.message})`;
  switch (true) {
    case error.status === 0:
      return `Could not reach the API to ${verb} ${what}: check the network and try again.`;
    case error.routeMissing:
      return `Not available: this API does not serve ${what} yet.`;
    case error.status === 401:
      return `The API did not accept this credential ${detail}. Log in again.`;
    case error.status === 403:
      return `This credential may not ${verb} ${what} ${detail}.`;
    case error.status === 404:
      return `Not found: ${what} ${detail}.`;
    case error.status === 409:
      return `Could not ${verb} ${what} now ${detail}.`;
    case error.status === 410:
      return `Gone: ${what} ${detail}.`;
    case error.status === 429:
      return `The API is refusing requests for a moment ${detail}; the console tries again shortly.`;
    case error.status >= 500:
      return `The API failed to ${verb} ${what} ${detail}.`;
    default:
      return `The API refused to ${verb} ${what} ${detail}.`;
  }
}

// Every page of a listing: `key` names the array; `next_token` continues, up to `maxPages`.
export async function allPages(path, key, query = {}, maxPages = 10) {
  const items = [];
  let token = null;
  for (let page = 0; page < maxPages; page += 1) {
    const answer = await call(path, { query: { ...query, next_token: token } });
    items.push(...(answer[key] || []));
    token = answer.next_token;
    if (!token) return { items, complete: true };
  }
  return { items, complete: false };
}

// Run `task` now and again `intervalMs` after each run ends (never two at once); stop() ends it, and a run
// still under way when it is stopped or restarted schedules nothing.
export function poller(task, intervalMs) {
  let timer = null;
  let generation = 0;
  async function tick(mine) {
    if (mine !== generation) return;
    try {
      await task();
    } finally {
      if (mine === generation) timer = setTimeout(() => tick(mine), intervalMs);
    }
  }
  return {
    start() {
      this.stop();
      tick(generation);
    },
    stop() {
      generation += 1;
      clearTimeout(timer);
      timer = null;
    },
  };
}
