import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * A claimed evaluation case carries an expiry its replica renews while the case runs: a replica
 * that dies leaves claims that run out, and any replica takes those cases over.
 */
export const evaluationClaims: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema.alterTable('evaluation_results').addColumn('claim_expires_at', 'text').execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.alterTable('evaluation_results').dropColumn('claim_expires_at').execute();
  },
};
