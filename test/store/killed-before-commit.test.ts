import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeModel, type FakeModelServer } from '../../src/testing/fake-model.ts';
import { apiCall, firstStartCredentials, postJson, runAgentd, startServe } from '../support/child-server.ts';
import { freshDatabase, TEST_POSTGRES_URL, type TestDatabase } from '../support/database.ts';
import { builtin, invokeBody, template } from '../support/harness.ts';

/**
 * `agentd serve` killed (SIGKILL) at the last moment before a write commits
 * (support/die-before-commit.mjs), then started again on the same data: whatever it had told
 * before dying holds after the restart, and nothing it had not told is half there.
 */

const DIE = ['--import', path.join(import.meta.dirname, '../support/die-before-commit.mjs')];
const INVOKE = '/services/agent/v0/invoke';

let model: FakeModelServer;
let database: TestDatabase;
let dataDir: string;
let env: Record<string, string>;

beforeAll(async () => {
  model = await startFakeModel();
});
afterAll(async () => model.close());
beforeEach(async () => {
  database = await freshDatabase();
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-killed-'));
  // On PostgreSQL the dead server's turn is interrupted once its lease lapses (the sweep): soon.
  env = { AGENTD_DATA_DIR: dataDir, OPENAI_API_KEY: 'sk-killed', OPENAI_BASE_URL: model.url, AGENTD_LEASE_TTL_MS: '1000', ...(database.url ? { DATABASE_URL: database.url } : {}) };
});
afterEach(async () => {
  await database.drop();
  await rm(dataDir, { recursive: true, force: true });
});

/** Runs `use` against a server on the test's data, then stops it. */
async function withServer<T>(use: (url: string, output: () => string) => Promise<T>, extra: Record<string, string> = {}, nodeArgs: string[] = []): Promise<T> {
  const server = await startServe({ ...env, ...extra }, nodeArgs);
  try {
    return await use(server.url, server.output);
  } finally {
    server.child.kill('SIGKILL');
    await server.exited;
  }
}

/** What a stream carried before it ended or broke off (nothing, when the server died before answering), one frame a line. */
async function framesUntilCut(reply: Promise<Response>): Promise<{ type: string; data: any }[]> {
  let text = '';
  try {
    const reader = (await reply).body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString();
    }
  } catch {
    // The server died mid-stream: what arrived is what the client was told.
  }
  return text.split('\n').filter((line) => line.trim().startsWith('{')).flatMap((line) => {
    try {
      return [JSON.parse(line)];
    } catch {
      return [];
    }
  });
}

