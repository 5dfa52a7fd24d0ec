// The console's start: which credential the API takes (config.json), the login, the views behind #/… addresses
// (a lease id is the only thing an address carries; the credential never is), and the session.

import { ApiError, call, credential, explain, forget, remember, setAuthMode, whenUnauthorized } from "./api.js";
import { byId, say, show } from "./dom.js";
import { createLeaseView } from "./lease.js";
import { createLeasesView } from "./leases.js";
import { createQueueView } from "./queue.js";
import { createSpendView } from "./spend.js";

const MODES = {
  token: {
    label: "Caller token",
    hint: "Your caller token (oas_…). An operator makes one with `leasectl callers add`.",
    who: "token",
  },
  secret: {
    label: "Shared secret",
    hint: "This API's X-Internal-Secret (`make run` prints where it keeps it).",
    who: "shared secret",
  },
};
const SCREENS = ["view-loading", "view-login", "view-iam", "view-leases", "view-lease", "view-queue", "view-spend"];

const state = { mode: "secret", operator: false, views: null, current: null, noticeTimer: null };

function screen(id) {
  for (const other of SCREENS) show(byId(other), other === id);
}

function notify(message) {
  const notice = byId("notice");
  say(notice, message);
  clearTimeout(state.noticeTimer);
  state.noticeTimer = setTimeout(() => say(notice, ""), 8000);
}

const session = {
  // Secret mode: whoever holds the secret acts as any owner. Token mode: operators (the callers registry is
  // theirs to read, which is how the console knows); a service or viewer sees no release button.
  canRelease: () => state.mode === "secret" || state.operator,
  notify,
};

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "lease" && parts[1]) return { view: "lease", params: { id: parts[1], part: parts[2] || "" } };
  if (parts[0] === "queue" || parts[0] === "spend") return { view: parts[0], params: {} };
  return { view: "leases", params: {} };
}

function navigate() {
  // Only the console's own addresses (#/…): the skip link's #main is a place on the page, not a view.
  if (!state.views || !credential() || (location.hash && !location.hash.startsWith("#/"))) return;
  const { view, params } = route();
  const next = state.views[view];
  if (state.current && state.current !== next) state.current.hide();
  state.current = next;
  screen(next.id);
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const focus = next.show(params) || byId(next.title);
  focus.focus({ preventScroll: view === "lease" && params.part === "logs" });
}

function stopViews() {
  if (state.current) state.current.hide();
  state.current = null;
}

function showLogin(message = "") {
  stopViews();
  show(byId("nav"), false);
  show(byId("session"), false);
  screen("view-login");
  say(byId("login-error"), message, "error");
  byId("token").value = "";
  byId("token").focus();
}

async function isOperator() {
  if (state.mode !== "token") return false;
  try {
    await call("v1/callers");
    return true;
  } catch (failure) {
    return false;
  }
}

async function startSession() {
  state.operator = await isOperator();
  const role = state.mode === "secret" ? "" : state.operator ? " · operator" : " · read-only here";
  byId("session-who").textContent = `${MODES[state.mode].who}${role}`;
  show(byId("nav"), true);
  show(byId("session"), true);
  if (!state.views) {
    state.views = {
      leases: createLeasesView(),
      lease: createLeaseView(session),
      queue: createQueueView(),
      spend: createSpendView(),
    };
  }
  navigate();
}

async function logIn(event) {
  event.preventDefault();
  const input = byId("token");
  const value = input.value.trim();
  const error = byId("login-error");
  if (!value) {
    say(error, `Enter your ${MODES[state.mode].label.toLowerCase()}.`, "error");
    input.focus();
    return;
  }
  byId("login-submit").disabled = true;
  performance.mark("console:login");
  remember(value);
  input.value = "";
  try {
    await call("v1/leases", { query: { limit: 1 } });
    say(error, "");
    await startSession();
  } catch (failure) {
    forget();
    const refused = failure instanceof ApiError && (failure.status === 401 || failure.status === 403);
    const what = MODES[state.mode].label.toLowerCase();
    say(error, refused ? `The API refused this ${what} (${failure.status}: ${failure.message}).` : explain(failure, "the live leases"), "error");
    input.focus();
  } finally {
    byId("login-submit").disabled = false;
  }
}

async function boot() {
  let mode;
  try {
    const answer = await fetch("config.json", { cache: "no-store", credentials: "omit" });
    if (!answer.ok) throw new Error(`config.json answered ${answer.status}`);
    mode = (await answer.json()).auth_mode;
  } catch (failure) {
    screen("view-login");
    say(byId("login-error"), `The console could not read its settings: ${failure.message}.`, "error");
    return;
  }
  if (!(mode in MODES)) {
    screen("view-iam");
    byId("iam-title").focus();
    return;
  }
  state.mode = mode;
  setAuthMode(mode);
  byId("token-label").textContent = MODES[mode].label;
  byId("token-hint").textContent = MODES[mode].hint;
  byId("login-form").addEventListener("submit", logIn);
  byId("logout").addEventListener("click", () => {
    forget();
    showLogin("Logged out.");
  });
  whenUnauthorized((failure) => {
    forget();
    showLogin(`The API no longer accepts this credential (${failure.status}: ${failure.message}). Log in again.`);
  });
  window.addEventListener("hashchange", navigate);
  if (credential()) await startSession();
  else showLogin();
}

boot();
