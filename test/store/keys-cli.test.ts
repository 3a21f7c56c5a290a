import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { keysCommand, type CliIo } from '../../src/cli/keys.ts';
import { loadConfig } from '../../src/config.ts';
import { openStore } from '../../src/store/db.ts';
import { tempDir } from './helpers.ts';

const dir = await tempDir('keys-cli');
const config = loadConfig({ AGENTD_DATA_DIR: path.join(dir, 'data') });

function capture(): CliIo & { out: string; err: string } {
  const io = { out: '', err: '', stdout: (text: string) => void (io.out += text), stderr: (text: string) => void (io.err += text) };
  return io;
}

describe('agentd keys', () => {
  it('create --json prints one JSON line whose key the store accepts', async () => {
    const written: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    let code: number;
    try {
      code = await keysCommand(['create', '--project', 'p1', '--json'], config);
    } finally {
      spy.mockRestore();
    }
    expect(code).toBe(0);
    const out = written.join('');
    expect(out.endsWith('\n')).toBe(true);
    expect(out.trimEnd().split('\n')).toHaveLength(1);
    const parsed = JSON.parse(out) as { project_id: string; api_key: string };
    expect(Object.keys(parsed).sort()).toEqual(['api_key', 'project_id']);

    const store = await openStore({ dataDir: config.dataDir });
    const project = await store.projects.findByName('p1');
    expect(project?.id).toBe(parsed.project_id);
    expect(await store.apiKeys.verify(parsed.api_key)).toMatchObject({ project_id: parsed.project_id, role: 'editor' });
    await store.close();
  });

  it('reuses an existing project and honours --role, in friendly text', async () => {
    const first = capture();
    expect(await keysCommand(['create', '--project', 'p2', '--json'], config, first)).toBe(0);
    const { project_id } = JSON.parse(first.out) as { project_id: string };

    const io = capture();
    expect(await keysCommand(['create', '--project', 'p2', '--role', 'viewer'], config, io)).toBe(0);
    expect(io.out).toContain('viewer');
    expect(io.out).toContain(project_id);
    expect(io.out).not.toContain('Created project');
    const key = io.out.match(/agd_[A-Za-z0-9_-]{43}/)?.[0];
    expect(key).toBeDefined();

    const store = await openStore({ dataDir: config.dataDir });
    expect(await store.apiKeys.verify(key!)).toMatchObject({ project_id, role: 'viewer' });
    await store.close();
  });

  it('lists and revokes keys', async () => {
    const created = capture();
    await keysCommand(['create', '--project', 'p3', '--json'], config, created);
    const { api_key } = JSON.parse(created.out) as { api_key: string };
    const listed = capture();
    expect(await keysCommand(['list', '--project', 'p3', '--json'], config, listed)).toBe(0);
    const { keys } = JSON.parse(listed.out) as { keys: { id: string; prefix: string }[] };
    expect(keys).toHaveLength(1);
    expect(api_key.startsWith(keys[0]!.prefix)).toBe(true);
    expect(listed.out).not.toContain(api_key);

    expect(await keysCommand(['revoke', '--id', keys[0]!.id], config, capture())).toBe(0);
    const store = await openStore({ dataDir: config.dataDir });
    expect(await store.apiKeys.verify(api_key)).toBeUndefined();
    await store.close();
    const again = capture();
    expect(await keysCommand(['revoke', '--id', keys[0]!.id], config, again)).toBe(1);
    expect(again.err).toBe(`No active key with id ${keys[0]!.id}: \`agentd keys list --project NAME\` lists each key's id.\n`);
    const unknown = capture();
    expect(await keysCommand(['list', '--project', 'no-such-project'], config, unknown)).toBe(1);
    expect(unknown.err).toMatch(/^No project named "no-such-project": check the name .*`agentd keys create --project no-such-project` would create it/);
  });

  it('prints help with exit code 0', async () => {
    for (const argv of [['--help'], ['create', '--help']]) {
      const io = capture();
      expect(await keysCommand(argv, config, io)).toBe(0);
      expect(io.out).toContain('agentd keys create --project NAME');
    }
  });

  it('answers bad usage with what to do and exit code 2', async () => {
    const cases: [string[], RegExp][] = [
      [[], /needs a subcommand/],
      [['rotate'], /Unknown subcommand "rotate"/],
      [['create'], /--project NAME is required/],
      [['create', '--project', 'p1', '--role', 'root'], /--role must be one of viewer, editor, admin/],
      [['create', '--project', 'p1', '--colour', 'red'], /Unknown option '--colour'.*\n.*agentd keys --help/],
      [['create', '--project'], /argument missing/],
      [['create', '--project', 'bad name'], /project name "bad name" is invalid/],
    ];
    for (const [argv, message] of cases) {
      const io = capture();
      expect(await keysCommand(argv, config, io), argv.join(' ')).toBe(2);
      expect(io.err).toMatch(message);
      expect(io.out).toBe('');
    }
  });
});
