// Small DOM helpers shared by the views. Everything user- or server-given
// goes in through textContent or attributes, never as HTML.

// h builds an element: h("div", {class: "x", dataset: {nodeId: "n1"}, onclick}, child, "text").
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "dataset") Object.assign(el.dataset, v);
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "class") el.className = v;
      else if (k in el && typeof v !== "string") el[k] = v;
      else el.setAttribute(k, v === true ? "" : v);
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// fmt formats a count with thousands separators.
const numbers = new Intl.NumberFormat("en-US");
export const fmt = (n) => numbers.format(n ?? 0);

const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
// esc escapes text for the one place that builds HTML in bulk (dag.js).
export const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESC[c]);

// tail keeps the last max characters of s (long lanes are capped on screen).
export function tail(s, max) {
  return s.length <= max ? s : "…" + s.slice(s.length - max);
}

export function json(v) {
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}
