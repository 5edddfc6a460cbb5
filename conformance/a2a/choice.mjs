// Choice questions: a run whose workers call ask_choice reaches
// TASK_STATE_INPUT_REQUIRED with a data part listing the options (reason
// "choice", options, a responseSchema whose choices enumerate the ids).
// The script answers in turn by text naming an option's number, by text
// naming its label, and by a data part of ids, until COMPLETED; an answer
// naming no option is refused with a typed error first.
import { check, collect, expectError, finalStatus, main, openInterrupts, stateName, TaskState, userMessage } from './lib.mjs';

main('choice', async (client) => {
  let events = await collect(client.sendMessageStream({
    message: userMessage({ text: 'Choose with me', metadata: { concurrency: 1, scenario: { nodes: 3, waves: 1, tokens: 3, choices: 3, seed: 5 } } }),
  }));
  const task = events[0].payload.value;
  let rounds = 0;
  const how = [];
  for (;;) {
    const status = finalStatus(events);
    if (status.state !== TaskState.TASK_STATE_INPUT_REQUIRED) break;
    check(++rounds <= 20, 'too many rounds');
    const open = openInterrupts(status);
    check(open.length === 1 && open[0].reason === 'choice', 'open interrupts', open);
    const d = open[0];
    check(d.options?.length === 3 && JSON.stringify(d.responseSchema).includes('"enum":["broad","deep","skip"]'), 'choice data', d);
    if (rounds === 1) {
      await expectError('an answer naming no option', Error, () => collect(client.sendMessageStream({
        message: userMessage({ text: 'purple', taskId: task.id, contextId: task.contextId }),
      })));
    }
    let parts;
    switch (rounds % 3) {
      case 1: parts = [{ text: '2' }]; how.push('number'); break;
      case 2: parts = [{ text: d.options[2].label }]; how.push('label'); break;
      default: parts = [{ data: { interruptId: d.interruptId, choices: ['broad'] } }]; how.push('data');
    }
    events = await collect(client.sendMessageStream({ message: userMessage({ parts, taskId: task.id, contextId: task.contextId }) }));
  }
  const status = finalStatus(events);
  check(status.state === TaskState.TASK_STATE_COMPLETED, 'final state', stateName(status.state));
  check(rounds === 3, `${rounds} choices asked, want 3`);
  return `${rounds} choices answered by ${how.join(', ')}`;
});
