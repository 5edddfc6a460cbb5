// The session's state as a reducer over its events (docs/events.md). The
// views never read events: they read this state, and the dirty sets tell
// them what changed since they last drew. apply() is pure bookkeeping (no
// DOM, no I/O), so a replay from seq 1 and a live stream build the same
// state.

import { newTimeline, track } from "./timeline.js";

// Every event type of docs/events.md: EventSource needs a listener per name.
export const EVENT_TYPES = [
  "run_started", "run_finished", "run_error", "run_abort_requested", "run_rewound", "planning_started", "plan_proposed",
  "planning_failed", "plan_approved", "plan_rejected", "wave_started", "wave_completed", "node_started",
  "node_completed", "node_failed", "node_cancelled", "node_skipped", "text_delta", "reasoning_delta",
  "tool_call_started", "tool_call_finished", "token_usage", "agent_restarted", "warning", "subagent_started",
  "subagent_finished", "synthesis_started", "synthesis_completed", "synthesis_failed", "run_cost_estimate",
  "team_started", "team_synthesized", "subteam_spawned", "steering_received", "steering_applied",
  "steering_rejected", "debate_round_started", "debate_turn_started", "debate_turn_completed",
  "debate_judge_started", "debate_judge_summary", "debate_round_compacted", "debate_stance_map", "dissent",
  "advisor", "escalation", "citation_added", "replay_truncated", "interrupt_raised", "interrupt_resolved",
  "interrupt_expired", "approval_signature_added", "replan_attempt",
  "node_progress", "synthesis_progress", "node_compacting", "debate_round_restarted", "file",
  "request_received", "turn_started", "tool_call_progress",
  "remote_task",
];

// Lane text is capped: a lane keeps its last TEXT_KEEP characters once it
// passes TEXT_MAX, so a 1,000-node run's memory stays bounded.
const TEXT_MAX = 16000;
const TEXT_KEEP = 8000;
const TERMINAL = new Set(["finished", "failed", "aborted", "interrupted"]);
export const isTerminal = (status) => TERMINAL.has(status);

export function newSession() {
  // applied counts the events folded: with a gapless seq from 1 it equals
  // lastSeq, which the end-to-end tests check after a server restart.
  return { lastSeq: 0, applied: 0, runs: new Map(), truncated: null };
}

function newRun(id) {
  return {
    id, question: "", hitl: "none", scenario: null, status: "planning", wave: -1, waves: 0,
    graphs: new Map(), // "" is the run's plan, "T" team T's: {nodes: [PlanNode], waves: [[id]]}
    nodes: new Map(), // id -> node state
    lanes: new Map(), // stream_id -> lane
    interrupts: new Map(), // interrupt_id -> interrupt
    steering: new Map(), // steering_id -> {id, note, status, error, wave}
    citations: [], usage: { input_tokens: 0, output_tokens: 0 }, estimate: null,
    // The run's estimated cost (token_usage's cost_usd added up; costUnknown
    // once a turn came without one: a model without a price) and its
    // budget (run_started's: {tokens, cost_usd}, or null).
    cost: 0, costUnknown: false, budget: null,
    answer: "", error: null, durationMs: 0, lastSeq: 0,
    // The files the run started with (run_started's, without their bytes)
    // and those its agents wrote (file events, by path: a later write of a
    // path replaces it), and the terminal event's files_bytes.
    attached: [], files: new Map(), filesBytes: 0,
    timeline: newTimeline(), // where the run's time went (timeline.js)
    // What changed since the views last drew.
    dirty: { layout: true, nodes: new Set(), lanes: new Set(), interrupts: true, summary: true, laneSet: true },
  };
}

function newNode(id, graph) {
  return { id, graph, kind: "leaf", goal: "", deps: [], role: "", wave: 0, state: "pending", parked: 0,
    attempts: 0, detail: "", debate: null, output: "" };
}

// nodeOfLane names the plan node a lane belongs to ("" for none).
export function nodeOfLane(sid) {
  if (!sid) return "";
  let m;
  if (sid.startsWith("node:")) {
    const rest = sid.slice(5);
    const i = rest.indexOf("/sub:");
    return i < 0 ? rest : rest.slice(0, i);
  }
  if ((m = /^debate:(.+)\/r\d+\/[^/]+$/.exec(sid))) return m[1];
  if ((m = /^judge:(.+)\/r\d+$/.exec(sid))) return m[1];
  if (sid.startsWith("synthesis:")) return sid.slice(10);
  return "";
}

