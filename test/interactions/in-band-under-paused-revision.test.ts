import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { commit, createWorkflow } from '../configs/client.ts';

/**
 * A turn run by `references` pauses under one revision; a newer one, without the gated tool, is
 * committed before the answer. Answered through the API or in band, the approved call runs under
 * the revision the turn paused under — the re-post's references once named the newer one, and
 * the approved call was refused as "not permitted" while the interaction was recorded approved.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const first = [{ role: 'user', content: 'please write a.txt' }];
const writes = { agent: { ...template({ tools: [builtin('write')], mode: 'ask' }), instructions: { agents_md: 'v1' } } };
const reads = { agent: { ...template({ tools: [builtin('read')], mode: 'allow' }), instructions: { agents_md: 'v2' } } };

async function pauseThenCommit(slug: string) {
  await createWorkflow(h, slug, writes);
  const session = sid(slug);
  h.model.reset();
  h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'hello' } }] }, { text: 'written' }]);
  const paused = await readJson(await h.invoke({ references: { workflow: { slug } }, session_id: session, data: { inputs: { messages: first } } }));
  expect(paused.data.outputs.stop_reason).toBe('paused');
  expect(paused.revision).toMatchObject({ version: 1 });
  await commit(h, slug, reads);
  return { session, paused };
}

describe('a pause answered after its revision changed', () => {
  it('in band: the approved call runs under the paused revision, and the reply says which', async () => {
    const { session, paused } = await pauseThenCommit('in-band-writer');
    const answered = (paused.data.outputs.messages as any[]).map((m) => (m.approval ? { ...m, approval: { ...m.approval, approved: true } } : m));
    const reply = await readJson(await h.invoke({ references: { workflow: { slug: 'in-band-writer' } }, session_id: session, data: { inputs: { messages: [...first, ...answered] } } }));
    expect(reply.data.outputs.stop_reason).toBe('end_turn');
    expect(reply.revision).toMatchObject({ version: 1 });
    expect(await readFile(path.join(h.sessionDir(session), 'a.txt'), 'utf8')).toBe('hello');
    expect(h.model.requests.at(-1)!.messages.find((m) => m.role === 'system')!.content).toContain('v1');
    const turns = await h.store.turns.listForSession(h.projectId, session, { limit: 10 });
    expect(turns.map((t) => (t.request as { revision?: { version: number } }).revision?.version)).toEqual([1, 1]);
  });

  it('a new message after the pause runs the newer revision', async () => {
    const { session } = await pauseThenCommit('moved-on-writer');
    h.model.script({ text: 'reading now' });
    const reply = await readJson(await h.invoke({ references: { workflow: { slug: 'moved-on-writer' } }, session_id: session, data: { inputs: { messages: [{ role: 'user', content: 'never mind' }] } } }));
    expect(reply.revision).toMatchObject({ version: 2 });
    expect(existsSync(path.join(h.sessionDir(session), 'a.txt'))).toBe(false);
  });
});
