// Follows one session's SSE stream (docs/api.md, Event streams) off the
// main thread. Chromium parses an EventSource's network chunk and
// dispatches every event in it in one task, hundreds at full speed (over
// 100 ms per chunk in traces): here that costs the page nothing. The
// worker posts the events' raw text in batches, at most one every
// BATCH_MS, and the connection's status as it changes.
//
// EventSource reconnects by itself after the stream ends or the network
// drops, sending Last-Event-ID; when the browser gives up (the server
// answered an error while restarting, for instance) we open a new one with
// ?after= the last seq received. Either way the server replays from the
// cursor; an event at or below the last seq is dropped here, and again by
// the page's reducer, so nothing is shown twice and nothing is missed.
//
// Messages in: {sessionId, token}. Out: {status} or {events: [json…]}.
import { EVENT_TYPES } from "./state.js";

const BATCH_MS = 16;

let cfg = null;
let es = null;
let lastSeq = 0;
let retry = 0;
let batch = [];
let timer = 0;

function status(s) {
  self.postMessage({ status: s });
}

function flush() {
  timer = 0;
  if (batch.length) self.postMessage({ events: batch });
  batch = [];
}

function receive(e) {
  const seq = Number(e.lastEventId); // the SSE id is the seq
  if (!(seq > lastSeq)) return;
  lastSeq = seq;
  batch.push(e.data);
  if (!timer) timer = setTimeout(flush, BATCH_MS);
}

function open() {
  const q = new URLSearchParams({ session_id: cfg.sessionId });
  if (lastSeq > 0) q.set("after", String(lastSeq));
  if (cfg.token) q.set("access_token", cfg.token); // EventSource cannot send headers
  const src = new EventSource(`/api/v1/events/stream?${q}`);
  es = src;
  status(lastSeq > 0 ? "reconnecting" : "connecting");
  for (const t of EVENT_TYPES) src.addEventListener(t, receive);
  src.addEventListener("stream_closed", () => status("reconnecting")); // shutdown or lagging: it reconnects
  src.onopen = () => {
    retry = 0;
    status("connected");
  };
  src.onerror = () => {
    if (src !== es) return;
    status("reconnecting");
    if (src.readyState === EventSource.CLOSED) {
      // The browser gave up: retry ourselves, from the last seq, backing off to 5 s.
      src.close();
      setTimeout(open, Math.min(5000, 500 * 2 ** retry++));
    }
  };
}

self.onmessage = (e) => {
  if (cfg) return;
  cfg = e.data;
  open();
};