// displayState is a node's state as the DAG shows it: parked while one of
// its agents waits for a human.
export function displayState(n) {
  return n.parked > 0 && (n.state === "pending" || n.state === "running") ? "parked" : n.state;
}

function setPlan(run, key, plan, waves) {
  const nodes = (plan && plan.nodes) || [];
  const w = waves || [];
  run.graphs.set(key, { nodes: nodes.map((n) => n.id), waves: w });
  const wave = new Map();
  w.forEach((ids, i) => ids && ids.forEach((id) => wave.set(id, i)));
  for (const pn of nodes) {
    let n = run.nodes.get(pn.id);
    if (!n) run.nodes.set(pn.id, (n = newNode(pn.id, key)));
    n.graph = key;
    n.kind = pn.kind || "leaf";
    n.goal = pn.goal || "";
    n.deps = pn.deps || [];
    n.role = pn.role || "";
    n.wave = wave.get(pn.id) ?? n.wave;
    if (n.kind === "debate" && !n.debate) {
      const cfg = pn.debate || {};
      n.debate = { rounds: cfg.rounds || 0, agents: (cfg.agents || []).length, round: 0, judge: !!cfg.judge, stances: null };
    }
    run.dirty.nodes.add(pn.id);
  }
  // Nodes a steering diff removed from this graph leave the view.
  const keep = new Set(nodes.map((n) => n.id));
  for (const [id, n] of run.nodes) {
    if (n.graph === key && !keep.has(id)) {
      run.nodes.delete(id);
      dropGraph(run, id);
    }
  }
  run.dirty.layout = true;
}

function dropGraph(run, teamId) {
  const g = run.graphs.get(teamId);
  if (!g) return;
  run.graphs.delete(teamId);
  for (const id of g.nodes) {
    run.nodes.delete(id);
    dropGraph(run, id);
  }
}

function lane(run, env) {
  const sid = env.lane.stream_id;
  let l = run.lanes.get(sid);
  if (!l) {
    l = {
      id: sid, parent: env.lane.parent_stream_id || "", depth: env.lane.depth || 0, agent: env.agent_id || "",
      node: nodeOfLane(sid), title: sid, open: true, outcome: "", text: "", reasoning: "", tools: new Map(),
      usage: { input_tokens: 0, output_tokens: 0 }, notes: [], children: [], updated: 0,
    };
    run.lanes.set(sid, l);
    const p = run.lanes.get(l.parent);
    if (p && !p.children.includes(sid)) p.children.push(sid);
    run.dirty.laneSet = true;
  }
  l.updated = env.seq;
  run.dirty.lanes.add(sid);
  return l;
}

function appendCapped(s, d) {
  s += d;
  return s.length > TEXT_MAX ? s.slice(s.length - TEXT_KEEP) : s;
}

function node(run, id) {
  let n = run.nodes.get(id);
  if (!n) run.nodes.set(id, (n = newNode(id, "")));
  run.dirty.nodes.add(id);
  return n;
}

function closeNode(run, p, state, detail) {
  const n = node(run, p.node_id);
  n.state = state;
  n.detail = detail || "";
  n.parked = 0;
  run.dirty.summary = true;
  return n;
}

// parkedNode is the plan node an interrupt parks: the node to approve, or
// the node whose lane (or sub-agent's) raised it. A plan or spawn approval
// parks no node of the DAG.
function parkedNode(run, it) {
  if (it.kind === "plan_approval" || it.kind === "spawn_approval") return null;
  const id = it.kind === "node_approval" ? it.node_id : nodeOfLane(it.lane);
  return id ? run.nodes.get(id) : null;
}

