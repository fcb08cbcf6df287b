// Charts over time, drawn by uPlot (vendor/uPlot.esm.js, served by Quiver itself, unchanged
// from its npm package; its licence beside it): bars per time bucket, overlaid (calls, and the
// errors and refusals among them) or stacked (tokens by model). A chart takes its container's
// width and follows it when the window changes, so that it fits a phone's 390 pixels as it
// fits a desktop. uPlot draws on a canvas and writes its legend as text (textContent), and
// sets styles through the DOM, which the console's Content-Security-Policy allows.
import uPlot from "./vendor/uPlot.esm.js";
import { fmt } from "./usage-data.js";

// COLORS are the series' colours, in order (distinct for the usual colour blindnesses first).
export const COLORS = ["#2b59c3", "#e08a1e", "#1d7a3e", "#b3261e", "#7b4fc4", "#168a8a", "#7a7f87"];

const AXIS = { stroke: "#5f6570", grid: { stroke: "#eceef1", width: 1 }, ticks: { stroke: "#d9dce1", width: 1 } };

// WHOLE are the steps between an axis' marks for counts: 1, 2, 5, 10, 20, 50, …
const WHOLE = [];
for (let p = 1; p <= 1e9; p *= 10) WHOLE.push(p, 2 * p, 5 * p);

// narrow says the container is a phone's: a lower chart, a thinner axis.
const narrow = (w) => w < 560;

// barChart draws bars over time in box and returns a function that removes it.
//   xs: the buckets' starts (Unix seconds); step: a bucket's length in seconds;
//   series: [{name, values, color?, size?}] drawn in order (a later one over an earlier one);
//   shown: (series index, bucket index) => the value the legend shows (stacked bars draw sums);
//   format: a value as the axis and the legend write it; integer: the values are counts (the
//   axis marks whole numbers only).
export function barChart(box, { xs, step, series, shown, format = fmt.compact, integer = false }) {
  const width = () => Math.max(160, Math.floor(box.getBoundingClientRect().width));
  const height = () => (narrow(width()) ? 180 : 240);
  const opts = {
    width: width(),
    height: height(),
    class: "chart",
    title: undefined,
    cursor: { drag: { x: false, y: false }, points: { show: false } },
    legend: { live: true },
    scales: {
      x: { time: true, range: () => [xs[0] - step / 2, xs[xs.length - 1] + step / 2] },
      y: { range: (u, min, max) => [0, max > 0 ? max * 1.08 : 1] },
    },
    axes: [
      { ...AXIS },
      { ...AXIS, size: 56, values: (u, splits) => splits.map((v) => format(v)), incrs: integer ? WHOLE : undefined },
    ],
    series: [
      { label: "Time" },
      ...series.map((s, k) => ({
        label: s.name,
        stroke: s.color || COLORS[k % COLORS.length],
        fill: (s.color || COLORS[k % COLORS.length]) + (s.size ? "" : "d9"),
        width: 0,
        points: { show: false },
        paths: uPlot.paths.bars({ size: [s.size || 0.75, 60], align: 0 }),
        value: (u, v, si, idx) => (idx == null ? "–" : format(shown ? shown(k, idx) : v)),
      })),
    ],
  };
  const data = [xs, ...series.map((s) => s.values)];
  const u = new uPlot(opts, data, box);
  let last = opts.width;
  const ro = new ResizeObserver(() => {
    const w = width();
    if (Math.abs(w - last) < 2) return;
    last = w;
    u.setSize({ width: w, height: height() });
  });
  ro.observe(box);
  return () => {
    ro.disconnect();
    u.destroy();
  };
}
