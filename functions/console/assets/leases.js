// The live leases: GET /v1/leases (every page), filtered by owner and provider there and by status here (the
// API has no status filter), refreshed every few seconds without reloading the page.

import { allPages, explain, poller } from "./api.js";
import {
  age, byId, clock, fillRows, h, host, leaseHref, markFirstData, perHour, say, shortId, show, text, timeLeft, usd,
} from "./dom.js";

const REFRESH_MS = 5000;

export function statusBadge(status) {
  return h("span", { class: `badge status-${String(status).replace(/[^a-z_-]/g, "")}` }, text(status));
}

function cell(label, ...content) {
  return h("td", { "data-label": label }, ...content);
}

function numeric(label, value) {
  return h("td", { "data-label": label, class: "num" }, value);
}

export function leaseLink(lease) {
  return h("a", { href: leaseHref(lease.lease_id), title: lease.lease_id, class: "mono" }, shortId(lease.lease_id));
}

function row(lease, now) {
  const logs = h("a", { href: leaseHref(lease.lease_id, "logs"), "aria-label": `Logs of lease ${lease.lease_id}` }, "Logs");
  const tr = h(
    "tr",
    { "data-lease-id": lease.lease_id, "data-status": lease.status },
    cell("Lease", leaseLink(lease)),
    cell("Status", statusBadge(lease.status), lease.preempt_at ? [" ", h("span", { class: "badge warn" }, "notice")] : null),
    cell("Worker", text(lease.worker_state)),
    cell("Owner", text(lease.owner_id)),
    cell("Kind", text(lease.kind)),
    cell("GPU", text(lease.gpu)),
    cell("Provider", text(lease.provider)),
    cell("Host", host(lease)),
    cell("Age", age(lease.created_at, now)),
    cell("Time left", timeLeft(lease.expires_at, now)),
    numeric("$/h", perHour(lease.cost_per_hour)),
    numeric("Cost", usd(lease.cost_usd)),
    cell("Logs", logs),
  );
  return tr;
}

export function createLeasesView() {
  const form = byId("leases-filters");
  const rows = byId("leases-rows");
  const status = byId("leases-status");
  const error = byId("leases-error");
  const empty = byId("leases-empty");
  let filters = { owner_id: "", provider: "", status: "" };

  async function load() {
    try {
      const query = { owner_id: filters.owner_id.trim(), provider: filters.provider, limit: 500 };
      const { items, complete } = await allPages("v1/leases", "leases", query);
      const shown = items.filter((lease) => !filters.status || lease.status === filters.status);
      const now = Date.now() / 1000;
      fillRows(rows, shown.map((lease) => row(lease, now)));
      show(empty, shown.length === 0);
      say(error, "");
      const more = complete ? "" : " (the first 5,000 only)";
      say(status, `${shown.length} of ${items.length} live leases${more} · updated ${clock()}`);
      markFirstData();
    } catch (failure) {
      say(error, explain(failure, "the live leases"), "error");
      say(status, `last attempt ${clock()}`);
    }
  }

  const refresh = poller(load, REFRESH_MS);

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    filters = {
      owner_id: String(data.get("owner_id") || ""),
      provider: String(data.get("provider") || ""),
      status: String(data.get("status") || ""),
    };
    refresh.start();
  });
  // A choice in a list applies at once; a typed owner applies with Enter or "Apply".
  form.addEventListener("change", (event) => {
    if (event.target instanceof HTMLSelectElement) form.requestSubmit();
  });
  byId("leases-refresh").addEventListener("click", () => refresh.start());

  return {
    id: "view-leases",
    title: "leases-title",
    show() {
      refresh.start();
    },
    hide() {
      refresh.stop();
    },
  };
}
