// Files in: a new task's message with file parts (raw bytes with filename
// and mediaType, A2A 1.0 FileParts) besides its text. The run's files are
// what the parts carried: run_started records them, bytes and all (read
// back from the session's SSE stream).
import { check, collect, finalStatus, main, stateName, TaskState, userMessage } from './lib.mjs';

const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
const notes = Buffer.from('# Notes\nThe sky scatters blue light.\n');

main('files', async (client) => {
  const events = await collect(client.sendMessageStream({
    message: userMessage({
      parts: [
        { text: 'What do these show?' },
        { raw: notes.toString('base64'), filename: 'notes.md', mediaType: 'text/markdown' },
        { raw: png.toString('base64'), filename: 'chart.png', mediaType: 'image/png' },
      ],
      metadata: { scenario: { nodes: 2, waves: 1, tokens: 4 } },
    }),
  }));
  const task = events[0].payload.value;
  const status = finalStatus(events);
  check(status.state === TaskState.TASK_STATE_COMPLETED, 'final state', stateName(status.state));
  const base = (process.argv[2] ?? process.env.A2A_BASE_URL).replace(/\/$/, '');
  const q = new URLSearchParams({ session_id: task.contextId, until: 'run_end', run_id: task.id });
  const body = await (await fetch(`${base}/api/v1/events/stream?${q}`)).text();
  const frame = body.split('\n\n').find((f) => f.includes('event: run_started'));
  check(frame, 'no run_started on the session stream');
  const started = JSON.parse(frame.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n')).payload;
  check(started.question === 'What do these show?', 'question', started.question);
  const files = started.files || [];
  check(files.length === 2, `${files.length} files in run_started, want 2`);
  check(files[0].name === 'notes.md' && files[0].media_type === 'text/markdown' && files[0].data === notes.toString('base64'), 'file 0', files[0]);
  check(files[1].name === 'chart.png' && files[1].media_type === 'image/png' && files[1].data === png.toString('base64'), 'file 1', files[1]);
  return `${events.length} frames, 2 files`;
});
