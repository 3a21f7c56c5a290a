import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keysCommand } from '../../src/cli/keys.ts';
import { loadConfig } from '../../src/config.ts';
import { openStore } from '../../src/store/db.ts';
import { startServe } from '../support/child-server.ts';
import { TEST_POSTGRES_URL } from '../support/database.ts';
import { tempDir } from '../store/helpers.ts';

/** The audit's case: `agentd keys revoke` in this process, `agentd serve` in another, one SQLite file. */

const dataDir = path.join(await tempDir('keys-revoke-serve'), 'data');
const config = loadConfig({ AGENTD_DATA_DIR: dataDir });
const server = TEST_POSTGRES_URL ? undefined : await startServe({ AGENTD_DATA_DIR: dataDir, DATABASE_URL: undefined });
afterAll(async () => {
  server?.child.kill('SIGTERM');
  await server?.exited;
});

describe.skipIf(TEST_POSTGRES_URL)('agentd keys revoke beside a running server', () => {
  it("refuses the key at the server's next request", async () => {
    const store = await openStore({ dataDir });
    const project = await store.projects.create('revoked-beside');
    const created = await store.apiKeys.create(project.id, 'viewer');
    await store.close();
    const list = () => fetch(`${server!.url}/api/sessions?project_id=${project.id}`, { headers: { authorization: `ApiKey ${created.key}` } });

    expect((await list()).status).toBe(200);
    // Answered from the server's key cache from here on.
    expect((await list()).status).toBe(200);
    const io = { stdout: () => {}, stderr: () => {} };
    expect(await keysCommand(['revoke', '--id', created.id], config, io)).toBe(0);
    expect((await list()).status).toBe(401);
  });
});
