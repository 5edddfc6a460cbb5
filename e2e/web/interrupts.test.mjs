// Unit tests of the interrupt cards' wording (web/static/js/interrupts.js):
// run with `node --test` (run.sh does). outcome needs no DOM.
import { test } from "node:test";
import assert from "node:assert/strict";
import { outcome } from "../../web/static/js/interrupts.js";

const choice = (status) => ({ kind: "choice", status, options: [{ id: "broad", label: "Broad survey" }, { id: "deep", label: "Deep dive" }] });

test("a choice's outcome names the labels chosen, a decline, or that nothing was chosen", () => {
  assert.equal(outcome(choice("resolved"), { decision: "approve", choices: ["deep", "broad"] }), "chose Deep dive, Broad survey");
  assert.equal(outcome(choice("resolved"), { decision: "approve", choices: ["gone"] }), "chose gone");
  assert.equal(outcome(choice("resolved"), { decision: "reject", feedback: "none fits" }), "declined");
  assert.equal(outcome(choice("resolved"), { decision: "cancel" }), "cancelled");
  assert.equal(outcome(choice("expired"), { action: "reject" }), "expired (nothing chosen)");
});

test("other kinds keep their wording", () => {
  assert.equal(outcome({ kind: "tool_approval", status: "expired" }, { action: "approve" }), "expired (approve)");
  assert.equal(outcome({ kind: "info_request", status: "resolved" }, { decision: "approve", response: "42" }), "answered");
  assert.equal(outcome({ kind: "node_approval", status: "resolved" }, { decision: "reject" }), "reject");
});
