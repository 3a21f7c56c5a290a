import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, expectError, invokeBody, readFrames, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * Spec §4.2, §7 and src/agent/model-errors.ts: what a broken upstream turns into. Never a 500 for
 * someone else's outage, the real status even when a stream was asked for, and a stream that has
 * begun ends with an `error` frame and `done`.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const agent = template({ tools: [builtin('write')], mode: 'allow' });
const turn = (extra: Record<string, unknown> = {}) => invokeBody([{ role: 'user', content: 'go' }], agent, extra);

describe('before any output (JSON)', () => {
  it('upstream 401 → 424 upstream-auth', async () => {
    h.model.script({ error: { status: 401 } });
    await expectError(await h.invoke(turn()), 424, 'upstream-auth', /credentials|API key/i);
  });

  it('upstream 403 → 424 upstream-auth', async () => {
    h.model.script({ error: { status: 403 } });
    await expectError(await h.invoke(turn()), 424, 'upstream-auth');
  });

  it('upstream 429 with retry-after: 7 → 429 upstream-rate-limited and retry-after: 7', async () => {
    h.model.script({ error: { status: 429, headers: { 'retry-after': '7' } } });
    const res = await h.invoke(turn());
    await expectError(res, 429, 'upstream-rate-limited', /7/);
    expect(res.headers.get('retry-after')).toBe('7');
  });

  it('upstream 500 → 502 upstream-error', async () => {
    h.model.script({ error: { status: 500 } });
    await expectError(await h.invoke(turn()), 502, 'upstream-error', /500/);
  });

  it('upstream 503 → a 5xx gateway error, not 500', async () => {
    h.model.script({ error: { status: 503 } });
    const res = await h.invoke(turn());
    expect([502, 503]).toContain(res.status);
    await expectError(res, res.status);
  });

  it('a malformed upstream stream → 502', async () => {
    h.model.script({ malformed: true });
    await expectError(await h.invoke(turn()), 502, 'upstream-error');
  });

  it('a failed turn still names its session and trace, and is recorded as failed', async () => {
    const session = sid('fail');
    h.model.script({ error: { status: 500 } });
    const res = await h.invoke(turn({ session_id: session }));
    const json = await expectError(res, 502);
    expect(json.session_id).toBe(session);
    expect(json.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(res.headers.get('x-ag-trace-id')).toBe(json.trace_id);
    const [record] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(record).toMatchObject({ status: 'failed', stop_reason: 'error', error: { code: 502, type: 'upstream-error' } });
  });

  it('a failed turn frees its session for the next one', async () => {
    const session = sid('fail');
    h.model.script({ error: { status: 500 } });
    expect((await h.invoke(turn({ session_id: session }))).status).toBe(502);
    h.model.script({ text: 'recovered' });
    expect((await h.invoke(turn({ session_id: session }))).status).toBe(200);
  });
});

describe('streamed requests', () => {
  it.each([
    [{ status: 429, headers: { 'retry-after': '7' } }, 429, 'upstream-rate-limited'],
    [{ status: 401 }, 424, 'upstream-auth'],
    [{ status: 500 }, 502, 'upstream-error'],
  ])('a failure before any output still answers with the JSON envelope and the real status (%j)', async (error, status, type) => {
    h.model.script({ error });
    const res = await h.invoke(turn(), { headers: { accept: 'text/event-stream' } });
    await expectError(res, status, type);
    if (status === 429) expect(res.headers.get('retry-after')).toBe('7');
  });

  it('NDJSON too', async () => {
    h.model.script({ error: { status: 401 } });
    await expectError(await h.invoke(turn(), { headers: { accept: 'application/x-ndjson' } }), 424, 'upstream-auth');
  });

  it('a failure after output began → an error frame, then done, then the stream ends', async () => {
    h.model.script([{ text: 'Writing now.', toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] }, { error: { status: 500 } }]);
    const res = await h.invoke(turn(), { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    const { frames } = await readFrames(res);
    const types = frames.map((f) => f.type);
    expect(types).toContain('tool_call');
    expect(types).toContain('tool_result');
    expect(types.slice(-2)).toEqual(['error', 'done']);
    expect(frames.at(-2)!.data).toMatchObject({ code: 502, type: 'upstream-error', message: expect.stringContaining('500') });
    expect(frames.at(-1)!.data).toEqual({ stop_reason: 'error', stopReason: 'error' });
    expect(types.filter((t) => t === 'done')).toHaveLength(1);
  });

  it('the same failure after output began, asked as JSON → the envelope with 502', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] }, { error: { status: 500 } }]);
    await expectError(await h.invoke(turn()), 502, 'upstream-error');
  });
});

