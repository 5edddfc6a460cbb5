// Scenario 2: a run with hitl "tools" asks for plan, node and tool
// approvals and a question. Each TASK_STATE_INPUT_REQUIRED ends the stream;
// the client's own resume mechanism (another sendMessageStream with the
// same taskId and contextId) answers and streams on, until COMPLETED.
import { check, collect, finalStatus, main, openInterrupts, stateName, TaskState, userMessage } from './lib.mjs';

main('hitl', async (client) => {
  let events = await collect(client.sendMessageStream({
    message: userMessage({
      text: 'Plan a trip',
      metadata: { hitl: 'tools', scenario: { nodes: 4, waves: 1, tokens: 3, approvals: 3, info_requests: 1, seed: 3 } },
    }),
  }));
  const task = events[0].payload.value;
  const asked = new Map(); // interrupt id → reason
  let rounds = 0;
  let byText = 0;
  let rejected = 0;
  let mostOpen = 0;
  for (;;) {
    const status = finalStatus(events);
    if (status.state !== TaskState.TASK_STATE_INPUT_REQUIRED) break;
    check(++rounds <= 60, 'too many rounds');
    const open = openInterrupts(status);
    check(open.length > 0, 'INPUT_REQUIRED without interrupts');
    mostOpen = Math.max(mostOpen, open.length);
    for (const d of open) {
      if (d.reason === 'info_request') continue;
      // Every approval carries its evidence package (docs/governance.md).
      const ev = d.evidence;
      check(ev && ev.id && ev.title && Array.isArray(ev.recommended_actions) && ev.recommended_actions.length >= 1 &&
        ev.recommended_actions.length <= 3 && ev.risk_level && Array.isArray(ev.reasoning_trace),
        `approval without an evidence package: ${JSON.stringify(d).slice(0, 300)}`);
    }
    let parts;
    if (open.length === 1 && rounds % 2 === 1) {
      // One question: answer in plain text, as a human would (every other
      // round; the others use data parts, as an agent would).
      const d = open[0];
      check(!asked.has(d.interruptId), `interrupt ${d.interruptId} asked twice`);
      asked.set(d.interruptId, d.reason);
      let text = 'approve';
      if (d.reason === 'info_request') text = 'Go by train.';
      else if (d.reason === 'tool_approval' && rejected++ === 0) text = 'reject: not this one';
      parts = [{ text }];
      byText++;
    } else {
      parts = open.map((d) => {
        check(!asked.has(d.interruptId), `interrupt ${d.interruptId} asked twice`);
        asked.set(d.interruptId, d.reason);
        if (d.reason === 'info_request') return { data: { interruptId: d.interruptId, response: 'Go by train.' } };
        if (d.reason === 'tool_approval' && rejected++ === 0) {
          return { data: { interruptId: d.interruptId, decision: 'reject', feedback: 'not this one' } };
        }
        return { data: { interruptId: d.interruptId, decision: 'approve' } };
      });
    }
    events = await collect(client.sendMessageStream({
      message: userMessage({ parts, taskId: task.id, contextId: task.contextId }),
    }));
    check(events[0].payload.$case === 'task' && events[0].payload.value.id === task.id, 'the answer stream is not about the task');
  }
  const status = finalStatus(events);
  check(status.state === TaskState.TASK_STATE_COMPLETED, 'final state', stateName(status.state));
  const kinds = {};
  for (const r of asked.values()) kinds[r] = (kinds[r] ?? 0) + 1;
  check(kinds.plan_approval === 1 && kinds.node_approval === 4 && kinds.tool_approval === 3 && kinds.info_request === 1,
    'interrupts asked', kinds);
  check(rejected === 3, `${rejected} tool approvals seen, want 3 (the first one rejected)`);
  check(byText >= 1, 'no interrupt was answered by text');
  return `${rounds} rounds, ${asked.size} interrupts (${byText} answered by text, at most ${mostOpen} open at once): ${JSON.stringify(kinds)}`;
});
