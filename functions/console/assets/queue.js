// The queue: GET /v1/queue (queued leases in admission order, each with its position, priority, owner and what
// it waits for), and the leases under a preemption notice (live leases carrying `preempt_at`, from
// GET /v1/leases) with their time left and the priority they yield to (`preempt_priority`). Refreshed every few
// seconds.

import { allPages, call, explain, poller } from "./api.js";
import { age, byId, clock, fill, fillRows, h, markFirstData, say, show, text, timeLeft } from "./dom.js";
import { leaseLink } from "./leases.js";

const REFRESH_MS = 5000;

function cell(label, ...content) {
  return h("td", { "data-label": label }, ...content);
}

function queuedRow(lease, now) {
  return h(
    "tr",
    { "data-lease-id": lease.lease_id, "data-position": lease.queue_position },
    h("td", { "data-label": "Position", class: "num" }, text(lease.queue_position)),
    cell("Lease", leaseLink(lease)),
    h("td", { "data-label": "Priority", class: "num" }, text(lease.priority)),
    cell("Owner", text(lease.owner_id)),
    cell("Kind", text(lease.kind)),
    cell("GPU", text(lease.gpu)),
    cell("Waiting", age(lease.queued_at ?? lease.created_at, now)),
    cell("Gives up in", timeLeft(lease.queued_until, now)),
    cell("Waits for", text(lease.queue_reason)),
  );
}

function noticeRow(lease, now) {
  return h(
    "tr",
    { "data-lease-id": lease.lease_id },
    cell("Lease", leaseLink(lease)),
    cell("Owner", text(lease.owner_id)),
    h("td", { "data-label": "Priority", class: "num" }, text(lease.priority)),
    h("td", { "data-label": "For priority", class: "num" }, text(lease.preempt_priority)),
    cell("Provider", text(lease.provider)),
    cell("Ends", h("time", { datetime: lease.preempt_at }, text(lease.preempt_at))),
    cell("Time left", timeLeft(lease.preempt_at, now)),
  );
}

export function createQueueView() {
  const rows = byId("queue-rows");
  const empty = byId("queue-empty");
  const error = byId("queue-error");
  const noticeRows = byId("preempt-rows");
  const noticeEmpty = byId("preempt-empty");
  const noticeError = byId("notice-error");
  const status = byId("queue-status");

  async function loadQueue(now) {
    try {
      const answer = await call("v1/queue", { query: { limit: 1000 } });
      const queued = answer.queue || [];
      fillRows(rows, queued.map((lease) => queuedRow(lease, now)));
      show(empty, queued.length === 0);
      say(error, "");
      return true;
    } catch (failure) {
      fill(rows);
      show(empty, false);
      say(error, explain(failure, "the queue"), failure.routeMissing ? "info" : "error");
      return false;
    }
  }

  async function loadNotices(now) {
    try {
      const { items } = await allPages("v1/leases", "leases", { limit: 500 });
      const noticed = items.filter((lease) => lease.preempt_at).sort((a, b) => (a.preempt_at < b.preempt_at ? -1 : 1));
      fillRows(noticeRows, noticed.map((lease) => noticeRow(lease, now)));
      show(noticeEmpty, noticed.length === 0);
      say(noticeError, "");
      return true;
    } catch (failure) {
      fill(noticeRows);
      say(noticeError, explain(failure, "the live leases"), "error");
      return false;
    }
  }

  async function load() {
    const now = Date.now() / 1000;
    const [queue, notices] = await Promise.all([loadQueue(now), loadNotices(now)]);
    if (queue || notices) markFirstData();
    say(status, `updated ${clock()}`);
  }

  const refresh = poller(load, REFRESH_MS);
  return {
    id: "view-queue",
    title: "queue-title",
    show() {
      refresh.start();
    },
    hide() {
      refresh.stop();
    },
  };
}
