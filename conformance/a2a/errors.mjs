// Errors through the client: each refusal arrives as the SDK's typed error,
// and a node failing mid-stream ends the task FAILED with its artifact
// closed.
import { GetTaskRequest, SendMessageRequest } from '@a2a-js/sdk';
import { RequestMalformedError, TaskNotFoundError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import { check, collect, expectError, finalStatus, main, stateName, TaskState, userMessage } from './lib.mjs';

main('errors', async (client) => {
  await expectError('unknown task', TaskNotFoundError, () => client.getTask(GetTaskRequest.fromJSON({ id: 'no-such-task' })));

  const failed = await collect(client.sendMessageStream({
    message: userMessage({ text: 'Fail one', metadata: { scenario: { nodes: 3, waves: 2, tokens: 6, fail_nodes: ['n001'] } } }),
  }));
  const task = failed[0].payload.value;
  check(finalStatus(failed).state === TaskState.TASK_STATE_FAILED, 'failing node: ended', stateName(finalStatus(failed).state));
  const chunks = failed.filter((e) => e.payload.$case === 'artifactUpdate' && e.payload.value.artifact.artifactId === 'node:n001');
  check(chunks.length >= 2 && chunks.at(-1).payload.value.lastChunk, 'the failed node\'s artifact was not streamed and closed');

  await expectError('resubscribe to a failed task', UnsupportedOperationError, () => collect(client.resubscribeTask({ id: task.id })));
  await expectError('message to a failed task', UnsupportedOperationError, () => client.sendMessage(SendMessageRequest.fromJSON({
    message: { messageId: 'e1', role: 'ROLE_USER', taskId: task.id, parts: [{ text: 'approve' }] },
  })));
  const waiting = await client.sendMessage({ message: userMessage({ text: 'Plan first', metadata: { hitl: 'plan' } }) });
  check(waiting.status.state === TaskState.TASK_STATE_INPUT_REQUIRED, 'hitl plan: SendMessage returned', stateName(waiting.status.state));
  await expectError('contextId mismatch', RequestMalformedError, () => client.sendMessage({
    message: userMessage({ text: 'approve', taskId: waiting.id, contextId: task.contextId }),
  }));
  await expectError('not a decision', RequestMalformedError, () => client.sendMessage({
    message: userMessage({ text: 'maybe', taskId: waiting.id }),
  }));
  const done = await client.sendMessage({ message: userMessage({ text: 'approve', taskId: waiting.id, contextId: waiting.contextId }) });
  check(done.status.state === TaskState.TASK_STATE_COMPLETED, 'after approving: ', stateName(done.status.state));
  return 'typed errors and a failing node';
});