// apply folds one envelope into the session; it returns false for a
// duplicate (seq at or below what was applied: resumes may overlap).
export function apply(session, env) {
  if (typeof env.seq !== "number" || env.seq <= session.lastSeq) return false;
  session.lastSeq = env.seq;
  session.applied++;
  if (env.type === "replay_truncated") {
    session.truncated = env.payload;
    return true;
  }
  if (!env.run_id) return true;
  let run = session.runs.get(env.run_id);
  if (!run) session.runs.set(env.run_id, (run = newRun(env.run_id)));
  run.lastSeq = env.seq;
  const p = env.payload || {};
  const l = env.lane ? lane(run, env) : null;
  track(run.timeline, env);
  switch (env.type) {
    case "run_started":
      run.question = p.question || "";
      run.hitl = p.hitl || "none";
      run.scenario = p.scenario || null;
      run.budget = p.budget || null;
      run.correlationId = env.correlation_id || "";
      run.attached = (p.files || []).map((f) => ({ name: f.name, mediaType: f.media_type, size: f.size, url: f.url || "" }));
      l.title = "run";
      break;
    case "request_received":
      run.request = { tenant: p.tenant || "", message: p.message || "" };
      run.dirty.summary = true;
      break;
    case "turn_started":
      // The lane's own model turns (an advisor's check carries a role).
      if (!p.role) l.turn = { model: p.model || "", turn: p.turn || 0, attempt: p.attempt || 1 };
      break;
    case "run_rewound":
      setPlan(run, "", p.plan, p.waves);
      for (const r of p.reused || []) node(run, r.node_id).state = "completed";
      run.status = "running";
      break;
    case "planning_started":
      l.title = "director";
      break;
    case "plan_proposed":
      setPlan(run, "", p.plan, p.waves);
      l.open = false;
      l.outcome = "ok";
      break;
    case "planning_failed":
      l.open = false;
      l.outcome = "failed";
      l.notes.push({ kind: "error", text: p.error });
      break;
    case "plan_approved":
      if (p.plan) setPlan(run, "", p.plan, p.waves);
      run.status = "running";
      break;
    case "plan_rejected":
      break; // still planning, as the run summary says, until run_error or replan_attempt
    case "replan_attempt":
      run.replans = p.attempt; // the director plans again; its plan_proposed replaces the plan
      break;
    case "run_cost_estimate":
      run.estimate = p;
      break;
    case "wave_started":
      if (!p.team) run.wave = p.wave;
      break;
    case "wave_completed":
      break;
    case "node_started": {
      const n = node(run, p.node_id);
      n.state = "running";
      if (p.kind) n.kind = p.kind;
      n.detail = "";
      l.title = p.node_id;
      break;
    }
    case "node_completed": {
      const n = closeNode(run, p, "completed");
      n.output = p.output || "";
      n.attempts = p.attempts || 0;
      for (const c of p.citations || []) l.notes.push({ kind: "cite", text: `cites ${c.title ? c.title + " " : ""}<${c.url}>` });
      l.open = false;
      l.outcome = "ok";
      break;
    }
    case "node_failed":
      closeNode(run, p, "failed", p.error);
      l.open = false;
      l.outcome = "failed";
      l.notes.push({ kind: "error", text: p.error });
      break;
    case "node_cancelled":
      closeNode(run, p, "cancelled", p.reason);
      l.open = false;
      l.outcome = "cancelled";
      break;
    case "node_skipped":
      closeNode(run, p, "skipped", p.reason);
      l.open = false;
      l.outcome = "skipped";
      break;
    case "text_delta":
      l.text = appendCapped(l.text, p.delta || "");
      break;
    case "reasoning_delta":
      l.reasoning = appendCapped(l.reasoning, p.delta || "");
      break;
    case "tool_call_started":
      l.tools.set(p.call_id, { id: p.call_id, tool: p.tool, args: p.args, result: null, isError: false });
      break;
    case "tool_call_progress": {
      // The running call's latest report: a bar on the call while it runs.
      const t = l.tools.get(p.call_id);
      if (t && t.result === null) t.progress = { progress: p.progress, total: p.total || 0, message: p.message || "" };
      break;
    }
    case "tool_call_finished": {
      const t = l.tools.get(p.call_id) || { id: p.call_id, tool: p.tool, args: null };
      t.progress = null;
      t.result = p.result;
      t.isError = !!p.is_error;
      l.tools.set(p.call_id, t);
      break;
    }
    case "token_usage":
      l.usage.input_tokens += p.input_tokens || 0;
      l.usage.output_tokens += p.output_tokens || 0;
      run.usage.input_tokens += p.input_tokens || 0;
      run.usage.output_tokens += p.output_tokens || 0;
      if (typeof p.cost_usd === "number") run.cost += p.cost_usd;
      else run.costUnknown = true;
      run.dirty.summary = true;
      break;
    case "file":
      run.files.set(p.path, { path: p.path, size: p.size, agent: env.agent_id || "", lane: env.lane.stream_id, content: p.content || "", seq: env.seq });
      l.notes.push({ kind: "info", text: `wrote ${p.path} (${p.size} bytes)` });
      run.dirty.summary = true;
      break;
    case "agent_restarted":
      l.text = "";
      l.reasoning = "";
      l.notes.push({ kind: "warn", text: `restarted (attempt ${p.attempt}): ${p.reason}` });
      break;
    case "warning":
      l.notes.push({ kind: "warn", text: `${p.code}: ${p.message}` });
      break;
    case "subagent_started":
      l.title = `sub-agent ${p.subagent_id}${p.async ? " (async)" : ""}`;
      l.notes.push({ kind: "info", text: `task: ${p.task}` });
      break;
    case "subagent_finished":
      l.open = false;
      l.outcome = p.outcome;
      if (p.error) l.notes.push({ kind: "error", text: p.error });
      break;
    case "synthesis_started":
      l.title = env.lane.stream_id;
      if (env.lane.stream_id === "synthesis") run.status = "synthesizing";
      break;
    case "synthesis_completed":
      l.open = false;
      l.outcome = "ok";
      break;
    case "synthesis_failed":
      l.open = false;
      l.outcome = "failed";
      l.notes.push({ kind: "error", text: p.error });
      break;
    case "team_started":
      setPlan(run, p.team_id, p.plan, p.waves);
      node(run, p.team_id).kind = "team";
      break;
    case "team_synthesized":
      break;
    case "node_progress":
    case "synthesis_progress":
      // The prompt read so far, before the first token: the lane shows it.
      l.progress = { processed: p.processed, total: p.total, cached: p.cached };
      break;
    case "node_compacting":
      l.notes.push({ kind: "info", text: "compacting its output" });
      break;
    case "remote_task": {
      // A node run by a remote A2A agent: a note when the task is named
      // and at each change of its state (not at every status text).
      const state = (p.state || "").replace("TASK_STATE_", "").toLowerCase();
      if (!l.remote || l.remote.state !== state) {
        l.notes.push({ kind: "info", text: `remote agent ${p.agent}, task ${p.task_id}: ${state}${p.message ? ": " + p.message : ""}` });
      }
      l.remote = { agent: p.agent, taskId: p.task_id, state, message: p.message || "" };
      break;
    }
    case "subteam_spawned": {
      const key = env.lane.stream_id === "run" ? "" : nodeOfLane(env.lane.stream_id);
      setPlan(run, key, p.plan, p.waves);
      node(run, p.parent_node_id).detail = `spawned ${p.team_id}`;
      break;
    }
    case "steering_received":
      run.steering.set(p.steering_id, { id: p.steering_id, note: p.note || "", diff: p.diff || null, status: "pending", error: "", wave: null });
      l.title = `steering ${p.steering_id}`;
      run.dirty.summary = true;
      break;
    case "steering_applied": {
      const s = run.steering.get(p.steering_id);
      if (s) Object.assign(s, { status: "applied", wave: p.applied_at_wave, diff: p.diff });
      setPlan(run, "", p.plan, p.waves);
      l.open = false;
      l.outcome = "ok";
      run.dirty.summary = true;
      break;
    }
    case "steering_rejected": {
      const s = run.steering.get(p.steering_id);
      if (s) Object.assign(s, { status: "rejected", error: p.error });
      l.open = false;
      l.outcome = "rejected";
      run.dirty.summary = true;
      break;
    }
    case "debate_round_started": {
      const n = node(run, p.node_id);
      n.debate = n.debate || { rounds: 0, agents: 0, round: 0, judge: false, stances: null };
      n.debate.round = p.round;
      break;
    }
    case "debate_turn_started":
      l.title = `round ${p.round} · ${p.agent_id}${p.persona ? ` (${p.persona})` : ""}`;
      break;
    case "debate_turn_completed":
      l.open = false;
      l.outcome = p.cancelled ? "cancelled" : p.restarted ? "restarted" : p.stance;
      break;
    case "debate_round_restarted":
      l.notes.push({ kind: "info", text: `round ${p.round} restarts (attempt ${p.attempt}): ${p.reason}` });
      break;
    case "debate_judge_started":
      l.title = `judge · round ${p.round}`;
      break;
    case "debate_judge_summary":
      l.open = false;
      l.outcome = p.consensus ? "consensus" : "no consensus";
      l.notes.push({ kind: "info", text: p.assessment });
      break;
    case "debate_round_compacted":
      l.notes.push({ kind: "info", text: `round ${p.round} compacted` });
      break;
    case "debate_stance_map": {
      const n = node(run, p.node_id);
      if (n.debate) n.debate.stances = p.stances;
      l.notes.push({ kind: "info", text: `stances: ${(p.stances || []).map((s) => `${s.agent_id} ${s.stance}`).join(", ")}` });
      break;
    }
    case "dissent":
      l.notes.push({ kind: "warn", text: `dissent of ${p.dissenting_agent_id} (${p.stance}): ${p.position}` });
      break;
    case "advisor":
      l.notes.push({ kind: p.kind === "gate_continue" ? "info" : "warn", text: `advisor ${p.kind}${p.detail ? ": " + p.detail : ""}` });
      break;
    case "escalation":
      l.notes.push({ kind: "error", text: `escalation: ${p.reason}` });
      break;
    case "citation_added":
      run.citations.push(p);
      run.dirty.summary = true;
      break;
    case "interrupt_raised": {
      const it = { ...p, lane: env.lane.stream_id, agent: env.agent_id, status: "pending", signatures: [], seq: env.seq, answer: null };
      run.interrupts.set(p.interrupt_id, it);
      const n = parkedNode(run, it);
      if (n) {
        n.parked++;
        run.dirty.nodes.add(n.id);
      }
      l.notes.push({ kind: "warn", text: `waiting for a human: ${p.kind}` });
      run.dirty.interrupts = true;
      break;
    }
    case "interrupt_resolved":
    case "interrupt_expired": {
      const it = run.interrupts.get(p.interrupt_id);
      if (it && it.status === "pending") {
        it.status = env.type === "interrupt_resolved" ? "resolved" : "expired";
        it.answer = p;
        const n = parkedNode(run, it);
        if (n && n.parked > 0) {
          n.parked--;
          run.dirty.nodes.add(n.id);
        }
      }
      run.dirty.interrupts = true;
      break;
    }
    case "approval_signature_added": {
      const it = run.interrupts.get(p.interrupt_id);
      if (it) {
        it.signatures.push({ approver: p.approver, decision: p.statement && p.statement.decision });
        it.signatureCount = p.count;
        it.signaturesRequired = p.required;
        it.fullySigned = p.is_fully_signed;
      }
      run.dirty.interrupts = true;
      break;
    }
    case "run_finished":
      run.status = "finished";
      run.answer = p.answer || "";
      run.usage = p.usage || run.usage;
      run.counts = p.nodes;
      run.durationMs = p.duration_ms;
      run.filesBytes = p.files_bytes || 0;
      l.open = false;
      break;
    case "run_error":
      run.status = p.code === "aborted" ? "aborted" : p.code === "interrupted" ? "interrupted" : "failed";
      run.error = { code: p.code, message: p.message };
      run.usage = p.usage || run.usage;
      run.counts = p.nodes;
      run.durationMs = p.duration_ms;
      run.filesBytes = p.files_bytes || 0;
      l.open = false;
      break;
  }
  if (isTerminal(run.status)) {
    // Every interrupt of an ended run has ended with it.
    for (const it of run.interrupts.values()) if (it.status === "pending") it.status = "resolved";
  }
  run.dirty.summary = true;
  return true;
}

