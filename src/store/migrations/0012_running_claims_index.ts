import { sql, type Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * The claim expiry index (0008) covers running cases only. As `(run_id, status, claim_expires_at)`
 * it also matched the search for a run's pending cases, and on PostgreSQL, before a freshly
 * written run's cases were analysed, the planner took it for that search and sorted every pending
 * case by id on each claim (10 ms a claim at 40,000 cases, where the `(run_id, status, id)` index
 * reads the first one). A partial index cannot be mistaken for it.
 */
export const runningClaimsIndex: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema.dropIndex('evaluation_results_run_claims_idx').execute();
    await db.schema
      .createIndex('evaluation_results_running_claims_idx')
      .on('evaluation_results')
      .columns(['run_id', 'claim_expires_at'])
      .where(sql.ref('status'), '=', 'running')
      .execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropIndex('evaluation_results_running_claims_idx').execute();
    await db.schema.createIndex('evaluation_results_run_claims_idx').on('evaluation_results').columns(['run_id', 'status', 'claim_expires_at']).execute();
  },
};
