// Files in: a user message with an image and a document part (AG-UI 1.0
// media parts, bytes inline in a data source), as HttpAgent sends it. The
// run's files are what the parts carried: run_started records them, bytes
// and all (read back from the session's SSE stream).
import { main, run, check, conclaveRunId, baseURL, id } from "./lib.mjs";
import { HttpAgent } from "@ag-ui/client";

const png = Buffer.from("89504e470d0a1a0a0000000d49484452", "hex");
const pdf = Buffer.from("%PDF-1.7\n");

await main("files: image and document parts", async () => {
  const agent = new HttpAgent({
    url: `${baseURL}/api/v1/agui`,
    threadId: id("thread"),
    initialMessages: [{ id: id("user"), role: "user", content: [
      { type: "text", text: "What do these show?" },
      { type: "image", source: { type: "data", value: png.toString("base64"), mimeType: "image/png" }, metadata: { filename: "chart.png" } },
      { type: "document", id: "paper", source: { type: "data", value: pdf.toString("base64"), mimeType: "application/pdf" } },
    ] }],
  });
  const { events, last } = await run(agent, { forwardedProps: { scenario: { nodes: 2, waves: 1, tokens: 4 } } });
  check(last.type === "RUN_FINISHED" && last.outcome?.type === "success", `last ${JSON.stringify(last).slice(0, 300)}`);
  const runId = conclaveRunId(events[0]);
  const q = new URLSearchParams({ session_id: agent.threadId, until: "run_end", run_id: runId });
  const body = await (await fetch(`${baseURL}/api/v1/events/stream?${q}`)).text();
  const frame = body.split("\n\n").find((f) => f.includes("event: run_started"));
  check(frame, "no run_started on the session's stream");
  const started = JSON.parse(frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n")).payload;
  check(started.question === "What do these show?", `question ${started.question}`);
  const files = started.files || [];
  check(files.length === 2, `${files.length} files in run_started, want 2`);
  check(files[0].name === "chart.png" && files[0].media_type === "image/png" && files[0].data === png.toString("base64"), `image ${JSON.stringify(files[0]).slice(0, 200)}`);
  check(files[1].name === "paper" && files[1].media_type === "application/pdf" && files[1].data === pdf.toString("base64"), `document ${JSON.stringify(files[1]).slice(0, 200)}`);
  return `${events.length} events`;
});
