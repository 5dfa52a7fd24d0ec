// One lease: every field it has (GET /v1/lease/{id}), its history (GET /v1/lease/{id}/events), its logs, and
// for a credential that may release it, a release button behind a confirmation.

import { call, explain, poller } from "./api.js";
import { DASH, byId, clock, duration, fill, h, markFirstData, perHour, say, seconds, show, text, usd } from "./dom.js";
import { createLogs } from "./logs.js";
import { statusBadge } from "./leases.js";

const REFRESH_MS = 5000;
const LIVE = new Set(["queued", "pending", "active", "releasing"]);
// The fields in the order an operator reads them; any other field the API adds follows, by name.
const ORDER = [
  "lease_id", "status", "worker_state", "owner_id", "kind", "gpu", "provider", "provider_token", "region", "endpoint",
  "created_at", "ready_at", "expires_at", "released_at", "ttl_seconds", "cost_per_hour", "max_cost_per_hour",
  "cost_usd", "correlation_id", "created_by", "ended_by", "failure_reason", "priority", "preemptible", "preempt_at",
  "preempt_priority", "queued_at", "queued_until", "queue_position", "queue_reason", "admitted_at",
];
const MONEY = new Set(["cost_per_hour", "max_cost_per_hour", "cost_usd"]);
const ENDS = new Set(["lease.released", "lease.expired", "lease.failed", "lease.preempted"]);
const ENDED_READS = 6;

function isTime(name) {
  return name.endsWith("_at") || name.endsWith("_until");
}

function relative(iso) {
  const at = seconds(iso);
  if (at === null) return "";
  const delta = at - Date.now() / 1000;
  return delta >= 0 ? `in ${duration(delta)}` : `${duration(-delta)} ago`;
}

function value(name, raw) {
  if (raw === null || raw === undefined || raw === "") return h("span", { class: "muted" }, DASH);
  if (name === "status") return statusBadge(raw);
  if (isTime(name) && typeof raw === "string") {
    return h("span", {}, h("time", { datetime: raw }, raw), h("span", { class: "muted" }, ` (${relative(raw)})`));
  }
  if (MONEY.has(name)) return h("span", {}, name === "cost_usd" ? usd(raw, 6) : perHour(raw));
  if (typeof raw === "object") return h("code", {}, JSON.stringify(raw));
  return h("span", { class: name.endsWith("_id") || name === "provider_token" ? "mono" : null }, String(raw));
}

function fields(lease) {
  const names = [...ORDER.filter((name) => name in lease), ...Object.keys(lease).filter((n) => !ORDER.includes(n)).sort()];
  return names.flatMap((name) => [h("dt", {}, name), h("dd", { "data-field": name }, value(name, lease[name]))]);
}

function historyItem(event) {
  const data = event.data || {};
  return h(
    "li",
    { "data-event-type": event.type, "data-sequence": data.sequence },
    h("span", { class: "event-type" }, text(event.type)),
    " ",
    h("time", { datetime: event.timestamp, class: "muted" }, text(event.timestamp)),
    h("span", { class: "event-actor" }, ` by ${text(data.actor)}`),
    data.reason ? h("span", { class: "event-reason" }, ` — ${data.reason}`) : null,
  );
}

