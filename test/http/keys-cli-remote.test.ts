import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysCommand, type CliIo } from '../../src/cli/keys.ts';
import { startHarness, type Harness } from '../support/harness.ts';

/** `agentd keys … --url`: the same commands through a server's API, with an admin key. */

let h: Harness;
let admin: string;
beforeAll(async () => {
  h = await startHarness();
  admin = (await h.store.apiKeys.create(h.projectId, 'admin')).key;
});
afterAll(async () => h.close());

function capture(): CliIo & { out: string; err: string } {
  const io = { out: '', err: '', stdout: (text: string) => void (io.out += text), stderr: (text: string) => void (io.err += text) };
  return io;
}

const keys = (io: CliIo, ...args: string[]) => keysCommand(args, h.config, io);

describe('agentd keys through the API', () => {
  it('creates a key in the admin key\'s project, lists it, and revokes it', async () => {
    const created = capture();
    expect(await keys(created, 'create', '--url', h.url, '--api-key', admin, '--role', 'viewer', '--json')).toBe(0);
    const { project_id, api_key } = JSON.parse(created.out) as { project_id: string; api_key: string };
    expect(project_id).toBe(h.projectId);
    expect(await h.store.apiKeys.verify(api_key)).toMatchObject({ project_id: h.projectId, role: 'viewer' });

    const listed = capture();
    expect(await keys(listed, 'list', '--url', h.url, '--api-key', admin)).toBe(0);
    const line = listed.out.split('\n').find((l) => l.includes(api_key.slice(0, 12)))!;
    expect(line).toMatch(/^\S+ {2}agd_\S+… {2}viewer {2}created \S+ {2}last used \S+ {2}active$/);

    const id = line.split(' ')[0]!;
    const revoked = capture();
    expect(await keys(revoked, 'revoke', '--url', h.url, '--api-key', admin, '--id', id)).toBe(0);
    expect(await h.store.apiKeys.verify(api_key)).toBeUndefined();
  });

  it('says what is wrong: a key that may not, a --project that does not apply, a missing key', async () => {
    const weak = capture();
    expect(await keys(weak, 'list', '--url', h.url, '--api-key', h.apiKey)).toBe(1);
    expect(weak.err).toMatch(/^agentd keys list: 403 forbidden: .*"admin" role/);
    const both = capture();
    expect(await keys(both, 'create', '--url', h.url, '--api-key', admin, '--project', 'x')).toBe(2);
    expect(both.err).toContain('leave --project out');
    const none = capture();
    const saved = process.env.AGENTD_API_KEY;
    delete process.env.AGENTD_API_KEY;
    try {
      expect(await keys(none, 'list', '--url', h.url)).toBe(2);
    } finally {
      if (saved !== undefined) process.env.AGENTD_API_KEY = saved;
    }
    expect(none.err).toContain('--url needs an admin key');
  });
});
