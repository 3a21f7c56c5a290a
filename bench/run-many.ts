/**
 * `agentd run-many` throughput (issue 6): N inputs, concurrency C, against an agentd whose model
 * (its own process, bench/model-server.ts) answers after a fixed latency. The ideal wall time is
 * N × latency / C; the floor is the same N model calls made straight to the model, C at a time.
 * The CLI runs as a child process, as a user runs it, after a warm-up run of BENCH_RUN_MANY_WARMUP
 * inputs. `npm run bench:run-many`.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { modelFloor, startLocalAgentd, startModelProcess } from './local.ts';

const INPUTS = Number(process.env.BENCH_RUN_MANY_INPUTS ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_RUN_MANY_CONCURRENCY ?? 50);
const LATENCY_MS = Number(process.env.BENCH_RUN_MANY_LATENCY_MS ?? 100);
const WARMUP = Number(process.env.BENCH_RUN_MANY_WARMUP ?? 200);

const model = await startModelProcess(LATENCY_MS);
const ask = model.ask;
const agentd = await startLocalAgentd(model.url);
const { url, key } = agentd;
const project = { id: agentd.projectId };
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

const runMany = (file: string) =>
  promisify(execFile)(process.execPath, [path.join(import.meta.dirname, '../bin/agentd.js'), 'run-many', '--input', file, '--out', out, '--template', template, '--concurrency', String(CONCURRENCY)], {
    env: { ...process.env, AGENTD_URL: url, AGENTD_API_KEY: key, AGENTD_PROJECT_ID: project.id },
  });

// A server that has been up a while, as a user's is: its first turns compile the code they run.
await writeFile(warmInputs, Array.from({ length: WARMUP }, (_, i) => JSON.stringify({ message: `warm-up ${i}` })).join('\n'));
await runMany(warmInputs);
const floorMs = await modelFloor(model.url, INPUTS, CONCURRENCY);
await ask({ type: 'reset' });
const cliBefore = childCpuSeconds();
const agentdBefore = process.cpuUsage();
const started = performance.now();
await runMany(inputs);
const wallMs = performance.now() - started;
const agentdCpu = process.cpuUsage(agentdBefore);
const perInput = (seconds: number) => ((seconds * 1000) / INPUTS).toFixed(2);
const cpu = `${perInput((agentdCpu.user + agentdCpu.system) / 1e6)} / ${perInput(childCpuSeconds() - cliBefore)} ms`;
const { peakInFlight } = await ask<{ peakInFlight: number }>({ type: 'peak' });
const lines = (await readFile(out, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { status: string });
const ok = lines.filter((l) => l.status === 'success').length;
const idealMs = (INPUTS * LATENCY_MS) / CONCURRENCY;

process.stdout.write(
  [
    `agentd run-many, ${INPUTS} inputs, concurrency ${CONCURRENCY}, model latency ${LATENCY_MS} ms, ${agentd.turnWorkers} turn worker threads (node ${process.version}, ${os.cpus().length} cores)`,
    '',
    '| ideal (N × latency / C) | floor (plain model calls) | run-many | run-many / ideal | run-many / floor | peak in flight | succeeded | CPU per input: agentd / CLI |',
    '|---|---|---|---|---|---|---|---|',
    `| ${(idealMs / 1000).toFixed(2)} s | ${(floorMs / 1000).toFixed(2)} s | ${(wallMs / 1000).toFixed(2)} s | ${(wallMs / idealMs).toFixed(2)} | ${(wallMs / floorMs).toFixed(2)} | ${peakInFlight} | ${ok}/${INPUTS} | ${cpu} |`,
    '',
  ].join('\n'),
);

await agentd.close();
model.stop();
await rm(dir, { recursive: true, force: true });
