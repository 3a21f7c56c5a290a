import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, expectError, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/** Spec §2.5-2.6 (turn output), §4.6-4.7 (sessions across turns) and design.md §4 "One live turn per session". */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const writeAgent = template({ tools: [builtin('write'), builtin('read'), builtin('ls')], mode: 'allow' });
const user = (content: string) => ({ role: 'user', content });

describe('turn output (spec §2.5)', () => {
  it('is ordered tool call, tool result, final assistant message', async () => {
    h.model.script([{ toolCalls: [{ id: 'call_1', name: 'write', input: { path: 'a.txt', content: 'hey' } }] }, { text: 'Wrote it.' }]);
    const res = await h.invoke(invokeBody([user('write a.txt')], writeAgent, { session_id: sid() }));
    const json = await readJson(res);
    expect(json.status).toEqual({ code: 200, message: 'ok' });
    expect(json.turn_id).toMatch(/\S/);
    const out = json.data.outputs;
    expect(out.messages).toEqual([
      { role: 'tool', content: '', tool_call_id: 'call_1', tool_name: 'write', input: { path: 'a.txt', content: 'hey' } },
      { role: 'tool', content: expect.stringContaining('a.txt'), tool_call_id: 'call_1', is_error: false },
      { role: 'assistant', content: 'Wrote it.' },
    ]);
    expect(out.stop_reason).toBe('end_turn');
    expect(out.pending_interaction).toBeUndefined();
    expect(out.usage.input).toBeGreaterThan(0);
    expect(out.usage.output).toBeGreaterThan(0);
    expect(out.usage.total).toBe(out.usage.input + out.usage.output);
  });

  it('usage adds up every model call of the turn', async () => {
    h.model.script([{ toolCalls: [{ name: 'ls', input: {} }], usage: { input: 10, output: 3 } }, { text: 'x', usage: { input: 20, output: 4 } }]);
    const json = await readJson(await h.invoke(invokeBody([user('ls')], writeAgent)));
    expect(json.data.outputs.usage).toEqual({ input: 30, output: 7, total: 37 });
  });

  it('the inputs are not echoed back: outputs hold only what the turn produced', async () => {
    h.model.script({ text: 'second answer' });
    const history = [user('one'), { role: 'assistant', content: 'first answer' }, user('two')];
    const json = await readJson(await h.invoke(invokeBody(history, writeAgent)));
    expect(json.data.outputs.messages).toEqual([{ role: 'assistant', content: 'second answer' }]);
  });
});

describe('trim: last', () => {
  const threeMessages = () => h.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }, { text: 'Final words.' }]);

  it('via x-ag-messages-transcript: last → only the final message of a text ending', async () => {
    threeMessages();
    const json = await readJson(await h.invoke(invokeBody([user('go')], writeAgent), { headers: { 'x-ag-messages-transcript': 'last' } }));
    expect(json.data.outputs.messages).toEqual([{ role: 'assistant', content: 'Final words.' }]);
    expect(json.data.outputs.stop_reason).toBe('end_turn');
  });

  it('via flags.trim → the same', async () => {
    threeMessages();
    const json = await readJson(await h.invoke(invokeBody([user('go')], writeAgent, { flags: { trim: true } })));
    expect(json.data.outputs.messages).toEqual([{ role: 'assistant', content: 'Final words.' }]);
  });

  it('full (the default) returns the whole turn', async () => {
    threeMessages();
    const json = await readJson(await h.invoke(invokeBody([user('go')], writeAgent), { headers: { 'x-ag-messages-transcript': 'full' } }));
    expect(json.data.outputs.messages).toHaveLength(3);
  });

  it('a turn ending in tool messages (a pause) keeps the trailing tool unit and the message that led to it', async () => {
    h.model.script([
      { toolCalls: [{ name: 'ls', input: {} }] },
      { text: 'Now I will write.', toolCalls: [{ id: 'call_w', name: 'write', input: { path: 'p.txt', content: 'x' } }] },
    ]);
    const agent = template({ tools: [builtin('write'), builtin('ls')], mode: 'allow_reads' });
    const full = await readJson(await h.invoke(invokeBody([user('go')], agent)));
    expect(full.data.outputs.messages.map((m: { role: string }) => m.role)).toEqual(['tool', 'tool', 'assistant', 'tool']);

    h.model.script([
      { toolCalls: [{ name: 'ls', input: {} }] },
      { text: 'Now I will write.', toolCalls: [{ id: 'call_w2', name: 'write', input: { path: 'p.txt', content: 'x' } }] },
    ]);
    const trimmed = await readJson(await h.invoke(invokeBody([user('go')], agent, { flags: { trim: true } })));
    const out = trimmed.data.outputs;
    expect(out.stop_reason).toBe('paused');
    expect(out.messages).toEqual([
      { role: 'assistant', content: 'Now I will write.' },
      { role: 'tool', content: '', tool_call_id: 'call_w2', tool_name: 'write', input: { path: 'p.txt', content: 'x' }, approval: { id: out.pending_interaction.id } },
    ]);
  });
});

