import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { BWRAP_MISSING, bashTool } from '../../src/agent/tools/bash.ts';
import { processesWith, run, tempFolder } from './helpers.ts';

// These tests are about the server without bubblewrap, whatever this machine has.
vi.mock('../../src/agent/tools/sandbox.ts', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../../src/agent/tools/sandbox.ts')>()),
  sandboxAvailable: async () => false,
}));

describe('bash without bubblewrap', () => {
  it('is refused with instructions unless the operator opts in', async () => {
    const root = await tempFolder();
    const tool = bashTool({ root, bash: { timeoutMs: 5000, maxOutputBytes: 1024, unsafeHost: false, limits: { processes: 256, memoryBytes: 1 << 30 } }, network: 'off' });
    await expect(run(tool, { command: 'touch ran' })).rejects.toThrow(BWRAP_MISSING);
    await expect(fs.access(path.join(root, 'ran'))).rejects.toThrow();
  });

  it('runs on the host in the folder with a cleared environment when opted in', async () => {
    const root = await tempFolder();
    process.env.AGENTD_TEST_SECRET = 'leaky-value';
    try {
      const tool = bashTool({ root, bash: { timeoutMs: 5000, maxOutputBytes: 4096, unsafeHost: true, limits: { processes: 256, memoryBytes: 1 << 30 } }, network: 'off' });
      const out = await run(tool, { command: 'pwd; env | sort; exit 4' });
      expect(out.split('\n')).toEqual(['exit code 4', root, `HOME=${root}`, 'LANG=C.UTF-8', 'PATH=/usr/local/bin:/usr/bin:/bin', expect.stringMatching(/^PWD=/), '']);
      await expect(run(tool, { command: 'sleep 30', timeout_ms: 300 })).rejects.toThrow('timed out after 300 ms');
      // A background job would hold the output pipe open; it is killed with the shell.
      const started = Date.now();
      expect(await run(tool, { command: 'sleep 26.93 & echo started' })).toBe('exit code 0\nstarted\n');
      expect(Date.now() - started).toBeLessThan(26_000);
      expect(await processesWith('26.93')).toEqual([]);
    } finally {
      delete process.env.AGENTD_TEST_SECRET;
    }
  });
});
