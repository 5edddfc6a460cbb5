// Council features as one AG-UI run: a team node (nested waves, its own
// synthesis), a debate with a judge, a spawned sub-team, a steering note,
// the advisor gate, async tasks and tool progress. Their lanes are SUBAGENT lanes, the
// rest CUSTOM events; the client must accept every event.
import { main, newAgent, run, check, count } from "./lib.mjs";

await main("features: teams, debate, spawn, steering, advisor, async", async () => {
  const agent = newAgent("Should we build it?");
  const { events, last } = await run(agent, {
    forwardedProps: {
      scenario: {
        nodes: 5, waves: 2, tokens: 6, tools_per_node: 1, tool_progress_steps: 2, tool_step_ms: 300, seed: 3, teams: 1, team_size: 3,
        debate: { agents: 3, rounds: 3, judge: true, min_rounds: 2, consensus_round: 2 },
        spawn: ["n003"], steering: [{ at_wave: 0, note: "add a node on costs" }],
        advisor: { redirects: 1 }, delegations: { async: 2 },
      },
      advisor: {},
    },
  });
  check(last.type === "RUN_FINISHED" && last.outcome?.type === "success", `last ${JSON.stringify(last).slice(0, 300)}`);
  // Every lane ends: finished, or an error for the async task cancelled by cancel_async_task.
  const started = count(events, "SUBAGENT_STARTED"), finished = count(events, "SUBAGENT_FINISHED"), errors = events.filter((e) => e.type === "SUBAGENT_ERROR");
  check(started === finished + errors.length, `${started} SUBAGENT_STARTED, ${finished} finished, ${errors.length} errors`);
  check(errors.every((e) => e.code === "cancelled"), `unexpected lane errors ${JSON.stringify(errors).slice(0, 300)}`);
  const customs = new Set(events.filter((e) => e.type === "CUSTOM").map((e) => e.name));
  for (const name of ["conclave.team_started", "conclave.team_synthesized", "conclave.debate_stance_map", "conclave.dissent",
    "conclave.subteam_spawned", "conclave.steering_applied", "conclave.advisor", "conclave.run_cost_estimate", "conclave.citation_added",
    "conclave.request_received", "conclave.turn_started", "conclave.tool_call_progress"]) {
    check(customs.has(name), `no CUSTOM ${name} (have ${[...customs].join(", ")})`);
  }
  // Each tool progress report names a tool call the client saw start, before its result.
  const startedCalls = new Set(), resulted = new Set();
  let reports = 0;
  for (const e of events) {
    if (e.type === "TOOL_CALL_START") startedCalls.add(e.toolCallId);
    if (e.type === "TOOL_CALL_RESULT") resulted.add(e.toolCallId);
    if (e.type === "CUSTOM" && e.name === "conclave.tool_call_progress") {
      reports++;
      const v = e.value;
      check(startedCalls.has(v.toolCallId) && !resulted.has(v.toolCallId), `progress of call ${v.toolCallId} outside its call`);
      check(v.total === 2 && v.progress >= 1 && v.progress <= 2 && v.message.startsWith("reading source"), `progress ${JSON.stringify(v)}`);
    }
  }
  check(reports >= 2, `${reports} tool progress reports`);
  check(count(events, "STEP_STARTED") === count(events, "STEP_FINISHED"), "unbalanced steps");
  check(agent.state?.status === "finished", `state.status ${agent.state?.status}`);
  return `${events.length} events`;
});
