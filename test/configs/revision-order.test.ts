import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.ts';
import { freshDatabase, type TestDatabase } from '../support/database.ts';

/**
 * Revisions committed within one millisecond (a script committing in a loop) still list newest
 * version first, across pages: their stamps tie, so the version orders them.
 */
describe('revision listing order', () => {
  let store: Store;
  let database: TestDatabase;
  let dataDir: string;
  beforeAll(async () => {
    database = await freshDatabase();
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-revisions-'));
    store = await openStore({ dataDir, databaseUrl: database.url });
  });
  afterAll(async () => {
    await store.close();
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('lists revisions stamped in the same millisecond by version, newest first, page after page', async () => {
    const project = await store.projects.ensure('order');
    const { artifact, variant } = await store.configs.createArtifact(project.id, { kind: 'workflow', family: 'workflow', slug: 'same-ms', variant: 'default' });
    for (let i = 0; i < 7; i++) await store.configs.commit(project.id, variant, { parameters: { n: i } });
    // Every stamp the same, as when the commits land within one millisecond.
    await store.db.updateTable('revisions').set({ created_at: '2026-01-01T00:00:00.000Z' }).where('artifact_id', '=', artifact.id).execute();

    const versions: number[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.configs.listRevisions(artifact.id, { limit: 3, cursor });
      versions.push(...page.items.map((r) => r.version));
      cursor = page.next;
    } while (cursor);
    expect(versions).toEqual([7, 6, 5, 4, 3, 2, 1]);
  });
});
