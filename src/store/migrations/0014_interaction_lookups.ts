import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Indexes that end in the order each lookup reads: without them SQLite answered a session's
 * pending interactions, a turn's interactions (every continuation) and a session's listing from
 * the project's index, which already had that order, by reading every interaction of the project
 * (BENCHMARKS.md). The session's index gains the order; the turn and the session's listing get
 * their own.
 */
export const interactionLookups: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema.dropIndex('interactions_session_idx').execute();
    await db.schema.createIndex('interactions_session_idx').on('interactions').columns(['project_id', 'session_id', 'status', 'created_at', 'id']).execute();
    await db.schema.createIndex('interactions_session_created_idx').on('interactions').columns(['project_id', 'session_id', 'created_at', 'id']).execute();
    await db.schema.createIndex('interactions_turn_idx').on('interactions').columns(['project_id', 'turn_id', 'created_at', 'id']).execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropIndex('interactions_turn_idx').execute();
    await db.schema.dropIndex('interactions_session_created_idx').execute();
    await db.schema.dropIndex('interactions_session_idx').execute();
    await db.schema.createIndex('interactions_session_idx').on('interactions').columns(['project_id', 'session_id', 'status']).execute();
  },
};
