import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Listing a project's sessions newest first (`GET /api/sessions`), a page at a time. By creation,
 * which a turn never changes: an index on the last use would be rewritten by every turn on a
 * session (about 25 µs of a turn's CPU on SQLite, BENCHMARKS.md).
 */
export const sessionListing: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema.createIndex('sessions_project_created_idx').on('sessions').columns(['project_id', 'created_at', 'id']).execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropIndex('sessions_project_created_idx').execute();
  },
};
