// End-to-end tests of the dashboard in headless Chromium against real
// `conclave serve` processes. Usage (run.sh does this):
//
//   node dashboard.mjs BIN OUT_DIR [scenario…]
//
// BIN is a built conclave binary, OUT_DIR receives screenshots and
// bench.json; with scenario names only those run. Each scenario drives the
// page only (clicks and typing); the API is read to check the page.
import { mkdirSync, writeFileSync, copyFileSync, mkdtempSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Server, launch, newPage, waitFor, assert, pageNodeStates, runStatus, waitStatus, finalStates } from "./lib.mjs";

const [bin, out, ...only] = process.argv.slice(2);
if (!bin || !out) {
  console.error("usage: node dashboard.mjs BIN OUT_DIR [scenario…]");
  process.exit(2);
}
mkdirSync(out, { recursive: true });

const shot = (page, name, fullPage = true) => page.screenshot({ path: join(out, `${name}.png`), fullPage });

// startFromPage fills the start form and returns the new run's id.
async function startFromPage(page, { question, hitl = "none", fields = {}, debate = false, extra = null, calls = [], timeoutAction = "", advisor = false }) {
  await page.waitForSelector('[data-action="start"]');
  if (calls.length) await page.waitForSelector('[data-tools]:not([data-tools="loading"])');
  for (const name of calls) await page.check(`input[name="call"][value="${name}"]`);
  await page.fill('input[name="question"]', question);
  await page.selectOption('select[name="hitl"]', hitl);
  for (const [k, v] of Object.entries(fields)) await page.fill(`input[name="${k}"]`, String(v));
  if (debate) await page.check('input[name="debate"]');
  if (timeoutAction) await page.selectOption('select[name="approval_timeout_action"]', timeoutAction);
  if (advisor) await page.check('input[name="advisor"]');
  if (extra) await page.fill('textarea[name="scenario_json"]', JSON.stringify(extra));
  await page.click('[data-action="start"]');
  await page.waitForURL(/#\/runs\//, { timeout: 10000 });
  return decodeURIComponent(page.url().split("#/runs/")[1]);
}

// checkFinalStates compares every node the page shows with the journal.
async function checkFinalStates(page, server, runId, token) {
  const truth = finalStates(await server.events(runId, token), runId);
  const seen = await waitFor(async () => {
    const s = await pageNodeStates(page);
    for (const [id, st] of truth) if (s[id] !== st) return false;
    return s;
  }, 10000, "the page's node states to match the journal").catch(async (e) => {
    const s = await pageNodeStates(page);
    const diff = [...truth].filter(([id, st]) => s[id] !== st).slice(0, 10).map(([id, st]) => `${id}: page ${s[id]}, journal ${st}`);
    throw new Error(`${e.message}\n${diff.join("\n")}`);
  });
  assert(Object.keys(seen).length === truth.size, `page shows ${Object.keys(seen).length} nodes, the journal has ${truth.size}`);
  return truth;
}

async function checkNoGap(page) {
  const d = await page.$eval("[data-run-id]", (el) => ({ ...el.dataset }));
  assert(d.duplicates === "0", `duplicates applied: ${d.duplicates}`);
  assert(d.applied === d.lastSeq, `applied ${d.applied} events up to seq ${d.lastSeq}: a gap`);
  return d;
}

const scenarios = {
  // Start a run from the page (teams, a debate, tools, sub-agents) and watch it finish.
  async start({ browser, server }) {
    const page = await newPage(browser);
    await page.goto(server.url + "/");
    const runId = await startFromPage(page, {
      question: "should we build it",
      fields: { nodes: 7, waves: 3, tokens: 12, token_delay_ms: 15, tools_per_node: 1, subagents_per_node: 1, teams: 1, reasoning_tokens: 4 },
      debate: true,
    });
    await waitFor(async () => (await runStatus(page)) === "running", 20000, "running");
    await shot(page, "start-running");
    await waitStatus(page, "finished", 60000);
    const truth = await checkFinalStates(page, server, runId);
    assert([...truth.values()].every((s) => s === "completed"), "every node completed");
    assert([...truth.keys()].some((id) => id.includes("/")), "the team's nested nodes are shown");
    await checkNoGap(page);
    assert(await page.$(".stance-legend:not([hidden])"), "the debate's stance letters have their key");
    // Select the team node, to show its lanes nested, for the README's screenshot.
    await page.click('[data-node-id="n001"]');
    await page.waitForSelector('[data-lane-id="node:n001"]');
    await page.waitForSelector('[data-lane-id="node:n001/m1"]');
    await shot(page, "dashboard", false);
    assert(!page.errors.length, `page errors: ${page.errors.join("; ")}`);
    // The runs page lists it.
    await page.goto(server.url + "/#/");
    await page.waitForSelector(`tr[data-run-id="${runId}"][data-status="finished"]`, { timeout: 10000 });
    // A second run joins the first one's session: its page links the session's other run.
    const { session_id: sessionId } = await server.api("GET", `/api/v1/runs/${runId}`);
    await page.fill('input[name="session_id"]', sessionId);
    // The form lists the tools (GET /api/v1/tools); a ticked one is called by every worker.
    // Every run option is in the form: they reach run_started.
    const second = await startFromPage(page, { question: "a follow-up", calls: ["publish"], timeoutAction: "reject", advisor: true,
      fields: { nodes: 2, tokens: 3, token_delay_ms: 0, teams: "", reasoning_tokens: "", tools_per_node: "", subagents_per_node: "",
        concurrency: 2, seed: 7, max_replans: 1, max_delegation_rounds: 2, approval_timeout_seconds: 45, advisor_max_redirects: 1 } });
    await waitStatus(page, "finished", 30000);
    const started = (await server.events(second)).find((e) => e.run_id === second && e.type === "run_started").payload;
    const opts = { concurrency: started.concurrency, max_replans: started.max_replans, max_delegation_rounds: started.max_delegation_rounds,
      approval_timeout_seconds: started.approval_timeout_seconds, approval_timeout_action: started.approval_timeout_action, advisor: started.advisor };
    assert(JSON.stringify(opts) === JSON.stringify({ concurrency: 2, max_replans: 1, max_delegation_rounds: 2, approval_timeout_seconds: 45,
      approval_timeout_action: "reject", advisor: { max_redirects: 1 } }), `the form's run options reach the run: ${JSON.stringify(opts)}`);
    const published = (await server.events(second)).filter((e) => e.run_id === second && e.type === "tool_call_finished" && e.payload.tool === "publish" && !e.payload.is_error);
    assert(published.length === 2, `publish ticked in the form: ${published.length} publish calls finished, want one per worker (2)`);
    await page.waitForSelector(`.others a[href="#/runs/${runId}"]`, { timeout: 10000 });
    assert((await server.api("GET", `/api/v1/runs/${second}`)).session_id === sessionId, "the run joined the session");
    await checkFinalStates(page, server, second);
    await page.goto(server.url + "/#/");
    await page.waitForSelector(`tr[data-run-id="${second}"]`, { timeout: 10000 });
    await shot(page, "runs");
    await page.context().close();
  },

  // A long tool call's progress (tool_call_progress) is a bar on the call in its lane while it runs; its
  // result replaces it. The lane shows its model turn (turn_started), the head the run's request
  // (correlation_id), the sources when they were first seen (first_seen_at).
  async toolprogress({ browser, server }) {
    const page = await newPage(browser);
    await page.goto(server.url + "/");
    const runId = await startFromPage(page, {
      question: "crawl the sources", fields: { nodes: 2, waves: 1, tokens: 4, token_delay_ms: 0, tools_per_node: 1 },
      extra: { tool_progress_steps: 8, tool_step_ms: 500 },
    });
    await page.click('[data-node-id="n001"]');
    await page.waitForSelector('[data-lane-id="node:n001"] .tool-progress progress', { timeout: 20000 });
    const bar = await waitFor(async () => {
      const b = await page.$eval('[data-lane-id="node:n001"] .tool-progress', (el) => ({
        value: el.querySelector("progress").value, max: el.querySelector("progress").max, text: el.textContent }));
      return b.value >= 2 && b;
    }, 20000, "the progress bar to move");
    assert(bar.max === 8 && /\d\/8 reading source \d of 8/.test(bar.text), `progress bar ${JSON.stringify(bar)}`);
    await shot(page, "tool-progress", false);
    // turn_started: the lane says which model turn it is on; the head names the run's request (correlation_id).
    const usage = await page.$eval('[data-lane-id="node:n001"] header .usage', (el) => el.textContent);
    assert(/^turn 1 · scripted/.test(usage), `lane header ${JSON.stringify(usage)}`);
    const stats = await page.$eval(".stats", (el) => el.textContent);
    const started = (await server.events(runId)).find((e) => e.run_id === runId && e.type === "run_started");
    assert(started.correlation_id && stats.includes(`request ${started.correlation_id}`), `head ${JSON.stringify(stats)}, run_started ${JSON.stringify(started.correlation_id)}`);
    await waitStatus(page, "finished", 60000);
    await page.waitForSelector('[data-lane-id="node:n001"] li.tool:not(:has(.tool-progress))', { timeout: 10000 });
    // The sources carry when they were first seen (citations' first_seen_at).
    await page.waitForSelector(".citations li", { timeout: 10000 });
    const cite = await page.$eval(".citations li", (el) => el.textContent);
    assert(/first seen by n00\d at /.test(cite), `citation ${JSON.stringify(cite)}`);
    const reports = (await server.events(runId)).filter((e) => e.run_id === runId && e.type === "tool_call_progress");
    assert(reports.length >= 2 * 4, `${reports.length} tool_call_progress events for 2 calls of 8 steps 500ms apart`);
    await checkNoGap(page);
    assert(!page.errors.length, `page errors: ${page.errors.join("; ")}`);
    await page.context().close();
  },

  // The pages on a phone, a small laptop and a desktop: nothing overflows sideways, nothing is cut narrower than
  // its content, the graph stacks above "Waiting for you" on a phone, and "fit" keeps 200 nodes readable.
  async screens({ browser, server }) {
    const page = await newPage(browser);
    await page.goto(server.url + "/");
    const runId = await startFromPage(page, { question: "two hundred nodes on three screens", hitl: "plan", fields: { nodes: 200, waves: 8, tokens: 2, token_delay_ms: 0 } });
    await page.waitForSelector('article.interrupt[data-interrupt-kind="plan_approval"]', { timeout: 30000 });
    await page.waitForSelector('[data-node-id="n200"]', { timeout: 30000 });
    const problems = () => page.evaluate(() => {
      const out = [];
      const root = document.documentElement;
      if (root.scrollWidth > root.clientWidth + 1) out.push(`the page scrolls sideways: ${root.scrollWidth} > ${root.clientWidth}`);
      // Scroll boxes (the graph, the timeline, the runs table, text) may be wider inside; nothing else may be cut.
      for (const el of document.querySelectorAll("main button, main label, main h2, main .badge, main .stats, main .interrupt header, main select")) {
        const r = el.getBoundingClientRect();
        if (r.width === 0 || el.closest(".runs-scroll, .dag-scroll, .timeline-scroll")) continue;
        if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") out.push(`${el.tagName.toLowerCase()}.${el.className} "${el.textContent.slice(0, 30)}" is cut: ${el.scrollWidth} > ${el.clientWidth}`);
        if (r.right > root.clientWidth + 1) out.push(`${el.tagName.toLowerCase()} "${el.textContent.slice(0, 30)}" ends past the screen at ${Math.round(r.right)}`);
      }
      return out;
    });
    for (const width of [390, 800, 1400]) {
      await page.setViewportSize({ width, height: 900 });
      // The relayout, and the timeline's redraw (a ResizeObserver callback), are done within the next frame.
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      const bad = await problems();
      assert(!bad.length, `at ${width} px: ${bad.slice(0, 5).join("; ")}`);
      const [dag, waiting] = await page.evaluate(() => [".dag-card", ".grid > section:last-child"].map((q) => document.querySelector(q).getBoundingClientRect().toJSON()));
      if (width === 390) assert(waiting.top >= dag.bottom - 1 && dag.width > 340, `at 390 px the graph is full width (${dag.width}) with "Waiting for you" below it`);
      else assert(dag.right <= waiting.left + 1, `at ${width} px the graph and "Waiting for you" sit side by side`);
      await page.click(".dag-tools button:text-is('fit')");
      const node = await page.evaluate(() => document.querySelector('[data-node-id="n001"]').getBoundingClientRect().toJSON());
      assert(node.width >= 40, `at ${width} px "fit" left node n001 ${node.width.toFixed(0)} px wide: unreadable`);
      await shot(page, `screen-${width}`, false);
    }
    await page.goto(server.url + "/#/");
    for (const width of [390, 800]) {
      await page.setViewportSize({ width, height: 900 });
      await page.waitForSelector(`tr[data-run-id="${runId}"]`, { timeout: 10000 });
      const bad = await problems();
      assert(!bad.length, `runs page at ${width} px: ${bad.slice(0, 5).join("; ")}`);
      await shot(page, `runs-${width}`, false);
    }
    assert(!page.errors.length, `page errors: ${page.errors.join("; ")}`);
    await page.context().close();
  },

  // A council node run by a remote A2A agent (a second conclave serve, registered with --a2a-agent): its lane
  // shows the remote task's notes and text, and the node completes with the remote's answer.
  async remote({ browser, bin }) {
    const agent = new Server(bin);
    await agent.start();
    const council = new Server(bin, { args: ["--a2a-agent", `helper=${agent.url}/.well-known/agent-card.json`] });
    try {
      await council.start();
      const page = await newPage(browser);
      await page.goto(council.url + "/");
      const runId = await startFromPage(page, { question: "a council with a remote member", fields: { nodes: 2, waves: 2, tokens: 4, token_delay_ms: 10 },
        extra: { remote: { agent: "helper", nodes: ["n002"] } } });
      await waitStatus(page, "finished", 60000);
      await checkFinalStates(page, council, runId);
      await checkNoGap(page);
      await page.click('[data-node-id="n002"]');
      const lane = '[data-lane-id="node:n002"]';
      await page.waitForSelector(`${lane} li.note:has-text("remote agent helper")`, { timeout: 10000 });
      const notes = await page.$$eval(`${lane} li.note`, (els) => els.map((e) => e.textContent));
      assert(notes.some((n) => /remote agent helper, task .*: completed/.test(n)), `the lane's notes: ${notes.join(" | ")}`);
      const output = (await council.events(runId)).find((e) => e.type === "node_completed" && e.payload.node_id === "n002").payload.output;
      assert(output.length > 0, "node n002 has the remote's answer as its output");
      await shot(page, "remote", false);
      await (await page.$(lane)).screenshot({ path: join(out, "remote-lane.png") });
      assert(!page.errors.length, `page errors: ${page.errors.join("; ")}`);
      await page.context().close();
    } finally {
      await council.stop();
      await agent.stop();
    }
  },

  // Approve, reject and revise under hitl "tools", answer an info request and a choice question, and check validation.
  async hitl({ browser, server }) {
    const page = await newPage(browser);
    await page.goto(server.url + "/");
    const runId = await startFromPage(page, { question: "hitl from the page", hitl: "tools", fields: { nodes: 3, waves: 3, tokens: 3, token_delay_ms: 0, approvals: 2, info_requests: 1, choices: 1 } });
    const done = [];
    let tools = 0;
    while (!["finished", "failed"].includes(await runStatus(page))) {
      // The next question, or the run's end.
      await page.waitForSelector('article.interrupt, [data-run-status="finished"], [data-run-status="failed"]', { timeout: 30000 });
      const card = await page.$("article.interrupt");
      if (!card) break;
      const id = await card.getAttribute("data-interrupt-id");
      const kind = await card.getAttribute("data-interrupt-kind");
      const sel = `article.interrupt[data-interrupt-id="${id}"]`;
      if (kind === "tool_approval" && tools++ === 0) {
        await shot(page, "hitl-pending", false);
        // Revise: invalid JSON is refused on the page, then valid arguments are sent.
        await page.click(`${sel} details.revise summary`);
        await page.fill(`${sel} textarea[name="revision"]`, "{not json");
        await page.click(`${sel} [data-action="revise"]`);
        await page.waitForSelector(`${sel} .check.error`);
        assert(await page.$(sel), "an invalid revision left the interrupt pending");
        await page.fill(`${sel} textarea[name="revision"]`, JSON.stringify({ query: "edited by the dashboard" }));
        await page.click(`${sel} [data-action="revise"]`);
      } else if (kind === "tool_approval") {
        await page.fill(`${sel} input[name="feedback"]`, "not this one");
        await page.click(`${sel} [data-action="reject"]`);
      } else if (kind === "info_request") {
        await page.fill(`${sel} textarea[name="answer"]`, "forty-two");
        await page.click(`${sel} [data-action="answer"]`);
      } else if (kind === "choice") {
        // Radio buttons, one per option; choosing nothing sends nothing.
        const radios = await page.$$(`${sel} fieldset.options input[type="radio"]`);
        assert(radios.length === 3, `${radios.length} radio buttons for the three options`);
        await page.click(`${sel} [data-action="choose"]`);
        await page.waitForSelector(`${sel} .check.error`);
        assert(await page.$(sel), "an empty choice left the interrupt pending");
        await page.click(`${sel} label.option[data-option-id="deep"]`);
        await shot(page, "hitl-choice", false);
        await page.click(`${sel} [data-action="choose"]`);
      } else {
        await page.click(`${sel} [data-action="approve"]`);
      }
      await page.waitForSelector(`.history [data-interrupt-id="${id}"]`, { timeout: 15000 });
      done.push(kind);
    }
    await waitStatus(page, ["finished", "failed"], 30000);
    const events = await server.events(runId);
    const resolved = events.filter((e) => e.type === "interrupt_resolved").map((e) => e.payload);
    const byKind = (k, d) => resolved.filter((p) => p.kind === k && (!d || p.decision === d)).length;
    assert(byKind("plan_approval", "approve") === 1, "plan approved from the page");
    assert(byKind("node_approval", "approve") === 3, "3 nodes approved from the page");
    assert(resolved.some((p) => p.kind === "tool_approval" && p.decision === "revise" && JSON.stringify(p.edited_args).includes("edited by the dashboard")), "a tool call revised from the page");
    assert(resolved.some((p) => p.kind === "tool_approval" && p.decision === "reject" && p.feedback === "not this one"), "a tool call rejected from the page");
    assert(resolved.some((p) => p.kind === "info_request" && p.response === "forty-two"), "an info request answered from the page");
    assert(resolved.some((p) => p.kind === "choice" && JSON.stringify(p.choices) === '["deep"]'), "a choice answered from the page");
    assert(await page.$('.history li[data-interrupt-status="resolved"]:has-text("chose Deep dive")'), "the history names the option chosen");
    const edited = events.find((e) => e.type === "tool_call_finished" && e.payload.result.includes("edited by the dashboard"));
    assert(edited, "the tool ran with the edited arguments");
    await checkFinalStates(page, server, runId);
    await checkNoGap(page);
    await shot(page, "hitl");
    // The timeline draws every tool call and every wait on a human of the run, from its events.
    const want = { tool: events.filter((e) => e.type === "tool_call_started").length, wait: events.filter((e) => e.type === "interrupt_raised").length };
    const drawn = async () => page.evaluate(() => ({
      tool: document.querySelectorAll('svg.timeline rect.bar[data-kind="tool"]').length,
      wait: document.querySelectorAll('svg.timeline rect.bar[data-kind="wait"]').length,
      model: document.querySelectorAll('svg.timeline rect.bar[data-kind="model"]').length,
      open: document.querySelectorAll("svg.timeline rect.bar.open").length,
    }));
    await waitFor(async () => { const d = await drawn(); return d.tool === want.tool && d.wait === want.wait; }, 10000, `timeline bars ${JSON.stringify(want)}`);
    const bars = await drawn();
    assert(bars.model > 0 && bars.open === 0, `timeline: ${JSON.stringify(bars)}: model turns drawn, nothing left open after the run ended`);
    await (await page.$(".timeline-card")).screenshot({ path: join(out, "timeline.png") });
    // A plan revised from the page: approve it with a one-node plan.
    await page.goto(server.url + "/#/");
    const run2 = await startFromPage(page, { question: "revise the plan", hitl: "plan", fields: { nodes: 3, tokens: 3, token_delay_ms: 0 } });
    const sel = 'article.interrupt[data-interrupt-kind="plan_approval"]';
    await page.waitForSelector(sel, { timeout: 20000 });
    await page.click(`${sel} details.revise summary`);
    await page.fill(`${sel} textarea[name="revision"]`, JSON.stringify({ nodes: [] }));
    await page.click(`${sel} [data-action="revise"]`);
    await page.waitForSelector(`${sel} .check.error`);
    await page.fill(`${sel} textarea[name="revision"]`, JSON.stringify({ nodes: [{ id: "only", goal: "the one node left" }] }));
    await page.click(`${sel} [data-action="revise"]`);
    await waitStatus(page, "finished", 30000);
    const states = await checkFinalStates(page, server, run2);
    assert(states.size === 1 && states.get("only") === "completed", `the revised plan ran: ${[...states]}`);
    assert(!page.errors.length, `page errors: ${page.errors.join("; ")}`);
    console.log(`  interrupts answered from the page: ${done.join(", ")}, then a plan revised`);
    await page.context().close();
  },

  // Steering from the page and a spawned sub-team change the DAG as they apply.
  async steer({ browser, server }) {
    const page = await newPage(browser);
    await page.goto(server.url + "/");
    const runId = await startFromPage(page, { question: "steer me", fields: { nodes: 4, waves: 2, tokens: 20, token_delay_ms: 30 }, extra: { spawn: ["n001"] } });
    await waitFor(async () => (await pageNodeStates(page)).n001 === "running", 20000, "n001 running");
    const before = Object.keys(await pageNodeStates(page)).length;
    await page.fill('textarea[name="steer"]', "add a node on costs");
    await page.click('[data-action="steer"]');
    await page.waitForSelector('.steering [data-steering-status="applied"]', { timeout: 30000 });
    await waitStatus(page, "finished", 60000);
    const truth = await checkFinalStates(page, server, runId);
    const events = await server.events(runId);
    const spawned = events.find((e) => e.type === "subteam_spawned");
    assert(spawned && truth.has(spawned.payload.team_id), "the spawned sub-team is in the DAG");
    assert(await page.$(`.node.team[data-node-id="${spawned.payload.team_id}"]`), "drawn as a team");
    assert(events.some((e) => e.type === "steering_applied"), "the steering applied");
    assert(truth.size > before, `the DAG grew from ${before} to ${truth.size} nodes`);
    assert([...truth.values()].every((st) => st === "completed"), "every node completed");
    await checkNoGap(page);
    await shot(page, "steer");
    assert(!page.errors.length, `page errors: ${page.errors.join("; ")}`);
    await page.context().close();
  },

  // A policy-covered approval: the page shows its evidence and counts the
  // approvers' signatures (conclave approve) until the decision is made.
  async signatures({ browser, bin }) {
    assert(process.env.KEYGEN, "KEYGEN names the keygen binary (run.sh builds it)");
    const dir = mkdtempSync(join(tmpdir(), "conclave-gov-"));
    execFileSync(process.env.KEYGEN, [join(dir, "keys"), "alice", "bob"]);
    writeFileSync(join(dir, "governance.json"), JSON.stringify({ tenants: { local: {
      approvers: { alice: "keys/alice.pub", bob: "keys/bob.pub" }, policy: { high: { required: 2 } } } } }));
    const server = new Server(bin, { args: ["--governance", join(dir, "governance.json")] });
    await server.start();
    try {
      const page = await newPage(browser);
      await page.goto(server.url + "/");
      const runId = await startFromPage(page, { question: "publish it", fields: { nodes: 1, tokens: 3, token_delay_ms: 0, approvals: 1 }, extra: { risky_approvals: 1 } });
      const card = await page.waitForSelector("article.interrupt", { timeout: 20000 });
      const id = await card.getAttribute("data-interrupt-id");
      const sel = `article.interrupt[data-interrupt-id="${id}"]`;
      await page.waitForSelector(`${sel} .evidence .risk-high`);
      await page.waitForSelector(`${sel} .signatures[data-count="0"]`);
      // A plain approve is refused (a signature is needed); the question stays open.
      await page.click(`${sel} [data-action="approve"]`);
      await page.waitForSelector(`${sel} .status.error`);
      const approve = (name) => execFileSync(bin, ["approve", id, "--key", join(dir, "keys", `${name}.key`), "--server", server.url], { input: "y\n", stdio: "pipe" }); // it asks first: y
      approve("alice");
      await page.waitForSelector(`${sel} .signatures[data-count="1"]`, { timeout: 10000 });
      const text = await page.textContent(`${sel} .signatures`);
      assert(text.includes("1 of 2") && text.includes("alice"), `signature count shown: ${text}`);
      await shot(page, "signatures", false);
      approve("bob");
      await page.waitForSelector(`.history [data-interrupt-id="${id}"]`, { timeout: 10000 });
      await waitStatus(page, "finished", 30000);
      await checkFinalStates(page, server, runId);
      await checkNoGap(page);
      await page.context().close();
    } finally {
      await server.stop();
    }
  },

  // Files in and out: a run started with an attached file, whose workers
  // write a file each (the workspace tool): the page lists the attached
  // file and the written one (last size, writer), its content one click
  // away, and the terminal event's files_bytes.
  async files({ browser, bin }) {
    const server = new Server(bin, { args: ["--tool-workspace"] });
    await server.start();
    try {
      const brief = "# Brief\nWhy is the sky blue? Keep it short.\n";
      const page = await newPage(browser);
      await page.goto(server.url + "/");
      await page.setInputFiles('input[name="files"]', { name: "brief.md", mimeType: "text/markdown", buffer: Buffer.from(brief) });
      const runId = await startFromPage(page, { question: "why is the sky blue", calls: ["workspace.write"],
        fields: { nodes: 2, waves: 1, tokens: 6, token_delay_ms: 10, teams: "", reasoning_tokens: "", tools_per_node: "", subagents_per_node: "" } });
      await waitStatus(page, "finished", 30000);
      const events = await server.events(runId);
      const started = events.find((e) => e.run_id === runId && e.type === "run_started").payload;
      assert(started.files.length === 1 && Buffer.from(started.files[0].data, "base64").toString() === brief, "the picked file reaches run_started");
      const written = events.filter((e) => e.run_id === runId && e.type === "file");
      const fin = events.find((e) => e.run_id === runId && e.type === "run_finished").payload;
      assert(written.length === 2 && fin.files_bytes === written.reduce((a, e) => a + e.payload.size, 0),
        `files_bytes ${fin.files_bytes} is the file events' sizes (${written.length} events)`);
      await page.waitForSelector('.files [data-attached-file="brief.md"]', { timeout: 10000 });
      const last = written[written.length - 1].payload;
      const row = await page.waitForSelector(`.files [data-written-file="${last.path}"][data-size="${last.size}"]`, { timeout: 10000 });
      await page.waitForSelector(`.files [data-files-bytes="${fin.files_bytes}"]`);
      await (await row.$("summary")).click();
      const shown = await row.$eval("pre.file-content", (el) => el.textContent);
      assert(shown === last.content, `the written file's content is shown: ${JSON.stringify(shown.slice(0, 80))}`);
      await (await page.$(".files")).screenshot({ path: join(out, "files.png") });
      await shot(page, "files-page");
      await checkNoGap(page);
      assert(!page.errors.length, `page errors: ${page.errors.join("; ")}`);
      await page.context().close();
    } finally {
      await server.stop();
    }
  },

  // Steer and abort a running run from the page.
  async abort({ browser, server }) {
    const page = await newPage(browser);
    await page.goto(server.url + "/");
    const runId = await startFromPage(page, { question: "abort me", fields: { nodes: 9, waves: 3, tokens: 40, token_delay_ms: 60 } });
    await waitFor(async () => (await pageNodeStates(page)).n001 === "running", 20000, "n001 running");
    await page.fill('textarea[name="steer"]', "add a node on costs");
    await page.click('[data-action="steer"]');
    await page.waitForSelector('.steering [data-steering-status]', { timeout: 10000 });
    // Abort asks first: "Keep running" sends nothing, then abort for real.
    let aborts = 0;
    page.on("request", (r) => { if (r.method() === "POST" && r.url().endsWith("/abort")) aborts++; });
    await page.click('[data-action="abort"]');
    await page.waitForSelector('[data-action="abort-confirm"]', { state: "visible" });
    await shot(page, "abort-confirm", false);
    await page.click('[data-action="abort-cancel"]');
    assert(await page.$('.confirm[hidden]'), "the confirmation closed");
    assert(aborts === 0, `Keep running sent ${aborts} abort requests`);
    await page.click('[data-action="abort"]');
    await page.click('[data-action="abort-confirm"]');
    await waitStatus(page, "aborted", 30000);
    assert(aborts === 1, `one abort request after the confirmation, got ${aborts}`);
    const truth = await checkFinalStates(page, server, runId);
    assert([...truth.values()].some((s) => s === "cancelled" || s === "skipped"), "nodes were cancelled or skipped");
    assert(await page.$('[data-error-code="aborted"]'), "the page shows the aborted error");
    await checkNoGap(page);
    await shot(page, "abort");
    assert(!page.errors.length, `page errors: ${page.errors.join("; ")}`);
    await page.context().close();
  },

  // kill -9 the server mid-run, restart it on the same --data: the page
  // reconnects, catches up with no gap or duplicate, every node's final state right.
  async crash({ browser, bin }) {
    const server = new Server(bin);
    await server.start();
    try {
      const page = await newPage(browser);
      await page.goto(server.url + "/");
      const runId = await startFromPage(page, { question: "survive a crash", fields: { nodes: 12, waves: 4, tokens: 30, token_delay_ms: 40, tools_per_node: 1 } });
      await waitFor(async () => Object.values(await pageNodeStates(page)).includes("completed"), 30000, "a node completed");
      assert((await runStatus(page)) === "running", "still running at the crash");
      await server.kill9();
      await waitFor(async () => (await page.getAttribute("#conn", "data-conn")) === "reconnecting", 10000, "the page to show reconnecting");
      await shot(page, "crash-reconnecting");
      await server.start();
      await waitFor(async () => (await page.getAttribute("#conn", "data-conn")) === "connected", 20000, "the page to reconnect");
      await waitStatus(page, "finished", 90000);
      const truth = await checkFinalStates(page, server, runId);
      assert([...truth.values()].every((s) => s === "completed"), "every node completed after the restart");
      const d = await checkNoGap(page);
      await shot(page, "crash-recovered");
      console.log(`  recovered: ${truth.size} nodes, ${d.applied} events, no gap, no duplicate`);
      await page.context().close();
    } finally {
      await server.stop();
    }
  },

  // With tokens: the page asks for one, uses it (fetch header, EventSource
  // query), and never shows another tenant's runs.
  async auth({ browser, bin }) {
    const alice = "alice-token-0123456789";
    const bob = "bob-token-0123456789xx";
    const server = new Server(bin, { env: { CONCLAVE_TOKENS: `alice:${alice},bob:${bob}` } });
    await server.start();
    try {
      const page = await newPage(browser);
      await page.goto(server.url + "/");
      await page.waitForSelector('input[name="token"]');
      await page.fill('input[name="token"]', "wrong-token-0123456789");
      await page.click('[data-action="sign-in"]');
      await page.waitForSelector("text=That token was refused");
      await page.fill('input[name="token"]', alice);
      await page.click('[data-action="sign-in"]');
      const runId = await startFromPage(page, { question: "alice's secret", fields: { nodes: 3, tokens: 5, token_delay_ms: 5 } });
      await waitStatus(page, "finished", 30000);
      await checkFinalStates(page, server, runId, alice);
      await page.click("#signout");
      await page.fill('input[name="token"]', bob);
      await page.click('[data-action="sign-in"]');
      await page.waitForSelector("table.runs tbody tr");
      const body = await page.textContent("main");
      assert(!body.includes(runId) && !body.includes("alice's secret"), "bob sees none of alice's runs");
      await page.goto(`${server.url}/#/runs/${runId}`);
      await page.waitForSelector("text=No such run");
      assert(!(await page.$("[data-node-id]")), "bob sees no node of alice's run");
      await shot(page, "auth");
      await page.context().close();
    } finally {
      await server.stop();
    }
  },

  // A 1,000-node council at full speed: the page keeps up and stays responsive.
  async scale({ browser, server }) {
    const page = await newPage(browser);
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("Performance.enable");
    await page.goto(server.url + "/");
    await page.waitForSelector('[data-action="start"]');
    // Frame gaps: the time between consecutive animation frames while the run streams.
    await page.evaluate(() => {
      window.__frames = [];
      let last = performance.now();
      const loop = (t) => {
        window.__frames.push(t - last);
        last = t;
        if (!window.__stopFrames) requestAnimationFrame(loop);
      };
      requestAnimationFrame(loop);
    });
    const t0 = Date.now();
    const runId = await startFromPage(page, { question: "a thousand nodes", fields: { nodes: 1000, waves: 10, tokens: 5, token_delay_ms: 0 } });
    // Responsiveness probe: how long the page takes to answer while the run streams.
    const probes = [];
    let finished = false;
    const probe = (async () => {
      while (!finished) {
        const s = Date.now();
        await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
        probes.push(Date.now() - s);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    await waitStatus(page, "finished", 300000);
    const runMs = Date.now() - t0;
    await waitFor(async () => (await page.$$eval('[data-node-state="completed"]', (els) => els.length)) === 1000, 30000, "1,000 completed nodes on the page");
    finished = true;
    await probe;
    await checkNoGap(page);
    const long = await page.evaluate(() => window.__longTasks);
    const frames = (await page.evaluate(() => {
      window.__stopFrames = true;
      return window.__frames;
    })).sort((a, b) => a - b);
    const pct = (q) => Math.round(frames[Math.min(frames.length - 1, Math.floor(frames.length * q))]);
    const metrics = Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.value]));
    const d = await page.$eval("[data-run-id]", (el) => ({ ...el.dataset }));
    const summary = await server.api("GET", `/api/v1/runs/${runId}`);
    probes.sort((a, b) => a - b);
    const result = {
      scenario: { nodes: 1000, waves: 10, tokens: 5 },
      events: Number(d.applied), run_ms: runMs,
      long_tasks: long.length, long_task_max_ms: Math.round(Math.max(0, ...long.map((t) => t.duration))),
      long_task_total_ms: Math.round(long.reduce((a, t) => a + t.duration, 0)),
      frames: frames.length, frame_gap_p50_ms: pct(0.5), frame_gap_p95_ms: pct(0.95), frame_gap_max_ms: Math.round(frames[frames.length - 1]),
      frame_probe_p50_ms: probes[Math.floor(probes.length / 2)], frame_probe_max_ms: probes[probes.length - 1], probes: probes.length,
      js_heap_used_mb: +(metrics.JSHeapUsedSize / 1048576).toFixed(1), js_heap_total_mb: +(metrics.JSHeapTotalSize / 1048576).toFixed(1),
      dom_nodes: metrics.Nodes, run_status: summary.status,
    };
    // Opening the ended run: the page replays its 9,368 events from seq 1.
    const replay = await newPage(browser);
    const r0 = Date.now();
    await replay.goto(`${server.url}/#/runs/${runId}`);
    await waitFor(async () => (await replay.$$eval('[data-node-state="completed"]', (els) => els.length)) === 1000, 60000, "the replayed run's 1,000 completed nodes");
    const replayMs = Date.now() - r0;
    const rlong = await replay.evaluate(() => window.__longTasks);
    result.replay = { ms: replayMs, long_tasks: rlong.length, long_task_max_ms: Math.round(Math.max(0, ...rlong.map((t) => t.duration))) };
    await replay.context().close();
    writeFileSync(join(out, "bench.json"), JSON.stringify(result, null, 2));
    console.log(`  ${JSON.stringify(result)}`);
    await shot(page, "scale");
    assert(result.frame_probe_max_ms < 2000, `the page answered a frame request within 2 s (max ${result.frame_probe_max_ms} ms)`);
    assert(result.long_task_max_ms < 1000, `no long task of 1 s or more (max ${result.long_task_max_ms} ms)`);
    assert(!page.errors.length, `page errors: ${page.errors.join("; ")}`);
    await page.context().close();
  },
};

const names = only.length ? only : Object.keys(scenarios);
const browser = await launch();
const server = new Server(bin);
await server.start();
let failed = 0;
for (const name of names) {
  const t = Date.now();
  try {
    await scenarios[name]({ browser, server, bin });
    console.log(`ok   ${name} (${((Date.now() - t) / 1000).toFixed(1)} s)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
    for (const ctx of browser.contexts()) {
      for (const [i, p] of ctx.pages().entries()) await p.screenshot({ path: join(out, `FAIL-${name}-${i}.png`), fullPage: true }).catch(() => {});
      await ctx.close().catch(() => {});
    }
  }
}
await browser.close();
await server.stop();
if (failed) console.log(`== server log\n${server.log}`);
if (process.env.UPDATE_DOCS_SCREENSHOT && names.includes("start") && !failed) {
  copyFileSync(join(out, "dashboard.png"), process.env.UPDATE_DOCS_SCREENSHOT);
}
console.log(`web e2e: ${names.length - failed} passed, ${failed} failed; screenshots in ${out}`);
process.exit(failed ? 1 : 0);
