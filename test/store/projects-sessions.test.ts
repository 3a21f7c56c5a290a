import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bootstrapFirstRun } from '../../src/store/bootstrap.ts';
import { openStore } from '../../src/store/db.ts';
import { sleep, tempDir } from './helpers.ts';

const dir = await tempDir('projects');

describe('projects', () => {
  it('ensure returns the existing project or creates it', async () => {
    const store = await openStore({ dataDir: path.join(dir, 'ensure') });
    expect(await store.projects.count()).toBe(0);
    const created = await store.projects.ensure('alpha');
    expect(created.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(await store.projects.ensure('alpha')).toEqual(created);
    expect(await store.projects.findByName('alpha')).toEqual(created);
    expect(await store.projects.findById(created.id)).toEqual(created);
    expect(await store.projects.findByName('beta')).toBeUndefined();
    expect(await store.projects.count()).toBe(1);

    const concurrent = await Promise.all([store.projects.ensure('gamma'), store.projects.ensure('gamma')]);
    expect(concurrent[0].id).toBe(concurrent[1].id);
    expect(await store.projects.count()).toBe(2);
    await store.close();
  });

  it('refuses a duplicate name and a malformed one', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    await store.projects.create('dup');
    await expect(store.projects.create('dup')).rejects.toMatchObject({ type: 'invalid-request', message: /already exists/ });
    await expect(store.projects.create('../etc')).rejects.toMatchObject({ type: 'invalid-request' });
    await expect(store.projects.ensure('')).rejects.toMatchObject({ type: 'invalid-request' });
    expect(await store.projects.count()).toBe(1);
    await store.close();
  });

  it('bootstraps a default project and admin key on first run only', async () => {
    const store = await openStore({ dataDir: path.join(dir, 'bootstrap') });
    const first = await bootstrapFirstRun(store);
    expect(first?.project.name).toBe('default');
    expect(first?.apiKey.role).toBe('admin');
    expect(await store.apiKeys.verify(first!.apiKey.key)).toEqual({
      key_id: first!.apiKey.id,
      project_id: first!.project.id,
      role: 'admin',
    });
    expect(await bootstrapFirstRun(store)).toBeUndefined();
    await store.close();
    const reopened = await openStore({ dataDir: path.join(dir, 'bootstrap') });
    expect(await bootstrapFirstRun(reopened)).toBeUndefined();
    await reopened.close();
  });
});

describe('sessions', () => {
  it('touch creates a session, then only moves updated_at', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    expect(await store.sessions.get('p1', 's1')).toBeUndefined();
    const created = await store.sessions.touch('p1', 's1');
    expect(created).toEqual({ project_id: 'p1', id: 's1', created_at: created.updated_at, updated_at: created.updated_at });
    await sleep(5);
    const touched = await store.sessions.touch('p1', 's1');
    expect(touched.created_at).toBe(created.created_at);
    expect(touched.updated_at > created.updated_at).toBe(true);
    expect(await store.sessions.get('p1', 's1')).toEqual(touched);
    await store.close();
  });

  it('keeps the same session id apart in different projects', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    await store.sessions.touch('p1', 'shared');
    expect(await store.sessions.get('p2', 'shared')).toBeUndefined();
    await store.sessions.touch('p2', 'shared');
    const rows = await store.db.selectFrom('sessions').selectAll().where('id', '=', 'shared').execute();
    expect(rows.map((row) => row.project_id).sort()).toEqual(['p1', 'p2']);
    await store.close();
  });
});
