// Scenario 6: council features (a team node, a debate with a judge, a
// spawned sub-team, a steering note, the advisor gate, async tasks) stream
// to TASK_STATE_COMPLETED through the official client: their progress as
// status updates, their lanes' text as artifacts, all closed.
import { check, collect, finalStatus, folded, main, stateName, TaskState, userMessage } from './lib.mjs';

main('features', async (client) => {
  const events = await collect(client.sendMessageStream({
    message: userMessage({
      text: 'Should we build it?',
      metadata: {
        scenario: {
          nodes: 5, waves: 2, tokens: 6, tools_per_node: 1, seed: 3, teams: 1, team_size: 3,
          debate: { agents: 3, rounds: 3, judge: true, min_rounds: 2, consensus_round: 2 },
          spawn: ['n003'], steering: [{ at_wave: 0, note: 'add a node on costs' }],
          advisor: { redirects: 1 }, delegations: { async: 2 },
        },
        advisor: {},
      },
    }),
  }));
  const status = finalStatus(events);
  check(status.state === TaskState.TASK_STATE_COMPLETED, 'final state', stateName(status.state));
  const texts = events.filter((e) => e.payload.$case === 'statusUpdate')
    .map((e) => e.payload.value.status.message?.parts?.[0]?.content?.value ?? '');
  for (const want of ['Team n001 started', 'Debate n002 ended after 2 rounds', 'Dissent of', 'spawned sub-team n003.team',
    'Steering scenario-1 applied', 'Advisor on', 'Estimated cost', 'Source [1]']) {
    check(texts.some((t) => t.includes(want)), `no status update "${want}"`);
  }
  const artifacts = folded(events);
  const closed = new Set(events.filter((e) => e.payload.$case === 'artifactUpdate' && e.payload.value.lastChunk)
    .map((e) => e.payload.value.artifact.artifactId));
  for (const id of ['node:n001', 'node:n002', 'node:n001.team', 'answer']) {
    if (artifacts.has(id)) check(closed.has(id), `artifact ${id} never got its last chunk`);
  }
  check(artifacts.get('answer')?.length > 0, 'no answer artifact');
  return `${events.length} frames, ${artifacts.size} artifacts`;
});
