import { afterAll, beforeAll, expect, it } from 'vitest';
import { builtin, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { getSession, okJson } from './client.ts';

/**
 * A NUL character is valid in a model's answer, a tool's result and a user's message, and
 * PostgreSQL cannot hold one in text: what a turn stores must still be stored, on both databases,
 * and read back as it was said.
 */
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h.close());

it('a turn whose user message, tool call, tool result and answer hold NUL characters is stored, and its outputs read back whole', async () => {
  const session = sid('nul');
  h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'n.txt', content: 'one\u0000two' } }] }, { text: 'said \u0000 this' }]);
  const res = await h.invoke(invokeBody([{ role: 'user', content: 'read \u0000 that' }], template({ tools: [builtin('write'), builtin('read')] }), { session_id: session }));
  const reply = await readJson(res);
  expect(res.status, JSON.stringify(reply)).toBe(200);
  expect(JSON.stringify(reply)).toContain('said \\u0000 this');
  const stored = await okJson(await getSession(h, session));
  const text = JSON.stringify(stored);
  expect(text).toContain('one\\u0000two');
  expect(text).toContain('said \\u0000 this');
});
