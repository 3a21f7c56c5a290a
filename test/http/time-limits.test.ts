import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, expectError, invokeBody, readFrames, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * Issue 19: each time limit tells the truth. AGENTD_MODEL_TIMEOUT_MS bounds waiting for the model,
 * never the tools a step runs; AGENTD_TURN_TIMEOUT_MS bounds the whole turn and says so.
 */

const bashAgent = template({ tools: [builtin('bash')] });
const sleepy = (seconds: number) => [{ toolCalls: [{ name: 'bash', input: { command: `sleep ${seconds}; echo slept` } }] }, { text: 'the command finished' }];

describe('the model timeout', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ env: { AGENTD_MODEL_TIMEOUT_MS: '300', AGENTD_UNSAFE_HOST_BASH: '1' } });
  });
  afterAll(async () => h.close());

  it('does not count a tool that runs longer than it: the turn ends with the tool’s result', async () => {
    h.model.script(sleepy(0.8));
    const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'sleep' }], bashAgent)));
    const result = body.data.outputs.messages.find((m: { role: string; is_error?: boolean }) => m.role === 'tool' && m.is_error !== undefined);
    expect(result).toMatchObject({ is_error: false, content: expect.stringContaining('slept') });
    expect(body.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'the command finished' });
  });

  it('does not count a tool on a streamed turn either', async () => {
    h.model.script(sleepy(0.8));
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'sleep' }], bashAgent), { headers: { accept: 'text/event-stream' } });
    const { frames } = await readFrames(res);
    expect(frames.find((f) => f.type === 'tool_result')?.data).toMatchObject({ is_error: false });
    expect(frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'end_turn' } });
  });

  it('still stops a model that does not answer: 504 upstream-timeout naming the setting', async () => {
    h.model.script({ text: 'late', latencyMs: 1_500 });
    await expectError(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template())), 504, 'upstream-timeout', /AGENTD_MODEL_TIMEOUT_MS/);
  });
});

describe('the turn timeout', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ env: { AGENTD_TURN_TIMEOUT_MS: '500', AGENTD_UNSAFE_HOST_BASH: '1' } });
  });
  afterAll(async () => h.close());

  it('stops a turn that runs too long with 504 turn-timeout, recorded as failed', async () => {
    const session = sid('slow');
    h.model.script(sleepy(3));
    await expectError(await h.invoke(invokeBody([{ role: 'user', content: 'sleep' }], bashAgent, { session_id: session })), 504, 'turn-timeout', /AGENTD_TURN_TIMEOUT_MS/);
    const turns = (await h.store.turns.listForSessionPage(h.projectId, session, { limit: 10 })).items;
    expect(turns).toHaveLength(1);
    expect(turns[0]).toMatchObject({ status: 'failed', stop_reason: 'error', error: { type: 'turn-timeout' } });
  });

  it('tells a stream that has begun with an error frame, then done; what it streamed is kept', async () => {
    const session = sid('slow-stream');
    h.model.script(sleepy(3));
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'sleep' }], bashAgent, { session_id: session }), { headers: { accept: 'text/event-stream' } });
    const { frames } = await readFrames(res);
    expect(frames.some((f) => f.type === 'tool_call')).toBe(true);
    const [turn] = (await h.store.turns.listForSessionPage(h.projectId, session, { limit: 10 })).items;
    expect((turn!.output as { messages: Array<{ tool_name?: string }> }).messages.some((m) => m.tool_name === 'bash')).toBe(true);
    expect(frames.find((f) => f.type === 'error')?.data).toMatchObject({ code: 504, type: 'turn-timeout' });
    expect(frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'error' } });
  });
});

describe('a stream held for the first output', () => {
  let h: Harness;
  beforeAll(async () => {
    // The hold leaves room for a turn's start on a thread of its own (the first one starts it).
    h = await startHarness({ env: { AGENTD_STREAM_HOLD_MS: '2000', AGENTD_MODEL_TIMEOUT_MS: '4000' } });
  });
  afterAll(async () => h.close());

  const stream = (format?: 'vercel') =>
    h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template()), { headers: { accept: 'text/event-stream', ...(format ? { 'x-ag-messages-format': format } : {}) } });

  it('a model that fails at once still answers with the JSON error and its status', async () => {
    h.model.script({ error: { status: 429, message: 'slow down' } });
    await expectError(await stream(), 429, 'upstream-rate-limited');
  });

  it('starts once AGENTD_STREAM_HOLD_MS is up with nothing to send: turn_start first, a later failure told on the stream', async () => {
    h.model.script({ text: 'late', latencyMs: 8_000 });
    const res = await stream();
    expect(res.status).toBe(200);
    const { frames } = await readFrames(res);
    expect(frames[0]).toMatchObject({ type: 'turn_start' });
    expect(frames.find((f) => f.type === 'error')?.data).toMatchObject({ code: 504, type: 'upstream-timeout' });
    expect(frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'error' } });
  });

  it('a slow model still gets its whole answer on a stream that started early, in the Vercel format too', async () => {
    h.model.script({ text: 'worth the wait', latencyMs: 3_000 });
    const res = await stream('vercel');
    expect(res.status).toBe(200);
    const raw = await res.text();
    expect(raw).toContain('"type":"start"');
    const chunks = raw.split('\n\n').filter((frame) => frame.startsWith('data: {')).map((frame) => JSON.parse(frame.slice(6)));
    expect(chunks.filter((chunk) => chunk.type === 'text-delta').map((chunk) => chunk.delta).join('')).toBe('worth the wait');
    expect(raw.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });
});