// counts tallies the plan's node states (what the summary shows live).
export function counts(run) {
  const c = { total: 0, pending: 0, running: 0, parked: 0, completed: 0, failed: 0, cancelled: 0, skipped: 0 };
  for (const n of run.nodes.values()) {
    c.total++;
    c[displayState(n)]++;
  }
  return c;
}

// usd writes a dollar amount: 4 decimals below a cent, else 2.
export function usd(v) {
  return `$${v !== 0 && Math.abs(v) < 0.01 ? v.toFixed(4) : v.toFixed(2)}`;
}

// spendText is the run's spend against its budget for the header:
// "spent 1234 of 5000 tokens · $0.0123 of $1.00". The cost is left out
// while no turn was priced, and says "cost unknown" once a model without
// a price was used.
export function spendText(run) {
  const tokens = (run.usage.input_tokens || 0) + (run.usage.output_tokens || 0);
  const b = run.budget || {};
  let s = `spent ${tokens}${b.tokens ? ` of ${b.tokens}` : ""} tokens`;
  if (run.costUnknown) s += " · cost unknown";
  else if (tokens > 0 || b.cost_usd) s += ` · ${usd(run.cost)}${b.cost_usd ? ` of ${usd(b.cost_usd)}` : ""}`;
  return s;
}
