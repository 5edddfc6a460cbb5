// Lays out a run's graphs off the main thread. Input: {version, graphs:
// {key: {nodes: [{id, deps}], waves: [[id]]}}, compact}; "" is the run's
// plan and a team node's id is its nested plan's key.
//
// Plans up to DAGRE_MAX nodes are laid out with dagre (ranks, crossing
// minimisation, routed edges). Its ordering phase grows much faster than
// the graph: 0.4 s for 100 nodes but 13 s for 1,000 on a 2-core machine,
// so larger plans are drawn as wave columns (the plan's own waves, which
// are its ranks) with straight edges, which takes milliseconds. Output: {version, width, height, nodes: [[id, x, y,
// w, h]] (top-left, absolute), edges: "M…L…" (one SVG path for all edges)}.
// A team node is sized to hold its nested graph, laid out first.
import dagre from "../vendor/dagre.esm.js";

const PAD = 10;
const HEADER = 26;

const DAGRE_MAX = 150;

function layoutGraph(key, graphs, size, useDagre) {
  const nodes = (graphs[key] && graphs[key].nodes) || [];
  const inner = new Map();
  const dims = new Map();
  for (const n of nodes) {
    if (graphs[n.id]) {
      const sub = layoutGraph(n.id, graphs, size, useDagre);
      inner.set(n.id, sub);
      dims.set(n.id, [Math.max(size.w, sub.width + 2 * PAD), sub.height + HEADER + PAD]);
    } else {
      dims.set(n.id, [size.w, size.h]);
    }
  }
  return useDagre ? dagreGraph(nodes, dims, inner, size) : waveGraph(nodes, graphs[key].waves || [], dims, inner, size);
}

// waveGraph puts wave i in column i, its nodes top to bottom in wave order.
function waveGraph(nodes, waves, dims, inner, size) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const cols = waves.map((ids) => (ids || []).filter((id) => byId.has(id)));
  const placed = new Set(cols.flat());
  const rest = nodes.filter((n) => !placed.has(n.id)).map((n) => n.id);
  if (rest.length) cols.push(rest);
  const res = { width: 0, height: 0, nodes: [], edges: [], inner };
  const at = new Map();
  let x = 0;
  for (const col of cols) {
    let y = 0;
    let w = 0;
    for (const id of col) {
      const [nw, nh] = dims.get(id);
      res.nodes.push([id, x, y, nw, nh]);
      at.set(id, [x, y, nw, nh]);
      y += nh + size.gap;
      w = Math.max(w, nw);
    }
    res.height = Math.max(res.height, y - size.gap);
    x += w + size.rank;
  }
  res.width = Math.max(0, x - size.rank);
  for (const n of nodes) {
    const b = at.get(n.id);
    for (const d of n.deps || []) {
      const a = at.get(d);
      if (a && b) res.edges.push([{ x: a[0] + a[2], y: a[1] + a[3] / 2 }, { x: b[0], y: b[1] + b[3] / 2 }]);
    }
  }
  return res;
}

function dagreGraph(nodes, dims, inner, size) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: size.gap, ranksep: size.rank, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set(nodes.map((n) => n.id));
  for (const n of nodes) {
    const [width, height] = dims.get(n.id);
    g.setNode(n.id, { width, height });
  }
  for (const n of nodes) for (const d of n.deps || []) if (ids.has(d)) g.setEdge(d, n.id);
  dagre.layout(g);
  const dim = (v) => (Number.isFinite(v) && v > 0 ? v : 0); // an empty graph has no size
  const res = { width: dim(g.graph().width), height: dim(g.graph().height), nodes: [], edges: [], inner };
  for (const n of nodes) {
    const v = g.node(n.id);
    res.nodes.push([n.id, v.x - v.width / 2, v.y - v.height / 2, v.width, v.height]);
  }
  for (const e of g.edges()) res.edges.push(g.edge(e).points || []);
  return res;
}

// flatten places a graph's layout at (ox, oy), its teams' inside them.
function flatten(res, ox, oy, nodes, path) {
  for (const [id, x, y, w, h] of res.nodes) {
    nodes.push([id, x + ox, y + oy, w, h]);
    const sub = res.inner.get(id);
    if (sub) flatten(sub, x + ox + (w - sub.width) / 2, y + oy + HEADER, nodes, path);
  }
  for (const pts of res.edges) {
    pts.forEach((p, i) => path.push(`${i ? "L" : "M"}${(p.x + ox).toFixed(1)} ${(p.y + oy).toFixed(1)}`));
  }
}

self.onmessage = (e) => {
  const { version, graphs, compact } = e.data;
  const size = compact ? { w: 96, h: 24, gap: 4, rank: 36 } : { w: 150, h: 44, gap: 10, rank: 48 };
  const t0 = performance.now();
  let total = 0;
  for (const k in graphs) total += graphs[k].nodes.length;
  const res = layoutGraph("", graphs, size, total <= DAGRE_MAX);
  const nodes = [];
  const path = [];
  flatten(res, PAD, PAD, nodes, path);
  self.postMessage({ version, width: res.width + 2 * PAD, height: res.height + 2 * PAD, nodes, edges: path.join(""), ms: performance.now() - t0 });
};
