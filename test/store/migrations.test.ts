import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { openStore, resolveDatabaseLocation } from '../../src/store/db.ts';
import { migrations } from '../../src/store/migrations/index.ts';
import { migrateToLatest } from '../../src/store/migrate.ts';
import { freshDatabase } from '../support/database.ts';
import { tempDir } from './helpers.ts';

const dir = await tempDir('migrations');

/** A statement on the database as it is, without opening (and so migrating) a store on it. */
async function rawQuery(where: { dataDir: string; databaseUrl: string | undefined }, text: string): Promise<Record<string, unknown>[]> {
  if (where.databaseUrl) {
    const client = new pg.Client({ connectionString: where.databaseUrl });
    await client.connect();
    try {
      return (await client.query(text)).rows;
    } finally {
      await client.end();
    }
  }
  const db = new DatabaseSync(path.join(where.dataDir, 'agentd.db'));
  try {
    return text.startsWith('select') ? (db.prepare(text).all() as Record<string, unknown>[]) : (db.exec(text), []);
  } finally {
    db.close();
  }
}

describe('openStore and migrations', () => {
  it('creates the schema once and reopens an existing database without migrating again', async () => {
    const dataDir = path.join(dir, 'nested', 'data');
    const first = await openStore({ dataDir });
    const project = await first.projects.create('kept');
    const tables = await sql<{ name: string }>`select name from sqlite_master where type = 'table' order by name`.execute(first.db);
    expect(tables.rows.map((row) => row.name)).toEqual(
      expect.arrayContaining(['api_keys', 'interactions', 'projects', 'sessions', 'turns', 'session_leases', 'kysely_migration']),
    );
    await first.close();

    const second = await openStore({ dataDir });
    expect(await migrateToLatest(second.db)).toEqual([]);
    expect(await second.projects.findById(project.id)).toEqual(project);
    const applied = await sql<{ name: string }>`select name from kysely_migration`.execute(second.db);
    expect(applied.rows.map((row) => row.name)).toEqual(Object.keys(migrations));
    await second.close();
  });

  it('refuses a database a newer agentd migrated, saying so, and leaves it as it was', async () => {
    const where = { dataDir: path.join(dir, 'downgrade'), databaseUrl: (await freshDatabase()).url };
    const newer = await openStore(where);
    const project = await newer.projects.create('kept');
    // What a newer agentd leaves: a migration this code does not know, here with a table of its own.
    await sql`create table future_things (id text primary key)`.execute(newer.db);
    await sql`insert into kysely_migration (name, timestamp) values ('0099_future_things', '2099-01-01T00:00:00.000Z')`.execute(newer.db);
    await newer.close();

    const refusal = openStore(where);
    await expect(refusal).rejects.toThrow(/the database was migrated by a newer agentd: it has migration 0099_future_things, which this version \(newest 0\d{3}_\w+\) does not know. Nothing was changed; run that newer agentd on it/);
    await expect(refusal).rejects.not.toThrow(/corrupted/);

    // Nothing was changed: every migration is still recorded, and once the newer one is taken
    // away (as restoring a backup would) the same data opens, whole.
    const applied = await rawQuery(where, 'select name from kysely_migration order by name');
    expect(applied.map((row) => row.name)).toEqual([...Object.keys(migrations), '0099_future_things']);
    await rawQuery(where, "delete from kysely_migration where name = '0099_future_things'");
    const again = await openStore(where);
    expect(await again.projects.findById(project.id)).toEqual(project);
    await again.close();
  });

  it('opens the file in WAL mode with foreign keys enforced', async () => {
    const store = await openStore({ dataDir: path.join(dir, 'pragmas') });
    const mode = await sql<{ journal_mode: string }>`pragma journal_mode`.execute(store.db);
    expect(mode.rows[0]?.journal_mode).toBe('wal');
    const fk = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(store.db);
    expect(fk.rows[0]?.foreign_keys).toBe(1);
    const busy = await sql<{ timeout: number }>`pragma busy_timeout`.execute(store.db);
    expect(busy.rows[0]?.timeout).toBe(5000);
    await expect(store.apiKeys.create('no-such-project', 'editor')).rejects.toThrow(/FOREIGN KEY/);
    await store.close();
  });

  it('refuses a boolean parameter with a message that says where to fix it', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    await expect(sql`select ${true} as x`.execute(store.db)).rejects.toThrow(/boolean.*0\/1/);
    await store.close();
  });

  it('enforces the role and status check constraints', async () => {
    const store = await openStore({ dataDir: ':memory:' });
    const project = await store.projects.create('p');
    await expect(
      store.db
        .insertInto('api_keys')
        .values({ id: 'k', project_id: project.id, role: 'root' as never, key_hash: 'h', key_prefix: 'p', created_at: 'now', revoked_at: null })
        .execute(),
    ).rejects.toThrow(/CHECK/);
    await store.close();
  });

  it('resolves DATABASE_URL, showing a PostgreSQL one without its password', async () => {
    expect(resolveDatabaseLocation({ dataDir: '/data' })).toBe('/data/agentd.db');
    expect(resolveDatabaseLocation({ dataDir: ':memory:' })).toBe(':memory:');
    expect(resolveDatabaseLocation({ dataDir: '/data', databaseUrl: 'sqlite:/x/y.db' })).toBe('/x/y.db');
    expect(resolveDatabaseLocation({ dataDir: '/data', databaseUrl: 'file:///x/z.db' })).toBe('/x/z.db');
    expect(resolveDatabaseLocation({ dataDir: '/data', databaseUrl: 'sqlite::memory:' })).toBe(':memory:');
    // Another database's URL is refused saying what to write, and not echoed: it may hold a password.
    expect(() => resolveDatabaseLocation({ dataDir: '/data', databaseUrl: 'mysql://u:hunter2@h/db' })).toThrow(/^DATABASE_URL is not one agentd reads: write sqlite:<path>, file:<path> or postgres:\/\/[^]*$/);
    expect(() => resolveDatabaseLocation({ dataDir: '/data', databaseUrl: 'mysql://u:hunter2@h/db' })).not.toThrow(/hunter2/);
    expect(resolveDatabaseLocation({ dataDir: '/data', databaseUrl: 'postgres://u:hunter2@h:5432/db' })).toBe('postgres://u:***@h:5432/db');
    // An unreachable server stops the start with the address (never the password) and the reason.
    await expect(openStore({ dataDir: dir, databaseUrl: 'postgresql://u:hunter2@127.0.0.1:1/db' })).rejects.toThrow(/cannot open the database at postgresql:\/\/u:\*\*\*@127\.0\.0\.1:1\/db: .*ECONNREFUSED/);

    const file = path.join(dir, 'via-url', 'custom.db');
    const store = await openStore({ dataDir: path.join(dir, 'unused'), databaseUrl: `sqlite:${file}` });
    await store.projects.create('via-url');
    await store.close();
    const again = await openStore({ dataDir: path.join(dir, 'unused'), databaseUrl: `file:${file}` });
    expect(await again.projects.findByName('via-url')).toBeDefined();
    await again.close();
  });
});
