/**
 * Replicas on one PostgreSQL database. `npm run bench:replicas`; needs BENCH_DATABASE_URL (or
 * AGENTD_TEST_DATABASE_URL); each part gets a fresh schema. BENCH_REPLICAS_PARTS picks the parts
 * (default `inputs,evaluations`):
 *
 * - `inputs`: what docs/deployment.md's capacity model is computed from, measured on this machine
 *   with two `agentd serve` processes: database statements, agentd CPU and PostgreSQL CPU per turn
 *   (JSON echo, JSON tool turn, streamed echo); statements per second with 0 and 100 live turns
 *   (the lease renewals); connections held; NOTIFY statements per event relayed to a follower on
 *   the other replica. Statements and notifications come from each replica's /metrics, CPU from /proc.
 * - `evaluations` (issue 7): 1, 2 and 3 processes, a run of N cases with a large `batch_size`, the
 *   model answering after 200 ms: cases per second per replica count, against one replica.
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

const PARTS = (process.env.BENCH_REPLICAS_PARTS ?? 'inputs,evaluations').split(',');
const INPUT_TURNS = Number(process.env.BENCH_REPLICAS_TURNS ?? 300);
const LIVE_TURNS = Number(process.env.BENCH_REPLICAS_LIVE ?? 100);

const model = await startModelProcess(LATENCY_MS);

async function admin<Row = unknown>(query: string): Promise<Row[]> {
  const client = new pg.Client({ connectionString: BASE_URL });
  await client.connect();
  try {
    return (await client.query(query)).rows as Row[];
  } finally {
    await client.end();
  }
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

/** A fresh schema and data folder for one part, the settings its replicas share, and the way to remove both. */
async function freshPlace(): Promise<{ env: Record<string, string>; remove(): Promise<void> }> {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  await admin(`CREATE SCHEMA ${schema}`);
  const url = new URL(BASE_URL!);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-replicas-'));
  return {
    env: { DATABASE_URL: url.toString(), AGENTD_DATA_DIR: dataDir, OPENAI_API_KEY: 'sk-bench', OPENAI_BASE_URL: model.url },
    remove: async () => {
      await admin(`DROP SCHEMA ${schema} CASCADE`);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function measure(replicas: number): Promise<{ rate: number; agentdMsPerCase: number; postgresMsPerCase: number }> {
  const place = await freshPlace();
  const env = { ...place.env, AGENTD_LOG_LEVEL: 'warn', AGENTD_EVAL_POLL_MS: '100' };
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
    await place.remove();
  }
}

async function evaluations(): Promise<void> {
  await model.ask({ type: 'latency', ms: LATENCY_MS });
  const rows: string[] = [];
  let one = 0;
  for (const replicas of [1, 2, 3]) {
    process.stderr.write(`  evaluations: ${replicas} replica(s)…\n`);
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
}

/** One counter or histogram count from a replica's /metrics (summed over its label sets). */
async function scraped(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n')) if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  return total;
}

/** Connections to the bench's database that PostgreSQL holds now (the bench's own query excluded). */
async function connections(): Promise<number> {
  const [row] = await admin<{ n: number }>('select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()');
  return row!.n;
}

async function inputs(): Promise<void> {
  const place = await freshPlace();
  const env = { ...place.env, AGENTD_LOG_LEVEL: 'info', AGENTD_METRICS: 'open', AGENTD_LEASE_TTL_MS: '3000' };
  const before = await connections();
  const a = await startServe(env);
  const b = await startServe(env);
  const auth = firstStartCredentials(a.output());
  const agent = (tools: string[]) => ({ llm: { provider: 'openai', model: 'm' }, tools: tools.map((name) => ({ type: 'builtin', name })), runner: { permissions: { default: 'allow' } } });
  let seq = 0;
  const invoke = (url: string, body: object, accept = 'application/json', signal?: AbortSignal) =>
    fetch(`${url}/services/agent/v0/invoke?project_id=${auth.projectId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${auth.key}`, accept },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
  const turn = (tools: string[], session = `bench-${++seq}`) => ({ session_id: session, data: { inputs: { messages: [{ role: 'user', content: 'hi' }] }, parameters: { agent: agent(tools) } } });
  const lines: string[] = [];
  try {
    await model.ask({ type: 'latency', ms: 0 });
    lines.push('| turn | statements per turn | agentd CPU per turn | PostgreSQL CPU per turn |', '|---|---|---|---|');
    for (const [name, tools, accept] of [
      ['JSON echo', [], 'application/json'],
      ['JSON tool turn (`write`)', ['write'], 'application/json'],
      ['streamed echo (SSE)', [], 'text/event-stream'],
    ] as const) {
      process.stderr.write(`  inputs: ${name}…\n`);
      const statements = await scraped(a.url, 'agentd_store_query_duration_seconds_count');
      const cpu = await cpuSeconds(a.child.pid!);
      const pgCpu = await postgresCpuSeconds();
      let left = INPUT_TURNS;
      await Promise.all(
        Array.from({ length: 10 }, async () => {
          while (left-- > 0) {
            const res = await invoke(a.url, turn([...tools]), accept);
            if (!res.ok) throw new Error(`${name}: ${res.status} ${await res.text()}`);
            await res.text();
          }
        }),
      );
      const per = (delta: number) => delta / INPUT_TURNS;
      lines.push(
        `| ${name} | ${per((await scraped(a.url, 'agentd_store_query_duration_seconds_count')) - statements).toFixed(1)} | ${(per((await cpuSeconds(a.child.pid!)) - cpu) * 1000).toFixed(2)} ms | ${(per((await postgresCpuSeconds()) - pgCpu) * 1000).toFixed(2)} ms |`,
      );
    }
    const peakConnections = (await connections()) - before;

    // Live turns: each holds a lease the replica renews; renewals are one statement per period
    // for all of a replica's turns.
    const window = async (): Promise<{ statements: number; pgCpu: number }> => {
      const [statements, pgCpu] = [await scraped(a.url, 'agentd_store_query_duration_seconds_count'), await postgresCpuSeconds()];
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      return { statements: ((await scraped(a.url, 'agentd_store_query_duration_seconds_count')) - statements) / 6, pgCpu: ((await postgresCpuSeconds()) - pgCpu) / 6 };
    };
    process.stderr.write(`  inputs: 0 and ${LIVE_TURNS} live turns…\n`);
    const idle = await window();
    await model.ask({ type: 'latency', ms: 20_000 });
    const stop = new AbortController();
    const live = Array.from({ length: LIVE_TURNS }, () => invoke(a.url, turn([]), 'text/event-stream', stop.signal).catch(() => undefined));
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const running = await scraped(a.url, 'agentd_live_turns');
    const busy = await window();
    stop.abort();
    await Promise.all(live);
    lines.push(
      '',
      `| live turns on the replica | statements per second (whole replica) | PostgreSQL CPU per second |`,
      '|---|---|---|',
      `| 0 | ${idle.statements.toFixed(2)} | ${(idle.pgCpu * 1000).toFixed(1)} ms |`,
      `| ${running} | ${busy.statements.toFixed(2)} | ${(busy.pgCpu * 1000).toFixed(1)} ms |`,
    );

    // A follower on the other replica: NOTIFY statements per event relayed.
    process.stderr.write('  inputs: relayed turns…\n');
    await model.ask({ type: 'latency', ms: 300 });
    await model.ask({ type: 'pace', ms: 5 });
    const sent = await scraped(a.url, 'agentd_notifications_sent_total');
    let relayedEvents = 0;
    for (let i = 0; i < 20; i++) {
      const body = turn([]);
      const owner = invoke(a.url, body, 'text/event-stream').then((res) => res.text());
      await new Promise((resolve) => setTimeout(resolve, 100));
      const attached = await fetch(`${b.url}/services/agent/v0/invoke?project_id=${auth.projectId}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `ApiKey ${auth.key}`, accept: 'text/event-stream', 'x-ag-session-control': 'force' },
        body: JSON.stringify({ session_id: body.session_id }),
      });
      relayedEvents += (await attached.text()).split('\n\n').filter((frame) => frame.includes('data:')).length;
      await owner;
    }
    await model.ask({ type: 'pace', ms: 0 });
    const notifies = (await scraped(a.url, 'agentd_notifications_sent_total')) - sent;
    lines.push(
      '',
      `Relayed: 20 streamed turns (the model's frames 5 ms apart), each followed from the other replica: ${relayedEvents} events relayed, ${notifies} NOTIFY statements (${(notifies / relayedEvents).toFixed(2)} per event).`,
      `Connections: up to ${peakConnections} held by the two replicas (AGENTD_PG_POOL_SIZE 10 each, plus one listening connection each).`,
    );
  } finally {
    await model.ask({ type: 'latency', ms: LATENCY_MS });
    for (const server of [a, b]) server.child.kill('SIGTERM');
    await Promise.all([a.exited, b.exited]);
    await place.remove();
  }
  process.stdout.write(
    [`The capacity model's inputs, on PostgreSQL (${INPUT_TURNS} turns of each kind, 10 at a time, on one of two replicas; lease TTL 3 s; node ${process.version}, ${os.cpus().length} cores)`, '', ...lines, ''].join('\n'),
  );
}

if (PARTS.includes('inputs')) await inputs();
if (PARTS.includes('evaluations')) await evaluations();
model.stop();
