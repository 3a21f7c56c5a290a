import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { removeDeletedFolders } from '../../src/sessions/folders.ts';
import { builtin, expectError, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { deleteSession, getFiles, getSession, okJson, otherProject, putFile, viewerOf, waitFor, type Caller } from './client.ts';

/** DELETE /api/sessions/{session_id}: the folder and every record go; never while a turn runs. */

let h: Harness;
let stranger: Caller;
beforeAll(async () => {
  h = await startHarness();
  stranger = await otherProject(h);
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

const agent = template({ tools: [builtin('write'), builtin('ls', 'ask')], mode: 'allow' });

/** A session with a completed turn that wrote a file, and a paused turn with a pending interaction. */
async function fullSession(): Promise<string> {
  const session = sid('del');
  h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'kept/a.txt', content: 'a' } }] }, { text: 'done' }]);
  await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write' }], agent, { session_id: session })));
  h.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }]);
  const paused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'ls' }], agent, { session_id: session })));
  expect(paused.data.outputs.stop_reason).toBe('paused');
  return session;
}

async function records(projectId: string, session: string) {
  return {
    session: await h.store.sessions.get(projectId, session),
    turns: await h.store.turns.listForSession(projectId, session, { limit: 10 }),
    interactions: (await h.store.interactions.query(projectId, { session_id: session }, { limit: 10 })).items,
    lease: await h.store.leases.get(projectId, session),
  };
}

describe('deleting a session', () => {
  it('removes the folder and every record; reading it afterwards is a 404', async () => {
    const session = await fullSession();
    const before = await records(h.projectId, session);
    expect(before.turns).toHaveLength(2);
    expect(before.interactions).toHaveLength(1);
    expect(existsSync(`${h.sessionDir(session)}/kept/a.txt`)).toBe(true);

    const res = await deleteSession(h, session);
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
    expect(existsSync(h.sessionDir(session))).toBe(false);
    expect(await records(h.projectId, session)).toEqual({ session: undefined, turns: [], interactions: [], lease: undefined });
    await expectError(await getSession(h, session), 404, 'not-found');
    await expectError(await getFiles(h, session), 404, 'not-found');
    await expectError(await deleteSession(h, session), 404, 'not-found');
  });

  it('leaves the session usable from scratch: a new turn starts with an empty folder and history', async () => {
    const session = await fullSession();
    expect((await deleteSession(h, session)).status).toBe(204);
    h.model.reset();
    h.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }, { text: 'nothing here' }]);
    const again = await readJson(
      await h.invoke(invokeBody([{ role: 'user', content: 'again' }], template({ tools: [builtin('ls')], mode: 'allow' }), { session_id: session })),
    );
    expect(again.data.outputs.stop_reason).toBe('end_turn');
    // What the agent saw: the old file is gone.
    expect(h.model.requests[1]!.messages.find((m) => m.role === 'tool')?.content).toBe('(empty folder)');
    const body = await okJson(await getSession(h, session));
    expect(body.turns.map((t: { id: string }) => t.id)).toEqual([again.turn_id]);
    expect((await okJson(await getFiles(h, session))).entries).toEqual([]);
  });

  it('is a 404 for an unknown session and for one of another project, which stays whole', async () => {
    const session = await fullSession();
    await expectError(await deleteSession(h, sid('nobody')), 404, 'not-found', /does not exist in this project/);
    await expectError(await deleteSession(h, session, { as: stranger }), 404, 'not-found', /does not exist in this project/);
    const after = await records(h.projectId, session);
    expect(after.session).toBeDefined();
    expect(after.turns).toHaveLength(2);
    expect(existsSync(`${h.sessionDir(session)}/kept/a.txt`)).toBe(true);
    await expectError(await deleteSession(h, 'bad id'), 400, 'invalid-session-id');
  });

  it('needs an editor key', async () => {
    const session = await fullSession();
    await expectError(await deleteSession(h, session, { as: await viewerOf(h) }), 403, 'forbidden', /editor/);
    expect((await records(h.projectId, session)).turns).toHaveLength(2);
    expect(existsSync(h.sessionDir(session))).toBe(true);
  });

  it('is refused with 409 while a turn runs, naming the turn; allowed once it ends', async () => {
    const session = sid('busy');
    await okJson(await putFile(h, session, 'kept.txt', 'k'), 201);
    h.model.script({ text: 'slow', latencyMs: 800 });
    const running = h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: session }));
    await waitFor(async () => h.model.requests.length >= 1, 'model call');
    const live = (await okJson(await getSession(h, session))).live_turn;
    expect(live).toBeDefined();

    await expectError(await deleteSession(h, session), 409, 'session-busy', new RegExp(live.id));
    expect(existsSync(`${h.sessionDir(session)}/kept.txt`)).toBe(true);
    expect((await records(h.projectId, session)).turns).toHaveLength(1);

    const reply = await readJson(await running);
    expect(reply.turn_id).toBe(live.id);
    expect(reply.data.outputs.messages.at(-1).content).toBe('slow');
    expect((await deleteSession(h, session)).status).toBe(204);
    expect(await records(h.projectId, session)).toEqual({ session: undefined, turns: [], interactions: [], lease: undefined });
  });

  it('removes a session that only has uploaded files', async () => {
    const session = sid('upload-only');
    await okJson(await putFile(h, session, 'f.txt', 'x'), 201);
    expect((await deleteSession(h, session)).status).toBe(204);
    expect(existsSync(h.sessionDir(session))).toBe(false);
    expect(await h.store.sessions.get(h.projectId, session)).toBeUndefined();
  });

  it('moves the folder away whole before the records go, so a delete cut off between them leaves no part of it', async () => {
    const session = await fullSession();
    const sessions = path.dirname(path.dirname(h.sessionDir(session)));
    const failing = vi.spyOn(h.store.sessions, 'remove').mockRejectedValueOnce(new Error('the database went away'));
    try {
      expect((await deleteSession(h, session)).status).toBeGreaterThanOrEqual(500);
    } finally {
      failing.mockRestore();
    }
    // Still listed, with none of its files: they wait, all together, under a name no session has.
    expect((await okJson(await getFiles(h, session))).entries).toEqual([]);
    const aside = (await readdir(sessions)).filter((name) => name.startsWith('.deleted-'));
    expect(aside).toHaveLength(1);
    expect(existsSync(path.join(sessions, aside[0]!, 'kept/a.txt'))).toBe(true);
    // Sent again, the delete completes; a start removes what the cut-off one left.
    expect((await deleteSession(h, session)).status).toBe(204);
    await removeDeletedFolders(h.dataDir);
    expect((await readdir(sessions)).filter((name) => name.startsWith('.deleted-'))).toEqual([]);
  });
});
