import type { Kysely } from 'kysely';
import { DEFAULT_MIGRATION_TABLE, Migrator, type MigrationResult } from 'kysely/migration';
import { migrations } from './migrations/index.ts';
import type { Database } from './schema.ts';

/**
 * `schema` (PostgreSQL) is where the migration tables live: Kysely looks for them across every
 * schema unless told which one is ours, so another database in another schema of the same server
 * would confuse it.
 */
export function createMigrator(db: Kysely<Database>, schema?: string): Migrator {
  return new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    ...(schema ? { migrationTableSchema: schema } : {}),
  });
}


/**
 * Brings the schema up to date; returns the migrations applied (none when already current).
 * Kysely's migrator never throws, it reports; a half-migrated database must stop the caller, so throw.
 */
export async function migrateToLatest(db: Kysely<Database>, schema?: string): Promise<string[]> {
  const { error, results } = await createMigrator(db, schema).migrateToLatest();
  if (error !== undefined) {
    const unknown = await unknownMigrations(db, schema);
    if (unknown.length > 0) throw new Error(newerDatabase(unknown));
    const failed = results?.find((result: MigrationResult) => result.status === 'Error');
    const where = failed ? ` in migration ${failed.migrationName}` : '';
    throw new Error(`database migration failed${where}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName);
}

/**
 * Migrations the database has applied that this code does not know: it was written by a newer
 * agentd. Kysely refuses such a database before it changes anything, but calls it "corrupted",
 * which sends an operator who only started an older version to repair a database that is fine.
 * Looked up only once a migration has failed, so a normal start reads nothing more.
 */
async function unknownMigrations(db: Kysely<Database>, schema?: string): Promise<string[]> {
  try {
    const from = (schema ? (db as Kysely<any>).withSchema(schema) : (db as Kysely<any>)).selectFrom(DEFAULT_MIGRATION_TABLE);
    const rows: { name: string }[] = await from.select('name').orderBy('name').execute();
    return rows.map((row) => row.name).filter((name) => !(name in migrations));
  } catch {
    // No migration table to read: the failure was something else, reported as it is.
    return [];
  }
}

function newerDatabase(unknown: string[]): string {
  const newest = Object.keys(migrations).at(-1);
  return (
    `the database was migrated by a newer agentd: it has ${unknown.length === 1 ? 'migration' : 'migrations'} ${unknown.join(', ')}, ` +
    `which this version (newest ${newest}) does not know. Nothing was changed; run that newer agentd on it, ` +
    'or restore the backup taken before the upgrade (agentd does not migrate a database back)'
  );
}
