// Lanes: one panel per agent, sub-agents nested under their parent lane
// (parent_stream_id), with streaming text, collapsible reasoning, tool
// calls with their arguments and results, notes and token usage.
//
// Bounded whatever the run's size: at most MAX_TOP lanes at the top level
// (the selected node's, else the most recently active) and MAX_CHILDREN
// under each, each showing at most SHOW_CHARS of its text; only lanes
// on screen whose events changed are redrawn.
import { h, fmt, tail } from "./dom.js";

const MAX_TOP = 12;
const MAX_CHILDREN = 16;
const SHOW_CHARS = 4000;
const RELIST_MS = 400;

export class LanesView {
  // onChange asks for a redraw (the selection changed).
  constructor(root, onChange) {
    this.root = root;
    this.onChange = onChange;
    this.root.classList.add("lanes");
    this.els = new Map(); // lane id -> {el, parts}
    this.key = "";
    this.listedAt = 0;
    this.selected = "";
  }

  select(nodeId) {
    this.selected = nodeId;
    this.listedAt = 0;
  }

  update(run) {
    const now = performance.now();
    if (run.dirty.laneSet || now - this.listedAt > RELIST_MS) {
      run.dirty.laneSet = false;
      this.listedAt = now;
      this.relist(run);
    }
    for (const id of run.dirty.lanes) {
      const e = this.els.get(id);
      if (e) this.paint(e, run.lanes.get(id));
    }
    run.dirty.lanes.clear();
  }

  relist(run) {
    let top;
    let more = 0;
    if (this.selected) {
      const l = run.lanes.get(`node:${this.selected}`);
      top = l ? [l] : [];
    } else {
      const root = run.lanes.get("run");
      const kids = root ? root.children.map((id) => run.lanes.get(id)).filter(Boolean) : [];
      kids.sort((a, b) => (b.open - a.open) || (b.updated - a.updated));
      more = Math.max(0, kids.length - MAX_TOP);
      top = kids.slice(0, MAX_TOP);
    }
    // The lane count too: a new sub-lane under a shown lane redraws the list.
    const sel = this.selected && run.nodes.get(this.selected);
    const key = top.map((l) => l.id).join(",") + "|" + more + "|" + run.lanes.size + "|" + (sel ? sel.state : "");
    if (key === this.key) return;
    this.key = key;
    const keep = new Map();
    const frag = document.createDocumentFragment();
    if (this.selected) {
      const n = run.nodes.get(this.selected);
      frag.append(h("div", { class: "node-info", dataset: { infoNode: this.selected } },
        h("p", null, h("b", null, this.selected), n ? ` · ${n.kind} · ${n.state}${n.role ? " · role " + n.role : ""}${n.deps.length ? " · after " + n.deps.join(", ") : ""}${n.detail ? " · " + n.detail : ""} ` : " ",
          h("button", { type: "button", onclick: () => {
            this.select("");
            this.onChange();
          } }, "show all lanes")),
        n && n.goal ? h("p", { class: "muted" }, n.goal) : null,
        n && n.output ? h("details", null, h("summary", null, `output (${fmt(n.output.length)} chars)`), h("pre", { class: "text" }, tail(n.output, SHOW_CHARS))) : null));
    }
    for (const l of top) frag.append(this.laneEl(l, run, keep, 0));
    if (more) frag.append(h("p", { class: "muted" }, `+${fmt(more)} more lanes: click a node in the DAG to see its lanes.`));
    if (!top.length) frag.append(h("p", { class: "muted" }, "No lanes yet."));
    this.els = keep;
    this.root.replaceChildren(frag);
  }

