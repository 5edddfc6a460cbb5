// Scenario 3: client.cancelTask while a stream is running: CancelTask
// answers TASK_STATE_CANCELED, the stream ends CANCELED, and the canceled
// task refuses another cancel, a resubscribe and a message.
import { GetTaskRequest } from '@a2a-js/sdk';
import { TaskNotCancelableError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import { check, collect, expectError, finalStatus, main, stateName, TaskState, userMessage } from './lib.mjs';

main('abort', async (client) => {
  let task;
  let canceled;
  const events = await collect(client.sendMessageStream({
    message: userMessage({ text: 'A long one', metadata: { scenario: { nodes: 4, waves: 1, tokens: 400, token_delay_ms: 5 } } }),
  }), async (ev) => {
    if (ev.payload.$case === 'task') task = ev.payload.value;
    if (ev.payload.$case === 'artifactUpdate' && !canceled) {
      canceled = await client.cancelTask({ id: task.id });
    }
    return false;
  });
  check(canceled, 'the stream ended before any artifact chunk');
  check(canceled.status.state === TaskState.TASK_STATE_CANCELED, 'CancelTask answered', stateName(canceled.status.state));
  const status = finalStatus(events);
  check(status.state === TaskState.TASK_STATE_CANCELED, 'the stream ended', stateName(status.state));
  const got = await client.getTask(GetTaskRequest.fromJSON({ id: task.id }));
  check(got.status.state === TaskState.TASK_STATE_CANCELED, 'GetTask', stateName(got.status.state));

  await expectError('cancel again', TaskNotCancelableError, () => client.cancelTask({ id: task.id }));
  await expectError('resubscribe', UnsupportedOperationError, () => collect(client.resubscribeTask({ id: task.id })));
  await expectError('message', UnsupportedOperationError, () => collect(client.sendMessageStream({
    message: userMessage({ text: 'approve', taskId: task.id, contextId: task.contextId }),
  })));
  return `${events.length} frames before CANCELED`;
});
