/**
 * Attach across replicas (issue 7): two `agentd serve` processes on one PostgreSQL database. A
 * turn streams on replica A to its caller while a second reader attaches to it through replica B,
 * which relays it over LISTEN/NOTIFY. For every frame both readers get, the lag is B's arrival
 * time minus A's; the replay (the frames A had before B attached) is counted apart. The model (in
 * this process) sends a frame every 50 ms. Needs BENCH_DATABASE_URL (or
 * AGENTD_TEST_DATABASE_URL). `npm run bench:attach`.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { startFakeModel } from '../src/testing/fake-model.ts';
import { firstStartCredentials, startServe } from '../test/support/child-server.ts';

const BASE_URL = process.env.BENCH_DATABASE_URL ?? process.env.AGENTD_TEST_DATABASE_URL;
if (!BASE_URL) throw new Error('set BENCH_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/test)');
const TURNS = Number(process.env.BENCH_ATTACH_TURNS ?? 30);
const FRAME_MS = 50;
const TEXT = 'a streamed answer, relayed to a second reader';

const model = await startFakeModel({ script: { text: TEXT, chunkDelayMs: FRAME_MS }, record: false });

async function admin(query: string): Promise<void> {
  const client = new pg.Client({ connectionString: BASE_URL });
  await client.connect();
  await client.query(query);
  await client.end();
}

/** Arrival times of the frames of a streamed reply, in order. */
async function deltaTimes(res: Response): Promise<number[]> {
  const times: number[] = [];
  const decoder = new TextDecoder();
  let buffer = '';
  const reader = res.body!.getReader();
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
    const now = performance.now();
    buffer += decoder.decode(chunk.value, { stream: true });
    const blocks = buffer.split('\n\n');
    buffer = blocks.pop()!;
    for (const block of blocks) if (block.startsWith('data: ')) times.push(now);
  }
  return times;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

const schema = `bench_${randomBytes(4).toString('hex')}`;
await admin(`CREATE SCHEMA ${schema}`);
const url = new URL(BASE_URL);
url.searchParams.set('options', `-c search_path=${schema}`);
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-attach-'));
const env = { DATABASE_URL: url.toString(), AGENTD_DATA_DIR: dataDir, AGENTD_LOG_LEVEL: 'info', OPENAI_API_KEY: 'sk-bench', OPENAI_BASE_URL: model.url };
const a = await startServe(env);
const b = await startServe(env);
const auth = firstStartCredentials(a.output());
const post = (base: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}/services/agent/v0/invoke?project_id=${auth.projectId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `ApiKey ${auth.key}`, accept: 'text/event-stream', ...headers },
    body: JSON.stringify(body),
  });

const lags: number[] = [];
let replayed = 0;
try {
  const agent = { llm: { provider: 'openai', model: 'm' }, tools: [], runner: { permissions: { default: 'allow' } } };
  for (let i = 0; i < TURNS; i++) {
    const session = `attach-${i}`;
    const owner = await post(a.url, { session_id: session, data: { inputs: { messages: [{ role: 'user', content: 'go' }] }, parameters: { agent } } });
    const ownTimes = deltaTimes(owner);
    // Attach some frames in, so part of the turn is replayed and the rest is live.
    await new Promise((resolve) => setTimeout(resolve, 2 * FRAME_MS));
    const asked = performance.now();
    const attached = await post(b.url, { session_id: session }, { 'x-ag-session-control': 'force' });
    if (attached.status !== 200) throw new Error(`attach answered ${attached.status}: ${await attached.text()}`);
    const [mine, theirs] = await Promise.all([ownTimes, deltaTimes(attached)]);
    if (mine.length !== theirs.length) throw new Error(`A sent ${mine.length} frames, B relayed ${theirs.length}`);
    for (let k = 0; k < mine.length; k++) {
      if (mine[k]! < asked) replayed++;
      else lags.push(theirs[k]! - mine[k]!);
    }
  }
} finally {
  for (const server of [a, b]) server.child.kill('SIGTERM');
  await Promise.all([a.exited, b.exited]);
  await admin(`DROP SCHEMA ${schema} CASCADE`);
  await rm(dataDir, { recursive: true, force: true });
  await model.close();
}

lags.sort((x, y) => x - y);
const ms = (v: number) => `${v.toFixed(1)} ms`;
process.stdout.write(
  [
    `Attach across replicas on PostgreSQL: ${TURNS} turns, a model frame every ${FRAME_MS} ms, ${replayed} frames replayed (node ${process.version}, ${os.cpus().length} cores)`,
    '',
    '| measure | p50 | p90 | p99 | max | frames |',
    '|---|---|---|---|---|---|',
    `| live frame: relayed reader (B) after the turn's own reader (A) | ${ms(percentile(lags, 0.5))} | ${ms(percentile(lags, 0.9))} | ${ms(percentile(lags, 0.99))} | ${ms(lags.at(-1)!)} | ${lags.length} |`,
    '',
  ].join('\n'),
);
