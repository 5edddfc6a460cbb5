// Unit tests of the dashboard's reducer (web/static/js/state.js), which is
// plain JavaScript with no DOM: run with `node --test` (run.sh does).
import { test } from "node:test";
import assert from "node:assert/strict";
import { newSession, apply, nodeOfLane, displayState, counts } from "../../web/static/js/state.js";

let seq = 0;
const lane = (stream_id, parent_stream_id = "run", depth = 1) => ({ stream_id, parent_stream_id, depth });
const ev = (type, payload, l = { stream_id: "run", depth: 0 }, run_id = "r1") => ({ seq: ++seq, type, run_id, session_id: "s", agent_id: "a", lane: l, payload });

function started() {
  seq = 0;
  const s = newSession();
  apply(s, ev("run_started", { question: "q", hitl: "tools" }));
  apply(s, ev("plan_proposed", { plan: { nodes: [{ id: "n001", goal: "g" }, { id: "T", goal: "team", kind: "team" }, { id: "n002", goal: "g", deps: ["n001", "T"] }] }, waves: [["n001", "T"], ["n002"]] }, lane("director")));
  return s;
}

test("nodeOfLane names the plan node of every kind of lane", () => {
  assert.equal(nodeOfLane("node:n001"), "n001");
  assert.equal(nodeOfLane("node:n001/sub:1/sub:2"), "n001");
  assert.equal(nodeOfLane("node:T/m1"), "T/m1");
  assert.equal(nodeOfLane("debate:T/D/r2/a1"), "T/D");
  assert.equal(nodeOfLane("judge:D/r3"), "D");
  assert.equal(nodeOfLane("synthesis:T"), "T");
  assert.equal(nodeOfLane("synthesis"), "");
  assert.equal(nodeOfLane("steering:x"), "");
});

test("status follows the run summary's values", () => {
  const s = started();
  const r = s.runs.get("r1");
  assert.equal(r.status, "planning");
  apply(s, ev("plan_approved", { automatic: true }));
  assert.equal(r.status, "running");
  apply(s, ev("synthesis_started", { inputs: 2 }, lane("synthesis")));
  assert.equal(r.status, "synthesizing");
  apply(s, ev("run_error", { code: "aborted", message: "m", usage: {}, nodes: {} }));
  assert.equal(r.status, "aborted");
});

test("a duplicate or older seq is dropped; applied counts each seq once", () => {
  const s = started();
  const e = ev("plan_approved", { automatic: true });
  assert.equal(apply(s, e), true);
  assert.equal(apply(s, e), false);
  assert.equal(apply(s, { ...e, seq: 1 }), false);
  assert.equal(s.applied, s.lastSeq);
});

test("node states, teams' nested plans and parked nodes", () => {
  const s = started();
  const r = s.runs.get("r1");
  apply(s, ev("plan_approved", { automatic: true }));
  apply(s, ev("node_started", { node_id: "T", kind: "team", wave: 0 }, lane("node:T")));
  apply(s, ev("team_started", { team_id: "T", depth: 1, plan: { nodes: [{ id: "T/m1", goal: "x" }] }, waves: [["T/m1"]] }, lane("node:T")));
  assert.equal(r.nodes.get("T/m1").graph, "T");
  apply(s, ev("interrupt_raised", { interrupt_id: "i1", kind: "node_approval", node_id: "n001" }));
  assert.equal(displayState(r.nodes.get("n001")), "parked");
  apply(s, ev("interrupt_resolved", { interrupt_id: "i1", kind: "node_approval", decision: "approve" }));
  assert.equal(displayState(r.nodes.get("n001")), "pending");
  apply(s, ev("node_started", { node_id: "n001", wave: 0 }, lane("node:n001")));
  apply(s, ev("interrupt_raised", { interrupt_id: "i2", kind: "tool_approval", tool_name: "search", tool_args: { query: "x" } }, lane("node:n001/sub:1", "node:n001", 2)));
  assert.equal(displayState(r.nodes.get("n001")), "parked");
  assert.equal(r.interrupts.get("i2").status, "pending");
  apply(s, ev("interrupt_expired", { interrupt_id: "i2", kind: "tool_approval", action: "reject" }, lane("node:n001/sub:1", "node:n001", 2)));
  assert.equal(r.interrupts.get("i2").status, "expired");
  assert.equal(displayState(r.nodes.get("n001")), "running");
  apply(s, ev("node_failed", { node_id: "n001", error: "boom" }, lane("node:n001")));
  apply(s, ev("node_skipped", { node_id: "n002", reason: "dep" }, lane("node:n002")));
  const c = counts(r);
  assert.deepEqual([c.total, c.failed, c.skipped, c.running], [4, 1, 1, 1]);
});

