/**
 * Evaluation throughput (issue 5): a run of N cases against a fake model that answers after a
 * fixed latency, with `batch_size` B. The ideal wall time is N × latency / B; the floor is the
 * same N model calls made straight to the fake model, B at a time, in the same run. The model is
 * its own process (bench/model-server.ts), as a provider is; agentd runs in this one.
 * Run with `npm run bench:evaluations` (BENCH_EVAL_LATENCY_MS changes the latency).
 */
import { fork } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../src/config.ts';
import { buildApp } from '../src/http/app.ts';
import { openStore } from '../src/store/db.ts';
import type { Ready } from './shared.ts';

const LATENCY_MS = Number(process.env.BENCH_EVAL_LATENCY_MS ?? 200);
const SCENARIOS = [
  { cases: 200, batch: 20 },
  { cases: 1000, batch: 100 },
];

const modelProcess = fork(path.join(import.meta.dirname, 'model-server.ts'), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
const ask = <T>(msg: object) =>
  new Promise<T>((resolve) => {
    modelProcess.once('message', (reply: T) => resolve(reply));
    modelProcess.send(msg);
  });
const model = await new Promise<Ready>((resolve) => modelProcess.once('message', (msg: Ready) => resolve(msg)));
await ask({ type: 'latency', ms: LATENCY_MS });
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-eval-'));
const config = loadConfig({ AGENTD_DATA_DIR: dataDir, AGENTD_LOG_LEVEL: 'warn', OPENAI_API_KEY: 'sk-bench', OPENAI_BASE_URL: model.url });
const store = await openStore({ dataDir });
const project = await store.projects.ensure('bench');
const key = (await store.apiKeys.create(project.id, 'editor')).key;
const app = await buildApp({ config, store });
await app.listen({ port: 0, host: '127.0.0.1' });
const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;

async function api(method: string, route: string, body?: unknown): Promise<any> {
  const res = await fetch(`${base}/api${route}?project_id=${project.id}`, {
    method,
    headers: { authorization: `ApiKey ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** N plain model calls, B at a time: what the run cannot beat on this machine. */
async function floor(cases: number, batch: number): Promise<number> {
  const body = JSON.stringify({ model: 'm', input: [{ role: 'user', content: 'q' }], stream: true });
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: batch }, async () => {
      while (next < cases) {
        next++;
        const res = await fetch(`${model.url}/responses`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' }, body });
        await res.text();
      }
    }),
  );
  return performance.now() - started;
}

const workflow = await api('POST', '/workflows', {
  slug: 'bench-target',
  data: { parameters: { agent: { llm: { provider: 'openai', model: 'm' }, tools: [], runner: { permissions: { default: 'allow' } } } } },
});

const rows: string[] = [];
for (const { cases, batch } of SCENARIOS) {
  const testset = await api('POST', '/simple/testsets/', {
    testset: { data: { testcases: Array.from({ length: cases }, (_, i) => ({ data: { messages: [{ role: 'user', content: `case ${i}` }] } })) } },
  });
  const floorMs = await floor(cases, batch);
  await ask({ type: 'reset' });
  const started = performance.now();
  const { evaluation } = await api('POST', '/simple/evaluations/', {
    evaluation: { data: { testset_steps: [testset.testset.revision_id], application_steps: [workflow.revision.id], concurrency: { batch_size: batch } } },
  });
  let run = evaluation;
  let lastReport = 0;
  while (run.data.status === 'pending' || run.data.status === 'running') {
    await new Promise((resolve) => setTimeout(resolve, 50));
    run = (await api('GET', `/simple/evaluations/${evaluation.id}`)).evaluation;
    if (performance.now() - lastReport > 1000) {
      process.stderr.write(`  ${cases} cases, batch ${batch}: ${run.data.progress.success + run.data.progress.failure}/${cases} done\n`);
      lastReport = performance.now();
    }
  }
  const wallMs = performance.now() - started;
  const { peakInFlight } = await ask<{ peakInFlight: number }>({ type: 'peak' });
  const idealMs = (cases * LATENCY_MS) / batch;
  if (run.data.status !== 'success') throw new Error(`the run ended ${run.data.status}`);
  const metrics = await api('POST', '/evaluations/metrics/query', { metrics: { run_id: evaluation.id } });
  const duration = metrics.metrics[0].data['application-bench-target'].duration_ms;
  rows.push(
    `| ${cases} | ${batch} | ${(idealMs / 1000).toFixed(2)} s | ${(floorMs / 1000).toFixed(2)} s | ${(wallMs / 1000).toFixed(2)} s | ${(wallMs / idealMs).toFixed(2)} | ${(wallMs / floorMs).toFixed(2)} | ${peakInFlight} | ${duration.p50.toFixed(0)} / ${duration.p99.toFixed(0)} ms |`,
  );
}

process.stdout.write(
  [
    `Evaluation runs, fake model latency ${LATENCY_MS} ms (node ${process.version}, ${os.cpus().length} cores)`,
    '',
    '| cases | batch_size | ideal (N × latency / B) | floor (plain model calls) | agentd run | run / ideal | run / floor | peak in flight | case p50 / p99 |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n'),
);

await app.close();
await store.close();
modelProcess.send({ type: 'stop' });
await rm(dataDir, { recursive: true, force: true });
