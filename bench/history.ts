/**
 * `npm run bench:history` (issue 21): what a turn costs as the conversation grows. The same JSON
 * echo turn with 1, 20, 100 and 1,000 prior messages (alternating user and assistant, about 200
 * characters each), BENCH_HISTORY_TURNS turns at each length, 10 at a time. agentd runs as
 * `agentd serve` does (bench/agentd-server.ts), the fake model in another child; CPU per turn of
 * agentd's process (every thread) comes from /proc. Growth per added message is what it costs
 * agentd to read, check, store and send on one more message of history. Beside it, the same
 * requests to a floor that only reads them, sends their messages to the model and answers
 * (bench/history-floor.ts): what any server must spend on one more message.
 *
 * Then the history replayed from the store: BENCH_HISTORY_PAUSES turns at each length end paused
 * on an approval (the `write` tool under `ask`), and each is answered through
 * `/api/sessions/interactions/{id}/respond`; the continuation reads the paused turn's history
 * from the store, not from a request. CPU per answer and continuation, to the end of the
 * continuations.
 */
import { fork } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { startAgentdProcess, startModelProcess } from './local.ts';
import { procCpuMs, settled } from './shared.ts';

const LENGTHS = [1, 20, 100, 1000];
const TURNS = Number(process.env.BENCH_HISTORY_TURNS ?? 600);
const PAUSES = Number(process.env.BENCH_HISTORY_PAUSES ?? 200);
const CONCURRENCY = 10;

const model = await startModelProcess(0);
const server = await startAgentdProcess(model.url);
const floor = fork(path.join(import.meta.dirname, 'history-floor.ts'), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, MODEL_URL: model.url } });
const floorUrl = `${(await new Promise<{ url: string }>((resolve) => floor.once('message', resolve))).url}/floor/history`;
const dispatcher = new Agent({ connections: CONCURRENCY });
const url = `${server.url}/services/agent/v0/invoke?project_id=${server.projectId}`;
const headers = { 'content-type': 'application/json', authorization: `ApiKey ${server.apiKey}` };
const agent = { llm: { provider: 'openai', model: 'fake-model' }, tools: [], runner: { permissions: { default: 'allow' } } };
const sentence = 'This message is here to make the conversation long, as a real one grows turn after turn of work. ';

const asker = { ...agent, tools: [{ type: 'builtin', name: 'write' }], runner: { permissions: { default: 'ask' } } };

function body(prior: number, paused?: { session: string }): string {
  const messages = Array.from({ length: prior }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: `${i}: ${sentence}${sentence}` }));
  if (messages.at(-1)?.role === 'user') messages.push({ role: 'assistant', content: 'Noted.' });
  const ask = paused ? { session_id: paused.session } : {};
  const last = paused ? 'Write the note.' : 'Say hello.';
  return JSON.stringify({ ...ask, data: { inputs: { messages: [...messages, { role: 'user', content: last }] }, parameters: { agent: paused ? asker : agent } } });
}

