// Interrupts: what waits for a human, with the answer each kind takes
// (docs/api.md, Human in the loop). Cards are keyed by interrupt id and
// kept while pending, so a redraw never loses what is being typed; a
// resolved or expired interrupt moves to the history below.
import { h, json } from "./dom.js";
import { api } from "./api.js";

const HISTORY = 30;

export class InterruptsView {
  constructor(root) {
    this.root = root;
    root.classList.add("interrupts");
    this.pendingBox = h("div", { class: "pending" });
    this.historyBox = h("ol", { class: "history" });
    this.cards = new Map(); // interrupt id -> {el, sig}
    this.done = new Set();
    root.append(h("h2", null, "Waiting for you"), this.pendingBox, h("h3", null, "Answered and expired"), this.historyBox);
  }

  update(run) {
    if (!run.dirty.interrupts) return;
    run.dirty.interrupts = false;
    const ended = [];
    for (const it of run.interrupts.values()) {
      if (it.status === "pending") {
        let c = this.cards.get(it.interrupt_id);
        if (!c) {
          c = this.card(it);
          this.cards.set(it.interrupt_id, c);
          this.pendingBox.append(c.el);
        }
        this.paintSignatures(c, it);
      } else if (!this.done.has(it.interrupt_id)) {
        ended.push(it);
      }
    }
    for (const it of ended) {
      this.done.add(it.interrupt_id);
      const c = this.cards.get(it.interrupt_id);
      if (c) {
        c.el.remove();
        this.cards.delete(it.interrupt_id);
      }
      const a = it.answer || {};
      const what = outcome(it, a);
      this.historyBox.prepend(h("li", { dataset: { interruptId: it.interrupt_id, interruptStatus: it.status } },
        h("b", null, it.kind), " ", subject(it), " — ", what, a.feedback ? `: ${a.feedback}` : "", a.response ? `: ${a.response}` : ""));
    }
    while (this.historyBox.childElementCount > HISTORY) this.historyBox.lastChild.remove();
    const n = this.cards.size;
    this.root.dataset.pending = String(n);
    if (!n && !this.pendingBox.querySelector(".empty")) this.pendingBox.append(h("p", { class: "muted empty" }, "Nothing waits for you."));
    if (n) this.pendingBox.querySelector(".empty")?.remove();
  }

  card(it) {
    const status = h("p", { class: "status" });
    const el = h("article", { class: "interrupt", dataset: { interruptId: it.interrupt_id, interruptKind: it.kind } },
      h("header", null, h("b", null, it.kind.replace("_", " ")), " ", subject(it), " ",
        h("span", { class: "muted" }, `expires ${new Date(it.expires_at).toLocaleTimeString()}`)));
    if (it.kind === "tool_approval") el.append(h("pre", { class: "snippet" }, `${it.tool_name}(${JSON.stringify(it.tool_args ?? {})})`));
    if (it.kind === "plan_approval" && it.plan) el.append(h("p", null, `${(it.plan.nodes || []).length} nodes in ${(it.waves || []).length || "?"} waves: ${(it.plan.nodes || []).slice(0, 8).map((n) => n.id).join(", ")}${(it.plan.nodes || []).length > 8 ? ", …" : ""}`));
    if (it.evidence) el.append(evidence(it.evidence));
    const sig = h("p", { class: "signatures", hidden: true });
    el.append(sig);
    const send = async (body, btn) => {
      status.textContent = "sending…";
      status.className = "status";
      el.querySelectorAll("button").forEach((b) => (b.disabled = true));
      try {
        await api.resume(it.interrupt_id, body);
        status.textContent = `${body.decision || "answer"} sent; waiting for the run`;
      } catch (e) {
        status.textContent = `${e.status || ""} ${e.code || ""}: ${e.message}`;
        status.className = "status error";
        el.querySelectorAll("button").forEach((b) => (b.disabled = false));
      }
      void btn;
    };
    if (it.kind === "choice") {
      // Radio buttons for a single choice, checkboxes for a multiple one;
      // nothing is preselected, and nothing is sent until one is chosen.
      const type = it.multiple_choice ? "checkbox" : "radio";
      const name = `choice-${it.interrupt_id}`;
      const check = h("p", { class: "check muted" });
      const list = h("fieldset", { class: "options", onchange: () => { check.textContent = ""; check.className = "check muted"; } },
        h("legend", null, it.multiple_choice ? "Choose one or more" : "Choose one"),
        (it.options || []).map((o) => h("label", { class: "option", dataset: { optionId: o.id } },
          h("input", { type, name, value: o.id }), " ", h("b", null, o.label), o.description ? h("span", { class: "muted" }, ` — ${o.description}`) : null)));
      const feedback = h("input", { type: "text", placeholder: "Feedback (to decline)", name: "feedback" });
      el.append(h("p", { class: "question" }, it.question || ""));
      if (it.context_snippet) el.append(h("pre", { class: "snippet" }, it.context_snippet));
      el.append(list, check, feedback, h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", dataset: { action: "choose" }, onclick: () => {
          const choices = [...list.querySelectorAll("input:checked")].map((i) => i.value);
          if (!choices.length) {
            check.textContent = "choose an option first";
            check.className = "check error";
            return; // never send an empty choice
          }
          send({ choices });
        } }, "Choose"),
        h("button", { type: "button", dataset: { action: "reject" }, onclick: () => {
          const body = { decision: "reject" };
          if (feedback.value) body.feedback = feedback.value;
          send(body);
        } }, "Decline")));
    } else if (it.kind === "info_request") {
      const answer = h("textarea", { rows: 2, placeholder: "Your answer", name: "answer" });
      el.append(h("p", { class: "question" }, it.question || ""));
      if (it.context_snippet) el.append(h("pre", { class: "snippet" }, it.context_snippet));
      el.append(answer, h("div", { class: "actions" },
        h("button", { type: "button", dataset: { action: "answer" }, onclick: () => send({ response: answer.value }) }, "Answer")));
    } else {
      const feedback = h("input", { type: "text", placeholder: "Feedback or reason (for reject)", name: "feedback" });
      const actions = h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", dataset: { action: "approve" }, onclick: () => send({ decision: "approve" }) }, "Approve"),
        h("button", { type: "button", dataset: { action: "reject" }, onclick: () => {
          const body = { decision: "reject" };
          if (feedback.value) body[it.kind === "plan_approval" ? "reason" : "feedback"] = feedback.value;
          send(body);
        } }, "Reject"));
      el.append(feedback);
      const revisable = it.kind === "tool_approval" ? it.tool_args : it.kind === "plan_approval" ? it.plan : undefined;
      if (revisable !== undefined) {
        const editor = h("textarea", { class: "json", rows: 6, spellcheck: false, name: "revision" }, json(revisable));
        const check = h("p", { class: "check muted" });
        const validate = () => {
          const r = parseRevision(it.kind, editor.value);
          check.textContent = r.error || "valid JSON";
          check.className = r.error ? "check error" : "check muted";
          return r;
        };
        editor.addEventListener("input", validate);
        actions.append(h("button", { type: "button", dataset: { action: "revise" }, onclick: () => {
          const r = validate();
          if (r.error) return; // never send what does not parse
          send(it.kind === "plan_approval" ? { decision: "revise", plan: r.value } : { decision: "revise", edited_args: r.value });
        } }, "Revise"));
        el.append(h("details", { class: "revise" }, h("summary", null, it.kind === "plan_approval" ? "Edit the plan (JSON)" : "Edit the arguments (JSON)"), editor, check));
      }
      el.append(actions);
    }
    el.append(status);
    return { el, sig };
  }

  paintSignatures(c, it) {
    const need = it.signaturesRequired ?? (it.approval && it.approval.required);
    if (!need && !it.signatures.length) return;
    c.sig.hidden = false;
    c.sig.dataset.count = String(it.signatureCount ?? it.signatures.length);
    c.sig.textContent = `signatures: ${it.signatureCount ?? it.signatures.length} of ${need ?? "?"}` +
      (it.signatures.length ? ` (${it.signatures.map((s) => `${s.approver} ${s.decision}`).join(", ")})` : "") +
      (it.fullySigned ? " — fully signed" : "");
  }
}

