// Building the page from data, safely by construction: every value goes in as text (textContent) or as an
// attribute value (setAttribute); nothing here parses markup, so an owner_id or correlation_id holding
// "<img onerror=...>" shows as those characters and never runs.

const SVG_NS = "http://www.w3.org/2000/svg";

// Attributes whose value may run script or load from elsewhere are never set from here.
function checkAttribute(name) {
  const lower = name.toLowerCase();
  if (lower.startsWith("on") || lower === "style" || lower === "srcdoc") {
    throw new Error(`refusing to set attribute ${name}`);
  }
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function build(node, attributes, children) {
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    checkAttribute(name);
    node.setAttribute(name, value === true ? "" : String(value));
  }
  return append(node, children);
}

// h("a", {href: "#/x"}, "text", child...): an HTML element.
export function h(tag, attributes, ...children) {
  return build(document.createElement(tag), attributes, children);
}

// s("rect", {x: 1}): an SVG element.
export function s(tag, attributes, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attributes, children);
}

// Replace what `node` holds with `children`.
export function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

// Replace the rows of a table that refreshes, keeping the keyboard's place: the link or button that had focus in
// a row (by the row's lease id and the cell's label) has it again in the new row, if that row is still there.
export function fillRows(tbody, rows) {
  const active = document.activeElement;
  const row = active && tbody.contains(active) ? active.closest("tr[data-lease-id]") : null;
  const cell = row ? active.closest("td[data-label]") : null;
  fill(tbody, rows);
  if (!row || !cell) return;
  const again = tbody.querySelector(
    `tr[data-lease-id="${CSS.escape(row.dataset.leaseId)}"] td[data-label="${CSS.escape(cell.dataset.label)}"] ${active.localName}`,
  );
  if (again) again.focus({ preventScroll: true });
}

export function byId(id) {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found;
}

export function show(node, visible) {
  node.hidden = !visible;
}

// Say something in words in a status line; `kind` is "info" or "error".
export function say(node, message, kind = "info") {
  node.textContent = message || "";
  node.dataset.kind = kind;
  node.hidden = !message;
}

// --- numbers and times ---------------------------------------------------------------------------------

export const DASH = "—";

export function seconds(iso) {
  const at = Date.parse(iso);
  return Number.isNaN(at) ? null : at / 1000;
}

// 75 → "1 m 15 s"; 7300 → "2 h 1 m"; 200000 → "2 d 7 h".
export function duration(totalSeconds) {
  if (totalSeconds === null || !Number.isFinite(totalSeconds)) return DASH;
  const value = Math.max(0, Math.round(totalSeconds));
  const days = Math.floor(value / 86400);
  const hours = Math.floor((value % 86400) / 3600);
  const minutes = Math.floor((value % 3600) / 60);
  const rest = value % 60;
  if (days) return `${days} d ${hours} h`;
  if (hours) return `${hours} h ${minutes} m`;
  if (minutes) return `${minutes} m ${rest} s`;
  return `${rest} s`;
}

export function age(iso, now = Date.now() / 1000) {
  const at = seconds(iso);
  return at === null ? DASH : duration(now - at);
}

export function timeLeft(iso, now = Date.now() / 1000) {
  const at = seconds(iso);
  if (at === null) return DASH;
  return at <= now ? "past" : duration(at - now);
}

export function usd(value, digits = 4) {
  if (value === null || value === undefined || !Number.isFinite(Number(value))) return DASH;
  const number = Number(value);
  return `$${number.toFixed(number !== 0 && Math.abs(number) < 1 ? digits : 2)}`;
}

export function perHour(value) {
  if (value === null || value === undefined || !Number.isFinite(Number(value))) return DASH;
  return `$${Number(value).toFixed(3)}/h`;
}

export function text(value) {
  return value === null || value === undefined || value === "" ? DASH : String(value);
}

// Where the worker runs: a fleet host's lease carries "<host>/<container id>" as its provider_token; another
// worker with an endpoint is reached at that endpoint's host (parsed, never asked); else its region, if any.
export function host(lease) {
  const token = lease.provider_token;
  if (typeof token === "string" && token.includes("/")) return token.slice(0, token.indexOf("/"));
  if (typeof lease.endpoint === "string") {
    try {
      return new URL(lease.endpoint).host;
    } catch {
      // not an absolute address: fall through to the region
    }
  }
  return lease.region || DASH;
}

export function shortId(id) {
  return String(id).slice(0, 8);
}

export function leaseHref(id, part = "") {
  return `#/lease/${encodeURIComponent(id)}${part ? `/${part}` : ""}`;
}

export function clock(date = new Date()) {
  return date.toISOString().slice(11, 19) + " UTC";
}

// The first time a view shows data from the API: a performance mark the tests (and anyone's devtools) read as
// the time from navigation to data on screen.
let marked = false;
export function markFirstData() {
  if (marked) return;
  marked = true;
  performance.mark("console:first-data");
}
