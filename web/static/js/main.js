// The dashboard's entry: the token gate, then a hash router between the
// runs page (#/) and a run (#/runs/<id>).
import { h } from "./dom.js";
import { api, token } from "./api.js";
import { runsPage } from "./runs.js";
import { runPage } from "./runview.js";

const app = document.getElementById("app");
const conn = document.getElementById("conn");
const signout = document.getElementById("signout");
let teardown = () => {};

function setConn(status) {
  conn.dataset.conn = status;
  conn.textContent = status === "idle" ? "" : status;
}

const navigate = (hash) => {
  location.hash = hash;
};

function tokenPage(message) {
  const input = h("input", { type: "password", name: "token", placeholder: "bearer token", autocomplete: "off", class: "wide" });
  const form = h("form", { class: "card token", onsubmit: (e) => {
    e.preventDefault();
    token.set(input.value.trim());
    route();
  } }, h("h2", null, "Sign in"), h("p", null, message), input, " ", h("button", { type: "submit", class: "primary", dataset: { action: "sign-in" } }, "Use token"));
  app.replaceChildren(form);
  input.focus();
}

async function route() {
  teardown();
  teardown = () => {};
  // The token gate: every page reads the API, so ask for a token first
  // when the server wants one (401) or refused the one we had.
  try {
    await api.get("/api/v1/runs?limit=1");
  } catch (e) {
    if (e.status === 401) {
      const had = token.get();
      token.set("");
      signout.hidden = true;
      tokenPage(had ? "That token was refused. Enter another." : "This server needs a bearer token.");
      return;
    }
  }
  signout.hidden = !token.get();
  const m = /^#\/runs\/(.+)$/.exec(location.hash);
  if (m) teardown = runPage(app, decodeURIComponent(m[1]), { setConn });
  else teardown = runsPage(app, { navigate });
}

signout.addEventListener("click", () => {
  // Forget the token and everything shown with it.
  token.set("");
  if (location.hash && location.hash !== "#/") location.hash = "#/";
  else route();
});
window.addEventListener("hashchange", route);
route();
