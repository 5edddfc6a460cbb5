// Human in the loop through the client's own resume mechanism: every AG-UI
// run ends with RUN_FINISHED{outcome:interrupt}; the script answers
// agent.pendingInterrupts with buildResumeArray (approve, approve with
// edited arguments, reject, an info answer) and runs again with resume, until
// the council is done.
import { buildResumeArray } from "@ag-ui/client";
import { main, newAgent, run, check, count, conclaveRunId, id } from "./lib.mjs";

async function hitlLoop(agent, first, answer) {
  let r = first;
  const conclaveRun = conclaveRunId(r.first);
  const reasons = {};
  let rounds = 0;
  let suspendedRunning = 0;
  while (agent.pendingInterrupts.length > 0) {
    check(r.last.type === "RUN_FINISHED" && r.last.outcome?.type === "interrupt", `pending interrupts after ${r.last.type}`);
    for (const e of r.events) {
      if (e.type === "SUBAGENT_FINISHED" && e.outcome?.type === "suspended" && !e.outcome.interruptIds) suspendedRunning++;
    }
    rounds++;
    check(rounds < 60, "too many interrupt rounds");
    // The client refuses new input that ignores the pending interrupts.
    let threw = false;
    try {
      await agent.runAgent({ runId: id("run") });
    } catch (err) {
      threw = /pending interrupt/.test(String(err?.message));
    }
    check(threw, "runAgent without resume did not throw");
    const responses = {};
    for (const i of agent.pendingInterrupts) {
      reasons[i.reason] = (reasons[i.reason] ?? 0) + 1;
      check(typeof i.message === "string" && i.expiresAt, `interrupt without message/expiresAt: ${JSON.stringify(i)}`);
      if (i.reason === "tool_call") check(i.toolCallId, "tool_call interrupt without toolCallId");
      if (i.reason !== "input_required") {
        // Every approval carries its evidence package (docs/governance.md).
        const ev = i.metadata?.evidence;
        check(ev && ev.id && ev.title && Array.isArray(ev.recommended_actions) && ev.recommended_actions.length >= 1 &&
          ev.recommended_actions.length <= 3 && ev.risk_level && Array.isArray(ev.reasoning_trace),
          `approval interrupt without an evidence package: ${JSON.stringify(i).slice(0, 300)}`);
      }
      responses[i.id] = answer(i, rounds);
    }
    const resume = buildResumeArray(agent.pendingInterrupts, responses);
    r = await run(agent, { resume });
    check(r.first.type === "RUN_STARTED", `resume answered ${r.first.type}: ${JSON.stringify(r.last)}`);
    check(conclaveRunId(r.first) === conclaveRun, "the resume continued another Conclave run");
  }
  check(r.last.type === "RUN_FINISHED" && r.last.outcome?.type === "success", `final ${JSON.stringify(r.last).slice(0, 300)}`);
  return { reasons, rounds, suspendedRunning, last: r };
}

let n = 0;
function mixed(i) {
  n++;
  if (i.reason === "input_required") return { status: "resolved", payload: { response: "forty-two" } };
  if (i.reason === "tool_call") {
    switch (n % 4) {
      case 1:
        return { status: "resolved", payload: { approved: true, editedArgs: { query: "edited by a human" } } };
      case 2:
        return { status: "resolved", payload: { approved: false, feedback: "not this one" } };
      case 3:
        return { status: "cancelled" };
    }
  }
  return { status: "resolved", payload: { approved: true } };
}

await main("hitl: tools, info requests, sub-agents", async () => {
  const agent = newAgent("Plan a trip, asking me when unsure.");
  const first = await run(agent, {
    forwardedProps: {
      hitl: "tools",
      scenario: { nodes: 4, waves: 2, tokens: 6, approvals: 4, info_requests: 2, subagents_per_node: 1, seed: 9 },
    },
  });
  const { reasons, rounds } = await hitlLoop(agent, first, mixed);
  for (const r of ["conclave:plan_approval", "confirmation", "tool_call", "input_required"]) {
    check(reasons[r] > 0, `no ${r} interrupt (saw ${JSON.stringify(reasons)})`);
  }
  check(rounds >= 3, `${rounds} rounds`);
  check(agent.state?.status === "finished", `state.status ${agent.state?.status}`);
  check(agent.messages.some((m) => m.role === "tool" && m.content === "forty-two"), "the info answer is not a tool result");
});

await main("hitl: siblings keep running while one node is parked", async () => {
  // n001 parks on a tool approval halfway; n002 and n003 stream for longer
  // than the server's hold (2 s): the AG-UI run ends with the interrupt and
  // reports them suspended; their output continues after the resume.
  const agent = newAgent("One careful node, two busy ones.");
  const first = await run(agent, {
    forwardedProps: {
      hitl: "tools",
      concurrency: 3,
      scenario: { nodes: 3, waves: 1, tokens: 160, token_delay_ms: 40, approvals: 1, seed: 4 },
    },
  });
  const { suspendedRunning, last } = await hitlLoop(agent, first, () => ({ status: "resolved", payload: { approved: true } }));
  check(suspendedRunning > 0, "no running lane was reported suspended");
  check(count(last.events, "TEXT_MESSAGE_CONTENT") > 0, "no output after the resume");
  const nodes = Object.values(agent.state?.nodes ?? {});
  check(nodes.length === 3 && nodes.every((x) => x.status === "completed"), "not every node completed");
});

await main("hitl: choice questions answered from their response schema", async () => {
  // Two ask_choice calls (multiple choice): each interrupt is input_required
  // with a responseSchema whose choices items list the option ids; the
  // script answers with the last option offered, read from that schema.
  const agent = newAgent("Pick an approach with me.");
  const first = await run(agent, {
    forwardedProps: { scenario: { nodes: 2, waves: 1, tokens: 4, choices: 2, multiple_choice: true, seed: 3 } },
  });
  let asked = 0;
  await hitlLoop(agent, first, (i) => {
    check(i.reason === "input_required" && i.toolCallId, `choice interrupt ${JSON.stringify(i).slice(0, 300)}`);
    const opts = i.responseSchema?.properties?.choices?.items?.oneOf ?? [];
    check(opts.length === 3 && i.metadata?.conclave?.kind === "choice", `choice schema ${JSON.stringify(i.responseSchema)}`);
    asked++;
    return { status: "resolved", payload: { choices: [opts[2].const, opts[0].const] } };
  });
  check(asked === 2, `${asked} choices asked, want 2`);
  check(agent.messages.filter((m) => m.role === "tool" && /"choices":\["skip","broad"\]/.test(m.content)).length === 2,
    "the choices are not the tool results");
});
