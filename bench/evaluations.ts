/**
 * Evaluation throughput (issue 5): a run of N cases against a fake model that answers after a
 * fixed latency, with `batch_size` B. The ideal wall time is N × latency / B; the floor is the
 * same N model calls made straight to the fake model, B at a time, in the same run; between the
 * two, the same calls through the AI SDK (what a turn is built on) and nothing else. The model is
 * its own process (bench/model-server.ts), as a provider is; agentd runs in this one. A run of
 * BENCH_EVAL_WARMUP cases (2,000) before the measured ones warms the process up.
 * CPU per case is the bench process's (agentd and its turn threads) and, of that, the server
 * thread's own, which is what one event loop must keep up with.
 * Run with `npm run bench:evaluations` (BENCH_EVAL_LATENCY_MS changes the latency,
 * BENCH_EVAL_JITTER_MS the last row's spread of it, 0 leaves that row out;
 * AGENTD_TURN_WORKERS=0 runs turns on the server thread).
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { apiCall } from '../test/support/child-server.ts';
import { modelFloor, sdkCalls, startLocalAgentd, startModelProcess } from './local.ts';

const LATENCY_MS = Number(process.env.BENCH_EVAL_LATENCY_MS ?? 200);
const WARMUP_CASES = Number(process.env.BENCH_EVAL_WARMUP ?? 2000);
const JITTER_MS = Number(process.env.BENCH_EVAL_JITTER_MS ?? 20);
// The issue's targets are on a model that answers after exactly LATENCY_MS. The last row draws each
// latency from LATENCY_MS ± JITTER_MS (the same draws for the floor, the SDK and agentd), as a real
// model's vary: with every answer on time to the millisecond, a batch's cases stay in step round
// after round, and that is most of what a run costs over ideal (BENCHMARKS.md, "Cases in step").
const SCENARIOS = [
  { cases: 200, batch: 20, jitter: 0 },
  { cases: 1000, batch: 100, jitter: 0 },
  ...(JITTER_MS > 0 ? [{ cases: 1000, batch: 100, jitter: JITTER_MS }] : []),
];

const model = await startModelProcess(LATENCY_MS);
const ask = model.ask;
const agentd = await startLocalAgentd(model.url);

const api = (method: string, route: string, body?: unknown) => apiCall(agentd.url, { projectId: agentd.projectId, key: agentd.key }, method, route, body);

const workflow = await api('POST', '/workflows', {
  slug: 'bench-target',
  data: { parameters: { agent: { llm: { provider: 'openai', model: 'm' }, tools: [], runner: { permissions: { default: 'allow' } } } } },
});

/** One run of `cases` cases, `batch` at a time: its wall time from the create request to its recorded end, and the run. */
async function evaluate(cases: number, batch: number): Promise<{ wallMs: number; run: any }> {
  const testset = await api('POST', '/simple/testsets/', {
    testset: { data: { testcases: Array.from({ length: cases }, (_, i) => ({ data: { messages: [{ role: 'user', content: `case ${i}` }] } })) } },
  });
  // Wall clock, not performance.now(): the end is the run's own ended_at, stamped by agentd in
  // this process. Timing to the poll that notices the end would add up to one poll interval.
  const started = Date.now();
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
  if (run.data.status !== 'success') throw new Error(`the run ended ${run.data.status}`);
  return { wallMs: Date.parse(run.data.ended_at) - started, run };
}

// A server that has run a while, as a user's has: a fresh process also compiles the code it runs
// (JIT), and that goes on for its first thousand or two cases (BENCHMARKS.md), which a measured
// run should not pay for.
if (WARMUP_CASES > 0) {
  await evaluate(WARMUP_CASES, 100);
  await sdkCalls(model.url, WARMUP_CASES, 100);
}

const rows: string[] = [];
for (const { cases, batch, jitter } of SCENARIOS) {
  // Each client gets the same latencies, drawn afresh in the same order.
  const latency = () => ask({ type: 'latency', ms: LATENCY_MS, jitterMs: jitter });
  await latency();
  const floorMs = await modelFloor(model.url, cases, batch);
  await latency();
  const sdkMs = await sdkCalls(model.url, cases, batch);
  await latency();
  await ask({ type: 'reset' });
  const cpuBefore = process.cpuUsage();
  const threadBefore = process.threadCpuUsage();
  const { wallMs, run } = await evaluate(cases, batch);
  const cpu = process.cpuUsage(cpuBefore);
  const thread = process.threadCpuUsage(threadBefore);
  const perCase = (usage: NodeJS.CpuUsage) => ((usage.user + usage.system) / 1000 / cases).toFixed(2);
  const { peakInFlight } = await ask<{ peakInFlight: number }>({ type: 'peak' });
  const idealMs = (cases * LATENCY_MS) / batch;
  const metrics = await api('POST', '/evaluations/metrics/query', { metrics: { run_id: run.id } });
  const duration = metrics.metrics[0].data['application-bench-target'].duration_ms;
  rows.push(
    `| ${cases} | ${batch} | ${jitter > 0 ? `${LATENCY_MS} ± ${jitter}` : LATENCY_MS} ms | ${(idealMs / 1000).toFixed(2)} s | ${(floorMs / 1000).toFixed(2)} s | ${(sdkMs / 1000).toFixed(2)} s (${(sdkMs / idealMs).toFixed(2)}) | ${(wallMs / 1000).toFixed(2)} s | ${(wallMs / idealMs).toFixed(2)} | ${(wallMs / floorMs).toFixed(2)} | ${peakInFlight} | ${duration.p50.toFixed(0)} / ${duration.p99.toFixed(0)} ms | ${perCase(cpu)} / ${perCase(thread)} ms |`,
  );
}

process.stdout.write(
  [
    `Evaluation runs, ${agentd.turnWorkers} turn worker threads (node ${process.version}, ${os.cpus().length} cores)`,
    '',
    '| cases | batch_size | model latency | ideal (N × latency / B) | floor (plain model calls) | AI SDK calls (/ ideal) | agentd run | run / ideal | run / floor | peak in flight | case p50 / p99 | CPU per case: process / server thread |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n'),
);

await agentd.close();
model.stop();
