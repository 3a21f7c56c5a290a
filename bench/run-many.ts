/**
 * `agentd run-many` throughput (issue 6): N inputs, concurrency C, against an agentd whose model
 * (its own process, bench/model-server.ts) answers after a fixed latency. The ideal wall time is
 * N × latency / C; the floor is the same N model calls made straight to the model, C at a time.
 * The CLI runs as a child process, as a user runs it, after a warm-up run of BENCH_RUN_MANY_WARMUP
 * inputs; then once more against each of two servers that are not agentd (below), to tell the
 * CLI's share, and the AI SDK's, from agentd's own. All of it again with each latency drawn from
 * latency ± BENCH_RUN_MANY_JITTER_MS (10; 0 leaves those rows out).
 * `npm run bench:run-many`.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import type { ModelMessage } from 'ai';
import Fastify from 'fastify';
import { keepAliveFetch } from '../src/keep-alive-fetch.ts';
import { modelFloor, sdkAnswerer, startLocalAgentd, startModelProcess } from './local.ts';

const INPUTS = Number(process.env.BENCH_RUN_MANY_INPUTS ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_RUN_MANY_CONCURRENCY ?? 50);
const LATENCY_MS = Number(process.env.BENCH_RUN_MANY_LATENCY_MS ?? 100);
const WARMUP = Number(process.env.BENCH_RUN_MANY_WARMUP ?? 2000);
// The issue's target is on a model that answers after exactly LATENCY_MS; the second set of rows
// draws each latency from LATENCY_MS ± JITTER_MS, as a real model's vary (BENCHMARKS.md, "Cases in step").
const JITTER_MS = Number(process.env.BENCH_RUN_MANY_JITTER_MS ?? 10);

const model = await startModelProcess(LATENCY_MS);
const ask = model.ask;
const agentd = await startLocalAgentd(model.url);
const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-run-many-'));

const inputs = path.join(dir, 'inputs.jsonl');
const warmInputs = path.join(dir, 'warm-up.jsonl');
const out = path.join(dir, 'results.jsonl');
const template = path.join(dir, 'template.json');
await writeFile(inputs, Array.from({ length: INPUTS }, (_, i) => JSON.stringify({ message: `input ${i}` })).join('\n'));
await writeFile(template, JSON.stringify({ llm: { provider: 'openai', model: 'm' }, tools: [], runner: { permissions: { default: 'allow' } } }));

/** CPU seconds of the children this process has waited for (Linux /proc): the CLI runs. */
function childCpuSeconds(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[13]) + Number(fields[14])) / 100;
}

interface Target {
  url: string;
  key: string;
  projectId: string;
}

const runMany = (target: Target, file: string) =>
  promisify(execFile)(process.execPath, [path.join(import.meta.dirname, '../bin/agentd.js'), 'run-many', '--input', file, '--out', out, '--template', template, '--concurrency', String(CONCURRENCY)], {
    env: { ...process.env, AGENTD_URL: target.url, AGENTD_API_KEY: target.key, AGENTD_PROJECT_ID: target.projectId },
  });