describe('a hanging provider', () => {
  let slow: Harness;
  beforeAll(async () => {
    slow = await startHarness({ env: { AGENTD_MODEL_TIMEOUT_MS: '300' } });
  });
  afterAll(async () => slow.close());

  it('→ 504 upstream-timeout within the configured time', async () => {
    slow.model.script({ hang: true });
    const res = await slow.invoke(turn());
    await expectError(res, 504, 'upstream-timeout');
  });

  it('a provider that stalls mid-stream → 504 too', async () => {
    slow.model.script({ text: 'slow words trickle in', chunkDelayMs: 1000 });
    // A streamed turn streams from the provider too (a JSON turn makes non-streaming calls).
    const res = await slow.invoke(turn(), { headers: { accept: 'text/event-stream' } });
    await expectError(res, 504, 'upstream-timeout');
  });

  it('a slow but timely provider is fine', async () => {
    slow.model.script({ text: 'just in time', latencyMs: 100 });
    expect((await slow.invoke(turn())).status).toBe(200);
  });

  it('a hang after output began, streamed → error frame and done', async () => {
    slow.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] }, { hang: true }]);
    const res = await slow.invoke(turn(), { headers: { accept: 'text/event-stream' } });
    const { frames } = await readFrames(res);
    expect(frames.map((f) => f.type).slice(-2)).toEqual(['error', 'done']);
    expect(frames.at(-2)!.data).toMatchObject({ code: 504, type: 'upstream-timeout' });
  });
});

describe('no provider key', () => {
  let keyless: Harness;
  beforeAll(async () => {
    // OpenAI at the fake model's base URL; Anthropic at its own public API.
    keyless = await startHarness({ env: { OPENAI_API_KEY: '', ANTHROPIC_API_KEY: '', ANTHROPIC_BASE_URL: '' } });
  });
  afterAll(async () => keyless.close());
  const anthropicTurn = () => invokeBody([{ role: 'user', content: 'go' }], { ...agent, llm: { provider: 'anthropic', model: 'claude-x' } });

  it("for the provider's own API → 424 naming ANTHROPIC_API_KEY, and no call upstream", async () => {
    keyless.model.reset();
    await expectError(await keyless.invoke(anthropicTurn()), 424, 'upstream-auth', 'ANTHROPIC_API_KEY');
    expect(keyless.model.requests).toHaveLength(0);
  });

  it('→ the JSON envelope even when streamed', async () => {
    await expectError(await keyless.invoke(anthropicTurn(), { headers: { accept: 'text/event-stream' } }), 424, 'upstream-auth', 'ANTHROPIC_API_KEY');
  });

  it('at a base URL of your own is not needed: the call goes without one', async () => {
    keyless.model.script({ text: 'no key needed' });
    const res = await keyless.invoke(turn());
    expect(res.status).toBe(200);
    expect((await res.json()).data.outputs.messages.at(-1).content).toBe('no key needed');
    expect(keyless.model.requests.at(-1)!.headers).not.toHaveProperty('authorization');
  });

  it('nor for Anthropic at a base URL of your own: no x-api-key header at all', async () => {
    const local = await startHarness({ env: (url) => ({ ANTHROPIC_API_KEY: '', ANTHROPIC_BASE_URL: url }) });
    try {
      local.model.script({ text: 'no key needed' });
      const res = await local.invoke(anthropicTurn());
      expect(res.status).toBe(200);
      expect(local.model.requests.at(-1)!.headers).not.toHaveProperty('x-api-key');
    } finally {
      await local.close();
    }
  });

  it('a per-request secret supplies the key', async () => {
    keyless.model.script({ text: 'ok' });
    const res = await keyless.invoke(turn({ secrets: { OPENAI_API_KEY: 'sk-from-request-1' } }));
    expect(res.status).toBe(200);
    expect(keyless.model.requests.at(-1)!.headers.authorization).toBe('Bearer sk-from-request-1');
  });

  it('a secret no header can carry (a copied "sk-…") is a 400 naming it, not a 502 blaming the provider', async () => {
    keyless.model.reset();
    await expectError(await keyless.invoke(turn({ secrets: { OPENAI_API_KEY: 'sk-…' } })), 400, 'invalid-request', 'secrets.OPENAI_API_KEY');
    expect(keyless.model.requests).toHaveLength(0);
  });

  it("so is one in the server's environment (`OPENAI_API_KEY=sk-… npm start` as copied), as a key that does not work: 424", async () => {
    const odd = await startHarness({ env: { OPENAI_API_KEY: 'sk-…' } });
    try {
      await expectError(await odd.invoke(turn()), 424, 'upstream-auth', "OPENAI_API_KEY in the server's environment");
      expect(odd.model.requests).toHaveLength(0);
    } finally {
      await odd.close();
    }
  });
});
