// Unit tests of the dashboard's timeline reducer (web/static/js/timeline.js):
// run with `node --test` (run.sh does).
import { test } from "node:test";
import assert from "node:assert/strict";
import { newTimeline, track, rowsInOrder, totals } from "../../web/static/js/timeline.js";

let seq = 0;
const T0 = Date.parse("2026-11-29T10:00:00Z");
const at = (ms) => new Date(T0 + ms).toISOString();
const ev = (ms, type, payload, stream_id = "node:n001", parent_stream_id = "run", depth = 1) =>
  ({ seq: ++seq, type, timestamp: at(ms), run_id: "r1", lane: { stream_id, parent_stream_id, depth }, payload });

function fold(events) {
  const tl = newTimeline();
  for (const e of events) track(tl, e);
  return tl;
}

test("a lane's model turns, tool call and wait are bars from the events' timestamps", () => {
  const tl = fold([
    ev(0, "run_started", {}, "run", "", 0),
    ev(100, "node_started", { node_id: "n001" }),
    ev(400, "text_delta", { delta: "thinking" }),
    ev(700, "tool_call_started", { call_id: "c1", tool: "search" }),
    ev(720, "token_usage", { model: "m", turn: 1, input_tokens: 10, output_tokens: 5 }), // usage after the call: the turn's label
    ev(1700, "tool_call_finished", { call_id: "c1", tool: "search", is_error: false }),
    ev(1800, "interrupt_raised", { interrupt_id: "i1", kind: "tool_approval" }),
    ev(4800, "interrupt_resolved", { interrupt_id: "i1", decision: "approve" }),
    ev(5000, "text_delta", { delta: "answer" }),
    ev(5500, "token_usage", { model: "m", turn: 2, input_tokens: 30, output_tokens: 7 }),
    ev(5600, "node_completed", { node_id: "n001" }),
  ]);
  const r = tl.rows.get("node:n001");
  const bars = r.bars.map((b) => [b.kind, b.start - T0, b.end - T0]);
  assert.deepEqual(bars, [
    ["model", 100, 700], // from the lane's start to the tool call the model asked for
    ["tool", 700, 1700],
    ["wait", 1800, 4800],
    ["model", 4800, 5500], // from the human's answer to the turn's usage
  ]);
  assert.match(r.bars[0].label, /turn 1 · 10 in \/ 5 out/);
  assert.match(r.bars[3].label, /turn 2 · 30 in \/ 7 out/);
  assert.match(r.bars[2].label, /tool_approval \(approve\)/);
  assert.equal(r.end - T0, 5600);
  assert.deepEqual(tl.tokens.map((p) => [p.t - T0, p.in, p.out]), [[720, 10, 5], [5500, 40, 12]]);
  assert.deepEqual(totals(tl, tl.t1), { model: 600 + 700, tool: 1000, wait: 3000 });
});

test("usage before the tool call (the engine's order) ends the turn; the next starts when the tool answers", () => {
  const tl = fold([
    ev(0, "node_started", { node_id: "n001" }),
    ev(300, "text_delta", { delta: "a" }),
    ev(600, "token_usage", { model: "m", turn: 1, input_tokens: 1, output_tokens: 1 }),
    ev(610, "tool_call_started", { call_id: "c1", tool: "search" }),
    ev(900, "tool_call_finished", { call_id: "c1", tool: "search" }),
    ev(1200, "token_usage", { model: "m", turn: 2, input_tokens: 1, output_tokens: 1 }),
  ]);
  assert.deepEqual(tl.rows.get("node:n001").bars.map((b) => [b.kind, b.start - T0, b.end - T0]),
    [["model", 0, 600], ["tool", 610, 900], ["model", 900, 1200]]);
});

test("a lane that fails ends its open bars as failed; a restart fails the turn under way", () => {
  const tl = fold([
    ev(0, "node_started", { node_id: "n001" }),
    ev(200, "text_delta", { delta: "a" }),
    ev(300, "agent_restarted", { attempt: 2, reason: "model error" }),
    ev(500, "text_delta", { delta: "b" }),
    ev(900, "tool_call_started", { call_id: "c1", tool: "fetch" }),
    ev(1000, "node_failed", { node_id: "n001", error: "x" }),
  ]);
  const bars = tl.rows.get("node:n001").bars.map((b) => [b.kind, b.start - T0, b.end - T0, b.error]);
  assert.deepEqual(bars, [["model", 0, 300, true], ["model", 300, 900, false], ["tool", 900, 1000, true]]);
});

test("rows nest sub-agents under their agent, in the order lanes opened", () => {
  const tl = fold([
    ev(0, "run_started", {}, "run", "", 0),
    ev(1, "node_started", { node_id: "n001" }, "node:n001"),
    ev(2, "node_started", { node_id: "n002" }, "node:n002"),
    ev(3, "subagent_started", { subagent_id: "1" }, "node:n001/sub:1", "node:n001", 2),
    ev(4, "subagent_started", { subagent_id: "2" }, "node:n001/sub:1/sub:2", "node:n001/sub:1", 3),
  ]);
  assert.deepEqual(rowsInOrder(tl).map(({ row, level }) => `${level} ${row.id}`),
    ["0 run", "1 node:n001", "2 node:n001/sub:1", "3 node:n001/sub:1/sub:2", "1 node:n002"]);
});

test("cost adds up from token_usage.cost_usd, and is unknown once a turn has no price", () => {
  const tl = fold([
    ev(0, "node_started", { node_id: "n001" }),
    ev(10, "token_usage", { model: "m", turn: 1, input_tokens: 1, output_tokens: 1, cost_usd: 0.25 }),
    ev(20, "token_usage", { model: "m", turn: 2, input_tokens: 1, output_tokens: 1, cost_usd: 0.5 }),
  ]);
  assert.deepEqual(tl.tokens.map((p) => [p.cost, p.priced]), [[0.25, true], [0.75, true]]);
  track(tl, ev(30, "token_usage", { model: "unpriced", turn: 3, input_tokens: 1, output_tokens: 1 }));
  assert.equal(tl.tokens[2].priced, false);
});

test("a looping agent's bars stay bounded", () => {
  const events = [ev(0, "node_started", { node_id: "n001" })];
  for (let i = 1; i <= 1000; i++) events.push(ev(i * 10, "token_usage", { model: "m", turn: i, input_tokens: 1, output_tokens: 1 }));
  const tl = fold(events);
  assert.equal(tl.rows.get("node:n001").bars.length, 400);
  assert.equal(tl.tokens.length, 1000);
});
