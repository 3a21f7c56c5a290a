import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Evaluation runs and their results: one result row per test case and repeat, made when the run is
 * created, so progress is a count of rows by status and a restarted server knows exactly which
 * cases are left. Test sets are artifacts (0005) of kind `testset`.
 */
export const evaluations: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema
      .createTable('evaluation_runs')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
      .addColumn('name', 'text')
      .addColumn('description', 'text')
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('spec_json', 'text', (c) => c.notNull())
      .addColumn('tags_json', 'text')
      .addColumn('meta_json', 'text')
      .addColumn('flags_json', 'text')
      .addColumn('error_json', 'text')
      .addColumn('metrics_json', 'text')
      .addColumn('cancel_requested', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addColumn('started_at', 'text')
      .addColumn('ended_at', 'text')
      .execute();
    await db.schema.createIndex('evaluation_runs_project_created_idx').on('evaluation_runs').columns(['project_id', 'created_at', 'id']).execute();
    await db.schema.createIndex('evaluation_runs_status_idx').on('evaluation_runs').columns(['status']).execute();
    await db.schema
      .createTable('evaluation_results')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
      .addColumn('run_id', 'text', (c) => c.notNull().references('evaluation_runs.id'))
      .addColumn('testcase_id', 'text', (c) => c.notNull())
      .addColumn('repeat_idx', 'integer', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('not_before', 'text')
      .addColumn('claimed_by', 'text')
      .addColumn('attempts_json', 'text', (c) => c.notNull())
      .addColumn('output_json', 'text')
      .addColumn('error_json', 'text')
      .addColumn('scores_json', 'text')
      .addColumn('duration_ms', 'double precision')
      .addColumn('tokens', 'double precision')
      .addColumn('cost', 'double precision')
      .addColumn('trace_id', 'text')
      .addColumn('session_id', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('evaluation_results_case_unique', ['run_id', 'testcase_id', 'repeat_idx'])
      .execute();
    // Claiming reads a run's pending cases in id order: the index serves both the filter and the order.
    await db.schema.createIndex('evaluation_results_run_status_idx').on('evaluation_results').columns(['run_id', 'status', 'id']).execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropTable('evaluation_results').execute();
    await db.schema.dropTable('evaluation_runs').execute();
  },
};
