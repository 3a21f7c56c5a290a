import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * A run's `batch_size` as rows: on PostgreSQL a case is claimed together with a free slot, both
 * locked `FOR UPDATE SKIP LOCKED`, so replicas claiming one run's cases never wait for each other
 * and never hold more than `batch_size` running (design.md §5). A slot is free when no case or a
 * case no longer running holds it, so nothing has to give a slot back; a run that ends drops its
 * slots. SQLite has one writer and counts instead; the table exists there too, so both engines
 * keep one schema.
 */
export const evaluationSlots: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema
      .createTable('evaluation_slots')
      .addColumn('run_id', 'text', (col) => col.notNull())
      .addColumn('slot', 'integer', (col) => col.notNull())
      .addColumn('result_id', 'text')
      .addPrimaryKeyConstraint('evaluation_slots_pkey', ['run_id', 'slot'])
      .execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropTable('evaluation_slots').execute();
  },
};
