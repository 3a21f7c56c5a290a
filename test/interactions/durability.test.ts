import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.ts';
import { sessionFolder } from '../../src/sessions/folders.ts';
import { startFakeModel, type FakeModelServer } from '../../src/testing/fake-model.ts';
import { firstStartCredentials, postJson, startServe } from '../support/child-server.ts';
import { builtin, invokeBody, startHarness, template } from '../support/harness.ts';
import { startMcpServer } from '../support/mcp-server.ts';

let model: FakeModelServer;
beforeAll(async () => {
  model = await startFakeModel();
});
afterAll(async () => model.close());

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}


const INVOKE = '/services/agent/v0/invoke';
const writeAgent = template({ tools: [builtin('write')], mode: 'ask' });

/** Starts a server on a fresh data folder, pauses a turn on a `write`, then kills the server with SIGKILL. */
async function pauseThenCrash(session: string, file: string, finalText: string) {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-durable-'));
  const env = { AGENTD_DATA_DIR: dataDir, OPENAI_API_KEY: 'sk-durable', OPENAI_BASE_URL: model.url };
  const first = await startServe(env);
  const auth = firstStartCredentials(first.output());
  model.script([{ toolCalls: [{ name: 'write', input: { path: file, content: 'survived' } }] }, { text: finalText }]);
  const paused = await postJson(first.url, INVOKE, auth, invokeBody([{ role: 'user', content: 'write' }], writeAgent, { session_id: session })).then((r) => r.json());
  first.child.kill('SIGKILL');
  await first.exited;
  return { dataDir, env, auth, id: paused.data.outputs.pending_interaction.id as string };
}

/** Runs `check` against a second server on the same data folder, then stops it and removes the folder. */
async function restartAndCheck(run: { dataDir: string; env: Record<string, string> }, check: (url: string) => Promise<void>) {
  try {
    const second = await startServe(run.env);
    try {
      await check(second.url);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  } finally {
    await rm(run.dataDir, { recursive: true, force: true });
  }
}

async function withStore<T>(dataDir: string, use: (store: Awaited<ReturnType<typeof openStore>>) => Promise<T>): Promise<T> {
  const store = await openStore({ dataDir });
  try {
    return await use(store);
  } finally {
    await store.close();
  }
}

describe('durable pauses', () => {
  it('a pause survives a killed server: a new process takes the answer and continues the turn', async () => {
    const run = await pauseThenCrash('durable', 'kept.txt', 'continued after restart');
    const { projectId } = run.auth;
    await restartAndCheck(run, async (url) => {
      const res = await postJson(url, `/api/sessions/interactions/${run.id}/respond`, run.auth, { answer: { approved: true } });
      expect(res.status).toBe(200);
      await withStore(run.dataDir, async (store) => {
        await until(async () => (await store.interactions.get(projectId, run.id))?.status === 'resolved');
        await until(async () => (await store.turns.listForSession(projectId, 'durable', { limit: 5 }))[0]?.status === 'completed');
        const [latest] = await store.turns.listForSession(projectId, 'durable', { limit: 5 });
        expect(JSON.stringify(latest!.output)).toContain('continued after restart');
      });
      expect(readFileSync(path.join(sessionFolder(run.dataDir, projectId, 'durable'), 'kept.txt'), 'utf8')).toBe('survived');
    });
  });

  it('an answer given while no server ran is picked up at the next start', async () => {
    const run = await pauseThenCrash('late', 'late.txt', 'picked up');
    const { projectId } = run.auth;
    // The answer was recorded (as by a replica that died before it could continue the turn).
    await withStore(run.dataDir, (store) => store.interactions.transition(projectId, run.id, { from: ['pending'], to: 'responded', answer: { approved: true } }));
    await restartAndCheck(run, async () => {
      await withStore(run.dataDir, (store) => until(async () => (await store.interactions.get(projectId, run.id))?.status === 'resolved'));
      await until(async () => existsSync(path.join(sessionFolder(run.dataDir, projectId, 'late'), 'late.txt')));
    });
  });

  it('a crashed holder’s lease runs out: the session is usable again and the cut-off turn is interrupted', async () => {
    const h = await startHarness({ env: { AGENTD_LEASE_TTL_MS: '400' } });
    try {
      // A turn left running by a process that died: its row and its lease, and no one renewing it.
      await h.store.turns.create({ id: 'ghost-turn', project_id: h.projectId, session_id: 'crashed', trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) });
      await h.store.leases.acquire({ projectId: h.projectId, sessionId: 'crashed', turnId: 'ghost-turn', holder: 'dead-process', ttlMs: 400 });
      const body = invokeBody([{ role: 'user', content: 'hi' }], template(), { session_id: 'crashed' });
      h.model.script({ text: 'back in business' });
      expect((await h.invoke(body)).status).toBe(409);
      await new Promise((r) => setTimeout(r, 500));
      const res = await h.invoke(body);
      expect(res.status).toBe(200);
      expect((await h.store.turns.get(h.projectId, 'ghost-turn'))?.status).toBe('interrupted');
    } finally {
      await h.close();
    }
  });
  it('a server stopped while a continuation waits to be tried again stops, and the next start continues it', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-durable-'));
    const env = { AGENTD_DATA_DIR: dataDir, OPENAI_API_KEY: 'sk-durable', OPENAI_BASE_URL: model.url };
    let mcp = await startMcpServer();
    const port = Number(new URL(mcp.url).port);
    const agent = { ...template({ mode: 'allow_reads' }), mcps: [{ name: 'calc', connection: { type: 'http', url: mcp.url } }] };
    try {
      const first = await startServe(env);
      const auth = firstStartCredentials(first.output());
      model.script([{ toolCalls: [{ name: 'calc__write_note', input: { text: 'later' } }] }, { text: 'noted at last' }]);
      const paused = await postJson(first.url, INVOKE, auth, invokeBody([{ role: 'user', content: 'note it' }], agent, { session_id: 'retried' })).then((r) => r.json());
      const id = paused.data.outputs.pending_interaction.id as string;
      await mcp.close();
      expect((await postJson(first.url, `/api/sessions/interactions/${id}/respond`, auth, { answer: { approved: true } })).status).toBe(200);
      const turns = (store: Awaited<ReturnType<typeof openStore>>) => store.turns.listForSession(auth.projectId, 'retried', { limit: 5 });
      await withStore(dataDir, async (store) => until(async () => (await turns(store))[0]?.status === 'failed'));
      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);

      mcp = await startMcpServer({ port });
      const second = await startServe(env);
      try {
        await withStore(dataDir, async (store) => {
          await until(async () => (await turns(store))[0]?.status === 'completed');
          // The failure was recorded once, by the first server; the second one's try worked.
          expect((await turns(store)).map((t) => t.status)).toEqual(['completed', 'failed', 'paused']);
          expect((await store.interactions.get(auth.projectId, id))?.status).toBe('resolved');
        });
        expect(mcp.calls).toEqual([{ name: 'write_note', args: { text: 'later' } }]);
      } finally {
        second.child.kill('SIGTERM');
        await second.exited;
      }
    } finally {
      await mcp.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
