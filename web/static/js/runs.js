// The runs page: the tenant's runs (GET /api/v1/runs) and the form that
// starts one (POST /api/v1/runs).
import { h, fmt } from "./dom.js";
import { api } from "./api.js";
import { usd } from "./state.js";

const PRICE_KEY = "conclave.pricePerMTok";
const REFRESH_MS = 2000;

const NUMBER_FIELDS = [
  ["nodes", "nodes", 6], ["waves", "waves", ""], ["tokens", "tokens per node", 24], ["token_delay_ms", "token delay (ms)", 20],
  ["reasoning_tokens", "reasoning tokens", ""], ["tools_per_node", "tools per node", ""], ["subagents_per_node", "sub-agents per node", ""],
  ["approvals", "approvals", ""], ["info_requests", "info requests", ""], ["choices", "choices", ""], ["teams", "teams", ""],
];

export function runsPage(root, { navigate }) {
  const status = h("p", { class: "status" });
  const form = startForm(async (body) => {
    status.textContent = "starting…";
    status.className = "status";
    try {
      const created = await api.start(body);
      navigate(`#/runs/${encodeURIComponent(created.run_id)}`);
    } catch (e) {
      status.textContent = `${e.status || ""} ${e.code || ""}: ${e.message}`;
      status.className = "status error";
    }
  });
  const price = h("input", { type: "number", min: "0", step: "any", value: localStorage.getItem(PRICE_KEY) || "", placeholder: "$ per 1M tokens", class: "price" });
  const tbody = h("tbody");
  const table = h("table", { class: "runs" },
    h("thead", null, h("tr", null, ["run", "session", "question", "status", "wave", "nodes", "tokens in / out", "cost", "created"].map((c) => h("th", null, c)))),
    tbody);
  let timer = 0;
  let stopped = false;
  let runs = [];
  const draw = () => {
    const per = parseFloat(price.value) || 0;
    tbody.replaceChildren(...runs.slice().reverse().map((r) => {
      const n = r.nodes || {};
      const u = r.usage || {};
      const tokens = (u.input_tokens || 0) + (u.output_tokens || 0);
      return h("tr", { dataset: { runId: r.run_id, status: r.status } },
        h("td", null, h("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.run_id)),
        h("td", { class: "muted", title: r.session_id }, r.session_id.slice(0, 8)),
        h("td", { class: "question" }, r.question),
        h("td", null, h("span", { class: `badge status-${r.status}` }, r.status)),
        h("td", null, r.waves ? `${Math.max(0, r.wave) + 1} / ${r.waves}` : "—"),
        h("td", null, `${fmt(n.completed)} / ${fmt(n.total)}${n.failed ? ` (${n.failed} failed)` : ""}${r.running ? ` · ${r.running} running` : ""}`),
        h("td", null, `${fmt(u.input_tokens)} / ${fmt(u.output_tokens)}`),
        h("td", null, cost(r, tokens, per)),
        h("td", { class: "muted" }, new Date(r.created_at).toLocaleString()));
    }));
    if (!runs.length) tbody.append(h("tr", null, h("td", { colspan: 9, class: "muted" }, "No runs yet: start one above.")));
  };
  // cost is the server's estimate (cost_usd, at its model prices) with the
  // run's cost budget; without one (a model without a price), the price
  // typed above, if any.
  const cost = (r, tokens, per) => {
    const b = r.budget && r.budget.cost_usd ? ` of ${usd(r.budget.cost_usd)}` : "";
    if (typeof r.cost_usd === "number") return usd(r.cost_usd) + b;
    return per ? `~$${((tokens * per) / 1e6).toFixed(4)}${b}` : `—${b}`;
  };
  price.addEventListener("input", () => {
    localStorage.setItem(PRICE_KEY, price.value);
    draw();
  });
  const refresh = async () => {
    try {
      runs = await api.runs();
      draw();
    } catch (e) {
      status.textContent = `runs: ${e.message}`;
      status.className = "status error";
    }
    if (!stopped) timer = setTimeout(refresh, REFRESH_MS);
  };
  root.replaceChildren(
    h("section", { class: "card" }, h("h2", null, "Start a run"), form, status),
    h("section", { class: "card" }, h("h2", null, "Runs ", h("label", { class: "muted small" }, "cost at ", price)), h("div", { class: "runs-scroll" }, table)));
  refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

// readFile is a picked file as a run's file: its name, its type (the
// server tells it by the name's extension when the browser has none) and
// its bytes in base64.
function readFile(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => {
      const url = String(r.result); // data:<type>;base64,<data>
      const f = { name: file.name, data: url.slice(url.indexOf(",") + 1) };
      if (file.type) f.media_type = file.type;
      resolve(f);
    };
    r.onerror = () => reject(r.error || new Error(`cannot read ${file.name}`));
    r.readAsDataURL(file);
  });
}

function startForm(onSubmit) {
  const question = h("input", { type: "text", name: "question", required: true, placeholder: "Question", value: "why is the sky blue", class: "wide" });
  const hitl = h("select", { name: "hitl" }, ["none", "plan", "node", "tools"].map((m) => h("option", { value: m }, m)));
  const session = h("input", { type: "text", name: "session_id", placeholder: "new session" });
  const nums = NUMBER_FIELDS.map(([name, label, def]) => [name, h("input", { type: "number", min: "0", name, value: String(def), placeholder: "–", title: "empty: the default" }), label]);
  const debate = h("input", { type: "checkbox", name: "debate" });
  const extra = h("textarea", { name: "scenario_json", rows: 2, placeholder: "more scenario fields as JSON, e.g. {\"spawn\":[\"n003\"],\"fail_nodes\":[\"n002\"]}", spellcheck: false });
  // The run's options (POST /api/v1/runs beside the scenario); empty: the server's default.
  const num = (name, title, min = "0") => h("input", { type: "number", min, name, placeholder: "default", title });
  const opts = {
    concurrency: num("concurrency", "nodes of a wave running at once", "1"),
    seed: num("seed", "the scripted model's seed (same seed, same run)", ""),
    max_replans: num("max_replans", "how often the director may plan again after a rejected plan"),
    max_delegation_rounds: num("max_delegation_rounds", "rounds of sub-agent delegation per worker", "1"),
    approval_timeout_seconds: num("approval_timeout_seconds", "how long an approval waits for a human before its timeout action", "1"),
  };
  const timeoutAction = h("select", { name: "approval_timeout_action", title: "what a timed-out approval does (one that needs signatures is always rejected)" },
    h("option", { value: "" }, "default"), h("option", { value: "reject" }, "reject"), h("option", { value: "approve" }, "approve"));
  const advisor = h("input", { type: "checkbox", name: "advisor" });
  const redirects = num("advisor_max_redirects", "redirects the advisor may make per agent");
  const err = h("p", { class: "status error" });
  // Files the run starts with: sent inline (base64); the server checks their size and type.
  const files = h("input", { type: "file", name: "files", multiple: true, title: "text, Markdown, JSON, PNG, JPEG, GIF, WebP or PDF" });
  // The tools agents may call (GET /api/v1/tools), but the runtime's own:
  // ticked ones go in the scenario's calls (every worker calls each once).
  const toolBoxes = h("span", { class: "tools", dataset: { tools: "loading" } }, "loading…");
  api.tools().then((list) => {
    const tools = (list.tools || []).filter((t) => t.source !== "runtime");
    toolBoxes.replaceChildren(...(tools.length ? tools.map((t) => h("label", { title: t.description || t.name, class: `risk-${t.risk}` },
      h("input", { type: "checkbox", name: "call", value: t.name }), ` ${t.name} `, h("span", { class: "muted small" }, `(${t.risk}${t.server ? `, ${t.server}` : ""})`))) : ["none"]));
    toolBoxes.dataset.tools = String(tools.length);
  }).catch((e) => {
    toolBoxes.textContent = `tools: ${e.message}`;
    toolBoxes.dataset.tools = "error";
  });
  const form = h("form", { class: "start", onsubmit: (e) => {
    e.preventDefault();
    err.textContent = "";
    const scenario = {};
    for (const [name, input] of nums) if (input.value !== "") scenario[name] = Number(input.value);
    if (debate.checked) scenario.debate = { nodes: 1 };
    if (extra.value.trim()) {
      let more;
      try {
        more = JSON.parse(extra.value);
      } catch (x) {
        err.textContent = `scenario JSON: ${x.message}`;
        return;
      }
      if (!more || typeof more !== "object" || Array.isArray(more)) {
        err.textContent = "scenario JSON must be an object";
        return;
      }
      Object.assign(scenario, more);
    }
    const calls = [...toolBoxes.querySelectorAll('input[name="call"]:checked')].map((c) => c.value);
    if (calls.length) scenario.calls = [...new Set([...(scenario.calls || []), ...calls])];
    const body = { question: question.value, hitl: hitl.value, scenario };
    if (session.value) body.session_id = session.value;
    for (const [name, input] of Object.entries(opts)) if (input.value !== "") body[name] = Number(input.value);
    if (timeoutAction.value) body.approval_timeout_action = timeoutAction.value;
    if (advisor.checked) body.advisor = redirects.value !== "" ? { max_redirects: Number(redirects.value) } : {};
    Promise.all([...files.files].map(readFile)).then((list) => {
      if (list.length) body.files = list;
      onSubmit(body);
    }, (x) => {
      err.textContent = `files: ${x.message}`;
    });
  } },
  h("div", { class: "row" }, h("label", { class: "grow" }, "question ", question), h("label", null, "hitl ", hitl), h("label", null, "session ", session)),
  h("div", { class: "row fields" }, nums.map(([, input, label]) => h("label", null, label, " ", input)), h("label", null, debate, " debate node")),
  h("div", { class: "row fields options" }, ...Object.entries(opts).map(([name, input]) => h("label", null, name.replaceAll("_", " "), " ", input)),
    h("label", null, "on timeout ", timeoutAction), h("label", null, advisor, " advisor, max redirects ", redirects)),
  h("div", { class: "row" }, h("span", { class: "muted" }, "workers call "), toolBoxes),
  h("div", { class: "row" }, h("label", null, "attach files ", files)),
  h("div", { class: "row" }, h("label", { class: "grow" }, "scenario ", extra), h("button", { type: "submit", class: "primary", dataset: { action: "start" } }, "Start run")),
  err);
  return form;
}
