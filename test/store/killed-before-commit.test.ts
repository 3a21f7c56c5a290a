import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeModel, type FakeModelServer } from '../../src/testing/fake-model.ts';
import { apiCall, firstStartCredentials, runAgentd, startServe } from '../support/child-server.ts';
import { freshDatabase, type TestDatabase } from '../support/database.ts';

/**
 * `agentd serve` killed (SIGKILL) at the last moment before a write commits
 * (support/die-before-commit.mjs), then started again on the same data: whatever it had told
 * before dying holds after the restart, and nothing it had not told is half there.
 */

const DIE = ['--import', path.join(import.meta.dirname, '../support/die-before-commit.mjs')];

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
  env = { AGENTD_DATA_DIR: dataDir, OPENAI_API_KEY: 'sk-killed', OPENAI_BASE_URL: model.url, ...(database.url ? { DATABASE_URL: database.url } : {}) };
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
