// Spend per owner per day over the last 30 UTC days: GET /v1/usage answers totals over a range, so the page asks
// once per day (since = until = that day, grouped by owner; six at a time) and draws what it gets, with the
// totals per owner as a table beside the chart.

import { call, explain } from "./api.js";
import { SERIES, stackedBars } from "./chart.js";
import { byId, clock, fill, h, markFirstData, say, usd } from "./dom.js";

const DAYS = 30;
const AT_ONCE = 6;
const NO_OWNER = "(no owner)";

export function lastDays(count, today = new Date()) {
  const days = [];
  for (let back = count - 1; back >= 0; back -= 1) {
    const day = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - back));
    days.push(day.toISOString().slice(0, 10));
  }
  return days;
}

async function usageByDay(days) {
  const answers = new Map();
  const failures = [];
  let next = 0;
  async function worker() {
    while (next < days.length) {
      const day = days[next];
      next += 1;
      try {
        const answer = await call("v1/usage", { query: { since: day, until: day, group_by: "owner" } });
        answers.set(day, answer.usage || []);
      } catch (failure) {
        failures.push(failure);
      }
    }
  }
  await Promise.all(Array.from({ length: AT_ONCE }, worker));
  return { answers, failures };
}

function totalsRows(points, owners) {
  const totals = new Map(owners.map((owner) => [owner, { leases: 0, seconds: 0, cost: 0 }]));
  for (const point of points) {
    const total = totals.get(point.owner);
    total.leases += point.leases;
    total.seconds += point.seconds;
    total.cost += point.cost;
  }
  const rows = owners.map((owner, index) => {
    const total = totals.get(owner);
    return h(
      "tr",
      { "data-owner": owner === null ? NO_OWNER : owner },
      h("th", { scope: "row" }, h("span", { class: `swatch series-${index % SERIES}`, "aria-hidden": "true" }), owner ?? NO_OWNER),
      h("td", { class: "num" }, String(total.leases)),
      h("td", { class: "num" }, (total.seconds / 3600).toFixed(2)),
      h("td", { class: "num" }, usd(total.cost)),
    );
  });
  const sum = [...totals.values()].reduce((all, t) => ({ leases: all.leases + t.leases, seconds: all.seconds + t.seconds, cost: all.cost + t.cost }), { leases: 0, seconds: 0, cost: 0 });
  const footer = h(
    "tr",
    {},
    h("th", { scope: "row" }, "All owners"),
    h("td", { class: "num" }, String(sum.leases)),
    h("td", { class: "num" }, (sum.seconds / 3600).toFixed(2)),
    h("td", { class: "num" }, usd(sum.cost)),
  );
  return { rows, footer };
}

export function createSpendView() {
  const chart = byId("spend-chart");
  const legend = byId("spend-legend");
  const table = byId("spend-rows");
  const total = byId("spend-total");
  const error = byId("spend-error");
  const status = byId("spend-status");
  let loading = null;

  async function load() {
    const days = lastDays(DAYS);
    say(status, `reading ${DAYS} days…`);
    const { answers, failures } = await usageByDay(days);
    if (answers.size === 0 && failures.length) {
      fill(chart);
      fill(legend);
      fill(table);
      fill(total);
      say(error, explain(failures[0], "the spend per owner"), "error");
      say(status, `last attempt ${clock()}`);
      return;
    }
    const missing = failures.length ? ` ${failures.length} of ${DAYS} days could not be read: ${explain(failures[0], "them")}` : "";
    say(error, missing.trim(), "error");
    const points = [];
    for (const day of days) {
      for (const row of answers.get(day) || []) {
        const owner = row.owner_id ?? null;
        points.push({
          owner,
          label: owner ?? NO_OWNER,
          day,
          cost: Number(row.cost_usd) || 0,
          leases: Number(row.leases) || 0,
          seconds: Number(row.lease_seconds) || 0,
        });
      }
    }
    const owners = [...new Set(points.map((point) => point.owner))].sort((a, b) => String(a ?? "").localeCompare(String(b ?? "")));
    const described = `Spend per owner per day from ${days[0]} to ${days[days.length - 1]}: ${owners.length} owners, ${points.length} owner-days`;
    fill(chart, stackedBars(days, points, owners, described));
    fill(
      legend,
      owners.map((owner, index) =>
        h("li", {}, h("span", { class: `swatch series-${index % SERIES}`, "aria-hidden": "true" }), owner ?? NO_OWNER),
      ),
    );
    const { rows, footer } = totalsRows(points, owners);
    fill(table, rows);
    fill(total, footer);
    say(status, `${days[0]} – ${days[days.length - 1]} (UTC) · updated ${clock()}`);
    markFirstData();
  }

  return {
    id: "view-spend",
    title: "spend-title",
    show() {
      // Thirty requests: read once each time the view is opened, not on a timer.
      if (!loading) loading = load().finally(() => {
        loading = null;
      });
    },
    hide() {},
  };
}