/** The session's turns once none is running any more: at once on SQLite, after the lease sweep on PostgreSQL. */
async function settledTurns(url: string, auth: { projectId: string; key: string }): Promise<string[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { turns } = await apiCall(url, auth, 'GET', '/sessions/cut');
    const statuses = turns.map((t: { status: string }) => t.status);
    if (!statuses.includes('running') || Date.now() > deadline) return statuses;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('a first start killed before its key is stored', () => {
  it('leaves no project behind: the next start creates it and prints the key, which works', async () => {
    const killed = runAgentd(['serve', '--port', '0'], { ...env, AGENTD_TEST_DIE_AT: 'insert into "api_keys"' }, DIE);
    expect(await killed.exited).toBeNull();
    expect(killed.output()).not.toMatch(/API key:/);
    await withServer(async (url, output) => {
      const auth = firstStartCredentials(output());
      expect((await apiCall(url, auth, 'GET', '/keys')).keys).toHaveLength(1);
    });
  }, 60_000);
});

describe('a first start killed once its key is stored', () => {
  // On PostgreSQL a start goes on to the database after storing the key (it listens for other
  // replicas' followers); on SQLite nothing is awaited between the two.
  it.runIf(TEST_POSTGRES_URL)('has printed the key, which works after the next start', async () => {
    const killed = runAgentd(['serve', '--port', '0'], { ...env, AGENTD_TEST_DIE_AT: '^LISTEN ".*follow"' }, DIE);
    expect(await killed.exited).toBeNull();
    const auth = firstStartCredentials(killed.output());
    await withServer(async (url, output) => {
      expect(output()).not.toMatch(/API key:/);
      expect((await apiCall(url, auth, 'GET', '/keys')).keys).toHaveLength(1);
    });
  }, 60_000);
});

describe('a streamed turn whose server is killed before the turn’s end is stored', () => {
  const writeAgent = template({ tools: [builtin('write')], mode: 'ask' });

  async function killedAtTheEnd(status: string, script: Parameters<FakeModelServer['script']>[0], content: string) {
    const auth = await withServer(async (_url, output) => firstStartCredentials(output()));
    model.script(script);
    const frames = await withServer(
      (url) => framesUntilCut(postJson(url, INVOKE, auth, invokeBody([{ role: 'user', content }], writeAgent, { session_id: 'cut' }), { accept: 'application/x-ndjson' })),
      { AGENTD_TEST_DIE_AT: `update "turns".*"${status}"` },
      DIE,
    );
    expect(frames.map((f) => f.type)).not.toContain('done');
    return auth;
  }

  it('never told the client it paused; the approval it asked for is refused, and the session takes a new turn', async () => {
    const auth = await killedAtTheEnd('paused', [{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'never' } }] }], 'write');
    await withServer(async (url) => {
      expect(await settledTurns(url, auth)).toEqual(['interrupted']);
      // Its stream may have told the request before the server died, and a client may answer it.
      const { interactions } = await apiCall(url, auth, 'POST', '/sessions/interactions/query', { session_id: 'cut' });
      expect(interactions.map((i: { status: string }) => i.status)).toEqual(['cancelled']);
      const asked = interactions[0].id as string;
      const answer = await postJson(url, `/api/sessions/interactions/${asked}/respond`, auth, { answer: { approved: true } });
      expect(answer.status).toBe(409);
      expect((await answer.json()).status.message).toMatch(/interrupted \(the server stopped\) before it paused/);
      model.script({ text: 'fresh start' });
      const next = await postJson(url, INVOKE, auth, invokeBody([{ role: 'user', content: 'again' }], writeAgent, { session_id: 'cut' }));
      expect(next.status).toBe(200);
      const { turns } = await apiCall(url, auth, 'GET', '/sessions/cut');
      expect(turns.map((t: { status: string }) => t.status)).toEqual(['completed', 'interrupted']);
    });
  }, 60_000);

  it('never told the client it ended; the turn is interrupted and the session takes a new turn', async () => {
    const auth = await killedAtTheEnd('completed', { text: 'done here' }, 'hello');
    await withServer(async (url) => {
      expect(await settledTurns(url, auth)).toEqual(['interrupted']);
      model.script({ text: 'again' });
      expect((await postJson(url, INVOKE, auth, invokeBody([{ role: 'user', content: 'again' }], writeAgent, { session_id: 'cut' }))).status).toBe(200);
      const { turns } = await apiCall(url, auth, 'GET', '/sessions/cut');
      expect(turns.map((t: { status: string }) => t.status)).toEqual(['completed', 'interrupted']);
    });
  }, 60_000);
});

describe('a continuation killed as it records its turn', () => {
  const writeAgent = template({ tools: [builtin('write')], mode: 'ask' });

  it('leaves the answer given through the API to be continued at the next start, not resolved by a turn that never was', async () => {
    const auth = await withServer(async (_url, output) => firstStartCredentials(output()));
    model.script({ toolCalls: [{ name: 'write', input: { path: 'kept.txt', content: 'approved' } }] });
    const asked = await withServer(async (url) => {
      const paused = await postJson(url, INVOKE, auth, invokeBody([{ role: 'user', content: 'write it' }], writeAgent, { session_id: 'cut' }));
      return ((await paused.json()) as { data: { outputs: { pending_interaction: { id: string } } } }).data.outputs.pending_interaction.id;
    });
    model.script({ text: 'written' });
    // The answer is stored and acknowledged; its continuation dies recording its turn.
    const dying = await startServe({ ...env, AGENTD_TEST_DIE_AT: 'insert into "turns".*out_of_band' }, DIE);
    expect((await postJson(dying.url, `/api/sessions/interactions/${asked}/respond`, auth, { answer: { approved: true } })).status).toBe(200);
    await dying.exited;
    expect(dying.child.signalCode).toBe('SIGKILL');
    await withServer(async (url) => {
      const deadline = Date.now() + 20_000;
      let turns: { status: string }[] = [];
      while (Date.now() < deadline) {
        ({ turns } = await apiCall(url, auth, 'GET', '/sessions/cut'));
        if (turns[0]?.status === 'completed') break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(turns.map((t) => t.status)).toEqual(['completed', 'paused']);
      const { interaction } = await apiCall(url, auth, 'GET', `/sessions/interactions/${asked}`);
      expect(interaction).toMatchObject({ status: 'resolved', resolution: { via: 'out_of_band', turn_id: (turns[0] as { id?: string }).id } });
    });
  }, 90_000);
});
