// Scenario: Conclave as the A2A *client*. The official @a2a-js/sdk sample
// agent (src/samples/agents/sample-agent of a2aproject/a2a-js, ported to
// plain JavaScript below, unchanged otherwise) is the remote agent; a
// `conclave serve` of its own (CONCLAVE_BIN, which run.sh exports)
// registers it with --a2a-agent, and a council whose node n002 names it
// must:
//   1. finish, node n002's lane showing the remote task (remote_task with its
//      id first, then its states), the sample's reply as text_delta, and
//      node_completed with the reply as its output;
//   2. on an abort while the sample works, cancel the remote task: the
//      sample's GetTask says TASK_STATE_CANCELED.
import { spawn } from 'node:child_process';
import express from 'express';
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const fail = (msg) => {
  process.stderr.write(`FAIL remote: ${msg}\n`);
  process.exit(1);
};
const check = (cond, msg) => cond || fail(msg);
const limit = Number(process.env.A2A_SCENARIO_TIMEOUT_MS ?? 120000);
setTimeout(() => fail(`timed out after ${limit} ms`), limit).unref();

// ------------------------------------------------ the SDK's sample agent

class SampleAgentExecutor {
  cancelledTasks = new Set();

  cancelTask = async (taskId) => {
    this.cancelledTasks.add(taskId);
  };

  async execute(requestContext, eventBus) {
    const userMessage = requestContext.userMessage;
    const { taskId, contextId } = requestContext;
    try {
      eventBus.publish(AgentEvent.task(requestContext.task ?? {
        id: taskId, contextId,
        status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: new Date().toISOString(), message: undefined },
        artifacts: [], history: [userMessage], metadata: userMessage.metadata,
      }));
      eventBus.publish(AgentEvent.statusUpdate({
        taskId, contextId,
        status: {
          state: TaskState.TASK_STATE_WORKING,
          message: {
            role: Role.ROLE_AGENT, messageId: crypto.randomUUID(),
            parts: [{ content: { $case: 'text', value: 'Processing your question' }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
            taskId, contextId, extensions: [], metadata: {}, referenceTaskIds: [],
          },
          timestamp: new Date().toISOString(),
        },
        metadata: {},
      }));
      const agentReplyText = this.parseInputMessage(userMessage);
      await new Promise((resolve) => setTimeout(resolve, 1000)); // the sample's processing delay
      if (this.cancelledTasks.has(taskId)) {
        eventBus.publish(AgentEvent.statusUpdate({
          taskId, contextId,
          status: { state: TaskState.TASK_STATE_CANCELED, timestamp: new Date().toISOString(), message: undefined },
          metadata: {},
        }));
        return;
      }
      eventBus.publish(AgentEvent.artifactUpdate({
        taskId, contextId,
        artifact: {
          artifactId: crypto.randomUUID(), name: 'Result', description: 'The final result from the agent.',
          parts: [{ content: { $case: 'text', value: agentReplyText }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
          metadata: undefined, extensions: [],
        },
        lastChunk: true, append: false, metadata: undefined,
      }));
      eventBus.publish(AgentEvent.statusUpdate({
        taskId, contextId,
        status: { state: TaskState.TASK_STATE_COMPLETED, timestamp: new Date().toISOString(), message: undefined },
        metadata: undefined,
      }));
    } finally {
      this.cancelledTasks.delete(taskId);
    }
  }

  parseInputMessage(message) {
    const textPart = message.parts.find((part) => part.content?.$case === 'text');
    const query = textPart?.content?.$case === 'text' ? textPart.content.value.trim() : '';
    if (!query) return 'Hello! Please provide a message for me to respond to.';
    return `Hello World! You said: '${query}'. Thanks for your message!`;
  }
}

async function startSample() {
  const app = express();
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const base = `http://127.0.0.1:${server.address().port}`;
  const card = {
    name: 'Sample Agent', description: 'A sample agent to test the stream functionality and simulate the flow of tasks statuses.',
    supportedInterfaces: [{ url: `${base}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION }],
    provider: { organization: 'A2A Samples', url: 'https://example.com/a2a-samples' },
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {}, securityRequirements: [],
    defaultInputModes: ['text'], defaultOutputModes: ['text', 'task-status'],
    skills: [{ id: 'sample_agent', name: 'Sample Agent', description: 'Simulate the general flow of a streaming agent.', tags: ['sample'],
      examples: ['hi'], inputModes: ['text'], outputModes: ['text', 'task-status'], securityRequirements: [] }],
    documentationUrl: '', signatures: [],
  };
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new SampleAgentExecutor());
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
  app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  return { base, server };
}

// ------------------------------------------------------ conclave serve

function startConclave(bin, agentCard) {
  const child = spawn(bin, ['serve', '--addr', '127.0.0.1:0', '--memory', '--log-level', 'info', '--a2a-agent', `sample=${agentCard}`],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  return new Promise((resolve) => {
    child.stderr.on('data', (b) => {
      log += b;
      const m = /msg="conclave listening" addr=(\S+)/.exec(log);
      if (m && !child.base) {
        child.base = `http://${m[1]}`;
        child.log = () => log;
        resolve(child);
      }
    });
    child.on('exit', (code) => child.base || fail(`conclave serve exited (${code}) before listening:\n${log}`));
  });
}

// events reads a session's SSE stream until the run's terminal event.
async function events(base, session, run, onEvent = () => {}) {
  const res = await fetch(`${base}/api/v1/events/stream?session_id=${encodeURIComponent(session)}&until=run_end`);
  check(res.ok, `GET stream: ${res.status}`);
  const out = [];
  let buf = '';
  const dec = new TextDecoder();
  for await (const chunk of res.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = frame.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
      if (!data) continue;
      const env = JSON.parse(data);
      if (!env.type) continue;
      out.push(env);
      await onEvent(env);
    }
  }
  check(out.some((e) => e.run_id === run && ['run_finished', 'run_error'].includes(e.type)), 'the stream ended before the run');
  return out;
}

