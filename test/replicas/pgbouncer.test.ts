import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { openStore, type Store } from '../../src/store/db.ts';
import { freshDatabase, type TestDatabase } from '../support/database.ts';
import { tempDir } from '../store/helpers.ts';

/**
 * Why a replica behind PgBouncer in transaction mode needs AGENTD_DATABASE_LISTEN_URL: a LISTEN
 * through the pooler is made on whichever server connection the statement borrowed, which goes
 * back to the pool at once, so nothing reaches the listener; a direct one hears everything. Runs
 * in the `pgbouncer` project only (vitest.config.ts), where the other replica tests run behind the
 * pooler too.
 */

let database: TestDatabase;
const stores: Store[] = [];

const open = async (listenUrl: string | undefined) => {
  const store = await openStore({ dataDir: await tempDir('pgbouncer'), databaseUrl: database.url, listenUrl });
  stores.push(store);
  return store;
};

async function heard(listener: Store, sender: Store, channel: string): Promise<boolean> {
  let got = false;
  const stop = await listener.notifications!.listen(channel, () => void (got = true));
  try {
    for (let i = 0; i < 20 && !got; i++) {
      await sender.notifications!.send(channel, 'hello');
      await new Promise((r) => setTimeout(r, 50));
    }
    return got;
  } finally {
    await stop();
  }
}

describe.runIf(process.env.AGENTD_TEST_PGBOUNCER)('a replica behind PgBouncer in transaction mode', () => {
  beforeAll(async () => {
    database = await freshDatabase();
  });
  afterAll(async () => {
    for (const store of stores) await store.close();
    await database.drop();
  });

  it('reaches its database through the pooler, and LISTENs on a direct connection', async () => {
    expect(new URL(database.url!).port).not.toBe(new URL(database.listenUrl!).port);
    const [listener, sender] = [await open(database.listenUrl), await open(undefined)];
    expect(await heard(listener, sender, 'direct')).toBe(true);
  });

  it('hears nothing when its LISTEN goes through the pooler', async () => {
    const [listener, sender] = [await open(undefined), await open(undefined)];
    expect(await heard(listener, sender, 'pooled')).toBe(false);
  });
});

describe('AGENTD_DATABASE_LISTEN_URL', () => {
  it('is read beside a PostgreSQL DATABASE_URL, and refused otherwise, saying what to set', () => {
    const direct = 'postgres://agentd@db:5432/agentd';
    expect(loadConfig({ DATABASE_URL: 'postgres://agentd@pgbouncer:6432/agentd', AGENTD_DATABASE_LISTEN_URL: direct }).databaseListenUrl).toBe(direct);
    expect(loadConfig({ DATABASE_URL: 'postgres://agentd@db:5432/agentd' }).databaseListenUrl).toBeUndefined();
    expect(() => loadConfig({ AGENTD_DATABASE_LISTEN_URL: direct })).toThrow(/only read with a PostgreSQL DATABASE_URL/);
    expect(() => loadConfig({ DATABASE_URL: 'postgres://agentd@pgbouncer:6432/agentd', AGENTD_DATABASE_LISTEN_URL: 'db:5432' })).toThrow(/must be a postgres:\/\/ URL/);
  });
});
