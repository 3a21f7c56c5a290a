/**
 * Durable pauses (issue 3): the time from an out-of-band answer to the continuation's first model
 * call, and the memory a paused session holds in the process. Run with `npm run bench:sessions`
 * (it needs --expose-gc, which the script passes).
 *
 * agentd and the fake model share this process: the first figure is a latency with no load, the
 * second a heap difference after forced collections, and neither gains from a second core.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../src/config.ts';
import { buildApp } from '../src/http/app.ts';
import { openStore } from '../src/store/db.ts';
import { startFakeModel, type FakeReply } from '../src/testing/fake-model.ts';

const RESPONDS = Number(process.env.BENCH_RESPONDS ?? 200);
const PAUSED = Number(process.env.BENCH_PAUSED_SESSIONS ?? 2000);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc (npm run bench:sessions does)');

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

let continuationCalledAt: (() => void) | undefined;
const model = await startFakeModel({
  record: false,
  script: (req): FakeReply => {
    const last = req.messages.at(-1);
    if (last?.role === 'tool') {
      continuationCalledAt?.();
      return { text: 'done' };
    }
    return { toolCalls: [{ name: 'write', input: { path: 'x.txt', content: 'x' } }] };
  },
});
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-sessions-'));
const config = loadConfig({ AGENTD_DATA_DIR: dataDir, AGENTD_LOG_LEVEL: 'warn', OPENAI_API_KEY: 'sk-bench', OPENAI_BASE_URL: model.url });
const store = await openStore({ dataDir });
const project = await store.projects.ensure('bench');
const key = (await store.apiKeys.create(project.id, 'editor')).key;
const app = await buildApp({ config, store });
await app.listen({ port: 0, host: '127.0.0.1' });
const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
const headers = { 'content-type': 'application/json', authorization: `ApiKey ${key}` };
const agent = { llm: { provider: 'openai', model: 'm' }, tools: [{ type: 'builtin', name: 'write' }], runner: { permissions: { default: 'ask' } } };

async function pause(session: string): Promise<string> {
  const res = await fetch(`${base}/services/agent/v0/invoke?project_id=${project.id}`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ session_id: session, data: { inputs: { messages: [{ role: 'user', content: 'go' }] }, parameters: { agent } } }),
  });
  const body = (await res.json()) as { data: { outputs: { pending_interaction: { id: string } } } };
  return body.data.outputs.pending_interaction.id;
}

// 1. Respond → the continuation's first model call.
const latencies: number[] = [];
for (let i = 0; i < RESPONDS + 20; i++) {
  const id = await pause(`respond-${i}`);
  const called = new Promise<number>((resolve) => (continuationCalledAt = () => resolve(performance.now())));
  const sent = performance.now();
  await fetch(`${base}/api/sessions/interactions/${id}/respond?project_id=${project.id}`, { method: 'POST', headers, body: JSON.stringify({ answer: { approved: true } }) });
  const at = await called;
  if (i >= 20) latencies.push(at - sent);
  await Promise.all([...app.interactions.continuing]);
  while (app.turns.live.size) await new Promise((r) => setTimeout(r, 1));
}
latencies.sort((a, b) => a - b);

// 2. Heap held per paused session.
for (let i = 0; i < 50; i++) await pause(`warm-${i}`);
gc();
gc();
const before = process.memoryUsage().heapUsed;
for (let i = 0; i < PAUSED; i++) await pause(`paused-${i}`);
gc();
gc();
const after = process.memoryUsage().heapUsed;
const perSession = (after - before) / PAUSED;

await app.close();
await model.close();
await store.close();
await rm(dataDir, { recursive: true, force: true });

const ms = (v: number) => v.toFixed(2);
const lines = [
  `machine: ${os.cpus().length} cores, Node ${process.version}`,
  '',
  '| measure | p50 | p90 | p99 | target | met |',
  '|---|---|---|---|---|---|',
  `| respond → continuation's first model call (${RESPONDS} answers, ms) | ${ms(percentile(latencies, 50))} | ${ms(percentile(latencies, 90))} | ${ms(percentile(latencies, 99))} | p50 ≤ 20 ms | ${percentile(latencies, 50) <= 20 ? 'yes' : 'no'} |`,
  '',
  '| measure | value | target | met |',
  '|---|---|---|---|',
  `| heap held per paused session (${PAUSED} sessions) | ${(perSession / 1024).toFixed(2)} KB | ≤ 50 KB | ${perSession <= 50 * 1024 ? 'yes' : 'no'} |`,
];
process.stdout.write(lines.join('\n') + '\n');
