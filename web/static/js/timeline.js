// The run's timeline: where its time went, lane by lane, as bars on one
// time axis (model turns, tool calls, waits on a human), and its tokens
// (and cost) over time. Built from the events already streamed (their timestamps),
// by track(), which state.js calls for every event of a run: pure
// bookkeeping, no DOM. TimelineView (timelineview.js) draws it.
//
// Events say when a tool call and a wait start and end. A model turn has
// no start event: the agent asks the model as soon as its lane opens, a
// tool answers, a human answers or its previous turn ends, so a turn bar
// runs from that moment to the turn's token_usage (or to the tool call
// the model asked for, or to the lane's end if the turn failed).

// MAX_BARS bounds one lane's bars (a looping agent's turns): the oldest
// go first, so a long run's memory stays bounded.
const MAX_BARS = 400;

export function newTimeline() {
  return { t0: 0, t1: 0, rows: new Map(), order: [], tokens: [], dirty: true };
}

function row(tl, env, t) {
  const id = env.lane.stream_id;
  let r = tl.rows.get(id);
  if (!r) {
    r = { id, parent: env.lane.parent_stream_id || "", depth: env.lane.depth || 0, start: t, end: 0,
      bars: [], turnFrom: t, turn: null, unbilled: null, tools: new Map(), waits: new Map() };
    tl.rows.set(id, r);
    tl.order.push(id);
  }
  return r;
}

function bar(r, kind, start, label) {
  const b = { kind, start, end: 0, label, error: false };
  r.bars.push(b);
  if (r.bars.length > MAX_BARS) r.bars.splice(0, r.bars.length - MAX_BARS);
  return b;
}

// endTurn ends the turn under way at t (the model asked for a tool, or a
// human): its usage may still come, and is then its label.
function endTurn(r, t) {
  if (r.turn) {
    r.turn.end = t;
    r.unbilled = r.turn;
    r.turn = null;
  }
}

// LANE_ENDS are the events after which a lane has nothing more to do.
const LANE_ENDS = new Set(["plan_proposed", "planning_failed", "node_completed", "node_failed", "node_cancelled",
  "node_skipped", "subagent_finished", "synthesis_completed", "synthesis_failed", "steering_applied",
  "steering_rejected", "debate_turn_completed", "debate_judge_summary", "run_finished", "run_error"]);

// track folds one event of a run into its timeline.
export function track(tl, env) {
  const t = Date.parse(env.timestamp);
  if (!env.lane || Number.isNaN(t)) return;
  if (!tl.t0 || t < tl.t0) tl.t0 = t;
  if (t > tl.t1) tl.t1 = t;
  tl.dirty = true;
  const r = row(tl, env, t);
  const p = env.payload || {};
  switch (env.type) {
    case "text_delta":
    case "reasoning_delta":
    case "node_progress":
    case "synthesis_progress":
      if (!r.turn) r.turn = bar(r, "model", r.turnFrom, "model turn");
      break;
    case "token_usage": {
      const label = `${p.model || "model"} turn ${p.turn || ""}`.trim() + ` · ${p.input_tokens || 0} in / ${p.output_tokens || 0} out`;
      const b = r.turn || r.unbilled;
      if (b) b.label = label;
      else bar(r, "model", r.turnFrom, label).end = t;
      if (r.turn) r.turn.end = t;
      r.turn = r.unbilled = null;
      // The next turn starts now, unless a tool or a human is still to answer.
      if (!r.tools.size && !r.waits.size) r.turnFrom = t;
      const last = tl.tokens.length ? tl.tokens[tl.tokens.length - 1] : { in: 0, out: 0, cost: 0, priced: true };
      // cost_usd is absent for a model without a price: the cost is then unknown, not 0.
      tl.tokens.push({ t, in: last.in + (p.input_tokens || 0), out: last.out + (p.output_tokens || 0),
        cost: last.cost + (p.cost_usd || 0), priced: last.priced && typeof p.cost_usd === "number" });
      break;
    }
    case "tool_call_started":
      endTurn(r, t);
      r.tools.set(p.call_id, bar(r, "tool", t, p.tool || "tool"));
      break;
    case "tool_call_finished": {
      const b = r.tools.get(p.call_id);
      if (b) {
        b.end = t;
        b.error = !!p.is_error;
        r.tools.delete(p.call_id);
      }
      r.turnFrom = t;
      break;
    }
    case "interrupt_raised":
      endTurn(r, t);
      r.waits.set(p.interrupt_id, bar(r, "wait", t, `waits for a human: ${p.kind}`));
      break;
    case "interrupt_resolved":
    case "interrupt_expired": {
      const b = r.waits.get(p.interrupt_id);
      if (b) {
        b.end = t;
        b.label += env.type === "interrupt_expired" ? " (expired)" : ` (${p.decision || "answered"})`;
        r.waits.delete(p.interrupt_id);
      }
      r.turnFrom = Math.max(r.turnFrom, t);
      break;
    }
    case "agent_restarted":
      if (r.turn) {
        r.turn.end = t;
        r.turn.error = true;
        r.turn = null;
      }
      r.unbilled = null;
      r.turnFrom = t;
      break;
  }
  if (LANE_ENDS.has(env.type)) closeRow(r, t, env.type.endsWith("failed") || env.type === "run_error");
}

// closeRow ends a lane: whatever is still open on it ends with it.
function closeRow(r, t, failed) {
  r.end = t;
  for (const b of r.bars) {
    if (!b.end) {
      b.end = t;
      b.error = b.error || failed;
    }
  }
  r.turn = r.unbilled = null;
  r.tools.clear();
  r.waits.clear();
}

// rowsInOrder lists the rows as a tree: each lane under its parent, in the
// order lanes opened (sub-agents nested under the agent that made them).
export function rowsInOrder(tl) {
  const kids = new Map();
  const roots = [];
  for (const id of tl.order) {
    const r = tl.rows.get(id);
    if (r.parent && tl.rows.has(r.parent) && r.parent !== id) {
      if (!kids.has(r.parent)) kids.set(r.parent, []);
      kids.get(r.parent).push(r);
    } else {
      roots.push(r);
    }
  }
  const out = [];
  const walk = (r, level) => {
    out.push({ row: r, level });
    for (const k of kids.get(r.id) || []) walk(k, level + 1);
  };
  for (const r of roots) walk(r, 0);
  return out;
}

// totals sums the bars' time by kind (ms), open bars counted to now.
export function totals(tl, now) {
  const sum = { model: 0, tool: 0, wait: 0 };
  for (const r of tl.rows.values()) for (const b of r.bars) sum[b.kind] += (b.end || now) - b.start;
  return sum;
}