async function startRun(base, question) {
  const res = await fetch(`${base}/api/v1/runs`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ question, scenario: { nodes: 2, waves: 2, tokens: 2, synthesis_tokens: 2, remote: { agent: 'sample', nodes: ['n002'] } } }),
  });
  if (res.status !== 201) fail(`POST /api/v1/runs: ${res.status} ${await res.text()}`);
  return res.json();
}

async function sampleTask(sampleBase, id) {
  const res = await fetch(`${sampleBase}/`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id } }),
  });
  return (await res.json()).result;
}

// ---------------------------------------------------------------- main

const bin = process.env.CONCLAVE_BIN;
if (!bin) {
  process.stderr.write('usage: CONCLAVE_BIN=<path of a conclave binary> node remote.mjs (run.sh sets it)\n');
  process.exit(2);
}
const started = Date.now();
const sample = await startSample();
const conclave = await startConclave(bin, `${sample.base}/${AGENT_CARD_PATH}`);
try {
  // 1. A council whose node n002 is the sample's task.
  const rc = await startRun(conclave.base, 'Plan the launch');
  const evs = await events(conclave.base, rc.session_id, rc.run_id);
  const last = evs[evs.length - 1];
  check(last.type === 'run_finished', `the run ended with ${last.type}: ${JSON.stringify(last.payload)}`);
  const lane = evs.filter((e) => e.lane.stream_id === 'node:n002');
  const types = lane.map((e) => e.type);
  check(types[0] === 'node_started' && types[1] === 'remote_task' && types.at(-1) === 'node_completed', `lane node:n002: ${types.join(' ')}`);
  const tasks = lane.filter((e) => e.type === 'remote_task').map((e) => e.payload);
  check(tasks.every((t) => t.agent === 'sample' && t.task_id === tasks[0].task_id), `remote_task: ${JSON.stringify(tasks)}`);
  check(tasks.at(-1).state === 'TASK_STATE_COMPLETED', `the last state: ${tasks.at(-1).state}`);
  const output = lane.at(-1).payload.output;
  check(/^Hello World! You said: 'As the .*|^Hello World! You said: '.*'\. Thanks for your message!$/s.test(output), `node output: ${output}`);
  const text = lane.filter((e) => e.type === 'text_delta').map((e) => e.payload.delta).join('');
  check(text === output, `lane text ${JSON.stringify(text)} is not the output`);

  // 2. Abort while the sample works: the remote task is cancelled.
  const rc2 = await startRun(conclave.base, 'Abort this one');
  let aborted = false;
  let taskId = '';
  const evs2 = await events(conclave.base, rc2.session_id, rc2.run_id, async (e) => {
    if (e.type === 'remote_task' && e.payload.state === 'TASK_STATE_WORKING' && !aborted) {
      aborted = true;
      taskId = e.payload.task_id;
      const res = await fetch(`${conclave.base}/api/v1/runs/${rc2.run_id}/abort`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ reason: 'enough' }),
      });
      if (!res.ok) fail(`abort: ${res.status} ${await res.text()}`);
    }
  });
  check(aborted, 'the remote task never reported working');
  const end = evs2.at(-1);
  check(end.type === 'run_error' && end.payload.code === 'aborted', `the aborted run ended with ${end.type} ${JSON.stringify(end.payload)}`);
  let state = '';
  for (let i = 0; i < 100 && state !== 'TASK_STATE_CANCELED'; i++) {
    state = (await sampleTask(sample.base, taskId))?.status?.state;
    if (state !== 'TASK_STATE_CANCELED') await new Promise((r) => setTimeout(r, 50));
  }
  check(state === 'TASK_STATE_CANCELED', `the sample's task ${taskId} is ${state}, not canceled`);
  process.stdout.write(`ok remote (${Date.now() - started} ms): node n002 answered "${output.slice(0, 60)}…"; abort canceled task ${taskId}\n`);
} finally {
  conclave.kill('SIGTERM');
  sample.server.close();
  sample.server.closeAllConnections?.();
}
