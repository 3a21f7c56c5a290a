import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Project connections: a provider endpoint and its API key, named by a slug unique in the project.
 * The key is stored only sealed (`api_key_ciphertext`, see secret-box.ts); `key_hint` keeps its
 * last characters so people can tell keys apart without reading them.
 */
export const connections: Migration = {
  async up(db: Kysely<any>): Promise<void> {
    await db.schema
      .createTable('connections')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id'))
      .addColumn('slug', 'text', (c) => c.notNull())
      .addColumn('provider', 'text', (c) => c.notNull())
      .addColumn('base_url', 'text')
      .addColumn('model', 'text')
      .addColumn('api_key_ciphertext', 'text', (c) => c.notNull())
      .addColumn('key_hint', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('connections_project_slug_unique', ['project_id', 'slug'])
      .execute();
  },
  async down(db: Kysely<any>): Promise<void> {
    await db.schema.dropTable('connections').execute();
  },
};
