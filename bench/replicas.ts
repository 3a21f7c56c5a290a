/**
 * Evaluation throughput across replicas (issue 7): one PostgreSQL database, 1, 2 and 3 `agentd
 * serve` processes, a run of N cases with a large `batch_size`, the model (its own process)
 * answering after 200 ms. Reports cases per second per replica count and the scaling against one
 * replica, measured in the same run. Needs BENCH_DATABASE_URL (or AGENTD_TEST_DATABASE_URL);
 * each replica count gets a fresh schema. `npm run bench:replicas`.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { firstStartCredentials, startServe } from '../test/support/child-server.ts';
import { startModelProcess } from './local.ts';

const BASE_URL = process.env.BENCH_DATABASE_URL ?? process.env.AGENTD_TEST_DATABASE_URL;
if (!BASE_URL) throw new Error('set BENCH_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/test)');
const CASES = Number(process.env.BENCH_REPLICAS_CASES ?? 600);
const BATCH = Number(process.env.BENCH_REPLICAS_BATCH ?? 150);
const LATENCY_MS = 200;

const model = await startModelProcess(LATENCY_MS);

async function admin(query: string): Promise<void> {
  const client = new pg.Client({ connectionString: BASE_URL });
  await client.connect();
  await client.query(query);
  await client.end();
}

/** CPU seconds a process has used so far (Linux /proc), to say where a run's time went. */
async function cpuSeconds(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds of every PostgreSQL server process. */
async function postgresCpuSeconds(): Promise<number> {
  let total = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if ((await readFile(`/proc/${entry}/comm`, 'utf8')).trim() === 'postgres') total += await cpuSeconds(Number(entry));
    } catch {
      // The process ended meanwhile.
    }
  }
  return total;
}

async function measure(replicas: number): Promise<{ rate: number; agentdMsPerCase: number; postgresMsPerCase: number }> {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  await admin(`CREATE SCHEMA ${schema}`);
  const url = new URL(BASE_URL!);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-replicas-'));
  const env = {
    DATABASE_URL: url.toString(),
    AGENTD_DATA_DIR: dataDir,
    AGENTD_LOG_LEVEL: 'warn',
    AGENTD_EVAL_POLL_MS: '100',
    OPENAI_API_KEY: 'sk-bench',
    OPENAI_BASE_URL: model.url,
  };
  // The first start prints the key; its `info` line also says where it listens.
  const first = await startServe({ ...env, AGENTD_LOG_LEVEL: 'info' });
  const servers = [first, ...(await Promise.all(Array.from({ length: replicas - 1 }, () => startServe({ ...env, AGENTD_LOG_LEVEL: 'info' }))))];
  const auth = firstStartCredentials(first.output());
  const api = async (route: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${first.url}/api${route}?project_id=${auth.projectId}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `ApiKey ${auth.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!res.ok) throw new Error(`${route}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  try {
    const workflow = await api('/workflows', { slug: 'bench', data: { parameters: { agent: { llm: { provider: 'openai', model: 'm' }, tools: [], runner: { permissions: { default: 'allow' } } } } } });
    const testset = await api('/simple/testsets/', { testset: { data: { testcases: Array.from({ length: CASES }, (_, i) => ({ data: { messages: [{ role: 'user', content: `case ${i}` }] } })) } } });
    const cpuBefore = await Promise.all(servers.map((s) => cpuSeconds(s.child.pid!)));
    const pgBefore = await postgresCpuSeconds();
    const started = performance.now();
    const { evaluation } = await api('/simple/evaluations/', {
      evaluation: { data: { testset_steps: [testset.testset.revision_id], application_steps: [workflow.revision.id], concurrency: { batch_size: BATCH } } },
    });
    let run = evaluation;
    while (run.data.status === 'pending' || run.data.status === 'running') {
      await new Promise((resolve) => setTimeout(resolve, 100));
      run = (await api(`/simple/evaluations/${evaluation.id}`)).evaluation;
    }
    if (run.data.status !== 'success') throw new Error(`the run ended ${run.data.status}`);
    const rate = CASES / ((performance.now() - started) / 1000);
    const cpuAfter = await Promise.all(servers.map((s) => cpuSeconds(s.child.pid!)));
    const agentdCpu = cpuAfter.reduce((sum, after, i) => sum + after - cpuBefore[i]!, 0);
    return { rate, agentdMsPerCase: (agentdCpu * 1000) / CASES, postgresMsPerCase: (((await postgresCpuSeconds()) - pgBefore) * 1000) / CASES };
  } finally {
    for (const server of servers) server.child.kill('SIGTERM');
    await Promise.all(servers.map((s) => s.exited));
    await admin(`DROP SCHEMA ${schema} CASCADE`);
    await rm(dataDir, { recursive: true, force: true });
  }
}

const rows: string[] = [];
let one = 0;
for (const replicas of [1, 2, 3]) {
  process.stderr.write(`  ${replicas} replica(s)…\n`);
  const { rate, agentdMsPerCase, postgresMsPerCase } = await measure(replicas);
  if (replicas === 1) one = rate;
  rows.push(`| ${replicas} | ${rate.toFixed(1)} | ${(rate / one).toFixed(2)} | ${agentdMsPerCase.toFixed(1)} | ${postgresMsPerCase.toFixed(1)} |`);
}
process.stdout.write(
  [
    `Evaluation on PostgreSQL, ${CASES} cases, batch_size ${BATCH}, model latency ${LATENCY_MS} ms (ideal ${(BATCH / (LATENCY_MS / 1000)).toFixed(0)} cases/s; node ${process.version}, ${os.cpus().length} cores)`,
    '',
    '| replicas | cases/s | vs 1 replica | agentd CPU per case (all replicas) | PostgreSQL CPU per case |',
    '|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n'),
);
model.stop();
