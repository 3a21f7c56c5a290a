import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * One row per session with a live turn: the lease. Its holder renews `expires_at` while the turn
 * runs; a lease past its expiry belongs to a process that died, and the session is free again.
 * `cancel_requested` lets any process ask the holder to stop its turn (force takeover).
 */
export const sessionLeases: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema
      .createTable('session_leases')
      .addColumn('project_id', 'text', (c) => c.notNull())
      .addColumn('session_id', 'text', (c) => c.notNull())
      .addColumn('turn_id', 'text', (c) => c.notNull())
      .addColumn('holder', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .addColumn('cancel_requested', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('started_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('session_leases_pk', ['project_id', 'session_id'])
      .execute();
    await db.schema.createIndex('session_leases_expiry_idx').on('session_leases').column('expires_at').execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropTable('session_leases').execute();
  },
};
