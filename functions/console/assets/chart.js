// A stacked bar chart drawn as SVG by the page: one bar per owner and day (a segment of the day's column), with
// its value in a <title> (the tooltip, and what a screen reader reads). Colours come from the style sheet's
// series-N classes: the chart sets no style of its own.

import { s } from "./dom.js";

const WIDTH = 720;
const HEIGHT = 300;
const MARGIN = { top: 12, right: 8, bottom: 34, left: 60 };
export const SERIES = 8;

// A round upper bound and step for the axis: 1, 2, 2.5 or 5 times a power of ten, about four steps.
function axis(max) {
  if (!(max > 0)) return { top: 1, step: 0.25 };
  const rough = max / 4;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((factor) => factor * power).find((candidate) => candidate >= rough);
  return { top: Math.ceil(max / step) * step, step };
}

function money(value, step) {
  const digits = step >= 1 ? (Number.isInteger(step) ? 0 : 1) : Math.min(6, Math.ceil(-Math.log10(step)) + 1);
  return `$${value.toFixed(digits)}`;
}

// `days`: the UTC days in order ("2026-12-01"); `points`: {owner, day, cost, leases}; `owners`: the series order.
export function stackedBars(days, points, owners, describe) {
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const totals = new Map(days.map((day) => [day, 0]));
  for (const point of points) totals.set(point.day, (totals.get(point.day) || 0) + point.cost);
  const { top, step } = axis(Math.max(0, ...totals.values()));
  const y = (value) => MARGIN.top + plotHeight - (value / top) * plotHeight;
  const band = plotWidth / days.length;
  const gap = Math.min(4, band * 0.2);
  const svg = s("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "bars",
    role: "img",
    "aria-label": describe,
    preserveAspectRatio: "xMidYMid meet",
  });
  const grid = s("g", { class: "grid-lines" });
  for (let value = 0; value <= top + step / 2; value += step) {
    grid.append(
      s("line", { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(value), y2: y(value) }),
      s("text", { x: MARGIN.left - 6, y: y(value) + 4, class: "tick y" }, money(value, step)),
    );
  }
  svg.append(grid);
  const labels = s("g", { class: "x-labels" });
  days.forEach((day, index) => {
    if (index % 5 === 0 || index === days.length - 1) {
      labels.append(s("text", { x: MARGIN.left + band * (index + 0.5), y: HEIGHT - 12, class: "tick x" }, day.slice(5)));
    }
  });
  svg.append(labels);
  const bars = s("g", { class: "series" });
  const stacked = new Map(days.map((day) => [day, 0]));
  const order = new Map(owners.map((owner, index) => [owner, index]));
  const sorted = [...points].sort((a, b) => order.get(a.owner) - order.get(b.owner));
  for (const point of sorted) {
    const index = days.indexOf(point.day);
    if (index < 0) continue;
    const below = stacked.get(point.day);
    stacked.set(point.day, below + point.cost);
    const height = y(below) - y(below + point.cost);
    const label = `${point.label} · ${point.day}: $${point.cost.toFixed(4)} (${point.leases} leases)`;
    bars.append(
      s(
        "rect",
        {
          x: MARGIN.left + band * index + gap / 2,
          y: y(below + point.cost),
          width: Math.max(1, band - gap),
          height: Math.max(0, height),
          class: `bar series-${order.get(point.owner) % SERIES}`,
          "data-owner": point.label,
          "data-day": point.day,
          "data-cost": point.cost,
        },
        s("title", {}, label),
      ),
    );
  }
  svg.append(bars);
  svg.append(s("line", { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(0), y2: y(0), class: "axis" }));
  return svg;
}
