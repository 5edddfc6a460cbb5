// Follows one session's SSE stream (docs/api.md, Event streams) and hands
// its events to the page in batches, once per animation frame.
//
// EventSource reconnects by itself after the stream ends or the network
// drops, sending Last-Event-ID; when the browser gives up (the server
// answered an error while restarting, for instance) we open a new one with
// ?after= the last seq applied. Either way the server replays from the
// cursor, and apply() drops any seq already seen, so nothing is shown twice
// and nothing is missed.
import { EVENT_TYPES } from "./state.js";

// FRAME_BUDGET_MS bounds the work of one frame: the events still queued
// wait for the next frame, so a burst never becomes a long task.
const FRAME_BUDGET_MS = 8;

export class SessionStream {
  // onEvent(envelope) applies an event; onFrame() draws; onStatus(status)
  // gets "connecting", "connected" or "reconnecting".
  constructor({ sessionId, token, onEvent, onFrame, onStatus }) {
    this.sessionId = sessionId;
    this.token = token;
    this.onEvent = onEvent;
    this.onFrame = onFrame;
    this.onStatus = onStatus;
    this.queue = [];
    this.head = 0;
    this.lastSeq = 0; // the last seq received (the cursor of a manual reconnect)
    this.es = null;
    this.closed = false;
    this.retry = 0;
    this.scheduled = false;
    this.received = 0;
  }

  start() {
    this.open();
  }

  open() {
    if (this.closed) return;
    const q = new URLSearchParams({ session_id: this.sessionId });
    if (this.lastSeq > 0) q.set("after", String(this.lastSeq));
    if (this.token) q.set("access_token", this.token);
    const es = new EventSource(`/api/v1/events/stream?${q}`);
    this.es = es;
    this.onStatus(this.lastSeq > 0 ? "reconnecting" : "connecting");
    const onEvent = (e) => this.receive(e);
    for (const t of EVENT_TYPES) es.addEventListener(t, onEvent);
    es.addEventListener("stream_closed", () => {
      // shutdown or lagging: EventSource reconnects from Last-Event-ID.
      this.onStatus("reconnecting");
    });
    es.onopen = () => {
      this.retry = 0;
      this.onStatus("connected");
    };
    es.onerror = () => {
      if (this.closed || es !== this.es) return;
      if (es.readyState === EventSource.CLOSED) {
        // The browser gave up: retry ourselves, from the last seq, backing off to 5 s.
        es.close();
        this.onStatus("reconnecting");
        const delay = Math.min(5000, 500 * 2 ** this.retry++);
        this.timer = setTimeout(() => this.open(), delay);
      } else {
        this.onStatus("reconnecting");
      }
    };
  }

  // receive only queues the frame: Chromium dispatches every event of a
  // network chunk in one task, hundreds at full speed, so parsing waits
  // for flush(), which bounds its work per frame. The SSE id is the seq.
  receive(e) {
    const seq = Number(e.lastEventId);
    if (!(seq > this.lastSeq)) return; // a replay overlapping what we have
    this.lastSeq = seq;
    this.received++;
    this.queue.push(e.data);
    this.schedule();
  }

  schedule() {
    if (this.scheduled || this.closed) return;
    this.scheduled = true;
    // Hidden tabs get no animation frames: fall back to a timer.
    const run = () => this.flush();
    if (document.hidden) setTimeout(run, 100);
    else requestAnimationFrame(run);
  }

  flush() {
    this.scheduled = false;
    if (this.closed) return;
    const start = performance.now();
    let n = 0;
    while (this.head < this.queue.length) {
      let env = null;
      try {
        env = JSON.parse(this.queue[this.head++]);
      } catch {
        // not an envelope: skip it
      }
      if (env) this.onEvent(env);
      if ((++n & 63) === 0 && performance.now() - start > FRAME_BUDGET_MS) break;
    }
    if (this.head === this.queue.length || this.head > 4096) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    this.onFrame();
    if (this.head < this.queue.length) this.schedule();
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.es) this.es.close();
  }
}
