// Shared harness of the A2A conformance scripts.
//
// Every script drives a real Conclave server with the official client
// (@a2a-js/sdk, pinned in package.json) and fails (exit code 1) on:
//   - any exception the client throws that the script did not ask for;
//   - any console.warn / console.error / process warning / unhandled rejection;
//   - a schema error: every response body the client receives is also read
//     raw (the same bytes, through the client's fetchImpl hook) and checked
//     against the A2A v1.0 JSON shapes, refusing unknown or v0.3 fields;
//   - an ordering violation of A2A's stream rules (a Task first, then
//     updates of that task only, nothing after a terminal or
//     input-required state, artifacts created before appended to and never
//     touched after their last chunk, Conclave's seq never going back).
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from '@a2a-js/sdk/client';
import { Message, TaskState, taskStateToJSON } from '@a2a-js/sdk';

// ---------------------------------------------------------------- failures

const problems = [];

function note(kind, args) {
  problems.push(`${kind}: ${args.map((a) => (a instanceof Error ? a.stack : String(a))).join(' ')}`);
}

const realError = console.error.bind(console);
for (const level of ['warn', 'error']) {
  console[level] = (...args) => note(`console.${level}`, args);
}
process.on('warning', (w) => note('process warning', [w]));
process.on('unhandledRejection', (r) => note('unhandled rejection', [r]));

export class Failure extends Error {}

export function check(cond, ...msg) {
  if (!cond) throw new Failure(msg.map((m) => (typeof m === 'string' ? m : JSON.stringify(m))).join(' '));
}

// ------------------------------------------------------------ wire checks

const STATES = [
  'TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', 'TASK_STATE_COMPLETED', 'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED', 'TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_REJECTED', 'TASK_STATE_AUTH_REQUIRED',
];
const TERMINAL = new Set(['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED']);
const INTERRUPTED = new Set(['TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED']);
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/;

const isObj = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);

// shape checks v against fields {name: [required, checker]} and refuses
// any other key (v0.3's kind/final included).
function shape(path, v, fields) {
  check(isObj(v), `${path}: not an object:`, v);
  for (const k of Object.keys(v)) check(k in fields, `${path}: unknown field "${k}"`);
  for (const [k, [required, fn]] of Object.entries(fields)) {
    if (v[k] === undefined) {
      check(!required, `${path}.${k} is required`);
    } else {
      check(v[k] !== null, `${path}.${k} is null`);
      fn(`${path}.${k}`, v[k]);
    }
  }
}
const str = (p, v) => check(typeof v === 'string', `${p}: not a string`);
const nonEmpty = (p, v) => check(typeof v === 'string' && v !== '', `${p}: not a non-empty string`);
const bool = (p, v) => check(typeof v === 'boolean', `${p}: not a boolean`);
const int = (p, v) => check(Number.isInteger(v), `${p}: not an integer`);
const obj = (p, v) => check(isObj(v), `${p}: not an object`);
const any = () => {};
const arr = (fn, min = 0) => (p, v) => {
  check(Array.isArray(v) && v.length >= min, `${p}: not an array of at least ${min}`);
  v.forEach((e, i) => fn(`${p}[${i}]`, e));
};
const oneOf = (values) => (p, v) => check(values.includes(v), `${p}: ${JSON.stringify(v)} is not one of ${values}`);
const timestamp = (p, v) => check(typeof v === 'string' && TIMESTAMP.test(v), `${p}: not a UTC ISO timestamp: ${v}`);

