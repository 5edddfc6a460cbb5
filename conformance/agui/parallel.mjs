// Parallel nodes stream at once (token delay, concurrency 4): their text
// messages interleave, each with its own messageId and subagentRunId.
import { main, newAgent, run, check } from "./lib.mjs";

await main("parallel: interleaved nodes", async () => {
  const agent = newAgent("Compare four approaches.");
  const { events, last } = await run(agent, {
    forwardedProps: {
      concurrency: 4,
      scenario: { nodes: 8, waves: 2, fan_in: 1, tokens: 16, reasoning_tokens: 2, token_delay_ms: 3, seed: 5 },
    },
  });
  check(last.type === "RUN_FINISHED" && last.outcome?.type === "success", `last ${last.type}`);
  const open = new Map(); // messageId -> subagentRunId
  let maxOpen = 0;
  let switches = 0;
  let prev;
  for (const e of events) {
    if (e.type === "TEXT_MESSAGE_START") {
      open.set(e.messageId, e.subagentRunId);
      maxOpen = Math.max(maxOpen, open.size);
    } else if (e.type === "TEXT_MESSAGE_END") {
      open.delete(e.messageId);
    } else if (e.type === "TEXT_MESSAGE_CONTENT") {
      check(e.subagentRunId === undefined || open.get(e.messageId) === e.subagentRunId, "content attributed to another lane");
      if (prev !== undefined && prev !== e.messageId) switches++;
      prev = e.messageId;
    }
  }
  check(maxOpen >= 2, `at most ${maxOpen} text message(s) open at once: no interleaving`);
  check(switches >= 4, `only ${switches} switches between messages`);
  const lanes = new Set(events.filter((e) => e.type === "TEXT_MESSAGE_START" && e.subagentRunId).map((e) => e.subagentRunId));
  check(lanes.size >= 9, `${lanes.size} lanes spoke, want 8 nodes + the director`);
});
