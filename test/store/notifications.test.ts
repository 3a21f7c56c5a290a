import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/db.ts';
import { createPgNotifications, splitMessage } from '../../src/store/notifications.ts';
import { freshDatabase, TEST_POSTGRES_URL, type TestDatabase } from '../support/database.ts';

describe('splitMessage', () => {
  it('cuts long text into parts that each fit one NOTIFY and join back to the original', () => {
    const text = '😀é-'.repeat(5_000);
    const parts = splitMessage(text);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.join('')).toBe(text);
    for (const part of parts) {
      expect(Buffer.byteLength(part, 'utf8')).toBeLessThan(8_000 - 64);
      // No part ends in the first half of a surrogate pair (it would reach PostgreSQL as U+FFFD).
      expect(part).toBe(Buffer.from(part, 'utf8').toString('utf8'));
    }
  });

  it('keeps a short or empty message whole', () => {
    expect(splitMessage('hi')).toEqual(['hi']);
    expect(splitMessage('')).toEqual(['']);
  });
});

describe('a listener that cannot connect', () => {
  it('rejects the listen with the connection error and does not keep trying for it', async () => {
    // A server that hangs up on every connection, counting them: the database is unreachable.
    let attempts = 0;
    const server = net.createServer((socket) => {
      attempts++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const connectionString = `postgres://nobody@127.0.0.1:${(server.address() as net.AddressInfo).port}/none`;
    const pool = new pg.Pool({ connectionString });
    const notifications = createPgNotifications({ connectionString, pool, prefix: 'agentd_test_' });
    try {
      await expect(notifications.listen('nowhere', () => {})).rejects.toThrow();
      // Nobody listens any more, so there is nothing to reconnect for: no second attempt a
      // reconnect delay later.
      await new Promise((r) => setTimeout(r, 2_500));
      expect(attempts).toBe(1);
    } finally {
      await notifications.close();
      await pool.end();
      server.close();
    }
  });
});

/** SQLite serves one process, so it has no notifications; these need a PostgreSQL server. */
describe.runIf(TEST_POSTGRES_URL)('notifications between processes on PostgreSQL', () => {
  let first: TestDatabase;
  let second: TestDatabase;
  const stores: Store[] = [];
  const open = async (database: TestDatabase) => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-notify-'));
    const store = await openStore({ dataDir, databaseUrl: database.url });
    stores.push(store);
    await rm(dataDir, { recursive: true, force: true });
    return store.notifications!;
  };
  const received = (into: string[], count: number) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`received ${into.length} of ${count}`)), 5_000);
      const poll = setInterval(() => {
        if (into.length < count) return;
        clearInterval(poll);
        clearTimeout(timer);
        resolve();
      }, 10);
    });

  beforeAll(async () => {
    first = await freshDatabase();
    second = await freshDatabase();
  });
  afterAll(async () => {
    for (const store of stores) await store.close();
    await first.drop();
    await second.drop();
  });

  it('delivers messages of any size, in the order one sender sent them, to every listener of the channel', async () => {
    const [sender, listenerA, listenerB] = [await open(first), await open(first), await open(first)];
    const gotA: string[] = [];
    const gotB: string[] = [];
    await listenerA.listen('ordered', (m) => gotA.push(m));
    await listenerB.listen('ordered', (m) => gotB.push(m));
    const messages = ['one', 'ü😀'.repeat(9_000), 'three', ''];
    for (const message of messages) await sender.send('ordered', message);
    await received(gotA, messages.length);
    await received(gotB, messages.length);
    expect(gotA).toEqual(messages);
    expect(gotB).toEqual(messages);
  });

  it('stops delivering once the listener stops', async () => {
    const [sender, listener] = [await open(first), await open(first)];
    const got: string[] = [];
    const stop = await listener.listen('stoppable', (m) => got.push(m));
    await sender.send('stoppable', 'before');
    await received(got, 1);
    await stop();
    await sender.send('stoppable', 'after');
    await sender.send('other', 'marker');
    await new Promise((r) => setTimeout(r, 200));
    expect(got).toEqual(['before']);
  });

  it('forgets the parts of a message left unfinished when the listener stops', async () => {
    const pool = new pg.Pool({ connectionString: TEST_POSTGRES_URL });
    const prefix = `agentd_unfinished_${process.pid}_`;
    const notifications = createPgNotifications({ connectionString: TEST_POSTGRES_URL!, pool, prefix });
    // One of two parts of a message, as a sender that died between them leaves it.
    const part = (index: number, text: string) => pool.query('select pg_notify($1, $2)', [`${prefix}held`, `msg ${index} 2 ${text}`]);
    try {
      const before: string[] = [];
      const stop = await notifications.listen('held', (m) => before.push(m));
      await part(0, 'stale ');
      await notifications.send('held', 'marker');
      await received(before, 1);
      await stop();
      // Listening again, the other part of that message finds nothing held from before: what the
      // earlier listener left unfinished went with it, instead of staying for the process's life.
      const after: string[] = [];
      await notifications.listen('held', (m) => after.push(m));
      await part(1, 'part');
      await notifications.send('held', 'marker');
      await received(after, 1);
      expect(after).toEqual(['marker']);
    } finally {
      await notifications.close();
      await pool.end();
    }
  });

  it('keeps deployments in different schemas of one database apart', async () => {
    const [here, there] = [await open(first), await open(second)];
    const got: string[] = [];
    await there.listen('shared_name', (m) => got.push(m));
    await here.send('shared_name', 'not for you');
    await there.send('shared_name', 'for you');
    await received(got, 1);
    await new Promise((r) => setTimeout(r, 200));
    expect(got).toEqual(['for you']);
  });

  it('listens again after its connection is cut (a database restart), on the same channels', async () => {
    const [sender, listener] = [await open(first), await open(first)];
    const channel = `reconnect_${Date.now()}`;
    const got: string[] = [];
    await listener.listen(channel, (m) => got.push(m));
    const admin = new pg.Client({ connectionString: TEST_POSTGRES_URL });
    await admin.connect();
    try {
      const cut = await admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'agentd-listener' and query like $1`, [`%${channel}%`]);
      expect(cut.rowCount).toBe(1);
    } finally {
      await admin.end();
    }
    // Sent until one arrives: the listener comes back about a second after the cut.
    for (let i = 0; got.length === 0 && i < 50; i++) {
      await sender.send(channel, `after the cut ${i}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(got[0]).toMatch(/^after the cut/);
  });

  it('refuses a channel name PostgreSQL could not take', async () => {
    const notifications = await open(first);
    await expect(notifications.send('Bad Name!', 'x')).rejects.toThrow(/invalid notification channel/);
  });
});