function part(p, v) {
  shape(p, v, {
    text: [false, str], raw: [false, str], url: [false, str], data: [false, any],
    metadata: [false, obj], filename: [false, str], mediaType: [false, str],
  });
  const n = ['text', 'raw', 'url', 'data'].filter((k) => v[k] !== undefined).length;
  check(n === 1, `${p}: ${n} content members`);
}
function message(p, v) {
  shape(p, v, {
    messageId: [true, nonEmpty], contextId: [false, str], taskId: [false, str],
    role: [true, oneOf(['ROLE_USER', 'ROLE_AGENT'])], parts: [true, arr(part, 1)],
    metadata: [false, obj], extensions: [false, arr(str)], referenceTaskIds: [false, arr(str)],
  });
}
function taskStatus(p, v) {
  shape(p, v, { state: [true, oneOf(STATES)], message: [false, message], timestamp: [false, timestamp] });
}
function artifact(p, v) {
  shape(p, v, {
    artifactId: [true, nonEmpty], name: [false, str], description: [false, str],
    parts: [true, arr(part, 1)], metadata: [false, obj], extensions: [false, arr(str)],
  });
}
export function task(p, v) {
  shape(p, v, {
    id: [true, nonEmpty], contextId: [true, nonEmpty], status: [true, taskStatus],
    artifacts: [false, arr(artifact)], history: [false, arr(message)], metadata: [false, obj],
  });
}
function statusUpdate(p, v) {
  shape(p, v, { taskId: [true, nonEmpty], contextId: [true, nonEmpty], status: [true, taskStatus], metadata: [false, obj] });
}
function artifactUpdate(p, v) {
  shape(p, v, {
    taskId: [true, nonEmpty], contextId: [true, nonEmpty], artifact: [true, artifact],
    append: [false, bool], lastChunk: [false, bool], metadata: [false, obj],
  });
}
function streamResponse(p, v) {
  shape(p, v, { task: [false, task], message: [false, message], statusUpdate: [false, statusUpdate], artifactUpdate: [false, artifactUpdate] });
  check(Object.keys(v).length === 1, `${p}: ${Object.keys(v).length} members, want exactly one`);
}
function sendMessageResponse(p, v) {
  shape(p, v, { task: [false, task], message: [false, message] });
  check(Object.keys(v).length === 1, `${p}: ${Object.keys(v).length} members, want exactly one`);
}
function listTasksResponse(p, v) {
  shape(p, v, { tasks: [true, arr(task)], nextPageToken: [true, str], pageSize: [true, int], totalSize: [true, int] });
}
function rpcError(p, v) {
  shape(p, v, { code: [true, int], message: [true, str], data: [false, any] });
}
export function agentCard(p, v) {
  const iface = (q, w) => shape(q, w, {
    url: [true, nonEmpty], protocolBinding: [true, oneOf(['JSONRPC', 'GRPC', 'HTTP+JSON'])],
    protocolVersion: [true, nonEmpty], tenant: [false, str],
  });
  const skill = (q, w) => shape(q, w, {
    id: [true, nonEmpty], name: [true, nonEmpty], description: [true, nonEmpty], tags: [true, arr(str)],
    examples: [false, arr(str)], inputModes: [false, arr(str)], outputModes: [false, arr(str)],
    securityRequirements: [false, arr(obj)],
  });
  shape(p, v, {
    name: [true, nonEmpty], description: [true, nonEmpty], supportedInterfaces: [true, arr(iface, 1)],
    provider: [false, obj], version: [true, nonEmpty], documentationUrl: [false, str],
    capabilities: [true, (q, w) => shape(q, w, { streaming: [false, bool], pushNotifications: [false, bool], extensions: [false, arr(obj)], extendedAgentCard: [false, bool] })],
    securitySchemes: [false, obj], securityRequirements: [false, arr(obj)],
    defaultInputModes: [true, arr(str, 1)], defaultOutputModes: [true, arr(str, 1)],
    skills: [true, arr(skill, 1)], signatures: [false, arr(obj)], iconUrl: [false, str],
  });
}

const RESULT_SHAPES = {
  SendMessage: sendMessageResponse, GetTask: task, CancelTask: task, ListTasks: listTasksResponse,
};

function rpcResponse(p, v, id, resultShape) {
  check(isObj(v), `${p}: not an object`);
  check(v.jsonrpc === '2.0', `${p}: jsonrpc is`, v.jsonrpc);
  check(v.id === id, `${p}: id ${v.id}, want ${id}`);
  check(('result' in v) !== ('error' in v), `${p}: needs exactly one of result and error`);
  for (const k of Object.keys(v)) check(['jsonrpc', 'id', 'result', 'error'].includes(k), `${p}: unknown field "${k}"`);
  if ('error' in v) rpcError(`${p}.error`, v.error);
  else resultShape(`${p}.result`, v.result);
}

