// The live DAG: every node of the run's plan and of its teams' nested
// plans (drawn inside the team's box), with edges, laid out by
// layout-worker.js. Each node element carries data-node-id and
// data-node-state; only the nodes whose state changed are touched per frame.
import { displayState } from "./state.js";
import { esc } from "./dom.js";

// READABLE is the smallest scale fit() uses: a compact node's name stays legible.
const READABLE = 0.6;

const COMPACT_OVER = 60; // nodes: smaller boxes above this
const PLACE_CHUNK = 250; // node boxes created per frame

export class DagView {
  constructor(root, { onSelect }) {
    this.onSelect = onSelect;
    this.zoom = 1;
    this.els = new Map(); // node id -> element
    this.version = 0;
    this.pending = false; // a layout request in flight
    this.size = { width: 0, height: 0 };
    this.worker = new Worker(new URL("./layout-worker.js", import.meta.url), { type: "module" });
    this.worker.onmessage = (e) => this.placed(e.data);
    this.destroyed = false;
    this.root = root;
    root.classList.add("dag");
    this.toolbar = document.createElement("div");
    this.toolbar.className = "dag-tools";
    for (const [label, f] of [["−", () => this.setZoom(this.zoom / 1.25)], ["+", () => this.setZoom(this.zoom * 1.25)], ["fit", () => this.fit()], ["1:1", () => this.setZoom(1)]]) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.onclick = f;
      this.toolbar.append(b);
    }
    this.info = document.createElement("span");
    this.info.className = "muted";
    // A debate node lists its agents' stances by their first letter: the key.
    this.legend = document.createElement("span");
    this.legend.className = "muted small stance-legend";
    this.legend.hidden = true;
    this.legend.textContent = "debate stances: h held · s shifted · c conceded";
    this.toolbar.append(this.info, this.legend);
    this.scroller = document.createElement("div");
    this.scroller.className = "dag-scroll";
    this.sizer = document.createElement("div");
    this.sizer.className = "dag-sizer";
    this.canvas = document.createElement("div");
    this.canvas.className = "dag-canvas";
    this.svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    this.svg.classList.add("dag-edges");
    this.path = document.createElementNS("http://www.w3.org/2000/svg", "path");
    this.svg.append(this.path);
    this.canvas.append(this.svg);
    this.sizer.append(this.canvas);
    this.scroller.append(this.sizer);
    root.append(this.toolbar, this.scroller);
    this.canvas.addEventListener("click", (e) => {
      const el = e.target.closest("[data-node-id]");
      if (el) this.onSelect(el.dataset.nodeId);
    });
  }

  destroy() {
    this.destroyed = true;
    this.worker.terminate();
  }

  // update draws what changed in run since the last call.
  update(run) {
    if (run.dirty.layout && !this.pending) {
      run.dirty.layout = false;
      this.request(run);
    }
    for (const id of run.dirty.nodes) {
      const n = run.nodes.get(id);
      const el = this.els.get(id);
      if (n && el) this.paint(el, n);
    }
    run.dirty.nodes.clear();
  }

  request(run) {
    const graphs = {};
    for (const [key, g] of run.graphs) {
      graphs[key] = { nodes: g.nodes.map((id) => ({ id, deps: (run.nodes.get(id) || {}).deps || [] })), waves: g.waves };
    }
    this.run = run;
    this.pending = true;
    this.worker.postMessage({ version: ++this.version, graphs, compact: run.nodes.size > COMPACT_OVER });
  }

  placed(res) {
    const run = this.run;
    if (res.version !== this.version || !run) {
      this.pending = false;
      return;
    }
    this.canvas.classList.toggle("compact", run.nodes.size > COMPACT_OVER);
    this.size = { width: res.width, height: res.height };
    this.svg.setAttribute("width", res.width);
    this.svg.setAttribute("height", res.height);
    this.path.setAttribute("d", res.edges);
    this.info.textContent = ` ${res.nodes.length} nodes · layout ${Math.round(res.ms)} ms`;
    this.applyZoom();
    this.placeFrom(res, 0);
  }

  // placeFrom creates and positions res.nodes[i…] at most PLACE_CHUNK per
  // frame: a 1,000-node plan's boxes would cost one long style and layout
  // pass if they all arrived at once. New boxes are made as one HTML string.
  placeFrom(res, i) {
    const run = this.run;
    if (res.version !== this.version || this.destroyed) {
      this.pending = false;
      return;
    }
    const slice = res.nodes.slice(i, i + PLACE_CHUNK);
    let html = "";
    for (const [id] of slice) {
      if (this.els.has(id)) continue;
      const name = id.includes("/") ? id.slice(id.lastIndexOf("/") + 1) : id;
      html += `<div class="node" data-node-id="${esc(id)}"><span class="nid">${esc(name)}</span><span class="meta"></span></div>`;
    }
    if (html) {
      const tpl = document.createElement("template");
      tpl.innerHTML = html;
      for (const el of tpl.content.children) this.els.set(el.dataset.nodeId, el);
      this.canvas.append(tpl.content);
    }
    for (const [id, x, y, w, h] of slice) {
      const el = this.els.get(id);
      el.style.cssText = `left:${x}px;top:${y}px;width:${w}px;height:${h}px`;
      const n = run.nodes.get(id);
      if (n) this.paint(el, n);
    }
    if (i + PLACE_CHUNK < res.nodes.length) {
      requestAnimationFrame(() => this.placeFrom(res, i + PLACE_CHUNK));
      return;
    }
    const seen = new Set(res.nodes.map((n) => n[0]));
    for (const [id, el] of this.els) {
      if (!seen.has(id)) {
        el.remove();
        this.els.delete(id);
      }
    }
    this.pending = false;
    if (run.dirty.layout) {
      run.dirty.layout = false;
      this.request(run);
    }
  }

  paint(el, n) {
    const state = displayState(n);
    if (el.dataset.nodeState !== state) el.dataset.nodeState = state;
    el.classList.toggle("team", n.kind === "team");
    el.classList.toggle("debate", n.kind === "debate");
    el.classList.toggle("selected", this.selected === n.id);
    let meta = n.kind !== "leaf" ? n.kind : n.goal;
    if (n.debate && n.debate.round) meta += ` r${n.debate.round}${n.debate.rounds ? "/" + n.debate.rounds : ""}`;
    if (n.debate && n.debate.stances) {
      meta += " " + n.debate.stances.map((s) => s.stance[0]).join("");
      this.legend.hidden = false;
    }
    if (n.detail && n.state !== "completed") meta += (meta ? " · " : "") + n.detail;
    else if (n.detail && n.detail.startsWith("spawned")) meta += (meta ? " · " : "") + n.detail;
    const m = el.lastChild;
    if (m.textContent !== meta) m.textContent = meta;
    const title = `${n.id} (${state})${n.role ? " · " + n.role : ""}\n${n.goal}`;
    if (el.title !== title) el.title = title;
  }

  select(id) {
    const old = this.els.get(this.selected);
    if (old) old.classList.remove("selected");
    this.selected = id;
    const el = this.els.get(id);
    if (el) el.classList.add("selected");
  }

  setZoom(z) {
    this.zoom = Math.min(2, Math.max(0.1, z));
    this.applyZoom();
  }

  // fit shows the whole graph when it fits at a readable scale; a big one
  // is fitted to the width (and scrolls down), never below READABLE, where
  // a node's name can still be read (it then scrolls sideways too).
  fit() {
    const w = this.scroller.clientWidth - 20;
    const h = this.scroller.clientHeight - 20;
    if (!this.size.width || !this.size.height) return;
    const whole = Math.min(w / this.size.width, h / this.size.height);
    this.setZoom(Math.min(1, whole >= READABLE ? whole : Math.max(READABLE, w / this.size.width)));
  }

  applyZoom() {
    this.canvas.style.transform = `scale(${this.zoom})`;
    this.sizer.style.width = `${this.size.width * this.zoom}px`;
    this.sizer.style.height = `${this.size.height * this.zoom}px`;
  }
}
