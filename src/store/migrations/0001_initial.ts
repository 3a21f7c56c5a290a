import { sql, type Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * A migration is frozen once released: it takes `Kysely<any>` rather than today's `Database`, so
 * later schema changes cannot alter what it does. Only types both SQLite and PostgreSQL have.
 */
export const initial: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema
      .createTable('projects')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull().unique())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('api_keys')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
      .addColumn('role', 'text', (c) => c.notNull())
      .addColumn('key_hash', 'text', (c) => c.notNull().unique())
      .addColumn('key_prefix', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('revoked_at', 'text')
      .addCheckConstraint('api_keys_role_check', sql`role in ('viewer', 'editor', 'admin')`)
      .execute();
    await db.schema.createIndex('api_keys_project_idx').on('api_keys').column('project_id').execute();

    await db.schema
      .createTable('sessions')
      .addColumn('project_id', 'text', (c) => c.notNull())
      .addColumn('id', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('sessions_pk', ['project_id', 'id'])
      .execute();

    await db.schema
      .createTable('turns')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull())
      .addColumn('session_id', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('stop_reason', 'text')
      .addColumn('trace_id', 'text', (c) => c.notNull())
      .addColumn('span_id', 'text', (c) => c.notNull())
      .addColumn('parent_span_id', 'text')
      .addColumn('request_json', 'text')
      .addColumn('output_json', 'text')
      .addColumn('usage_json', 'text')
      .addColumn('error_json', 'text')
      .addColumn('started_at', 'text', (c) => c.notNull())
      .addColumn('ended_at', 'text')
      .addCheckConstraint(
        'turns_status_check',
        sql`status in ('running', 'completed', 'paused', 'failed', 'interrupted', 'cancelled')`,
      )
      .execute();
    await db.schema
      .createIndex('turns_session_idx')
      .on('turns')
      .columns(['project_id', 'session_id', 'started_at'])
      .execute();
    // Startup and shutdown look for turns still `running`; they are few, so this stays small to scan.
    await db.schema.createIndex('turns_status_idx').on('turns').column('status').execute();

    await db.schema
      .createTable('interactions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull())
      .addColumn('session_id', 'text', (c) => c.notNull())
      .addColumn('turn_id', 'text', (c) => c.notNull())
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('tool_call_id', 'text', (c) => c.notNull())
      .addColumn('request_json', 'text', (c) => c.notNull())
      .addColumn('answer_json', 'text')
      .addColumn('resolution_json', 'text')
      .addColumn('state_json', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addCheckConstraint(
        'interactions_status_check',
        sql`status in ('pending', 'responded', 'resolved', 'cancelled')`,
      )
      .execute();
    await db.schema
      .createIndex('interactions_session_idx')
      .on('interactions')
      .columns(['project_id', 'session_id', 'status'])
      .execute();
  },

  async down(db: Kysely<any>): Promise<void> {
    for (const table of ['interactions', 'turns', 'sessions', 'api_keys', 'projects']) {
      await db.schema.dropTable(table).execute();
    }
  },
};
