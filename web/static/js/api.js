// The REST API of docs/api.md, with the bearer token when one is set.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

const TOKEN_KEY = "conclave.token";

// The token lives in sessionStorage: it is forgotten with the tab.
export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || "",
  set: (t) => (t ? sessionStorage.setItem(TOKEN_KEY, t) : sessionStorage.removeItem(TOKEN_KEY)),
};

async function request(method, path, body) {
  const headers = {};
  const t = token.get();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const err = data && data.error;
    throw new ApiError(resp.status, err && err.code, err ? err.message : text);
  }
  return data;
}

export const api = {
  get: (path) => request("GET", path),
  post: (path, body) => request("POST", path, body),
  runs: async (pages = 5) => {
    // Oldest first, paginated: read up to pages pages, newest shown first.
    const out = [];
    let cursor = "";
    for (let i = 0; i < pages; i++) {
      const q = new URLSearchParams({ limit: "200" });
      if (cursor) q.set("cursor", cursor);
      const page = await request("GET", `/api/v1/runs?${q}`);
      out.push(...(page.runs || []));
      if (!page.next_cursor) break;
      cursor = page.next_cursor;
    }
    return out;
  },
  run: (id) => request("GET", `/api/v1/runs/${encodeURIComponent(id)}`),
  tools: () => request("GET", "/api/v1/tools"),
  start: (body) => request("POST", "/api/v1/runs", body),
  abort: (id, reason) => request("POST", `/api/v1/runs/${encodeURIComponent(id)}/abort`, reason ? { reason } : {}),
  steer: (id, body) => request("POST", `/api/v1/runs/${encodeURIComponent(id)}/steer`, body),
  resume: (interruptId, body) => request("POST", `/api/v1/events/resume/${encodeURIComponent(interruptId)}`, body),
};