/** One measured run-many over INPUTS: wall time, CPU per input of this process (the server) and of the CLI. */
async function measure(target: Target) {
  await ask({ type: 'reset' });
  const cliBefore = childCpuSeconds();
  const serverBefore = process.cpuUsage();
  const started = performance.now();
  await runMany(target, inputs);
  const wallMs = performance.now() - started;
  const server = process.cpuUsage(serverBefore);
  const perInput = (seconds: number) => ((seconds * 1000) / INPUTS).toFixed(2);
  const { peakInFlight } = await ask<{ peakInFlight: number }>({ type: 'peak' });
  const lines = (await readFile(out, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { status: string });
  return {
    wallMs,
    cpu: `${perInput((server.user + server.system) / 1e6)} / ${perInput(childCpuSeconds() - cliBefore)} ms`,
    peakInFlight,
    ok: lines.filter((l) => l.status === 'success').length,
  };
}

/** The model's answer to an input's messages, as one of the servers below gets it. */
type Answer = (messages: ModelMessage[]) => Promise<string>;

/** The one model call, straight over HTTP. */
const rawAnswer: Answer = async (messages) => {
  const res = await keepAliveFetch(`${model.url}/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' },
    body: JSON.stringify({ model: 'm', input: messages, store: false }),
  });
  const answer = (await res.json()) as { output: Array<{ content?: Array<{ text?: string }> }> };
  return answer.output.flatMap((item) => item.content ?? []).map((part) => part.text ?? '').join('');
};


/**
 * Not agentd: an invoke route that gets the model's answer and replies in the invoke envelope,
 * nothing else. run-many against it is what the CLI, the model (and, with `sdkAnswerer`, the AI
 * SDK) and the machine cost by themselves.
 */
async function startBareServer(answer: Answer): Promise<Target & { close(): Promise<void> }> {
  const app = Fastify({ logger: false });
  app.post('/services/agent/v0/invoke', async (request) => {
    const body = request.body as { session_id?: string; data: { inputs: { messages: ModelMessage[] } } };
    const text = await answer(body.data.inputs.messages);
    return { version: '2025.07.14', status: { code: 200, message: 'OK' }, session_id: body.session_id, data: { outputs: { messages: [{ role: 'assistant', content: text }], stop_reason: 'end_turn' } } };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { url: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`, key: 'unused', projectId: 'unused', close: () => app.close() };
}

const agentdTarget = { url: agentd.url, key: agentd.key, projectId: agentd.projectId };
const bare = await startBareServer(rawAnswer);
const sdk = await startBareServer(sdkAnswerer(model.url));
const targets = [
  ['agentd', agentdTarget],
  ['AI SDK reference (not agentd)', sdk],
  ['bare server (not agentd)', bare],
] as const;
// Servers that have been up a while, as a user's is: a fresh process compiles the code it runs
// (JIT), and that goes on for its first thousand or two turns (BENCHMARKS.md).
if (WARMUP > 0) {
  await writeFile(warmInputs, Array.from({ length: WARMUP }, (_, i) => JSON.stringify({ message: `warm-up ${i}` })).join('\n'));
  for (const [, target] of targets) await runMany(target, warmInputs);
}
const idealMs = (INPUTS * LATENCY_MS) / CONCURRENCY;
const rows: string[] = [];
for (const jitter of JITTER_MS > 0 ? [0, JITTER_MS] : [0]) {
  // Every client gets the same latencies, drawn afresh in the same order.
  const latency = () => ask({ type: 'latency', ms: LATENCY_MS, jitterMs: jitter });
  await latency();
  const floorMs = await modelFloor(model.url, INPUTS, CONCURRENCY);
  for (const [name, target] of targets) {
    await latency();
    const run = await measure(target);
    rows.push(
      `| ${name} | ${jitter > 0 ? `${LATENCY_MS} ± ${jitter}` : LATENCY_MS} ms | ${(idealMs / 1000).toFixed(2)} s | ${(floorMs / 1000).toFixed(2)} s | ${(run.wallMs / 1000).toFixed(2)} s | ${(run.wallMs / idealMs).toFixed(2)} | ${(run.wallMs / floorMs).toFixed(2)} | ${run.peakInFlight} | ${run.ok}/${INPUTS} | ${run.cpu} |`,
    );
  }
}

process.stdout.write(
  [
    `agentd run-many, ${INPUTS} inputs, concurrency ${CONCURRENCY}, ${agentd.turnWorkers} turn worker threads (node ${process.version}, ${os.cpus().length} cores)`,
    '',
    '| server | model latency | ideal (N × latency / C) | floor (plain model calls) | run-many | run-many / ideal | run-many / floor | peak in flight | succeeded | CPU per input: server / CLI |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n'),
);

await bare.close();
await sdk.close();
await agentd.close();
model.stop();
await rm(dir, { recursive: true, force: true });
