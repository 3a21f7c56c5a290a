import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createApiKeysRepo, hashApiKey } from '../../src/store/api-keys.ts';
import { openStore } from '../../src/store/db.ts';
import { tempDir } from './helpers.ts';

const dir = await tempDir('api-keys');

describe('api keys', () => {
  it('creates a key shown once, stores only its hash, and verifies it', async () => {
    const store = await openStore({ dataDir: path.join(dir, 'basic') });
    const project = await store.projects.create('keys');
    const created = await store.apiKeys.create(project.id, 'viewer');
    expect(created.key).toMatch(/^agd_[A-Za-z0-9_-]{43}$/);
    expect(created.prefix).toBe(created.key.slice(0, 12));
    expect(created).toMatchObject({ role: 'viewer', project_id: project.id });

    const row = await store.db.selectFrom('api_keys').selectAll().where('id', '=', created.id).executeTakeFirstOrThrow();
    expect(row.key_hash).toBe(hashApiKey(created.key));
    expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(Object.values(row)).not.toContain(created.key);

    expect(await store.apiKeys.verify(created.key)).toEqual({ key_id: created.id, project_id: project.id, role: 'viewer' });
    const other = await store.apiKeys.create(project.id, 'editor');
    expect(other.key).not.toBe(created.key);
    expect(await store.apiKeys.verify(other.key)).toMatchObject({ key_id: other.id, role: 'editor' });
    await store.close();
  });

  it('rejects unknown and malformed keys', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const project = await store.projects.create('p');
    const { key } = await store.apiKeys.create(project.id, 'editor');
    const tampered = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
    expect(await store.apiKeys.verify(tampered)).toBeUndefined();
    expect(await store.apiKeys.verify('')).toBeUndefined();
    expect(await store.apiKeys.verify('Bearer nonsense')).toBeUndefined();
    expect(await store.apiKeys.verify(key + 'x')).toBeUndefined();
    await store.close();
  });

  it('answers repeat verifications from the cache until they expire', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    let clock = 1_000_000;
    const keys = createApiKeysRepo(store.db, { cacheTtlMs: 60_000, now: () => clock });
    const project = await store.projects.create('cache');
    const created = await keys.create(project.id, 'editor');
    expect(await keys.verify(created.key)).toBeDefined();

    // With the row gone, only the cache can still vouch for the key.
    await store.db.deleteFrom('api_keys').where('id', '=', created.id).execute();
    clock += 59_000;
    expect(await keys.verify(created.key)).toMatchObject({ key_id: created.id });
    clock += 2_000;
    expect(await keys.verify(created.key)).toBeUndefined();
    await store.close();
  });

  it('keeps the cache bounded, dropping the oldest entry first', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const keys = createApiKeysRepo(store.db, { cacheSize: 2 });
    const project = await store.projects.create('bounded');
    const [a, b, c] = [await keys.create(project.id, 'editor'), await keys.create(project.id, 'editor'), await keys.create(project.id, 'editor')];
    for (const k of [a, b, c]) expect(await keys.verify(k.key)).toBeDefined();
    await store.db.deleteFrom('api_keys').execute();
    expect(await keys.verify(a.key)).toBeUndefined();
    expect(await keys.verify(b.key)).toBeDefined();
    expect(await keys.verify(c.key)).toBeDefined();
    await store.close();
  });

  it('revokes a key at once, even when its verification is cached', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const project = await store.projects.create('revoke');
    const created = await store.apiKeys.create(project.id, 'admin');
    expect(await store.apiKeys.verify(created.key)).toBeDefined();
    expect(await store.apiKeys.revoke(created.id)).toBe(true);
    expect(await store.apiKeys.verify(created.key)).toBeUndefined();
    expect(await store.apiKeys.revoke(created.id)).toBe(false);
    const [info] = await store.apiKeys.list(project.id);
    expect(info).toMatchObject({ id: created.id, prefix: created.prefix, role: 'admin' });
    expect(info?.revoked_at).toEqual(expect.any(String));
    await store.close();
  });

  it('does not cache a lookup that raced a revoke', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const project = await store.projects.create('race');
    const created = await store.apiKeys.create(project.id, 'editor');
    const [verified, revoked] = await Promise.all([store.apiKeys.verify(created.key), store.apiKeys.revoke(created.id)]);
    expect(revoked).toBe(true);
    // Whatever the in-flight lookup saw, nothing may vouch for the key afterwards.
    expect(verified === undefined || verified.key_id === created.id).toBe(true);
    expect(await store.apiKeys.verify(created.key)).toBeUndefined();
    await store.close();
  });

  it('revokes within a project only when one is given', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const mine = await store.projects.create('mine');
    const theirs = await store.projects.create('theirs');
    const key = await store.apiKeys.create(theirs.id, 'editor');
    expect(await store.apiKeys.revoke(key.id, mine.id)).toBe(false);
    expect(await store.apiKeys.verify(key.key)).toBeDefined();
    expect(await store.apiKeys.revoke(key.id, theirs.id)).toBe(true);
    expect(await store.apiKeys.verify(key.key)).toBeUndefined();
    await store.close();
  });
});