test("steering replaces the plan: removed nodes leave, new ones arrive", () => {
  const s = started();
  const r = s.runs.get("r1");
  apply(s, ev("team_started", { team_id: "T", plan: { nodes: [{ id: "T/m1" }] }, waves: [["T/m1"]] }, lane("node:T")));
  apply(s, ev("steering_received", { steering_id: "st", note: "n" }, lane("steering:st")));
  apply(s, ev("steering_applied", { steering_id: "st", applied_at_wave: 1, diff: { ops: [] }, plan: { nodes: [{ id: "n001" }, { id: "n003", deps: ["n001"] }] }, waves: [["n001"], ["n003"]] }, lane("steering:st")));
  assert.deepEqual([...r.nodes.keys()].sort(), ["n001", "n003"]);
  assert.equal(r.steering.get("st").status, "applied");
});

test("signatures of a policy-covered approval are counted", () => {
  const s = started();
  const r = s.runs.get("r1");
  apply(s, ev("interrupt_raised", { interrupt_id: "i3", kind: "tool_approval", approval: { required: 2, reject_required: 1, approvers: ["alice", "bob"] }, evidence: { id: "e", title: "t", risk_level: "high" } }, lane("node:n001")));
  apply(s, ev("approval_signature_added", { interrupt_id: "i3", approver: "alice", statement: { decision: "approve" }, count: 1, required: 2, is_fully_signed: false }, lane("node:n001")));
  const it = r.interrupts.get("i3");
  assert.equal(it.signatureCount, 1);
  assert.equal(it.signaturesRequired, 2);
  assert.deepEqual(it.signatures, [{ approver: "alice", decision: "approve" }]);
});

test("a remote agent's task: a note when it is named and at each change of state, not at each status text", () => {
  const s = started();
  const r = s.runs.get("r1");
  apply(s, ev("node_started", { node_id: "n001", wave: 0, goal: "g" }, lane("node:n001")));
  const rt = (state, message) => ev("remote_task", { agent: "helper", task_id: "t1", context_id: "c1", state, message }, lane("node:n001"));
  apply(s, rt("TASK_STATE_SUBMITTED"));
  apply(s, rt("TASK_STATE_WORKING", "n001 started"));
  apply(s, rt("TASK_STATE_WORKING", "wave 1 started"));
  apply(s, rt("TASK_STATE_COMPLETED", "the answer"));
  const l = r.lanes.get("node:n001");
  assert.deepEqual(l.notes.map((n) => n.text), [
    "remote agent helper, task t1: submitted",
    "remote agent helper, task t1: working: n001 started",
    "remote agent helper, task t1: completed: the answer",
  ]);
  assert.deepEqual(l.remote, { agent: "helper", taskId: "t1", state: "completed", message: "the answer" });
});

test("lane text is capped", () => {
  const s = started();
  const r = s.runs.get("r1");
  for (let i = 0; i < 400; i++) apply(s, ev("text_delta", { delta: "x".repeat(100) }, lane("node:n001")));
  const l = r.lanes.get("node:n001");
  assert.ok(l.text.length <= 16000, `text kept ${l.text.length}`);
  assert.equal(r.lanes.get("run").children.includes("node:n001"), true);
});

test("spend against the budget: cost_usd adds up, a turn without one makes the cost unknown", async () => {
  const { spendText } = await import("../../web/static/js/state.js");
  seq = 0;
  const s = newSession();
  apply(s, ev("run_started", { question: "q", hitl: "none", budget: { tokens: 5000, cost_usd: 1 } }));
  const r = s.runs.get("r1");
  assert.equal(spendText(r), "spent 0 of 5000 tokens · $0.00 of $1.00");
  apply(s, ev("token_usage", { model: "m", turn: 1, input_tokens: 1000, output_tokens: 234, cost_usd: 0.0123 }, lane("director")));
  apply(s, ev("token_usage", { model: "m", turn: 1, input_tokens: 0, output_tokens: 0, cost_usd: 0.5 }, lane("node:n001")));
  assert.equal(spendText(r), "spent 1234 of 5000 tokens · $0.51 of $1.00");
  apply(s, ev("token_usage", { model: "free?", turn: 1, input_tokens: 6, output_tokens: 0 }, lane("node:n001")));
  assert.equal(spendText(r), "spent 1240 of 5000 tokens · cost unknown");
  const plain = newSession();
  seq = 0;
  apply(plain, ev("run_started", { question: "q", hitl: "none" }));
  assert.equal(spendText(plain.runs.get("r1")), "spent 0 tokens");
});

