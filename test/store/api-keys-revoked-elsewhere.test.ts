import { DatabaseSync } from 'node:sqlite';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DATABASE_FILE, openStore } from '../../src/store/db.ts';
import { TEST_POSTGRES_URL } from '../support/database.ts';
import { tempDir } from './helpers.ts';

/**
 * SQLite: `agentd keys revoke` beside a running server writes through a connection of its own, and
 * nothing tells the server (PostgreSQL's replicas are told: notifications.test.ts). Its key cache
 * must still refuse the key at the next request, not after its TTL.
 */

const dir = await tempDir('keys-elsewhere');

describe.skipIf(TEST_POSTGRES_URL)('a key revoked by another connection to the SQLite file', () => {
  it('is refused at once by the store that had it cached', async () => {
    const dataDir = path.join(dir, 'two-stores');
    const server = await openStore({ dataDir });
    const cli = await openStore({ dataDir });
    try {
      const project = await server.projects.create('p');
      const kept = await server.apiKeys.create(project.id, 'editor');
      const revoked = await server.apiKeys.create(project.id, 'editor');
      expect(await server.apiKeys.verify(revoked.key)).toMatchObject({ key_id: revoked.id });
      expect(await server.apiKeys.verify(kept.key)).toMatchObject({ key_id: kept.id });

      expect(await cli.apiKeys.revoke(revoked.id)).toBe(true);
      expect(await server.apiKeys.verify(revoked.key)).toBeUndefined();
      // The cache went whole; the other key is read again, and still works.
      expect(await server.apiKeys.verify(kept.key)).toMatchObject({ key_id: kept.id });
    } finally {
      await cli.close();
      await server.close();
    }
  });

  it("keeps the cache across the store's own writes and another connection's checkpoints", async () => {
    const dataDir = path.join(dir, 'own-writes');
    const store = await openStore({ dataDir });
    const other = new DatabaseSync(path.join(dataDir, DATABASE_FILE));
    try {
      const project = await store.projects.create('p');
      const created = await store.apiKeys.create(project.id, 'editor');
      expect(await store.apiKeys.verify(created.key)).toBeDefined();
      // With the row gone by the store's own hand, only the cache can still vouch for the key…
      await store.db.deleteFrom('api_keys').where('id', '=', created.id).execute();
      expect(await store.apiKeys.verify(created.key)).toMatchObject({ key_id: created.id });
      // …and a checkpoint (the checkpoint thread's is another connection's) leaves it too.
      other.exec('PRAGMA busy_timeout = 1000');
      other.prepare('PRAGMA wal_checkpoint(PASSIVE)').get();
      expect(await store.apiKeys.verify(created.key)).toMatchObject({ key_id: created.id });
    } finally {
      other.close();
      await store.close();
    }
  });
});