export function createLeaseView(session) {
  const title = byId("lease-title");
  const list = byId("lease-fields");
  const history = byId("lease-history");
  const historyStatus = byId("history-status");
  const error = byId("lease-error");
  const status = byId("lease-status");
  const release = byId("lease-release");
  const dialog = byId("confirm");
  const logs = createLogs();
  let leaseId = null;
  let current = null;
  let toLogs = false;
  const timeline = { events: [], after: 0, loaded: false, closed: false, endedReads: 0 };

  // The events numbered after the last one shown (all of them the first time), appended.
  async function loadHistory(mine) {
    try {
      for (let page = 0, after = timeline.after; page < 20 && after !== null; page += 1) {
        const answer = await call(`v1/lease/${encodeURIComponent(mine)}/events`, { query: { after } });
        if (mine !== leaseId) return;
        const fresh = answer.events || [];
        timeline.events.push(...fresh);
        if (fresh.length) timeline.after = Number(fresh[fresh.length - 1].data?.sequence) || timeline.after;
        after = answer.next_after ?? null;
      }
      timeline.loaded = true;
      fill(history, timeline.events.map(historyItem));
      say(historyStatus, timeline.events.length ? "" : "No event recorded yet.");
    } catch (failure) {
      if (mine !== leaseId) return;
      // A route this API lacks, or a history this credential may not read, is said once and not asked again.
      timeline.closed = failure.routeMissing || failure.status === 403 || failure.status === 404;
      fill(history);
      say(historyStatus, explain(failure, "this lease's history"), failure.routeMissing ? "info" : "error");
    }
  }

  // Asked again at each refresh while the lease is live; once it has ended, until its end is in the history (the
  // event follows the transition by a moment: it comes from the table's stream), a few times at most.
  function historyWanted() {
    if (timeline.closed) return false;
    if (!timeline.loaded || LIVE.has(current.status)) return true;
    const last = timeline.events[timeline.events.length - 1];
    if (last && ENDS.has(last.type)) return false;
    timeline.endedReads += 1;
    return timeline.endedReads <= ENDED_READS;
  }

  async function load() {
    const mine = leaseId;
    try {
      const answer = await call(`v1/lease/${encodeURIComponent(mine)}`);
      if (mine !== leaseId) return;
      current = answer.lease;
      fill(title, "Lease ", h("span", { class: "mono" }, current.lease_id), " ", statusBadge(current.status));
      fill(list, fields(current));
      show(release, session.canRelease() && LIVE.has(current.status) && current.status !== "releasing");
      if (toLogs) {
        // #/lease/<id>/logs: once the fields are in place, the logs are where the view opens.
        toLogs = false;
        byId("logs").scrollIntoView({ block: "start" });
      }
      say(error, "");
      say(status, `updated ${clock()}`);
      markFirstData();
      if (historyWanted()) await loadHistory(mine);
      logs.update(current);
    } catch (failure) {
      say(error, explain(failure, `lease ${mine}`), "error");
      say(status, `last attempt ${clock()}`);
    }
  }

  const refresh = poller(load, REFRESH_MS);

  release.addEventListener("click", () => {
    if (!current) return;
    const owner = current.owner_id === null ? "no owner" : `owner ${current.owner_id}`;
    byId("confirm-text").textContent =
      `Lease ${current.lease_id} (${owner}, ${current.provider}): its worker is removed and cannot be brought back.`;
    dialog.returnValue = "";
    dialog.showModal();
  });
  byId("confirm-cancel").addEventListener("click", () => dialog.close("cancel"));
  byId("confirm-release").addEventListener("click", () => dialog.close("release"));
  dialog.addEventListener("close", async () => {
    if (dialog.returnValue !== "release" || !current) {
      release.focus();
      return;
    }
    const target = current;
    say(status, `releasing ${target.lease_id}…`);
    logs.pause();
    try {
      await call(`v1/lease/${encodeURIComponent(target.lease_id)}`, { method: "DELETE", owner: target.owner_id });
      session.notify(`Released lease ${target.lease_id} at ${clock()}.`);
    } catch (failure) {
      say(error, explain(failure, `lease ${target.lease_id}`, "release"), "error");
    }
    refresh.start();
  });

  return {
    id: "view-lease",
    title: "lease-title",
    show(params) {
      const changed = params.id !== leaseId;
      leaseId = params.id;
      if (changed) {
        current = null;
        Object.assign(timeline, { events: [], after: 0, loaded: false, closed: false, endedReads: 0 });
        fill(title, "Lease ", h("span", { class: "mono" }, leaseId));
        fill(list);
        fill(history);
        say(historyStatus, "Loading…");
        show(release, false);
        logs.reset(leaseId);
      }
      toLogs = params.part === "logs";
      refresh.start();
      return toLogs ? byId("logs") : null;
    },
    hide() {
      refresh.stop();
      logs.stop();
    },
  };
}
