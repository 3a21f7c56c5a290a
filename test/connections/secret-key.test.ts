import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { openStore } from '../../src/store/db.ts';
import { createSecretBox, loadSecretKey, parseSecretKey, SECRET_KEY_FILE, SecretBoxMismatch } from '../../src/store/secret-box.ts';

/** The secret key that seals stored provider keys: where it comes from, and what a wrong one does. */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-secret-'));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe('AGENTD_SECRET_KEY', () => {
  const key = randomBytes(32);

  it('is 32 bytes as base64, base64url or hex', () => {
    for (const text of [key.toString('base64'), key.toString('base64url'), key.toString('hex'), ` ${key.toString('hex').toUpperCase()}\n`]) {
      expect(parseSecretKey(text, 'AGENTD_SECRET_KEY').equals(key)).toBe(true);
    }
    expect(loadConfig({ AGENTD_SECRET_KEY: key.toString('base64') }).secretKey?.equals(key)).toBe(true);
    expect(loadConfig({}).secretKey).toBeUndefined();
  });

  it('anything else stops the start, saying how to make one and never repeating the value', () => {
    for (const bad of ['hunter2-is-my-password', randomBytes(16).toString('base64'), randomBytes(33).toString('hex'), 'z'.repeat(64)]) {
      let message = '';
      try {
        loadConfig({ AGENTD_SECRET_KEY: bad });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(/AGENTD_SECRET_KEY must be 32 random bytes.*openssl rand -base64 32/);
      expect(message).not.toContain(bad);
    }
  });

  it('when set, is used and no key file is written', async () => {
    const data = path.join(dir, 'configured');
    const store = await openStore({ dataDir: data, secretKey: key });
    const project = await store.projects.ensure('p');
    await store.connections.create(project.id, { slug: 'c', provider: 'openai', api_key: 'sk-configured-123456' });
    await store.close();
    expect(await readdir(data)).not.toContain(SECRET_KEY_FILE);
    const again = await openStore({ dataDir: data, secretKey: Buffer.from(key) });
    expect((await again.connections.open(project.id, 'c'))?.api_key).toBe('sk-configured-123456');
    await again.close();
  });
});

describe('the generated key file', () => {
  it('is made once (0600) and the same key is read back', async () => {
    const data = path.join(dir, 'generated');
    const first = loadSecretKey(data, undefined);
    expect((await stat(path.join(data, SECRET_KEY_FILE))).mode & 0o777).toBe(0o600);
    expect(loadSecretKey(data, undefined).equals(first)).toBe(true);
    // No temporary file is left behind.
    expect(await readdir(data)).toEqual([SECRET_KEY_FILE]);
  });

  it("left half-made by a start killed while writing it is cleared at the next start, unless its process still runs", async () => {
    const data = path.join(dir, 'killed');
    await mkdir(data, { recursive: true });
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    const left = `${SECRET_KEY_FILE}.${gone}.0123456789ab.tmp`;
    const starting = `${SECRET_KEY_FILE}.${process.pid}.0123456789ab.tmp`;
    for (const name of [left, starting, 'secret.key.notes.tmp']) await writeFile(path.join(data, name), `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    loadSecretKey(data, undefined);
    expect((await readdir(data)).sort()).toEqual([SECRET_KEY_FILE, 'secret.key.notes.tmp', starting].sort());
  });

  it('that is not a key stops the start', async () => {
    const data = path.join(dir, 'broken');
    await mkdir(data, { recursive: true });
    await writeFile(path.join(data, SECRET_KEY_FILE), 'not a key\n');
    await expect(openStore({ dataDir: data })).rejects.toThrow(/secret key file .*secret\.key must be 32 random bytes.*openssl rand -base64 32/);
  });
});

describe('the secret box', () => {
  const box = createSecretBox(randomBytes(32));

  it('seals with a fresh IV each time and opens what it sealed', () => {
    const a = box.seal('value', 'ctx');
    const b = box.seal('value', 'ctx');
    expect(a).not.toBe(b);
    expect(box.open(a, 'ctx')).toBe('value');
    expect(box.open(b, 'ctx')).toBe('value');
  });

  it('refuses another key, another context and altered bytes', () => {
    const sealed = box.seal('value', 'ctx');
    expect(() => createSecretBox(randomBytes(32)).open(sealed, 'ctx')).toThrow(SecretBoxMismatch);
    expect(() => box.open(sealed, 'other row')).toThrow(SecretBoxMismatch);
    const bytes = Buffer.from(sealed, 'base64');
    bytes[bytes.length - 1]! ^= 1;
    expect(() => box.open(bytes.toString('base64'), 'ctx')).toThrow(SecretBoxMismatch);
    expect(() => box.open('', 'ctx')).toThrow(SecretBoxMismatch);
  });
});
