// Shared helpers of the dashboard's end-to-end tests: a real `conclave
// serve` process (started, killed, restarted on the same port and data),
// Debian's Chromium through playwright-core, and small assertions.
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

// Server is one `conclave serve` on a fixed port and data directory, so
// that a restart after kill -9 serves the same origin and journal.
export class Server {
  constructor(bin, { env = {}, args = [] } = {}) {
    this.bin = bin;
    this.env = env;
    this.args = args;
    this.data = mkdtempSync(join(tmpdir(), "conclave-web-"));
    this.log = "";
  }

  async start() {
    this.port = this.port || (await freePort());
    this.url = `http://127.0.0.1:${this.port}`;
    const args = ["serve", "--addr", `127.0.0.1:${this.port}`, "--data", this.data, "--log-level", "warn", ...this.args];
    this.proc = spawn(this.bin, args, { env: { ...process.env, CONCLAVE_TOKENS: "", ...this.env }, stdio: ["ignore", "ignore", "pipe"] });
    this.proc.stderr.on("data", (b) => (this.log += b));
    this.exited = new Promise((r) => this.proc.on("exit", r));
    await waitFor(async () => {
      if (this.proc.exitCode !== null) throw new Error(`conclave serve exited ${this.proc.exitCode}:\n${this.log}`);
      try {
        return (await fetch(`${this.url}/healthz`)).ok;
      } catch {
        return false;
      }
    }, 20000, "conclave serve healthy");
  }

  async kill9() {
    this.proc.kill("SIGKILL");
    await this.exited;
  }

  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return;
    this.proc.kill("SIGTERM");
    const t = setTimeout(() => this.proc.kill("SIGKILL"), 10000);
    await this.exited;
    clearTimeout(t);
  }

  async api(method, path, body, token) {
    const headers = {};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (token) headers.Authorization = `Bearer ${token}`;
    const r = await fetch(this.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  // events reads a run's session from seq 1 until the run's end.
  async events(runId, token) {
    const run = await this.api("GET", `/api/v1/runs/${runId}`, undefined, token);
    const q = new URLSearchParams({ session_id: run.session_id, until: "run_end", run_id: runId });
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    const r = await fetch(`${this.url}/api/v1/events/stream?${q}`, { headers });
    const text = await r.text();
    return text.split("\n").filter((l) => l.startsWith("data: {\"id\"")).map((l) => JSON.parse(l.slice(6)));
  }
}

// finalStates folds a run's events into each node's last state: the nodes
// of the run's plan as it ended (plan_proposed, replaced by an edited
// plan_approved, steering_applied and subteam_spawned) and of its teams'.
export function finalStates(events, runId) {
  const closing = { node_started: "running", node_completed: "completed", node_failed: "failed", node_cancelled: "cancelled", node_skipped: "skipped" };
  const graphs = new Map();
  const states = new Map();
  for (const e of events) {
    if (e.run_id !== runId) continue;
    const p = e.payload;
    if (closing[e.type]) states.set(p.node_id, closing[e.type]);
    let key = null;
    if (["plan_proposed", "plan_approved", "steering_applied", "run_rewound"].includes(e.type) && p.plan) key = "";
    if (e.type === "subteam_spawned") key = e.lane.stream_id === "run" ? "" : e.lane.stream_id.slice(5);
    if (e.type === "team_started") key = p.team_id;
    if (key !== null) graphs.set(key, p.plan.nodes.map((n) => n.id));
  }
  const out = new Map();
  const add = (key) => {
    for (const id of graphs.get(key) || []) {
      out.set(id, states.get(id) || "pending");
      if (graphs.has(id)) add(id);
    }
  };
  add("");
  return out;
}

export async function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--enable-precise-memory-info"],
  });
}

// newPage opens a page that records long tasks from its first script on.
export async function newPage(browser) {
  const context = await browser.newContext({ viewport: { width: 1440, height: 960 } });
  await context.addInitScript(() => {
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longTasks.push({ start: e.startTime, duration: e.duration });
    }).observe({ type: "longtask", buffered: true });
  });
  const page = await context.newPage();
  page.errors = [];
  page.on("pageerror", (e) => page.errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error") page.errors.push(m.text());
  });
  return page;
}

export async function waitFor(f, ms, what) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await f();
      if (last) return last;
    } catch (e) {
      if (String(e.message).includes("exited")) throw e;
      last = e;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${last})`);
}

export function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

// pageNodeStates reads every DAG node's data-node-state.
export function pageNodeStates(page) {
  return page.$$eval("[data-node-id]", (els) => Object.fromEntries(els.map((e) => [e.dataset.nodeId, e.dataset.nodeState])));
}

export const runStatus = (page) => page.getAttribute("[data-run-status]", "data-run-status");

export async function waitStatus(page, statuses, ms = 60000) {
  const want = [].concat(statuses);
  return waitFor(async () => {
    const s = await runStatus(page);
    return want.includes(s) ? s : false;
  }, ms, `run status ${want.join("|")}`);
}

export function readJSON(path) {
  return JSON.parse(readFileSync(path, "utf8"));
}
