// An abort through the API (POST /api/v1/runs/{id}/abort) while the AG-UI
// run streams: the client sees RUN_ERROR{code:"aborted"} as the last event.
import { main, newAgent, run, check, conclaveRunId, baseURL } from "./lib.mjs";

await main("abort: RUN_ERROR aborted", async () => {
  const agent = newAgent("A long question.");
  let aborted;
  const { events, last } = await run(
    agent,
    { forwardedProps: { scenario: { nodes: 4, waves: 2, tokens: 400, token_delay_ms: 5, seed: 3 } } },
    {
      onEvent: (e, all) => {
        if (e.type === "TEXT_MESSAGE_CONTENT" && e.subagentRunId?.includes("/node:") && !aborted) {
          const runID = conclaveRunId(all[0]);
          aborted = fetch(`${baseURL}/api/v1/runs/${encodeURIComponent(runID)}/abort`, {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ reason: "aborted by the conformance script" }),
          }).then((r) => r.status);
        }
      },
    },
  );
  check(aborted !== undefined, "never saw node text to abort on");
  const status = await aborted;
  check(status === 202, `abort answered ${status}`);
  check(last.type === "RUN_ERROR" && last.code === "aborted", `last ${JSON.stringify(last)}`);
  check(last.message === "aborted by the conformance script", `message ${last.message}`);
  check(events.some((e) => e.type === "SUBAGENT_ERROR" && e.code === "cancelled"), "no cancelled node lane");
  check(agent.state?.status === "aborted", `state.status ${agent.state?.status}`);
});
