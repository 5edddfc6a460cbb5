// Follows one session's event stream and hands its events to the page,
// once per animation frame. The stream itself is read in a worker
// (stream-worker.js: EventSource, Last-Event-ID, reconnection), which posts
// the events' text in batches; here they wait in a queue, and each frame
// parses and applies as many as fit in FRAME_BUDGET_MS.

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
    this.closed = false;
    this.scheduled = false;
    this.received = 0;
  }

  start() {
    this.worker = new Worker(new URL("./stream-worker.js", import.meta.url), { type: "module" });
    this.worker.onmessage = (e) => {
      if (this.closed) return;
      if (e.data.status) this.onStatus(e.data.status);
      if (e.data.events) {
        for (const text of e.data.events) this.queue.push(text);
        this.received += e.data.events.length;
        this.schedule();
      }
    };
    this.worker.postMessage({ sessionId: this.sessionId, token: this.token });
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
    if (this.worker) this.worker.terminate(); // its EventSource closes with it
  }
}
