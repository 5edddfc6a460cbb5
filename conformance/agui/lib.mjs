// Shared helpers of the AG-UI conformance scripts. Each script drives a real
// `conclave serve` through the official client, @ag-ui/client's HttpAgent,
// and fails (exit code 1) on any client exception, schema error, ordering
// violation (the client's verifyEvents), console warning or error, or a
// stream that does not end with RUN_FINISHED / RUN_ERROR.
//
// Usage: node <script>.mjs <base URL>   (or CONCLAVE_URL=<base URL>)

import { HttpAgent } from "@ag-ui/client";

export const baseURL = (process.argv[2] || process.env.CONCLAVE_URL || "").replace(/\/$/, "");
if (!baseURL) {
  console.log("usage: node <script>.mjs http://127.0.0.1:<port>");
  process.exit(2);
}
export const aguiURL = `${baseURL}/api/v1/agui`;

// Any warning or error the client prints fails the script: unknown fields
// stripped, unknown events dropped, failed state patches and protocol
// version complaints are all console.warn in @ag-ui/client 1.0.0.
const complaints = [];
for (const level of ["warn", "error"]) {
  const orig = console[level].bind(console);
  console[level] = (...args) => {
    complaints.push(`console.${level}: ${args.map(String).join(" ")}`);
    orig(...args);
  };
}

// A hard watchdog: a hung stream fails instead of blocking CI.
const watchdogMs = Number(process.env.AGUI_WATCHDOG_MS || 120000);
const watchdog = setTimeout(() => {
  process.stdout.write(`FAIL: watchdog: still running after ${watchdogMs} ms\n`);
  process.exit(1);
}, watchdogMs);
watchdog.unref();

export class CheckError extends Error {}

export function check(cond, msg) {
  if (!cond) throw new CheckError(msg);
}

let seq = 0;
export function id(prefix) {
  seq += 1;
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${seq}`;
}

export function newAgent(question, threadId = id("thread")) {
  return new HttpAgent({
    url: aguiURL,
    threadId,
    initialMessages: [{ id: id("user"), role: "user", content: question }],
  });
}

// run is one agent.runAgent with our own stream checks: the first event is
// RUN_STARTED echoing threadId and runId, the last is RUN_FINISHED (echoing
// them too) or RUN_ERROR. It returns every event the client delivered.
export async function run(agent, params, hooks = {}) {
  const events = [];
  const runId = params.runId ?? id("run");
  const result = await agent.runAgent(
    { ...params, runId },
    {
      onEvent: ({ event }) => {
        events.push(event);
        hooks.onEvent?.(event, events);
      },
    },
  );
  check(events.length > 0, `run ${runId}: no events`);
  const first = events[0];
  const last = events[events.length - 1];
  if (first.type === "RUN_STARTED") {
    check(first.threadId === agent.threadId, `RUN_STARTED.threadId ${first.threadId}, want ${agent.threadId}`);
    check(first.runId === runId, `RUN_STARTED.runId ${first.runId}, want ${runId}`);
  } else {
    check(first.type === "RUN_ERROR", `first event ${first.type}`);
  }
  check(last.type === "RUN_FINISHED" || last.type === "RUN_ERROR", `stream ended after ${last.type}, not RUN_FINISHED/RUN_ERROR`);
  if (last.type === "RUN_FINISHED") {
    check(last.threadId === agent.threadId && last.runId === runId, `RUN_FINISHED echoes ${last.threadId}/${last.runId}`);
  }
  return { runId, events, first, last, result };
}

export function count(events, type) {
  return events.filter((e) => e.type === type).length;
}

export function conclaveRunId(runStarted) {
  return runStarted?.metadata?.conclave?.runId;
}

// main runs a scenario and reports PASS/FAIL; warnings fail it too.
export async function main(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    if (complaints.length > 0) {
      throw new CheckError(`${complaints.length} console warning(s)/error(s):\n  ${complaints.join("\n  ")}`);
    }
    process.stdout.write(`PASS ${name} (${Date.now() - t0} ms)\n`);
  } catch (err) {
    process.stdout.write(`FAIL ${name}: ${err instanceof CheckError ? err.message : err?.stack || err}\n`);
    process.exitCode = 1;
  }
}
