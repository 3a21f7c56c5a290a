import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/** When each API key was last seen, for the key listing (written when a verification misses the cache). */
export const apiKeyLastUsed: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema.alterTable('api_keys').addColumn('last_used_at', 'text').execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.alterTable('api_keys').dropColumn('last_used_at').execute();
  },
};
