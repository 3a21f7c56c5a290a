import type { Kysely } from 'kysely';
import { Migrator, type MigrationResult } from 'kysely/migration';
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
    const failed = results?.find((result: MigrationResult) => result.status === 'Error');
    const where = failed ? ` in migration ${failed.migrationName}` : '';
    throw new Error(`database migration failed${where}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName);
}