test("tool_call_progress puts the latest report on the running call until its result", () => {
  const s = started();
  const l = lane("node:n001");
  apply(s, ev("node_started", { node_id: "n001", wave: 0, goal: "g" }, l));
  apply(s, ev("tool_call_started", { call_id: "c1", tool: "search", args: { query: "x" } }, l));
  apply(s, ev("tool_call_progress", { call_id: "c1", tool: "search", progress: 1, total: 3, message: "reading source 1 of 3" }, l));
  apply(s, ev("tool_call_progress", { call_id: "c1", tool: "search", progress: 2, total: 3, message: "reading source 2 of 3" }, l));
  const t = s.runs.get("r1").lanes.get("node:n001").tools.get("c1");
  assert.deepEqual(t.progress, { progress: 2, total: 3, message: "reading source 2 of 3" });
  apply(s, ev("tool_call_finished", { call_id: "c1", tool: "search", result: "ok", is_error: false }, l));
  assert.equal(t.progress, null);
  assert.equal(t.result, "ok");
  // A report of an unknown call, or after the result, changes nothing.
  apply(s, ev("tool_call_progress", { call_id: "c1", tool: "search", progress: 3, total: 3 }, l));
  apply(s, ev("tool_call_progress", { call_id: "zz", tool: "search", progress: 1 }, l));
  assert.equal(t.progress, null);
  assert.equal(s.runs.get("r1").lanes.get("node:n001").tools.size, 1);
});

test("request_received, turn_started and correlation_id reach the run and its lanes", () => {
  seq = 0;
  const s = newSession();
  apply(s, { ...ev("run_started", { question: "q" }), correlation_id: "req-7" });
  apply(s, ev("request_received", { tenant: "acme", message: "q" }));
  const l = lane("node:n001");
  apply(s, ev("turn_started", { model: "gpt", turn: 2, attempt: 1 }, l));
  apply(s, ev("turn_started", { model: "judge", turn: 1, role: "advisor" }, l)); // an advisor's check: not the lane's turn
  const r = s.runs.get("r1");
  assert.equal(r.correlationId, "req-7");
  assert.deepEqual(r.request, { tenant: "acme", message: "q" });
  assert.deepEqual(r.lanes.get("node:n001").turn, { model: "gpt", turn: 2, attempt: 1 });
});

test("files: attached ones from run_started, written ones by path (the last write wins), files_bytes from the terminal event", () => {
  seq = 0;
  const s = newSession();
  apply(s, ev("run_started", { question: "q", hitl: "none", files: [{ name: "brief.md", media_type: "text/markdown", size: 12, sha256: "x", data: "IyBCcmllZgo=" }] }));
  const r = s.runs.get("r1");
  assert.deepEqual(r.attached, [{ name: "brief.md", mediaType: "text/markdown", size: 12, url: "" }]);
  apply(s, ev("file", { path: "notes.md", size: 5, encoding: "utf-8", content: "hello", call_id: "c1", tool: "workspace.write" }, lane("node:n001")));
  apply(s, ev("file", { path: "out/a.md", size: 1, encoding: "utf-8", content: "a", call_id: "c2", tool: "workspace.write" }, lane("node:n002")));
  apply(s, ev("file", { path: "notes.md", size: 7, encoding: "utf-8", content: "hello!!", call_id: "c3", tool: "workspace.write" }, lane("node:n002")));
  assert.deepEqual([...r.files.keys()], ["notes.md", "out/a.md"]);
  assert.equal(r.files.get("notes.md").content, "hello!!");
  assert.equal(r.files.get("notes.md").lane, "node:n002");
  assert.equal(r.filesBytes, 0);
  apply(s, ev("run_finished", { answer: "a", usage: {}, nodes: {}, duration_ms: 1, files_bytes: 13 }));
  assert.equal(r.filesBytes, 13);
});
