import { describe, expect, it } from 'vitest';
import { startHarness } from '../support/harness.ts';
import { TEST_POSTGRES_URL } from '../support/database.ts';

/**
 * A key revoked on one replica stops working on the others at once: they hear the revoke
 * (LISTEN/NOTIFY) and forget the key they had verified, instead of trusting their cache for a
 * minute more.
 */

describe.runIf(TEST_POSTGRES_URL)('a revoked key, across replicas', () => {
  it('is refused by the other replica within a second, though that replica had it cached', async () => {
    const a = await startHarness();
    const b = await startHarness({ dataDir: a.dataDir, databaseUrl: a.databaseUrl, listenUrl: a.listenUrl });
    try {
      const admin = (await a.store.apiKeys.create(a.projectId, 'admin')).key;
      const doomed = await a.store.apiKeys.create(a.projectId, 'viewer');
      const self = (h: typeof a, key: string) => fetch(`${h.url}/api/keys/self`, { headers: { authorization: `ApiKey ${key}` } });
      // B verifies the key and keeps it in its cache.
      expect((await self(b, doomed.key)).status).toBe(200);
      const revoked = await fetch(`${a.url}/api/keys/${doomed.id}`, { method: 'DELETE', headers: { authorization: `ApiKey ${admin}` } });
      expect(revoked.status).toBe(204);
      const started = Date.now();
      let status = 200;
      while (status === 200 && Date.now() - started < 1000) {
        status = (await self(b, doomed.key)).status;
        if (status === 200) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(status).toBe(401);
    } finally {
      await b.close();
      await a.close();
    }
  });
});