  laneEl(l, run, keep, level) {
    let e = this.els.get(l.id);
    if (!e) {
      const parts = {
        title: h("b"), outcome: h("span", { class: "outcome" }), usage: h("span", { class: "usage muted" }),
        rsum: h("summary"), reasoning: h("pre", { class: "reasoning" }), text: h("pre", { class: "text" }),
        tools: h("ol", { class: "tools" }), notes: h("ul", { class: "notes" }), children: h("div", { class: "children" }),
      };
      parts.rdet = h("details", { class: "reasoning-box", hidden: true }, parts.rsum, parts.reasoning);
      const el = h("section", { class: "lane", dataset: { laneId: l.id } },
        h("header", null, parts.title, " ", parts.outcome, " ", parts.usage),
        parts.rdet, parts.text, parts.tools, parts.notes, parts.children);
      e = { el, parts, l };
      this.paint(e, l);
    }
    keep.set(l.id, e);
    const kids = l.children.map((id) => run.lanes.get(id)).filter(Boolean);
    const shown = kids.slice(-MAX_CHILDREN);
    const nodes = shown.map((k) => this.laneEl(k, run, keep, level + 1));
    if (kids.length > shown.length) nodes.unshift(h("p", { class: "muted" }, `${kids.length - shown.length} earlier sub-lanes not shown`));
    e.parts.children.replaceChildren(...nodes);
    return e.el;
  }

  paint(e, l) {
    if (!l) return;
    const p = e.parts;
    e.el.dataset.laneOpen = String(l.open);
    p.title.textContent = l.title + (l.agent && l.agent !== l.title ? ` · ${l.agent}` : "");
    p.outcome.textContent = l.open ? "running" : l.outcome;
    p.outcome.dataset.outcome = l.open ? "running" : l.outcome;
    const used = l.usage.input_tokens || l.usage.output_tokens ? `${fmt(l.usage.input_tokens)} in / ${fmt(l.usage.output_tokens)} out`
      : l.progress ? `reading its prompt: ${fmt(l.progress.processed)} of ${fmt(l.progress.total)}` : "";
    // turn_started: the model turn the lane is on (attempt when restarted).
    const turn = l.turn ? `turn ${l.turn.turn}${l.turn.attempt > 1 ? ` (attempt ${l.turn.attempt})` : ""} · ${l.turn.model}` : "";
    p.usage.textContent = [turn, used].filter(Boolean).join(" · ");
    if (l.reasoning) {
      p.rdet.hidden = false;
      p.rsum.textContent = `reasoning (${fmt(l.reasoning.length)} chars)`;
      if (p.rdet.open) p.reasoning.textContent = tail(l.reasoning, SHOW_CHARS);
      else if (!p.rdet.ontoggle) p.rdet.ontoggle = () => (p.reasoning.textContent = tail(l.reasoning, SHOW_CHARS));
    }
    p.text.textContent = tail(l.text, SHOW_CHARS);
    p.text.hidden = !l.text;
    if (p.tools.childElementCount !== l.tools.size || l.tools.size) {
      p.tools.replaceChildren(...[...l.tools.values()].slice(-MAX_CHILDREN).map((t) =>
        h("li", { class: t.isError ? "tool error" : "tool", dataset: { callId: t.id } },
          h("code", null, `${t.tool}(${t.args === null || t.args === undefined ? "" : tail(JSON.stringify(t.args), 300)})`),
          t.result === null ? running(t) : h("span", null, " → ", tail(String(t.result), 400)))));
    }
    if (p.notes.childElementCount !== l.notes.length) {
      p.notes.replaceChildren(...l.notes.slice(-8).map((n) => h("li", { class: `note ${n.kind}` }, n.text)));
    }
  }
}

// running shows a running call: its latest progress report (a bar when the
// total is known, tool_call_progress), or that it runs.
function running(t) {
  const pr = t.progress;
  if (!pr) return h("span", { class: "muted" }, " … running");
  const count = pr.total > 0 ? `${pr.progress}/${pr.total}` : `${pr.progress}`;
  return h("span", { class: "tool-progress" },
    pr.total > 0 ? h("progress", { max: pr.total, value: Math.min(pr.progress, pr.total) }) : null,
    h("span", { class: "muted" }, ` ${count}${pr.message ? " " + pr.message : ""}`));
}