async function post(to: string, payload: string): Promise<any> {
  const res = await request(to, { method: 'POST', headers, body: payload, dispatcher });
  const text = await res.body.text();
  if (res.statusCode >= 300) throw new Error(`${to} answered ${res.statusCode}: ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : undefined;
}

/** `count` calls of `call`, CONCURRENCY at a time. */
async function each(count: number, call: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) await call(next++);
    }),
  );
}

const turns = (to: string, payload: string, count: number) => each(count, () => post(to, payload));

/** CPU ms per request of `pid` over `count` requests of `payload` to `to`, after `warmUp` more. */
async function cpuPerRequest(pid: number, to: string, payload: string, warmUp: number, count: number): Promise<{ ms: number; wall: number }> {
  await turns(to, payload, warmUp);
  await settled(pid);
  const before = procCpuMs(pid)!;
  const started = performance.now();
  await turns(to, payload, count);
  return { ms: (procCpuMs(pid)! - before) / count, wall: (performance.now() - started) / count };
}

const rows: string[] = [];
let first: { agentd: number; floor: number } | undefined;
const perAdded = (ms: number, at1: number, prior: number) => (prior > 1 ? (((ms - at1) * 1000) / (prior - 1)).toFixed(1) : '–');
for (const prior of LENGTHS) {
  const payload = body(prior);
  process.stderr.write(`${prior} prior messages (${(Buffer.byteLength(payload) / 1024).toFixed(0)} KB a request) … `);
  // The first length also warms the processes up (their JIT, their pools), so it gets a longer warm-up.
  const warmUp = prior === LENGTHS[0] ? 1000 : 100;
  const atFloor = await cpuPerRequest(floor.pid!, floorUrl, payload, warmUp, TURNS);
  const { ms, wall } = await cpuPerRequest(server.child.pid!, url, payload, warmUp, TURNS);
  first ??= { agentd: ms, floor: atFloor.ms };
  process.stderr.write('done\n');
  rows.push(
    `| ${prior} | ${(Buffer.byteLength(payload) / 1024).toFixed(1)} KB | ${atFloor.ms.toFixed(2)} | ${ms.toFixed(2)} | ${(ms / atFloor.ms).toFixed(2)} | ${(ms / first.agentd).toFixed(2)}× | ${perAdded(atFloor.ms, first.floor, prior)} | ${perAdded(ms, first.agentd, prior)} | ${wall.toFixed(2)} |`,
  );
}

// The history replayed from the store: pauses, then their answers through the API.
const replayRows: string[] = [];
let firstReplay: number | undefined;
/** Pauses `count` sessions with `prior` messages of history, then answers them all: CPU per answer and continuation. */
async function pauseAndAnswer(prior: number, count: number, tag: string): Promise<number> {
  const ids: string[] = [];
  await each(count, async (i) => {
    const reply = await post(url, body(prior, { session: `${tag}-${prior}-${i}` }));
    ids.push(reply.data.outputs.pending_interaction.id);
  });
  await settled(server.child.pid!);
  const before = procCpuMs(server.child.pid!)!;
  await each(ids.length, (i) => post(`${server.url}/api/sessions/interactions/${ids[i]}/respond?project_id=${server.projectId}`, JSON.stringify({ answer: { approved: true } })));
  // The continuations run after the answers are taken: counted to their end.
  await settled(server.child.pid!);
  return (procCpuMs(server.child.pid!)! - before) / ids.length;
}

for (const prior of LENGTHS) {
  process.stderr.write(`${PAUSES} pauses answered through the API, ${prior} prior messages … `);
  if (prior === LENGTHS[0]) await pauseAndAnswer(prior, PAUSES, 'warm-up');
  const ms = await pauseAndAnswer(prior, PAUSES, 'replay');
  firstReplay ??= ms;
  process.stderr.write('done\n');
  replayRows.push(`| ${prior} | ${ms.toFixed(2)} | ${(ms / firstReplay).toFixed(2)}× | ${prior > 1 ? (((ms - firstReplay) * 1000) / (prior - 1)).toFixed(1) : '–'} |`);
}

process.stdout.write(
  [
    `machine: ${os.cpus().length} cores, Node ${process.version}; ${TURNS} JSON echo turns at each length, ${CONCURRENCY} at a time`,
    '',
    '| prior messages | request | floor CPU ms/request | agentd CPU ms/turn | × floor | agentd × 1 message | floor µs per added message | agentd µs per added message | agentd wall ms/turn |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    `the history replayed from the store: ${PAUSES} paused turns at each length, each answered through /respond and continued`,
    '',
    '| prior messages | agentd CPU ms per answer and continuation | × 1 message | µs per added message |',
    '|---|---|---|---|',
    ...replayRows,
    '',
  ].join('\n'),
);
await server.stop();
floor.disconnect();
model.stop();
await dispatcher.close();
