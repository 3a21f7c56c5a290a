import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { runAgentd } from '../support/child-server.ts';

/**
 * A database that takes connections and never answers (a pooler waiting for a server connection
 * does exactly this) holds a start for minutes: `agentd serve` says what it waits on meanwhile.
 */
describe('agentd serve waiting on a database that never answers', () => {
  let silent: net.Server;
  let port: number;
  let dataDir: string;
  const held: net.Socket[] = [];
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-slow-start-'));
    silent = net.createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    port = (silent.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
    await rm(dataDir, { recursive: true, force: true });
  });

  it('says on stderr that it is still opening the database, and where, without the password', async () => {
    const run = runAgentd(['serve', '--port', '0'], { AGENTD_DATA_DIR: dataDir, DATABASE_URL: `postgres://agentd:hunter2-secret@127.0.0.1:${port}/agentd` });
    try {
      while (!/still opening/.test(run.output())) {
        if (run.child.exitCode !== null) throw new Error(`agentd serve exited:\n${run.output()}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(run.output()).toMatch(new RegExp(`^agentd: still opening the database at postgres://agentd:\\*\\*\\*@127\\.0\\.0\\.1:${port}/agentd \\(connecting, then migrating\\) after \\d+ s$`, 'm'));
      expect(run.output()).not.toContain('hunter2');
      expect(held.length).toBeGreaterThan(0);
    } finally {
      run.child.kill('SIGKILL');
      await run.exited;
    }
  });
});
