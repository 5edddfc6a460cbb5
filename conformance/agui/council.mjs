// A 20-node council (reasoning, tool calls, one sub-agent per node) as one
// AG-UI run: a lane per node and sub-agent, a step per wave, the task graph
// in the agent state.
import { main, newAgent, run, check, count } from "./lib.mjs";

await main("council: 20 nodes", async () => {
  const agent = newAgent("Why is the sky blue?");
  const { events, last } = await run(agent, {
    forwardedProps: {
      scenario: { nodes: 20, waves: 4, tokens: 8, reasoning_tokens: 2, tools_per_node: 1, subagents_per_node: 1, seed: 11 },
    },
  });
  check(last.type === "RUN_FINISHED" && last.outcome?.type === "success", `last ${JSON.stringify(last).slice(0, 300)}`);
  check(count(events, "SUBAGENT_STARTED") === 41, `${count(events, "SUBAGENT_STARTED")} SUBAGENT_STARTED, want 41 (20 nodes, 20 sub-agents, the director)`);
  check(count(events, "SUBAGENT_FINISHED") === 41, `${count(events, "SUBAGENT_FINISHED")} SUBAGENT_FINISHED`);
  check(count(events, "STEP_STARTED") === 4 && count(events, "STEP_FINISHED") === 4, "one step per wave");
  check(count(events, "TOOL_CALL_RESULT") === 40, `${count(events, "TOOL_CALL_RESULT")} TOOL_CALL_RESULT, want 40`);
  for (const t of ["REASONING_START", "TEXT_MESSAGE_START", "STATE_SNAPSHOT", "STATE_DELTA", "CUSTOM"]) {
    check(count(events, t) > 0, `no ${t}`);
  }
  // The client's own state: the task graph, every node completed.
  const nodes = Object.entries(agent.state?.nodes ?? {});
  check(agent.state?.status === "finished", `state.status ${agent.state?.status}`);
  check(nodes.length === 20 && nodes.every(([, n]) => n.status === "completed"), `state nodes ${JSON.stringify(agent.state?.nodes).slice(0, 200)}`);
  // The client's messages: the answer, node texts attributed to their lanes, tool results.
  const tagged = agent.messages.filter((m) => m.subagentRunId);
  check(tagged.length > 0, "no message attributed to a sub-agent");
  check(agent.messages.some((m) => m.role === "assistant" && !m.subagentRunId && m.content?.startsWith("Answer to:")), "no top-level answer message");
  check(agent.messages.some((m) => m.role === "tool"), "no tool message");
  check(agent.pendingInterrupts.length === 0, "pending interrupts after a successful run");
});
