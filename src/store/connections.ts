import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { ConnectionCreate, ConnectionView, ProjectConnection } from '../contract/connections.ts';
import { AppError } from '../errors.ts';
import { nowIso } from './columns.ts';
import { pageSize, type ListWindow } from './cursor.ts';
import type { ConnectionsTable, Database } from './schema.ts';
import type { SecretBox } from './secret-box.ts';

/**
 * "…" and the key's last characters: 4 for a key of 16 or more, fewer for a shorter one, so a hint
 * never gives away more than a quarter of a key.
 */
function keyHint(key: string): string {
  return `…${key.slice(key.length - Math.min(4, Math.floor(key.length / 4)))}`;
}

/** What a sealed key is bound to: the row it was written for. */
const sealContext = (row: { id: string; project_id: string }) => `connection:${row.project_id}:${row.id}`;

function toView(row: Selectable<ConnectionsTable>): ConnectionView {
  return {
    id: row.id,
    project_id: row.project_id,
    slug: row.slug,
    provider: row.provider as ConnectionView['provider'],
    ...(row.base_url !== null ? { base_url: row.base_url } : {}),
    ...(row.model !== null ? { model: row.model } : {}),
    key_hint: row.key_hint,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function createConnectionsRepo(db: Kysely<Database>, box: SecretBox) {
  const bySlug = (projectId: string, slug: string) =>
    db.selectFrom('connections').selectAll().where('project_id', '=', projectId).where('slug', '=', slug);

  /** Stores a connection; a slug the project already has is a 409, even when two requests race. */
  async function create(projectId: string, input: ConnectionCreate): Promise<ConnectionView> {
    const now = nowIso();
    const id = randomUUID();
    const row = {
      id,
      project_id: projectId,
      slug: input.slug,
      provider: input.provider,
      base_url: input.base_url ?? null,
      model: input.model ?? null,
      api_key_ciphertext: box.seal(input.api_key, sealContext({ id, project_id: projectId })),
      key_hint: keyHint(input.api_key),
      created_at: now,
      updated_at: now,
    };
    const result = await db
      .insertInto('connections')
      .values(row)
      .onConflict((oc) => oc.columns(['project_id', 'slug']).doNothing())
      .executeTakeFirst();
    if (Number(result.numInsertedOrUpdatedRows ?? 0n) !== 1) {
      throw new AppError('conflict', `the project already has a connection "${input.slug}"; delete it first (DELETE /api/connections/${input.slug}) or choose another slug`);
    }
    return toView(row);
  }

  /** A project's connections, by slug (then id); a window's limit reads one more, as toListPage expects. */
  async function list(projectId: string, window: ListWindow = {}): Promise<ConnectionView[]> {
    let query = db.selectFrom('connections').selectAll().where('project_id', '=', projectId);
    const { after, limit } = window;
    if (after) query = query.where((eb) => eb.or([eb('slug', '>', after.key), eb.and([eb('slug', '=', after.key), eb('id', '>', after.id)])]));
    if (limit !== undefined) query = query.limit(pageSize(limit) + 1);
    const rows = await query.orderBy('slug').orderBy('id').execute();
    return rows.map(toView);
  }

  async function get(projectId: string, slug: string): Promise<ConnectionView | undefined> {
    const row = await bySlug(projectId, slug).executeTakeFirst();
    return row && toView(row);
  }

  /**
   * The connection with its key decrypted, for the one turn that uses it; undefined when the
   * project has no such slug. Throws SecretBoxMismatch when the key was sealed under another key.
   */
  async function open(projectId: string, slug: string): Promise<ProjectConnection | undefined> {
    const row = await bySlug(projectId, slug).executeTakeFirst();
    if (!row) return undefined;
    return {
      slug: row.slug,
      provider: row.provider as ConnectionView['provider'],
      ...(row.base_url !== null ? { base_url: row.base_url } : {}),
      ...(row.model !== null ? { model: row.model } : {}),
      api_key: box.open(row.api_key_ciphertext, sealContext(row)),
    };
  }

  /** True when the connection existed. */
  async function remove(projectId: string, slug: string): Promise<boolean> {
    const result = await db.deleteFrom('connections').where('project_id', '=', projectId).where('slug', '=', slug).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  return { create, list, get, open, remove };
}

export type ConnectionsRepo = ReturnType<typeof createConnectionsRepo>;
