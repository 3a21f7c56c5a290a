import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Every claim counts the run's live claims and looks for lapsed ones; without the expiry in an
 * index, both read each running case's row, so a claim cost grew with `batch_size`.
 */
export const claimExpiryIndex: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema.createIndex('evaluation_results_run_claims_idx').on('evaluation_results').columns(['run_id', 'status', 'claim_expires_at']).execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropIndex('evaluation_results_run_claims_idx').execute();
  },
};
