import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Indexes for listing interactions: a project's records oldest first (the query API pages through
 * them by `created_at`, `id`), and every project's records in one status (the startup sweep).
 */
export const interactionListing: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema.createIndex('interactions_project_created_idx').on('interactions').columns(['project_id', 'created_at', 'id']).execute();
    await db.schema.createIndex('interactions_status_updated_idx').on('interactions').columns(['status', 'updated_at']).execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropIndex('interactions_status_updated_idx').execute();
    await db.schema.dropIndex('interactions_project_created_idx').execute();
  },
};