describe('sessions across turns (spec §4.6, §4.7)', () => {
  it('one session id keeps its folder: a file written in turn 1 is read in turn 2, and the model sees the history', async () => {
    const session = sid('multi');
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'notes.txt', content: 'remember me' } }] }, { text: 'Saved.' }]);
    const first = [user('save a note')];
    const r1 = await readJson(await h.invoke(invokeBody(first, writeAgent, { session_id: session })));
    expect(await readFile(`${h.sessionDir(session)}/notes.txt`, 'utf8')).toBe('remember me');

    h.model.script([{ toolCalls: [{ id: 'call_r', name: 'read', input: { path: 'notes.txt' } }] }, { text: 'It says remember me.' }]);
    h.model.reset();
    const second = [...first, ...r1.data.outputs.messages, user('what does it say?')];
    const r2 = await readJson(await h.invoke(invokeBody(second, writeAgent, { session_id: session })));
    const result = r2.data.outputs.messages.find((m: { tool_call_id?: string; is_error?: boolean }) => m.tool_call_id === 'call_r' && m.is_error !== undefined);
    expect(result).toMatchObject({ is_error: false, content: expect.stringContaining('remember me') });
    const seen = h.model.requests[0]!.messages;
    expect(seen.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'user']);
    expect(seen.find((m) => m.role === 'tool')!.content).toContain('notes.txt');
  });

  it('a fresh session id per input gives each its own folder', async () => {
    const a = sid('fresh');
    const b = sid('fresh');
    h.model.script((req) => (req.messages.at(-1)?.role === 'tool' ? { text: 'ok' } : { toolCalls: [{ name: 'write', input: { path: 'mine.txt', content: req.messages.at(-1)!.content } }] }));
    const [ra, rb] = await Promise.all([
      h.invoke(invokeBody([user('from a')], writeAgent, { session_id: a })),
      h.invoke(invokeBody([user('from b')], writeAgent, { session_id: b })),
    ]);
    expect([ra.status, rb.status]).toEqual([200, 200]);
    expect(await readFile(`${h.sessionDir(a)}/mine.txt`, 'utf8')).toBe('from a');
    expect(await readFile(`${h.sessionDir(b)}/mine.txt`, 'utf8')).toBe('from b');
  });

  it('a second invoke on a busy session → 409 session-busy; the first still completes', async () => {
    const session = sid('busy');
    h.model.script((req) => (req.messages.some((m) => m.content === 'slow') ? { text: 'slow done', latencyMs: 600 } : { text: 'fast' }));
    h.model.reset();
    const slow = h.invoke(invokeBody([user('slow')], writeAgent, { session_id: session }));
    // The first turn is certainly live once its model call has arrived.
    while (h.model.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
    const busy = await h.invoke(invokeBody([user('fast')], writeAgent, { session_id: session }));
    await expectError(busy, 409, 'session-busy', session);
    const done = await readJson(await slow);
    expect(done.data.outputs.messages).toEqual([{ role: 'assistant', content: 'slow done' }]);
    // Once it has ended the session takes new turns again.
    expect((await h.invoke(invokeBody([user('fast')], writeAgent, { session_id: session }))).status).toBe(200);
  });

  it('concurrent turns on different sessions run side by side', async () => {
    h.model.script({ text: 'parallel', latencyMs: 200 });
    h.model.reset();
    const replies = await Promise.all(Array.from({ length: 5 }, () => h.invoke(invokeBody([user('p')], writeAgent))));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    // Measured at the model: the turns were in flight together, not one after another.
    expect(h.model.peakInFlight).toBeGreaterThan(1);
  });

  it('a session id made of dots stays inside the data dir', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'dots.txt', content: 'x' } }] }, { text: 'ok' }]);
    const res = await h.invoke(invokeBody([user('w')], writeAgent, { session_id: '..' }));
    expect(res.status).toBe(200);
    expect(existsSync(`${h.dataDir}/sessions/dots.txt`)).toBe(false);
    expect(existsSync(`${h.dataDir}/sessions/${h.projectId}/%2E%2E/dots.txt`)).toBe(true);
  });
});
