import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import type { RecordedRequest } from '../../src/testing/fake-model.ts';
import { startServe } from '../support/child-server.ts';
import { TEST_POSTGRES_URL } from '../support/database.ts';
import { expectError, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * Replicas whose clocks disagree by 30 s, either way, still agree on who holds what: leases and
 * evaluation claims expire by the database's clock. With each replica's own clock, the one ahead
 * would take the other's live sessions and cases for abandoned, and run them a second time.
 */

const SKEWED = path.join(import.meta.dirname, '../support/skewed-clock.mjs');

describe.runIf(TEST_POSTGRES_URL).each([30_000, -30_000])('a replica whose clock is %i ms off', (skew) => {
  let a: Harness;
  let b: Awaited<ReturnType<typeof startServe>>;
  const calls = new Map<string, number>();

  beforeAll(async () => {
    a = await startHarness({
      script: (req: RecordedRequest) => {
        const text = req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
        calls.set(text, (calls.get(text) ?? 0) + 1);
        return { text: `done ${text}`, latencyMs: 1500 };
      },
      env: { AGENTD_LEASE_TTL_MS: '3000', AGENTD_EVAL_POLL_MS: '100' },
    });
    b = await startServe(
      {
        DATABASE_URL: a.databaseUrl,
        ...(a.listenUrl ? { AGENTD_DATABASE_LISTEN_URL: a.listenUrl } : {}),
        AGENTD_DATA_DIR: a.dataDir,
        OPENAI_API_KEY: 'sk-test-openai-key',
        OPENAI_BASE_URL: a.model.url,
        AGENTD_DEFAULT_PROVIDER: 'openai',
        AGENTD_DEFAULT_MODEL: 'fake-model',
        AGENTD_LEASE_TTL_MS: '3000',
        AGENTD_EVAL_POLL_MS: '100',
        AGENTD_TEST_CLOCK_SKEW_MS: String(skew),
      },
      ['--import', SKEWED],
    );
  }, 60_000);
  afterAll(async () => {
    b?.child.kill('SIGTERM');
    await b?.exited;
    await a?.close();
  });

  const onB = (body: unknown) =>
    fetch(`${b.url}/services/agent/v0/invoke?project_id=${a.projectId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${a.apiKey}` },
      body: JSON.stringify(body),
    });
  const hello = (session: string, text: string) => invokeBody([{ role: 'user', content: text }], template(), { session_id: session });

  it('never runs two live turns on one session, whichever replica holds it', async () => {
    const heldByA = sid('skew-a');
    const running = a.invoke(hello(heldByA, `a ${skew}`));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await expectError(await onB(hello(heldByA, `b on a ${skew}`)), 409, 'session-busy');
    expect((await readJson(await running)).data.outputs.stop_reason).toBe('end_turn');

    const heldByB = sid('skew-b');
    const onOther = onB(hello(heldByB, `b ${skew}`));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await expectError(await a.invoke(hello(heldByB, `a on b ${skew}`)), 409, 'session-busy');
    expect((await readJson(await onOther)).data.outputs.stop_reason).toBe('end_turn');
  });

  it('never runs an evaluation case twice, however the two replicas share the run', async () => {
    const client = createClient({ baseUrl: a.url, apiKey: a.apiKey, projectId: a.projectId });
    const texts = Array.from({ length: 6 }, (_, i) => `case ${skew} ${i}`);
    const testset = (await client.testsets.create({ data: { testcases: texts.map((t) => ({ data: { messages: [{ role: 'user', content: t }] } })) } })).revision_id;
    const { evaluation } = await client.evaluations.create({ data: { testset_steps: [testset], application_steps: ['agenta:builtin:agent:v0'], concurrency: { batch_size: 2 } } });
    for (let i = 0; i < 400 && ['pending', 'running'].includes((await client.evaluations.get(evaluation.id)).evaluation.data.status); i++) await new Promise((r) => setTimeout(r, 50));
    expect((await client.evaluations.get(evaluation.id)).evaluation.data).toMatchObject({ status: 'success', progress: { success: 6 } });
    expect(texts.map((t) => calls.get(t))).toEqual(texts.map(() => 1));
    const results = (await client.evaluations.results({ result: { run_id: evaluation.id } })).results;
    expect(results.every((r) => r.attempts.length === 1)).toBe(true);
  }, 60_000);
});