// StreamOrder checks A2A's ordering rules frame by frame.
class StreamOrder {
  constructor(name) {
    this.name = name;
    this.n = 0;
    this.state = undefined;
    this.artifacts = new Map(); // id → 'open' | 'closed'
    this.seq = 0;
  }

  add(frame) {
    const at = `${this.name} frame ${this.n}`;
    this.n++;
    check(!TERMINAL.has(this.state) && !INTERRUPTED.has(this.state), `${at} follows the final state ${this.state}`);
    if (this.n === 1) {
      check(frame.task, `${at}: a stream must start with a Task`);
      this.task = frame.task;
      this.state = frame.task.status.state;
      for (const a of frame.task.artifacts ?? []) this.artifacts.set(a.artifactId, 'open');
      return;
    }
    check(!frame.task && !frame.message, `${at}: only the first frame is a Task`);
    const u = frame.statusUpdate ?? frame.artifactUpdate;
    check(u.taskId === this.task.id && u.contextId === this.task.contextId, `${at} is about ${u.taskId}/${u.contextId}`);
    const meta = (frame.statusUpdate ? u.status.message?.metadata : u.metadata)?.conclave;
    if (meta) {
      check(meta.seq >= this.seq, `${at}: seq ${meta.seq} after ${this.seq}`);
      this.seq = meta.seq;
    }
    if (frame.statusUpdate) {
      this.state = u.status.state;
      return;
    }
    const id = u.artifact.artifactId;
    check(this.artifacts.get(id) !== 'closed', `${at} touches artifact ${id} after its last chunk`);
    check(!u.append || this.artifacts.has(id), `${at} appends to artifact ${id} before creating it`);
    this.artifacts.set(id, u.lastChunk ? 'closed' : 'open');
  }

  end() {
    check(this.n > 0, `${this.name}: empty stream`);
    check(TERMINAL.has(this.state) || INTERRUPTED.has(this.state), `${this.name} ended in state ${this.state}`);
  }
}

// Trace is the client's fetchImpl: it passes every response through
// unchanged and checks a copy of its bytes.
export class Trace {
  constructor() {
    this.streams = []; // {method, frames: [raw result JSON text], done: Promise}
    this.pending = [];
    this.errors = [];
    this.fetch = this.fetch.bind(this);
  }

  async fetch(url, init) {
    const res = await fetch(url, init);
    const href = String(url);
    if (href.endsWith('/.well-known/agent-card.json')) {
      const text = await res.clone().text();
      agentCard('agent card', JSON.parse(text));
      return res;
    }
    const req = JSON.parse(init.body);
    const ct = res.headers.get('content-type') ?? '';
    if (ct.startsWith('text/event-stream')) {
      const [mine, theirs] = res.body.tee();
      const s = { method: req.method, frames: [] };
      // Failures are kept for settled(), not left as unhandled rejections.
      s.done = this.readStream(s, req, theirs).catch((e) => { this.errors.push(e); });
      this.streams.push(s);
      this.pending.push(s.done);
      return new Response(mine, { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    const text = await res.clone().text();
    const shape = RESULT_SHAPES[req.method] ?? (() => {});
    rpcResponse(`${req.method} answer`, JSON.parse(text), req.id, shape);
    return res;
  }

  async readStream(s, req, body) {
    const order = new StreamOrder(`${req.method} stream ${this.streams.length}`);
    let buf = '';
    const decoder = new TextDecoder();
    for await (const chunk of body) {
      buf += decoder.decode(chunk, { stream: true });
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        check(!block.includes('\r'), `${req.method}: CRLF in the stream`);
        const data = [];
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue; // heartbeat
          check(line.startsWith('data: '), `${req.method}: unexpected SSE line ${JSON.stringify(line)}`);
          data.push(line.slice(6));
        }
        if (data.length === 0) continue;
        check(data.length === 1, `${req.method}: a frame on ${data.length} data lines`);
        const v = JSON.parse(data[0]);
        rpcResponse(`${req.method} frame ${s.frames.length}`, v, req.id, streamResponse);
        check(!('error' in v), `${req.method}: error frame`, v.error);
        order.add(v.result);
        s.frames.push(JSON.stringify(v.result));
      }
    }
    check(buf.trim() === '', `${req.method}: truncated frame at the end of the stream`);
    order.end();
  }

  // settled waits until every stream seen so far was read and checked.
  async settled() {
    await Promise.all(this.pending);
    if (this.errors.length > 0) throw this.errors[0];
  }
}

// connect builds a client for base the way an A2A caller does: it fetches
// the agent card and picks the JSON-RPC interface.
export async function connect(base) {
  const trace = new Trace();
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: trace.fetch })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: trace.fetch }),
  }));
  const client = await factory.createFromUrl(base);
  return { client, trace };
}

