/**
 * `agentd run-many` throughput (issue 6): N inputs, concurrency C, against an agentd whose model
 * (its own process, bench/model-server.ts) answers after a fixed latency. The ideal wall time is
 * N × latency / C; the floor is the same N model calls made straight to the model, C at a time.
 * The CLI runs as a child process, as a user runs it. `npm run bench:run-many`.
 */
import { execFile, fork } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { loadConfig } from '../src/config.ts';
import { buildApp } from '../src/http/app.ts';
import { openStore } from '../src/store/db.ts';
import type { Ready } from './shared.ts';

const INPUTS = Number(process.env.BENCH_RUN_MANY_INPUTS ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_RUN_MANY_CONCURRENCY ?? 50);
const LATENCY_MS = Number(process.env.BENCH_RUN_MANY_LATENCY_MS ?? 100);

const modelProcess = fork(path.join(import.meta.dirname, 'model-server.ts'), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
const ask = <T>(msg: object) =>
  new Promise<T>((resolve) => {
    modelProcess.once('message', (reply: T) => resolve(reply));
    modelProcess.send(msg);
  });
const model = await new Promise<Ready>((resolve) => modelProcess.once('message', (msg: Ready) => resolve(msg)));
await ask({ type: 'latency', ms: LATENCY_MS });

const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-run-many-'));
const config = loadConfig({ AGENTD_DATA_DIR: dir, AGENTD_LOG_LEVEL: 'warn', OPENAI_API_KEY: 'sk-bench', OPENAI_BASE_URL: model.url });
const store = await openStore({ dataDir: dir });
const project = await store.projects.ensure('bench');
const key = (await store.apiKeys.create(project.id, 'editor')).key;
const app = await buildApp({ config, store });
await app.listen({ port: 0, host: '127.0.0.1' });
const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;

async function floor(): Promise<number> {
  const body = JSON.stringify({ model: 'm', input: [{ role: 'user', content: 'q' }], stream: true });
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < INPUTS) await (await fetch(`${model.url}/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).text();
    }),
  );
  return performance.now() - started;
}

const inputs = path.join(dir, 'inputs.jsonl');
const out = path.join(dir, 'results.jsonl');
const template = path.join(dir, 'template.json');
await writeFile(inputs, Array.from({ length: INPUTS }, (_, i) => JSON.stringify({ message: `input ${i}` })).join('\n'));
await writeFile(template, JSON.stringify({ llm: { provider: 'openai', model: 'm' }, tools: [], runner: { permissions: { default: 'allow' } } }));

const floorMs = await floor();
await ask({ type: 'reset' });
const started = performance.now();
await promisify(execFile)(process.execPath, [path.join(import.meta.dirname, '../bin/agentd.js'), 'run-many', '--input', inputs, '--out', out, '--template', template, '--concurrency', String(CONCURRENCY)], {
  env: { ...process.env, AGENTD_URL: url, AGENTD_API_KEY: key, AGENTD_PROJECT_ID: project.id },
});
const wallMs = performance.now() - started;
const { peakInFlight } = await ask<{ peakInFlight: number }>({ type: 'peak' });
const lines = (await readFile(out, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { status: string });
const ok = lines.filter((l) => l.status === 'success').length;
const idealMs = (INPUTS * LATENCY_MS) / CONCURRENCY;

process.stdout.write(
  [
    `agentd run-many, ${INPUTS} inputs, concurrency ${CONCURRENCY}, model latency ${LATENCY_MS} ms (node ${process.version}, ${os.cpus().length} cores)`,
    '',
    '| ideal (N × latency / C) | floor (plain model calls) | run-many | run-many / ideal | run-many / floor | peak in flight | succeeded |',
    '|---|---|---|---|---|---|---|',
    `| ${(idealMs / 1000).toFixed(2)} s | ${(floorMs / 1000).toFixed(2)} s | ${(wallMs / 1000).toFixed(2)} s | ${(wallMs / idealMs).toFixed(2)} | ${(wallMs / floorMs).toFixed(2)} | ${peakInFlight} | ${ok}/${INPUTS} |`,
    '',
  ].join('\n'),
);

await app.close();
await store.close();
modelProcess.send({ type: 'stop' });
await rm(dir, { recursive: true, force: true });
