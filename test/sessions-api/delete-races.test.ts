import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { deleteSession, getFiles, getSession, putFile } from './client.ts';

/**
 * Issue 19: a delete racing with uploads, listings, downloads and a turn of the same session ends
 * clean: every request gets a clean status (never a 5xx), and afterwards the session and its folder
 * agree — both gone, or both there with what the requests that won wrote.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const CLEAN = new Set([200, 201, 204, 404, 409]);

async function statusOf(res: Promise<Response>): Promise<number> {
  const r = await res;
  await r.arrayBuffer();
  return r.status;
}

/** The session record and its folder agree: both gone, or both there. */
async function agrees(session: string): Promise<void> {
  const exists = (await statusOf(getSession(h, session))) === 200;
  const folder = h.sessionDir(session);
  if (!exists) expect(existsSync(folder), `folder of deleted session ${session}`).toBe(false);
  else expect(existsSync(folder)).toBe(true);
}

describe('deleting a session while others use it', () => {
  it('uploads, listings and downloads racing a delete: clean statuses, nothing left behind', async () => {
    for (let round = 0; round < 25; round++) {
      const session = sid('race');
      expect(await statusOf(putFile(h, session, 'seed.txt', 'seed'))).toBe(201);
      const requests: Promise<number>[] = [];
      for (let i = 0; i < 8; i++) requests.push(statusOf(putFile(h, session, `dir${i % 3}/f${i}.txt`, 'x'.repeat(10_000))));
      requests.push(statusOf(deleteSession(h, session)));
      for (let i = 0; i < 4; i++) {
        requests.push(statusOf(getFiles(h, session)));
        requests.push(statusOf(getFiles(h, session, 'dir0')));
        requests.push(statusOf(getFiles(h, session, 'seed.txt')));
      }
      for (let i = 8; i < 12; i++) requests.push(statusOf(putFile(h, session, `late/f${i}.txt`, 'y')));
      const statuses = await Promise.all(requests);
      expect(statuses.filter((s) => !CLEAN.has(s)), `round ${round}: ${statuses.join(',')}`).toEqual([]);
      await agrees(session);
    }
  }, 120_000);

  it('a delete racing a turn: either the turn runs (and the delete is 409) or the session goes', async () => {
    for (let round = 0; round < 10; round++) {
      const session = sid('turnrace');
      expect(await statusOf(putFile(h, session, 'seed.txt', 'seed'))).toBe(201);
      h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'out.txt', content: 'z' } }] }, { text: 'done' }]);
      const turn = statusOf(h.invoke(invokeBody([{ role: 'user', content: 'write' }], template({ tools: [builtin('write')] }), { session_id: session })));
      const statuses = await Promise.all([turn, statusOf(deleteSession(h, session)), statusOf(getFiles(h, session))]);
      expect(statuses.filter((s) => !CLEAN.has(s)), `round ${round}: ${statuses.join(',')}`).toEqual([]);
      await agrees(session);
    }
  }, 120_000);

  it('leaves no folder of a deleted session on disk', async () => {
    const projectDir = h.sessionDir('x').replace(/\/x$/, '');
    const folders = await readdir(projectDir).catch(() => []);
    for (const name of folders) await agrees(name);
  });
});
