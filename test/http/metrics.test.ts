import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { openStore } from '../../src/store/db.ts';
import { builtin, expectError, invokeBody, readJson, startHarness, template, until, type Harness } from '../support/harness.ts';
import { createClient } from '../../src/client/index.ts';
import pg from 'pg';
import { TEST_POSTGRES_URL } from '../support/database.ts';
import { createWorkflow } from '../configs/client.ts';
import { createTestset, runEnded, runResults, startRun } from '../evaluation/client.ts';

/** `GET /metrics` (Prometheus, behind its own token) and `/ready`. */

const TOKEN = 'metrics-token-of-the-operator';

/** One sample's value: `name{labels} value`, the labels given matching in any order. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = Object.fromEntries((match[2] ?? '').split(',').filter(Boolean).map((pair) => pair.split('=').map((part) => part.replace(/^"|"$/g, '')) as [string, string]));
    if (Object.entries(labels).every(([key, value]) => have[key] === value)) return Number(match[3]);
  }
  return undefined;
}

describe('metrics', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ env: { AGENTD_METRICS_TOKEN: TOKEN } });
  });
  afterAll(async () => h.close());
  const scrape = async () => {
    const res = await fetch(`${h.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.text();
  };

  it('needs its own token, not an API key', async () => {
    await expectError(await fetch(`${h.url}/metrics`), 401, 'unauthenticated', /Bearer/);
    await expectError(await fetch(`${h.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}x` } }), 401, 'unauthenticated');
    await expectError(await fetch(`${h.url}/metrics`, { headers: { authorization: `ApiKey ${h.apiKey}` } }), 401, 'unauthenticated');
  });

  it('counts turns by outcome, times them and their model calls, and counts what waits for a human', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'm.txt', content: 'x' } }] }, { text: 'done' }]);
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write' }], template({ tools: [builtin('write')] }))));
    h.model.script({ toolCalls: [{ name: 'write', input: { path: 'p.txt', content: 'x' } }] });
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write, but ask' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: 'metrics-paused' })));
    const text = await scrape();
    expect(sample(text, 'agentd_turns_started_total', { harness: 'agentd' })).toBe(2);
    expect(sample(text, 'agentd_turns_finished_total', { harness: 'agentd', outcome: 'completed' })).toBe(1);
    expect(sample(text, 'agentd_turns_finished_total', { harness: 'agentd', outcome: 'paused' })).toBe(1);
    expect(sample(text, 'agentd_turn_duration_seconds_count', { outcome: 'completed' })).toBe(1);
    // The completed turn asked the model twice (before and after its tool), the paused one once.
    expect(sample(text, 'agentd_model_call_duration_seconds_count', { provider: 'openai', outcome: 'ok' })).toBe(3);
    expect(sample(text, 'agentd_pending_interactions')).toBe(1);
    expect(sample(text, 'agentd_paused_sessions')).toBe(1);
    expect(sample(text, 'agentd_live_turns')).toBe(0);
    expect(sample(text, 'agentd_turn_threads')).toBe(h.app.turns.threadsRunning);
    // Where they went depends on the project's AGENTD_TURN_WORKERS_LOAD; both are counted either way.
    const { server, threads } = h.app.turns.placement;
    expect(server + threads).toBe(2);
    expect(sample(text, 'agentd_turns_placed_total', { on: 'server' })).toBe(server);
    expect(sample(text, 'agentd_turns_placed_total', { on: 'thread' })).toBe(threads);
    expect(sample(text, 'agentd_store_query_duration_seconds_count', { engine: h.store.engine })).toBeGreaterThan(5);
    expect(sample(text, 'agentd_event_loop_utilization')).toBeGreaterThan(0);
    expect(sample(text, 'nodejs_eventloop_lag_seconds')).toBeDefined();
    // Every sample says which replica it comes from.
    expect(text).toMatch(/agentd_live_turns\{replica="[^"]+:\d+"\} 0/);
  });

  it("counts failed turns by error type and the model's tokens by provider", async () => {
    const before = await scrape();
    const count = (text: string, name: string, labels: Record<string, string>) => sample(text, name, labels) ?? 0;
    h.model.script({ text: 'counted', usage: { input: 1200, output: 34 } });
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'count me' }], template())));
    h.model.script({ error: { status: 401 } });
    await h.invoke(invokeBody([{ role: 'user', content: 'refused' }], template()));
    h.model.script({ error: { status: 500 } });
    await h.invoke(invokeBody([{ role: 'user', content: 'broken' }], template()));
    const after = await scrape();
    const added = (name: string, labels: Record<string, string>) => count(after, name, labels) - count(before, name, labels);
    expect(added('agentd_turn_errors_total', { harness: 'agentd', type: 'upstream-auth' })).toBe(1);
    expect(added('agentd_turn_errors_total', { harness: 'agentd', type: 'upstream-error' })).toBe(1);
    expect(added('agentd_model_tokens_total', { provider: 'openai', type: 'input' })).toBe(1200);
    expect(added('agentd_model_tokens_total', { provider: 'openai', type: 'output' })).toBe(34);
  });

  it('counts evaluation case attempts and their retries', async () => {
    const client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
    const testset = (await client.testsets.create({ data: { testcases: [{ data: { messages: [{ role: 'user', content: 'one' }] } }] } })).revision_id;
    h.model.script([{ error: { status: 500 } }, { text: 'fine' }]);
    const { evaluation } = await client.evaluations.create({ data: { testset_steps: [testset], application_steps: ['agenta:builtin:agent:v0'], concurrency: { max_retries: 1 } } });
    for (let i = 0; i < 200 && ['pending', 'running'].includes((await client.evaluations.get(evaluation.id)).evaluation.data.status); i++) await new Promise((r) => setTimeout(r, 25));
    const text = await scrape();
    expect(sample(text, 'agentd_evaluation_cases_total', { outcome: 'retry' })).toBe(1);
    expect(sample(text, 'agentd_evaluation_cases_total', { outcome: 'success' })).toBe(1);
    expect(sample(text, 'agentd_evaluation_cases_in_flight')).toBe(0);
  });

  it('counts no human wait for an evaluation case that paused: nobody can answer it, so it fails and what it asked is cancelled', async () => {
    const before = await scrape();
    h.model.script({ toolCalls: [{ name: 'write', input: { path: 'case.txt', content: 'x' } }] });
    const appRevision = (await createWorkflow(h, 'metrics-asks', { agent: template({ tools: [builtin('write')], mode: 'ask' }) })).revision.id;
    const revision = (await createTestset(h, { name: 'metrics-asks', data: { testcases: [{ data: { messages: [{ role: 'user', content: 'write it' }] } }] } })).revision_id;
    const run = await startRun(h, revision, appRevision);
    expect((await runEnded(h, run.id)).data.status).toBe('errors');
    const [result] = await runResults(h, run.id);
    expect(result.error).toMatchObject({ type: 'invalid-request', message: expect.stringMatching(/paused for a human decision/) });
    const after = await scrape();
    expect(sample(after, 'agentd_pending_interactions')).toBe(sample(before, 'agentd_pending_interactions'));
    expect(sample(after, 'agentd_paused_sessions')).toBe(sample(before, 'agentd_paused_sessions'));
    const listed = await fetch(`${h.url}/api/sessions/interactions/query?project_id=${h.projectId}`, {
      method: 'POST',
      headers: { authorization: `ApiKey ${h.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: result.session_id }),
    });
    expect(listed.status).toBe(200);
    const asked = (await listed.json()).interactions;
    expect(asked.map((interaction: any) => interaction.status)).toEqual(['cancelled']);
    expect(await h.store.pausedStates.get(h.projectId, asked[0].turn_id)).toBeUndefined();
    // An answer no longer runs the case's tool after the case has failed.
    expect((await h.respond(asked[0].id, { approved: true })).status).toBe(409);
  });
});

describe.runIf(TEST_POSTGRES_URL)('metrics while the database does not answer', () => {
  it('/ready says so within its wait instead of hanging with the database', async () => {
    const h = await startHarness();
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      // The migrations' own table, which the probe reads.
      await locker.query('LOCK TABLE kysely_migration IN ACCESS EXCLUSIVE MODE');
      const res = await fetch(`${h.url}/ready`, { signal: AbortSignal.timeout(20_000) });
      expect(res.status).toBe(503);
      expect((await res.json()).reason).toBe('the database cannot be reached: no answer within 2000 ms');
      await locker.query('ROLLBACK');
      await until(async () => (await fetch(`${h.url}/ready`)).status, (status) => status === 200);
    } finally {
      await locker.end();
      await h.close();
    }
  }, 60_000);

  it('are scraped all the same, the counts read from the database left as they were, and one read waits, not one per scrape', async () => {
    const h = await startHarness({ env: { AGENTD_METRICS: 'open' } });
    const locker = new pg.Client({ connectionString: h.databaseUrl });
    await locker.connect();
    try {
      h.model.script({ toolCalls: [{ name: 'write', input: { path: 'p.txt', content: 'x' } }] });
      await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write, but ask' }], template({ tools: [builtin('write')], mode: 'ask' }))));
      // A deadline the scrape has to meet: without it, a scrape waited as long as the lock was held.
      const scrape = async () => {
        const res = await fetch(`${h.url}/metrics`, { signal: AbortSignal.timeout(20_000) });
        expect(res.status).toBe(200);
        return res.text();
      };
      expect(sample(await scrape(), 'agentd_pending_interactions')).toBe(1);
      // A migration or a long transaction holds the table the counts are read from.
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE interactions IN ACCESS EXCLUSIVE MODE');
      for (let i = 0; i < 3; i++) {
        const text = await scrape();
        expect(sample(text, 'agentd_pending_interactions')).toBe(1);
        expect(sample(text, 'agentd_paused_sessions')).toBe(1);
        expect(sample(text, 'agentd_turns_started_total', { harness: 'agentd' })).toBe(1);
      }
      const { rows } = await locker.query("select count(*)::int as waiting from pg_locks where relation = 'interactions'::regclass and not granted");
      expect(rows[0].waiting).toBe(1);
      await locker.query('ROLLBACK');
      // Once the database answers again, the counts are read afresh.
      h.model.script({ toolCalls: [{ name: 'write', input: { path: 'q.txt', content: 'x' } }] });
      await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'ask again' }], template({ tools: [builtin('write')], mode: 'ask' }))));
      await until(async () => sample(await scrape(), 'agentd_pending_interactions'), (pending) => pending === 2);
    } finally {
      await locker.end();
      await h.close();
    }
  }, 60_000);
});

describe('metrics off and open', () => {
  it('is no route unless turned on', async () => {
    const h = await startHarness();
    try {
      expect((await fetch(`${h.url}/metrics`)).status).toBe(404);
    } finally {
      await h.close();
    }
  });

  it('is open to every caller with AGENTD_METRICS=open, and a weak token is refused at start', async () => {
    const h = await startHarness({ env: { AGENTD_METRICS: 'open' } });
    try {
      expect((await fetch(`${h.url}/metrics`)).status).toBe(200);
    } finally {
      await h.close();
    }
    expect(() => loadConfig({ AGENTD_METRICS_TOKEN: 'short' })).toThrow(/at least 16 characters/);
    expect(() => loadConfig({ AGENTD_METRICS: 'yes' })).toThrow(/AGENTD_METRICS must be off or open/);
  });
});

describe('/ready', () => {
  it('is ready while the database answers, and not while the server is stopping', async () => {
    const h = await startHarness();
    try {
      expect(await (await fetch(`${h.url}/ready`)).json()).toEqual({ status: 'ready' });
      h.app.draining = true;
      const draining = await fetch(`${h.url}/ready`);
      expect(draining.status).toBe(503);
      expect((await draining.json()).reason).toMatch(/stopping/);
    } finally {
      await h.close();
    }
  });

  it('is not ready when its database is gone, while /health still answers', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-ready-'));
    const store = await openStore({ dataDir });
    const app = await buildApp({ config: loadConfig({ AGENTD_DATA_DIR: dataDir, AGENTD_LOG_LEVEL: 'silent' }), store });
    try {
      await store.close();
      const gone = await app.inject({ url: '/ready' });
      expect(gone.statusCode).toBe(503);
      expect(gone.json().reason).toMatch(/^the database cannot be reached/);
      expect((await app.inject({ url: '/health' })).statusCode).toBe(200);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