function subject(it) {
  if (it.kind === "tool_approval") return `${it.tool_name} on ${it.lane}`;
  if (it.kind === "node_approval") return `node ${it.node_id}`;
  if (it.kind === "spawn_approval") return `sub-team for ${it.node_id}: ${it.goal || ""}`;
  if (it.kind === "info_request" || it.kind === "choice") return `from ${it.lane}`;
  return "";
}

// parseRevision checks an edited revision before it is sent: arguments
// must be a JSON object, a plan an object with a non-empty nodes list of
// objects with an id.
export function parseRevision(kind, text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return { error: `not JSON: ${e.message}` };
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) return { error: "must be a JSON object" };
  if (kind === "plan_approval") {
    if (!Array.isArray(v.nodes) || !v.nodes.length) return { error: "a plan needs a non-empty \"nodes\" list" };
    const bad = v.nodes.findIndex((n) => !n || typeof n.id !== "string" || !n.id);
    if (bad >= 0) return { error: `nodes[${bad}] needs an "id"` };
  }
  return { value: v };
}

function evidence(ev) {
  return h("details", { class: "evidence", open: true, dataset: { evidenceId: ev.id } },
    h("summary", null, `Evidence: ${ev.title} `, h("span", { class: `risk risk-${ev.risk_level}` }, ev.risk_level)),
    h("p", null, ev.narrative),
    ev.reasoning_trace && ev.reasoning_trace.length ? h("ol", null, ev.reasoning_trace.map((t) => h("li", null, t))) : null,
    ev.recommended_actions && ev.recommended_actions.length ? h("ul", { class: "recommended" }, ev.recommended_actions.map((a) =>
      h("li", null, h("b", null, a.decision), ` ${a.label}`, a.consequences && a.consequences.length ? `: ${a.consequences.join("; ")}` : ""))) : null,
    h("p", { class: "muted" }, `from ${ev.source_agent_id} · task ${ev.task_id}`));
}

// outcome says how an interrupt ended, in words: an info request is
// answered (its resolution's decision is a formality), a choice by the
// labels chosen (or declined), a cancelled one cancelled, an expired one
// by its timeout's action (a choice: nothing chosen).
export function outcome(it, a) {
  if (it.status === "expired") return it.kind === "choice" ? "expired (nothing chosen)" : `expired (${a.action || "timeout"})`;
  if (a.decision === "cancel") return "cancelled";
  if (it.kind === "choice" && a.choices && a.choices.length) {
    const label = (id) => ((it.options || []).find((o) => o.id === id) || { label: id }).label;
    return `chose ${a.choices.map(label).join(", ")}`;
  }
  if (it.kind === "choice" && a.decision === "reject") return "declined";
  if (it.kind === "info_request" || it.kind === "choice") return a.response !== undefined && a.response !== "" ? "answered" : a.decision || "ended";
  return a.decision || (a.response !== undefined ? "answered" : "ended");
}
