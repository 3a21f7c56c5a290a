/**
 * The store's share of a turn (issue 21): CPU per turn of the five statements every turn runs
 * (take the session's lease, create or touch the session, insert the turn, finish it, give the
 * lease back: the middle two and the last two go together, src/store/turns.ts), through agentd's
 * own repositories, in this process. Turns run 1 and 50 at a time:
 * one at a time, every write commits alone; fifty at a time, as under the bench's 50 clients,
 * the writes of one event-loop iteration share a commit (src/store/sqlite-driver.ts). CPU is the
 * whole process's (the WAL checkpointer's thread included). `npm run bench:store`; with
 * BENCH_DATABASE_URL, PostgreSQL too (its server's CPU is not counted).
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { newId } from '../src/ids.ts';
import { openStore, type Store } from '../src/store/db.ts';

const TURNS = Number(process.env.BENCH_STORE_TURNS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
async function turn(store: Store, projectId: string): Promise<void> {
  // Ids as the server mints them: time-ordered (src/ids.ts).
  const sessionId = newId().replaceAll('-', '');
  const turnId = newId();
  await store.leases.acquire({ projectId, sessionId, turnId, holder: 'bench', ttlMs: 30_000 });
  await store.turns.create({
    id: turnId,
    project_id: projectId,
    session_id: sessionId,
    trace_id: randomUUID().replaceAll('-', ''),
    span_id: randomUUID().slice(0, 16),
    request: { tags: { bench: 'store' } },
    started_at: new Date().toISOString(),
  });
  await store.turns.finish(turnId, {
    status: 'completed',
    stop_reason: 'end_turn',
    output: { messages: [{ role: 'assistant', content: [{ type: 'text', text: 'hello back' }] }] },
    usage: { input: 12, output: 3, total: 15 },
  }, { project_id: projectId, session_id: sessionId });
}

/** µs of CPU per turn with `concurrency` turns at a time. */
async function measure(store: Store, projectId: string, concurrency: number): Promise<number> {
  const before = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < TURNS) await turn(store, projectId);
    }),
  );
  const used = process.cpuUsage(before);
  return (used.user + used.system) / TURNS;
}

async function bench(label: string, databaseUrl: string | undefined): Promise<void> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-store-'));
  const store = await openStore({ dataDir, databaseUrl });
  const { id: projectId } = await store.projects.create('bench');
  try {
    await measure(store, projectId, 50);
    for (const concurrency of [1, 50]) {
      const rounds: number[] = [];
      for (let round = 0; round < ROUNDS; round++) rounds.push(await measure(store, projectId, concurrency));
      console.log(`${label}, ${String(concurrency).padStart(2)} at a time: ${rounds.map((us) => us.toFixed(0)).join(', ')} µs CPU per turn (${TURNS} turns a round)`);
    }
  } finally {
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** A schema of its own on the bench's PostgreSQL server, dropped when done. */
async function withSchema(base: string, run: (url: string) => Promise<void>): Promise<void> {
  const schema = `bench_store_${process.pid}`;
  const admin = async (query: string) => {
    const client = new pg.Client({ connectionString: base });
    await client.connect();
    await client.query(query).finally(() => client.end());
  };
  await admin(`CREATE SCHEMA ${schema}`);
  const url = new URL(base);
  url.searchParams.set('options', `-c search_path=${schema}`);
  try {
    await run(url.toString());
  } finally {
    await admin(`DROP SCHEMA ${schema} CASCADE`);
  }
}

await bench('SQLite', undefined);
const postgres = process.env.BENCH_DATABASE_URL;
if (postgres) await withSchema(postgres, (url) => bench('PostgreSQL', url));
