// Scenario 1: a 20-node council streams to TASK_STATE_COMPLETED with the
// answer artifact, and GetTask / ListTasks agree with the stream.
import { ListTasksRequest, GetTaskRequest } from '@a2a-js/sdk';
import { check, collect, finalStatus, folded, main, stateName, TaskState, userMessage } from './lib.mjs';

main('council', async (client, trace) => {
  const events = await collect(client.sendMessageStream({
    message: userMessage({
      text: 'Why is the sky blue?',
      metadata: { scenario: { nodes: 20, waves: 4, fan_in: 2, tokens: 6, synthesis_tokens: 12, tools_per_node: 1, seed: 7 } },
    }),
  }));
  check(events[0].payload.$case === 'task', 'first frame is', events[0].payload.$case);
  const task = events[0].payload.value;
  check(task.status.state === TaskState.TASK_STATE_SUBMITTED, 'first state', stateName(task.status.state));
  const status = finalStatus(events);
  check(status.state === TaskState.TASK_STATE_COMPLETED, 'final state', stateName(status.state));

  const artifacts = folded(events);
  const answer = artifacts.get('answer');
  check(answer && answer.length > 0, 'no answer artifact');
  check(status.message.parts[0].content.value === answer, 'the final status message is not the answer');
  const nodes = [...artifacts.keys()].filter((id) => id.startsWith('node:'));
  check(nodes.length === 20, `${nodes.length} node artifacts, want 20`);
  const closed = new Set(events.filter((e) => e.payload.$case === 'artifactUpdate' && e.payload.value.lastChunk)
    .map((e) => e.payload.value.artifact.artifactId));
  for (const id of [...nodes, 'answer']) check(closed.has(id), `artifact ${id} never got its last chunk`);
  const workers = new Set(events.filter((e) => e.payload.$case === 'statusUpdate')
    .map((e) => e.payload.value.status.message?.metadata?.conclave?.lane).filter((l) => l?.startsWith('node:')));
  check(workers.size === 20, `status updates name ${workers.size} node lanes, want 20`);

  const got = await client.getTask(GetTaskRequest.fromJSON({ id: task.id }));
  check(got.status.state === TaskState.TASK_STATE_COMPLETED, 'GetTask state', stateName(got.status.state));
  check(got.artifacts.length === artifacts.size, `GetTask has ${got.artifacts.length} artifacts, the stream ${artifacts.size}`);
  for (const a of got.artifacts) check(a.parts[0].content.value === artifacts.get(a.artifactId), `artifact ${a.artifactId} differs`);

  const list = await client.listTasks(ListTasksRequest.fromJSON({ contextId: task.contextId }));
  check(list.tasks.length === 1 && list.tasks[0].id === task.id && list.totalSize === 1, 'ListTasks', list);
  await trace.settled();
  check(trace.streams[0].frames.length === events.length, 'the client saw', events.length, 'frames of', trace.streams[0].frames.length);
  return `${events.length} frames, ${artifacts.size} artifacts`;
});
