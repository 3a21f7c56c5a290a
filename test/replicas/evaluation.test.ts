import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModel, type FakeModelServer, type RecordedRequest } from '../../src/testing/fake-model.ts';
import { apiCall, firstStartCredentials, startServe } from '../support/child-server.ts';
import { freshDatabase, TEST_POSTGRES_URL, type TestDatabase } from '../support/database.ts';

/**
 * Three agentd replicas on one PostgreSQL database share an evaluation run (issue 7): cases are
 * claimed from the database with at most `batch_size` in flight across all of them, and when one
 * replica is killed (-9) mid-run its cases are taken over once their claims lapse — every case
 * ends with exactly one result. Runs only in the `postgres` project: SQLite serves one process.
 */

let model: FakeModelServer;
let database: TestDatabase;
let dataDir: string;
const calls = new Map<string, number>();

describe.runIf(TEST_POSTGRES_URL)('replicas sharing an evaluation run', () => {
  beforeAll(async () => {
    model = await startFakeModel({
      script: (req: RecordedRequest) => {
        const text = req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
        calls.set(text, (calls.get(text) ?? 0) + 1);
        return { text: `done ${text}`, latencyMs: 300 };
      },
    });
    database = await freshDatabase();
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-replicas-'));
  });
  afterAll(async () => {
    await model.close();
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('runs every case exactly once under one batch_size across replicas, even when one is killed', async () => {
    const env = {
      DATABASE_URL: database.url!,
      ...(database.listenUrl ? { AGENTD_DATABASE_LISTEN_URL: database.listenUrl } : {}),
      AGENTD_DATA_DIR: dataDir,
      AGENTD_LOG_LEVEL: 'info',
      AGENTD_LEASE_TTL_MS: '1500',
      AGENTD_EVAL_POLL_MS: '100',
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: model.url,
      AGENTD_DEFAULT_PROVIDER: 'openai',
      AGENTD_DEFAULT_MODEL: 'fake-model',
    };
    const a = await startServe(env);
    const auth = firstStartCredentials(a.output());
    const b = await startServe(env);
    const c = await startServe(env);
    const call = (url: string, method: string, route: string, body?: unknown) => apiCall(url, auth, method, route, body);
    try {
      const agent = { llm: { provider: 'openai', model: 'fake-model' }, tools: [], runner: { permissions: { default: 'allow' } } };
      const workflow = await call(a.url, 'POST', '/workflows', { slug: 'shared-target', data: { parameters: { agent } } });
      const texts = Array.from({ length: 24 }, (_, i) => `shared-case-${i}`);
      const testset = await call(b.url, 'POST', '/simple/testsets/', { testset: { data: { testcases: texts.map((t) => ({ data: { messages: [{ role: 'user', content: t }] } })) } } });
      model.reset();
      const { evaluation } = await call(a.url, 'POST', '/simple/evaluations/', {
        evaluation: { data: { testset_steps: [testset.testset.revision_id], application_steps: [workflow.revision.id], concurrency: { batch_size: 4 } } },
      });
      // Once a few cases are done, replica A dies with its claims held.
      for (;;) {
        const { evaluation: run } = await call(c.url, 'GET', `/simple/evaluations/${evaluation.id}`);
        if (run.data.progress.success >= 6) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      a.child.kill('SIGKILL');
      await a.exited;

      let run;
      for (;;) {
        ({ evaluation: run } = await call(b.url, 'GET', `/simple/evaluations/${evaluation.id}`));
        if (!['pending', 'running'].includes(run.data.status)) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const { results } = await call(c.url, 'POST', '/evaluations/results/query', { result: { run_id: evaluation.id }, windowing: { limit: 100 } });
      // Failures first, with their errors, so a failing run says why.
      expect(results.filter((r: any) => r.status !== 'success').map((r: any) => ({ status: r.status, error: r.error, attempts: r.attempts }))).toEqual([]);
      expect(run.data).toMatchObject({ status: 'success', progress: { total: 24, success: 24, failure: 0, running: 0, pending: 0 } });
      expect(results).toHaveLength(24);
      expect(results.map((r: any) => r.outputs.messages.at(-1).content).sort()).toEqual(texts.map((t) => `done ${t}`).sort());
      // batch_size held across the replicas; only cases cut off with replica A ran twice.
      expect(model.peakInFlight).toBeLessThanOrEqual(4);
      expect(texts.filter((t) => (calls.get(t) ?? 0) > 1).length).toBeLessThanOrEqual(4);
      expect(texts.every((t) => (calls.get(t) ?? 0) >= 1)).toBe(true);
    } finally {
      for (const replica of [a, b, c]) if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGTERM');
      await Promise.all([a.exited, b.exited, c.exited]);
    }
  }, 90_000);
});
