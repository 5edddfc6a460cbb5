// Scenario 4: parallel nodes stream at once, so their artifact chunks
// interleave; a second stream opened with resubscribeTask mid-run receives
// its Task, then exactly the frames the first stream receives from that
// point on (compared byte for byte on the wire).
import { check, collect, finalStatus, folded, main, stateName, TaskState, userMessage } from './lib.mjs';

main('parallel', async (client, trace) => {
  let second;
  let seen = 0;
  const first = await collect(client.sendMessageStream({
    message: userMessage({
      text: 'Compare eight things',
      metadata: { concurrency: 8, scenario: { nodes: 8, waves: 1, tokens: 60, token_delay_ms: 4, seed: 11 } },
    }),
  }), (ev, events) => {
    if (++seen === 12) {
      second = collect(client.resubscribeTask({ id: events[0].payload.value.id }));
    }
    return false;
  });
  check(second, 'the first stream ended before the second could start');
  const other = await second;
  check(finalStatus(first).state === TaskState.TASK_STATE_COMPLETED, 'first stream ended', stateName(finalStatus(first).state));
  check(finalStatus(other).state === TaskState.TASK_STATE_COMPLETED, 'second stream ended', stateName(finalStatus(other).state));

  // Interleaving: some lane's chunks are split by another lane's.
  let last = '';
  let switches = 0;
  const lanes = new Set();
  for (const { payload } of first) {
    if (payload.$case !== 'artifactUpdate' || !payload.value.append) continue;
    const id = payload.value.artifact.artifactId;
    if (id !== last && lanes.has(id)) switches++;
    lanes.add(id);
    last = id;
  }
  const nodeLanes = [...lanes].filter((id) => id.startsWith('node:')).length;
  check(nodeLanes === 8 && switches > 0, `chunks of ${nodeLanes} node lanes, ${switches} interleavings`);

  // Same frames, same order, from the second stream's first update on.
  await trace.settled();
  const [a, b] = trace.streams.map((s) => s.frames);
  check(trace.streams[1].method === 'SubscribeToTask', 'second stream is', trace.streams[1].method);
  check(b.length >= 2, 'the second stream has no updates');
  const start = a.indexOf(b[1]);
  check(start > 0, 'the second stream\'s first update is not in the first stream');
  check(a.length - start === b.length - 1, `first stream: ${a.length - start} frames from there, second: ${b.length - 1}`);
  for (let i = 1; i < b.length; i++) check(a[start + i - 1] === b[i], `frame ${i} differs:\n${a[start + i - 1]}\n${b[i]}`);
  // The second stream's Task plus its updates fold to the same artifacts.
  const fa = folded(first);
  const fb = folded(other);
  check(fa.size === fb.size && [...fa].every(([k, v]) => fb.get(k) === v), 'the streams fold to different artifacts');
  return `${first.length} frames, second stream joined at frame ${start} with ${b.length} frames, ${switches} interleavings`;
});
