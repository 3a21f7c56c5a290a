/**
 * Evaluation claims per second for one run (issue 24): 1 and 3 processes, each a store of its own
 * on one PostgreSQL database with several claim loops, every claim finished at once, so the
 * claim path (and its locking) is all that is measured. Claims take a case and a free slot with
 * `FOR UPDATE SKIP LOCKED` (design.md §5); BENCHMARKS.md has the figures before and after.
 * Needs BENCH_DATABASE_URL (or AGENTD_TEST_DATABASE_URL). `npm run bench:claims`.
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { openStore } from '../src/store/db.ts';

const BASE_URL = process.env.BENCH_DATABASE_URL ?? process.env.AGENTD_TEST_DATABASE_URL;
const SECONDS = Number(process.env.BENCH_DURATION ?? 8);
const LOOPS = Number(process.env.BENCH_CLAIM_LOOPS ?? 4);
const CAP = Number(process.env.BENCH_CLAIM_CAP ?? 50);
const RUN_ID = 'bench-run';

interface Job {
  url: string;
  holder: string;
  limit: number;
  /** Claims are counted from here (the children have started by then) to `until`. */
  from: number;
  until: number;
}

/** In a child: claim and finish cases until the time is up, then report how many. */
async function claimer(job: Job): Promise<number> {
  const store = await openStore({ dataDir: await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-claims-')), databaseUrl: job.url });
  let claimed = 0;
  await Promise.all(
    Array.from({ length: LOOPS }, async () => {
      while (Date.now() < job.until) {
        const cases = await store.evaluations.claim(RUN_ID, job.holder, job.limit, CAP, 60_000);
        if (cases.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
        for (const c of cases) await store.evaluations.updateResult(c.id, job.holder, { status: 'success', attempts: [] });
        if (Date.now() >= job.from) claimed += cases.length;
      }
    }),
  );
  await store.close();
  return claimed;
}

async function measure(processes: number, limit: number): Promise<number> {
  if (!BASE_URL) throw new Error('set BENCH_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/test)');
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: BASE_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const url = new URL(BASE_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  try {
    const store = await openStore({ dataDir: await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-claims-')), databaseUrl: url.toString() });
    const project = (await store.projects.ensure('bench')).id;
    // More cases than the run can get through, so claimers never run out.
    const ids = Array.from({ length: 40_000 }, (_, i) => `case-${String(i).padStart(6, '0')}`);
    await store.evaluations.createRun({ id: RUN_ID, project_id: project, spec: {} }, ids.map((id, i) => ({ id, testcase_id: `t${i}`, repeat_idx: 0 })));
    await store.close();
    const from = Date.now() + 2000;
    const until = from + SECONDS * 1000;
    const counts = await Promise.all(
      Array.from({ length: processes }, (_, i) => {
        const child = fork(fileURLToPath(import.meta.url), ['child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
        child.send({ url: url.toString(), holder: `replica-${i}`, limit, from, until } satisfies Job);
        return new Promise<number>((resolve, reject) => {
          child.once('message', (count) => resolve(count as number));
          child.once('exit', (code) => (code ? reject(new Error(`a claimer exited with ${code}`)) : undefined));
        });
      }),
    );
    return counts.reduce((a, b) => a + b, 0) / SECONDS;
  } finally {
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
  }
}

if (process.argv[2] === 'child') {
  process.once('message', async (job: Job) => {
    process.send!(await claimer(job));
    process.disconnect();
  });
} else {
  const rows: string[] = [];
  for (const limit of [1, 5]) {
    for (const processes of [1, 3]) {
      process.stderr.write(`  ${processes} process(es), ${limit} case(s) per claim…\n`);
      rows.push(`| ${processes} | ${limit} | ${(await measure(processes, limit)).toFixed(0)} |`);
    }
  }
  process.stdout.write(
    [
      `Claims per second for one run on PostgreSQL, ${LOOPS} claim loops per process, cap ${CAP} (node ${process.version}, ${os.cpus().length} cores)`,
      '',
      '| processes | cases per claim | claims/s |',
      '|---|---|---|',
      ...rows,
      '',
    ].join('\n'),
  );
}
