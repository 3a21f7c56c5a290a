import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Stored configurations: artifacts (workflows and environments), their variants, and the
 * variants' immutable revisions. One shape serves both kinds, as the reference's
 * `{workflow, workflow_variant, workflow_revision}` and `{environment, …}` references do. Slugs are
 * unique per project and kind; versions count up per variant; a revision's slug is unique per
 * project so `{slug}` alone names it.
 */
export const configs: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema
      .createTable('artifacts')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('family', 'text')
      .addColumn('slug', 'text', (c) => c.notNull())
      .addColumn('name', 'text')
      .addColumn('description', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('artifacts_project_kind_slug_unique', ['project_id', 'kind', 'slug'])
      .execute();
    await db.schema
      .createTable('variants')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
      .addColumn('artifact_id', 'text', (c) => c.notNull().references('artifacts.id'))
      .addColumn('slug', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('variants_artifact_slug_unique', ['artifact_id', 'slug'])
      .execute();
    await db.schema.createIndex('variants_project_slug_idx').on('variants').columns(['project_id', 'slug']).execute();
    await db.schema
      .createTable('revisions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
      .addColumn('artifact_id', 'text', (c) => c.notNull().references('artifacts.id'))
      .addColumn('variant_id', 'text', (c) => c.notNull().references('variants.id'))
      .addColumn('version', 'integer', (c) => c.notNull())
      .addColumn('slug', 'text', (c) => c.notNull())
      .addColumn('data_json', 'text', (c) => c.notNull())
      .addColumn('message', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('revisions_variant_version_unique', ['variant_id', 'version'])
      .addUniqueConstraint('revisions_project_slug_unique', ['project_id', 'slug'])
      .execute();
    await db.schema.createIndex('revisions_artifact_created_idx').on('revisions').columns(['artifact_id', 'created_at', 'id']).execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropTable('revisions').execute();
    await db.schema.dropTable('variants').execute();
    await db.schema.dropTable('artifacts').execute();
  },
};
