// Draws a run's timeline (timeline.js): one row per lane, nested as the
// lanes are, with its model turns, tool calls and waits on a human as bars
// on a shared time axis; then the run's tokens over time. SVG, redrawn
// when the timeline changed, at the lanes' pace (runview.js).
import { h, fmt } from "./dom.js";
import { rowsInOrder, totals } from "./timeline.js";

const NS = "http://www.w3.org/2000/svg";
const ROW = 16;
const LABEL = 190;
const AXIS = 18;
const TOKENS = 64;
// MAX_ROWS bounds what is drawn (a 1,000-node run has thousands of lanes);
// the rest are counted.
const MAX_ROWS = 300;

function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// tick picks a round step for about n ticks over span ms.
function tick(span, n) {
  const raw = span / n;
  for (const step of [100, 250, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 1800000, 3600000]) {
    if (step >= raw) return step;
  }
  return 3600000;
}

const secs = (ms) => (ms >= 60000 ? `${(ms / 60000).toFixed(1)} min` : `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`);

export class TimelineView {
  constructor(box) {
    this.box = box;
    this.summary = h("p", { class: "muted small timeline-summary" });
    this.svgBox = h("div", { class: "timeline-scroll" });
    this.tokens = h("div", { class: "timeline-tokens" });
    box.replaceChildren(h("h2", null, "Timeline ", h("span", { class: "muted small" }, "model turns, tool calls and waits on a human, per lane")),
      h("div", { class: "timeline-legend small" },
        h("span", { class: "key model" }, "model"), h("span", { class: "key tool" }, "tool"),
        h("span", { class: "key wait" }, "waiting for a human"), h("span", { class: "key error" }, "failed")),
      this.summary, this.svgBox, this.tokens);
    // Drawn to the box's width: a new width (a turned phone, a resized
    // window) draws again.
    this.width = 0;
    this.resize = new ResizeObserver(() => {
      if (this.run && this.box.clientWidth !== this.width) {
        this.run.timeline.dirty = true;
        this.update(this.run);
      }
    });
    this.resize.observe(box);
  }

  destroy() {
    this.resize.disconnect();
  }

  update(run) {
    this.run = run;
    const tl = run.timeline;
    if (!tl || !tl.dirty) return;
    tl.dirty = false;
    this.width = this.box.clientWidth;
    const width = Math.max(this.box.clientWidth - 24, 320);
    const now = tl.t1;
    const span = Math.max(now - tl.t0, 1);
    const x = (t) => LABEL + ((t - tl.t0) / span) * (width - LABEL - 8);
    const all = rowsInOrder(tl);
    const rows = all.slice(0, MAX_ROWS);
    const height = AXIS + rows.length * ROW + 4;
    const svg = s("svg", { class: "timeline", width, height, viewBox: `0 0 ${width} ${height}`, "data-rows": all.length });
    const step = tick(span, Math.max(2, Math.floor((width - LABEL) / 90)));
    for (let t = 0; t <= span; t += step) {
      const xx = x(tl.t0 + t);
      svg.append(s("line", { x1: xx, x2: xx, y1: AXIS - 4, y2: height, class: "grid" }),
        s("text", { x: xx + 2, y: AXIS - 6, class: "axis" }, step < 1000 ? `${(t / 1000).toFixed(2)} s` : secs(t)));
    }
    rows.forEach(({ row: r, level }, i) => {
      const y = AXIS + i * ROW;
      const g = s("g", { class: "lane-row", "data-lane": r.id });
      g.append(s("text", { x: 4 + level * 10, y: y + ROW - 4, class: "label" }, r.id.length > 28 ? r.id.slice(0, 27) + "…" : r.id),
        s("line", { x1: x(r.start), x2: x(r.end || now), y1: y + ROW / 2, y2: y + ROW / 2, class: "span" }));
      for (const b of r.bars) {
        const x0 = x(b.start);
        const w = Math.max(x(b.end || now) - x0, 2);
        // A wait is drawn thinner, over the tool call it holds (a tool approval).
        const inset = b.kind === "wait" ? 5 : 3;
        g.append(s("rect", { x: x0, y: y + inset, width: w, height: ROW - 2 * inset, rx: 2, class: `bar ${b.kind}${b.error ? " error" : ""}${b.end ? "" : " open"}`, "data-kind": b.kind },
          s("title", null, `${b.label}: ${secs((b.end || now) - b.start)}${b.end ? "" : " (still going)"}`)));
      }
      svg.append(g);
    });
    this.svgBox.replaceChildren(svg);
    const sum = totals(tl, now);
    const more = all.length > rows.length ? ` · ${fmt(all.length - rows.length)} more lanes not drawn` : "";
    this.summary.textContent = `${secs(span)} from first to last event · model ${secs(sum.model)}, tools ${secs(sum.tool)}, waiting for humans ${secs(sum.wait)} (summed over lanes)${more}`;
    this.drawTokens(tl, width, x);
  }

  drawTokens(tl, width, x) {
    const pts = tl.tokens;
    if (!pts.length) {
      this.tokens.replaceChildren();
      return;
    }
    const last = pts[pts.length - 1];
    const top = Math.max(last.in + last.out, 1);
    const y = (v) => TOKENS - 4 - (v / top) * (TOKENS - 12);
    const line = (f) => [`${x(tl.t0)},${y(0)}`, ...pts.map((p) => `${x(p.t)},${y(f(p))}`)].join(" ");
    const svg = s("svg", { class: "timeline tokens", width, height: TOKENS, viewBox: `0 0 ${width} ${TOKENS}` },
      s("text", { x: 4, y: 14, class: "label" }, last.priced ? `tokens over time · $${last.cost.toFixed(4)}` : "tokens over time · cost unknown"),
      s("text", { x: 4, y: 30, class: "axis" }, `${fmt(last.in + last.out)} total`),
      s("text", { x: 4, y: 44, class: "axis in" }, `${fmt(last.in)} in`),
      s("text", { x: 4, y: 58, class: "axis out" }, `${fmt(last.out)} out`),
      s("polyline", { points: line((p) => p.in + p.out), class: "total" }),
      s("polyline", { points: line((p) => p.in), class: "in" }),
      s("polyline", { points: line((p) => p.out), class: "out" }));
    this.tokens.replaceChildren(svg);
  }
}
