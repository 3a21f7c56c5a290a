/**
 * `npm run bench:history` (issue 21): what a turn costs as the conversation grows. The same JSON
 * echo turn with 1, 20, 100 and 1,000 prior messages (alternating user and assistant, about 200
 * characters each), BENCH_HISTORY_TURNS turns at each length, 10 at a time. agentd runs as
 * `agentd serve` does (bench/agentd-server.ts), the fake model in another child; CPU per turn of
 * agentd's process (every thread) comes from /proc. Growth per added message is what it costs
 * agentd to read, check, store and send on one more message of history.
 */
import os from 'node:os';
import { Agent, request } from 'undici';
import { startAgentdProcess, startModelProcess } from './local.ts';
import { procCpuMs } from './shared.ts';

const LENGTHS = [1, 20, 100, 1000];
const TURNS = Number(process.env.BENCH_HISTORY_TURNS ?? 600);
const CONCURRENCY = 10;

const model = await startModelProcess(0);
const server = await startAgentdProcess(model.url);
const dispatcher = new Agent({ connections: CONCURRENCY });
const url = `${server.url}/services/agent/v0/invoke?project_id=${server.projectId}`;
const headers = { 'content-type': 'application/json', authorization: `ApiKey ${server.apiKey}` };
const agent = { llm: { provider: 'openai', model: 'fake-model' }, tools: [], runner: { permissions: { default: 'allow' } } };
const sentence = 'This message is here to make the conversation long, as a real one grows turn after turn of work. ';

function body(prior: number): string {
  const messages = Array.from({ length: prior }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: `${i}: ${sentence}${sentence}` }));
  if (messages.at(-1)?.role === 'user') messages.push({ role: 'assistant', content: 'Noted.' });
  return JSON.stringify({ data: { inputs: { messages: [...messages, { role: 'user', content: 'Say hello.' }] }, parameters: { agent } } });
}

async function turns(payload: string, count: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < count) {
        const res = await request(url, { method: 'POST', headers, body: payload, dispatcher });
        const text = await res.body.text();
        if (res.statusCode !== 200) throw new Error(`turn answered ${res.statusCode}: ${text.slice(0, 300)}`);
      }
    }),
  );
}

const rows: string[] = [];
let first: number | undefined;
for (const prior of LENGTHS) {
  const payload = body(prior);
  process.stderr.write(`${prior} prior messages (${(Buffer.byteLength(payload) / 1024).toFixed(0)} KB a request) … `);
  // The first length also warms the process up (its JIT, its pools), so it gets a longer warm-up.
  await turns(payload, prior === LENGTHS[0] ? 1000 : 100);
  const before = procCpuMs(server.child.pid!)!;
  const started = performance.now();
  await turns(payload, TURNS);
  const ms = (procCpuMs(server.child.pid!)! - before) / TURNS;
  const wall = (performance.now() - started) / TURNS;
  first ??= ms;
  process.stderr.write('done\n');
  rows.push(`| ${prior} | ${(Buffer.byteLength(payload) / 1024).toFixed(1)} KB | ${ms.toFixed(2)} | ${(ms / first).toFixed(2)}× | ${prior > 1 ? (((ms - first) * 1000) / (prior - 1)).toFixed(1) : '–'} | ${wall.toFixed(2)} |`);
}

process.stdout.write(
  [
    `machine: ${os.cpus().length} cores, Node ${process.version}; ${TURNS} JSON echo turns at each length, ${CONCURRENCY} at a time`,
    '',
    '| prior messages | request | agentd CPU ms/turn | × 1 message | µs per added message | wall ms/turn |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n'),
);
await server.stop();
model.stop();
await dispatcher.close();
