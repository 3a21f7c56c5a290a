import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENTD_BIN } from '../support/child-server.ts';

/**
 * The client commands load the client, not the server: `agentd run-many` on a CI runner should
 * start in a tenth of a second, not spend half a second loading Fastify, the AI SDK and the
 * database drivers it never uses. A module hook in the child lists the packages it resolved.
 */

let dir: string;
let hook: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-loading-'));
  hook = path.join(dir, 'hook.mjs');
  await writeFile(
    hook,
    `import { registerHooks } from 'node:module';
const seen = new Set();
registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(r.url); if (m) seen.add(m[1]); return r; } });
process.on('exit', () => process.stderr.write('PACKAGES ' + JSON.stringify([...seen]) + '\\n'));
`,
  );
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

async function packagesLoadedBy(args: string[]): Promise<string[]> {
  const { stderr } = await promisify(execFile)(process.execPath, ['--import', hook, AGENTD_BIN, ...args]).catch((error: { stderr: string }) => error);
  const line = stderr.split('\n').find((l) => l.startsWith('PACKAGES '));
  if (!line) throw new Error(`no package list in:\n${stderr}`);
  return JSON.parse(line.slice('PACKAGES '.length)) as string[];
}

describe('loading commands', () => {
  it('client commands load none of the server packages', async () => {
    for (const command of ['run-many', 'invoke', 'eval', 'testsets']) {
      const loaded = await packagesLoadedBy([command, '--help']);
      expect(loaded, command).not.toContain('fastify');
      expect(loaded, command).not.toContain('ai');
      expect(loaded, command).not.toContain('pg');
      expect(loaded, command).not.toContain('kysely');
    }
  });

  it('serve loads them (the hook sees what is loaded)', async () => {
    const loaded = await packagesLoadedBy(['serve', '--help']);
    expect(loaded).toContain('fastify');
  });
});
