import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/** Listing a project's sessions most recently used first (`GET /api/sessions`), a page at a time. */
export const sessionListing: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema.createIndex('sessions_project_updated_idx').on('sessions').columns(['project_id', 'updated_at', 'id']).execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropIndex('sessions_project_updated_idx').execute();
  },
};