// ----------------------------------------------------------------- helpers

let messageCount = 0;

// userMessage builds a user message from its wire (ProtoJSON) form.
export function userMessage({ text, parts, taskId, contextId, metadata }) {
  messageCount++;
  return Message.fromJSON({
    messageId: `conformance-${process.pid}-${messageCount}`,
    role: 'ROLE_USER',
    parts: parts ?? [{ text }],
    taskId,
    contextId,
    metadata,
  });
}

export const stateName = (s) => taskStateToJSON(s);
export { TaskState };

// collect reads a stream to its end. onEvent may return true to stop
// early; it may be async.
export async function collect(gen, onEvent) {
  const events = [];
  for await (const ev of gen) {
    events.push(ev);
    if (onEvent && (await onEvent(ev, events))) break;
  }
  return events;
}

// finalStatus is the status of a stream's last frame.
export function finalStatus(events) {
  const { payload } = events.at(-1);
  check(payload.$case === 'task' || payload.$case === 'statusUpdate', 'the last frame is a', payload.$case);
  return payload.value.status;
}

// openInterrupts reads the data parts of an input-required status.
export function openInterrupts(status) {
  return (status.message?.parts ?? []).filter((p) => p.content?.$case === 'data').map((p) => p.content.value);
}

// folded rebuilds the artifacts (id → text) a stream carries.
export function folded(events) {
  const out = new Map();
  const text = (a) => a.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
  for (const { payload } of events) {
    if (payload.$case === 'task') {
      for (const a of payload.value.artifacts) out.set(a.artifactId, text(a));
    } else if (payload.$case === 'artifactUpdate') {
      const u = payload.value;
      out.set(u.artifact.artifactId, (u.append ? out.get(u.artifact.artifactId) ?? '' : '') + text(u.artifact));
    }
  }
  return out;
}

// expectError runs fn and checks that it throws an instance of cls.
export async function expectError(what, cls, fn) {
  try {
    await fn();
  } catch (e) {
    check(e instanceof cls, `${what}: threw ${e?.name}: ${e?.message}, want ${cls.name}`);
    return e;
  }
  throw new Failure(`${what}: did not throw ${cls.name}`);
}

// main runs a scenario against the server at argv[2] or $A2A_BASE_URL and
// exits non-zero on any failure or warning.
export function main(name, scenario) {
  const base = process.argv[2] ?? process.env.A2A_BASE_URL;
  if (!base) {
    realError(`usage: node ${name}.mjs <base URL of conclave serve>`);
    process.exit(2);
  }
  const limit = Number(process.env.A2A_SCENARIO_TIMEOUT_MS ?? 120000);
  const timer = setTimeout(() => {
    realError(`FAIL ${name}: timed out after ${limit} ms`);
    process.exit(1);
  }, limit);
  (async () => {
    const started = Date.now();
    try {
      const { client, trace } = await connect(base);
      const summary = await scenario(client, trace);
      await trace.settled();
      if (problems.length > 0) throw new Failure(`${problems.length} warning(s):\n  ${problems.join('\n  ')}`);
      clearTimeout(timer);
      process.stdout.write(`ok ${name} (${Date.now() - started} ms)${summary ? ': ' + summary : ''}\n`);
    } catch (e) {
      realError(`FAIL ${name}: ${e instanceof Failure ? e.message : e?.stack ?? e}`);
      for (const p of problems) realError(`  ${p}`);
      process.exit(1);
    }
  })();
}
