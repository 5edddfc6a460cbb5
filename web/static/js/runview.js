// One run: its status and counts, the live DAG, the interrupts that wait,
// the lanes, the answer, and the run's controls (steer, abort). Follows
// the run's session stream; the session's other runs are folded too (the
// stream is the session's) but not shown.
import { h, fmt } from "./dom.js";
import { api, token } from "./api.js";
import { newSession, apply, counts, isTerminal, spendText } from "./state.js";
import { SessionStream } from "./connection.js";
import { DagView } from "./dag.js";
import { LanesView } from "./lanes.js";
import { InterruptsView } from "./interrupts.js";
import { TimelineView } from "./timelineview.js";

const SLOW_MS = 150;

export function runPage(root, runId, { setConn }) {
  const statusEl = h("span", { class: "badge", dataset: { runStatus: "" } }, "…");
  const stats = h("span", { class: "stats" });
  const msg = h("p", { class: "status" });
  const question = h("h2", { class: "question" }, runId);
  // Abort asks first: one click must not end a run of many agents.
  const confirmRow = h("div", { class: "confirm", hidden: true, role: "alertdialog" },
    h("span", null, "Abort this run? Its agents stop and it ends as aborted."),
    h("button", { type: "button", class: "danger", dataset: { action: "abort-confirm" }, onclick: async (e) => {
      const btn = e.currentTarget; // null once the handler awaits
      btn.disabled = true;
      try {
        await api.abort(runId, "aborted from the dashboard");
        msg.textContent = "abort accepted";
        msg.className = "status";
        confirmRow.hidden = true;
      } catch (x) {
        msg.textContent = `abort: ${x.status} ${x.code || ""}: ${x.message}`;
        msg.className = "status error";
        abortBtn.disabled = false;
        confirmRow.hidden = true;
      } finally {
        btn.disabled = false;
      }
    } }, "Abort run"),
    h("button", { type: "button", dataset: { action: "abort-cancel" }, onclick: () => {
      confirmRow.hidden = true;
      abortBtn.disabled = false;
    } }, "Keep running"));
  const abortBtn = h("button", { type: "button", class: "danger", dataset: { action: "abort" }, onclick: () => {
    abortBtn.disabled = true;
    confirmRow.hidden = false;
  } }, "Abort");
  const note = h("textarea", { rows: 2, name: "steer", placeholder: "Steering note (or a GraphDiff as JSON: {\"ops\":[…]})" });
  const steerBtn = h("button", { type: "button", dataset: { action: "steer" }, onclick: async () => {
    const text = note.value.trim();
    if (!text) return;
    let body = { note: text };
    if (text.startsWith("{")) {
      try {
        body = { diff: JSON.parse(text) };
      } catch (e) {
        msg.textContent = `steer: not JSON: ${e.message}`;
        msg.className = "status error";
        return;
      }
    }
    try {
      const r = await api.steer(runId, body);
      msg.textContent = `steering ${r.steering_id} accepted: applies at the next wave boundary`;
      msg.className = "status";
      note.value = "";
    } catch (e) {
      msg.textContent = `steer: ${e.status} ${e.code || ""}: ${e.message}`;
      msg.className = "status error";
    }
  } }, "Steer");
  const controls = h("div", { class: "controls" }, note, steerBtn, abortBtn);
  const dagBox = h("section", { class: "card dag-card" });
  const intBox = h("section", { class: "card" });
  const laneBox = h("section", { class: "card" });
  const timelineBox = h("section", { class: "card timeline-card" });
  const answer = h("section", { class: "card answer", hidden: true });
  // The files the run started with and those its agents wrote (with a
  // written file's content one click away).
  const filesBox = h("section", { class: "card files", hidden: true });
  const steerList = h("ul", { class: "steering" });
  const others = h("p", { class: "muted small others" });
  const page = h("div", { class: "run", dataset: { runId } },
    h("section", { class: "card head" }, question, h("div", { class: "row" }, statusEl, stats), controls, confirmRow, msg, steerList, others),
    h("div", { class: "grid" }, dagBox, intBox), answer, filesBox, timelineBox, h("h2", null, "Lanes"), laneBox);
  root.replaceChildren(page);

  const lanes = new LanesView(laneBox, () => requestAnimationFrame(frame));
  const dag = new DagView(dagBox, { onSelect: (id) => {
    dag.select(id);
    lanes.select(id);
    requestAnimationFrame(frame); // draw the selection even when no event arrives
  } });
  const interrupts = new InterruptsView(intBox);
  const timeline = new TimelineView(timelineBox);
  const session = newSession();
  let duplicates = 0;
  let stream = null;
  let stopped = false;

  const drawHead = (run) => {
    if (!run.dirty.summary) return;
    run.dirty.summary = false;
    if (statusEl.dataset.runStatus !== run.status) {
      statusEl.dataset.runStatus = run.status;
      statusEl.textContent = run.status;
      statusEl.className = `badge status-${run.status}`;
    }
    question.textContent = run.question || runId;
    const c = counts(run);
    // Waves are numbered from 0, as the API and the CLI number them.
    const plan = run.graphs.get("");
    const nWaves = plan ? plan.waves.length : 0;
    const parts = [run.wave < 0 ? "no wave yet" : `wave ${run.wave} (of 0–${nWaves - 1})`, `nodes ${fmt(c.completed)}/${fmt(c.total)} done`];
    if (c.running) parts.push(`${fmt(c.running)} running`);
    if (c.parked) parts.push(`${fmt(c.parked)} parked`);
    if (c.failed) parts.push(`${fmt(c.failed)} failed`);
    if (c.cancelled) parts.push(`${fmt(c.cancelled)} cancelled`);
    if (c.skipped) parts.push(`${fmt(c.skipped)} skipped`);
    parts.push(`tokens ${fmt(run.usage.input_tokens)} in / ${fmt(run.usage.output_tokens)} out`);
    parts.push(spendText(run));
    if (run.estimate) parts.push(`estimate ${fmt(run.estimate.est_tokens)} tokens, ~${fmt(run.estimate.est_wall_seconds)} s`);
    if (run.durationMs) parts.push(`${(run.durationMs / 1000).toFixed(1)} s`);
    parts.push(`hitl ${run.hitl}`);
    if (run.request?.tenant) parts.push(`tenant ${run.request.tenant}`);
    if (run.correlationId) parts.push(`request ${run.correlationId}`);
    stats.textContent = parts.join(" · ");
    drawFiles(run);
    const otherKey = [...session.runs.values()].map((r) => r.id + r.status).join();
    if (session.runs.size > 1 && others.dataset.key !== otherKey) {
      others.dataset.key = otherKey;
      // The session's other runs: the stream is the session's, so they are one click away.
      others.replaceChildren("Other runs of this session: ", ...[...session.runs.values()].filter((r) => r.id !== runId).map((r) =>
        h("a", { href: `#/runs/${encodeURIComponent(r.id)}`, class: "other-run" }, `${r.question || r.id} (${r.status})`)));
    }
    const ended = isTerminal(run.status);
    controls.hidden = ended;
    if (ended) confirmRow.hidden = true;
    steerList.replaceChildren(...[...run.steering.values()].map((s) =>
      h("li", { dataset: { steeringStatus: s.status } }, `steering ${s.id}: ${s.note || "diff"} — ${s.status}`,
        s.wave !== null ? ` at wave ${s.wave}` : "", s.error ? ` (${s.error})` : "")));
    if (ended) {
      answer.hidden = false;
      answer.replaceChildren(...[
        run.error ? h("p", { class: "status error", dataset: { errorCode: run.error.code } }, `${run.error.code}: ${run.error.message}`) : null,
        run.answer ? h("div", null, h("h3", null, "Answer"), h("pre", { class: "text" }, run.answer)) : null,
        run.citations.length ? h("div", null, h("h3", null, "Sources"), h("ol", { class: "citations" }, run.citations.map((c) =>
          h("li", { value: c.number }, h("a", { href: c.url, rel: "noreferrer noopener", target: "_blank" }, c.title || c.url), h("span", { class: "muted" }, ` (first seen by ${c.first_seen_by}${c.first_seen_at ? ` at ${new Date(c.first_seen_at).toLocaleTimeString()}` : ""})`))))) : null,
      ].filter(Boolean));
    } else if (run.citations.length) {
      answer.hidden = false;
      answer.replaceChildren(h("h3", null, "Sources so far"), h("ol", { class: "citations" }, run.citations.map((c) => h("li", { value: c.number }, c.title || c.url))));
    }
  };

  // drawFiles redraws the files card when the files changed (its key).
  const drawFiles = (run) => {
    const key = `${run.attached.length}/${[...run.files.values()].map((f) => f.seq).join(",")}/${run.filesBytes}`;
    if (filesBox.dataset.key === key) return;
    filesBox.dataset.key = key;
    filesBox.hidden = run.attached.length === 0 && run.files.size === 0;
    const written = [...run.files.values()];
    filesBox.replaceChildren(...[
      run.attached.length ? h("div", null, h("h3", null, "Attached files"), h("ul", { class: "attached-files" }, run.attached.map((f) =>
        h("li", { dataset: { attachedFile: f.name } }, h("code", null, f.name), h("span", { class: "muted" }, ` ${f.mediaType} · ${fmt(f.size)} bytes${f.url ? ` · from ${f.url}` : ""}`))))) : null,
      written.length ? h("div", null,
        h("h3", null, "Files written", h("span", { class: "muted small", dataset: { filesBytes: String(run.filesBytes) } },
          run.filesBytes ? ` · ${fmt(run.filesBytes)} bytes written in all` : "")),
        h("ul", { class: "written-files" }, written.map((f) =>
          h("li", { dataset: { writtenFile: f.path, size: String(f.size) } },
            h("details", null,
              h("summary", null, h("code", null, f.path), h("span", { class: "muted" }, ` ${fmt(f.size)} bytes · by ${f.agent}`)),
              h("pre", { class: "text file-content" }, f.content)))))) : null,
    ].filter(Boolean));
  };

  let slowAt = 0;
  let slowTimer = 0;
  const frame = () => {
    const run = session.runs.get(runId);
    page.dataset.lastSeq = String(session.lastSeq);
    page.dataset.duplicates = String(duplicates);
    page.dataset.applied = String(session.applied);
    if (!run) return;
    // The DAG and interrupts draw every frame; the head and the lanes,
    // whose text changes with nearly every event, at most every SLOW_MS
    // (a timer draws the last state when the events stop).
    dag.update(run);
    interrupts.update(run);
    const now = performance.now();
    if (now - slowAt >= SLOW_MS || isTerminal(run.status)) {
      slowAt = now;
      clearTimeout(slowTimer);
      slowTimer = 0;
      drawHead(run);
      lanes.update(run);
      timeline.update(run);
    } else if (!slowTimer) {
      slowTimer = setTimeout(() => {
        slowTimer = 0;
        frame();
      }, SLOW_MS);
    }
  };

  (async () => {
    let summary;
    try {
      summary = await api.run(runId);
    } catch (e) {
      msg.textContent = e.status === 404 ? "No such run (or not yours)." : `${e.status || ""} ${e.message}`;
      msg.className = "status error";
      page.replaceChildren(h("section", { class: "card head" }, question, msg));
      return;
    }
    if (stopped) return;
    question.textContent = summary.question;
    stream = new SessionStream({
      sessionId: summary.session_id, token: token.get(),
      onEvent: (env) => {
        if (!apply(session, env)) duplicates++;
      },
      onFrame: frame,
      onStatus: setConn,
    });
    window.__conclave = { session, stream, runId }; // for the end-to-end tests and the curious
    stream.start();
  })();

  return () => {
    stopped = true;
    clearTimeout(slowTimer);
    if (stream) stream.close();
    dag.destroy();
    timeline.destroy();
    setConn("idle");
  };
}
