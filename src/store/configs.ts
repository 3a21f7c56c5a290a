import { randomBytes, randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import { AppError } from '../errors.ts';
import { fromJson, nowIso } from './columns.ts';
import { decodeCursor, pageSize, toPage, type ListWindow, type Page, type PageRequest } from './cursor.ts';
import type { ArtifactKind, ArtifactsTable, Database } from './schema.ts';

/**
 * Artifacts (workflows and environments), their variants and revisions. Revisions are never
 * updated: committing writes the next version, so whatever a turn ran stays readable as it was.
 */

export type ArtifactRecord = Selectable<ArtifactsTable>;

export interface VariantRecord {
  id: string;
  artifact_id: string;
  slug: string;
  created_at: string;
  latest_version: number | null;
}

export interface RevisionRecord {
  id: string;
  slug: string;
  version: number;
  artifact: { id: string; slug: string; kind: ArtifactKind; family: string | null; name: string | null; description: string | null };
  variant: { id: string; slug: string };
  data: Record<string, unknown>;
  message: string | null;
  created_at: string;
}

/** A reference's lookup keys, as the caller gave them. */
export interface Lookup {
  id?: string | null | undefined;
  slug?: string | null | undefined;
}

export interface NewArtifact {
  kind: ArtifactKind;
  family: string | null;
  slug: string;
  name?: string | undefined;
  description?: string | undefined;
  /** The first variant's slug. */
  variant: string;
}

/** Short and random: the reference names revisions by such slugs too. */
const revisionSlug = () => randomBytes(6).toString('hex');

/** Commits take turns, so an insert is refused only for a revision slug drawn twice, or beside a replica of an older agentd that commits without the lock. */
const COMMIT_ATTEMPTS = 4;

export function createConfigsRepo(db: Kysely<Database>, engine: 'sqlite' | 'postgres') {
  const revisions = () =>
    db
      .selectFrom('revisions as r')
      .innerJoin('artifacts as a', 'a.id', 'r.artifact_id')
      .innerJoin('variants as v', 'v.id', 'r.variant_id')
      .select([
        'r.id',
        'r.slug',
        'r.version',
        'r.data_json',
        'r.message',
        'r.created_at',
        'a.id as artifact_id',
        'a.slug as artifact_slug',
        'a.kind as artifact_kind',
        'a.family as artifact_family',
        'a.name as artifact_name',
        'a.description as artifact_description',
        'v.id as variant_id',
        'v.slug as variant_slug',
      ]);
  type RevisionRow = Awaited<ReturnType<ReturnType<typeof revisions>['executeTakeFirstOrThrow']>>;

  const toRevision = (row: RevisionRow): RevisionRecord => ({
    id: row.id,
    slug: row.slug,
    version: Number(row.version),
    artifact: {
      id: row.artifact_id,
      slug: row.artifact_slug,
      kind: row.artifact_kind,
      family: row.artifact_family,
      name: row.artifact_name,
      description: row.artifact_description,
    },
    variant: { id: row.variant_id, slug: row.variant_slug },
    data: fromJson<Record<string, unknown>>(row.data_json) ?? {},
    message: row.message,
    created_at: row.created_at,
  });

  const variants = () =>
    db
      .selectFrom('variants as v')
      .select(['v.id', 'v.artifact_id', 'v.slug', 'v.created_at'])
      .select((eb) => eb.selectFrom('revisions as r').whereRef('r.variant_id', '=', 'v.id').select((sub) => sub.fn.max('r.version').as('m')).as('latest_version'));

  const toVariant = (row: { id: string; artifact_id: string; slug: string; created_at: string; latest_version: unknown }): VariantRecord => ({
    id: row.id,
    artifact_id: row.artifact_id,
    slug: row.slug,
    created_at: row.created_at,
    latest_version: row.latest_version == null ? null : Number(row.latest_version),
  });

  /** Creates an artifact with its first variant; a slug the project already uses is a 409. */
  async function createArtifact(projectId: string, input: NewArtifact): Promise<{ artifact: ArtifactRecord; variant: VariantRecord }> {
    const now = nowIso();
    const artifact: ArtifactRecord = {
      id: randomUUID(),
      project_id: projectId,
      kind: input.kind,
      family: input.family,
      slug: input.slug,
      name: input.name ?? null,
      description: input.description ?? null,
      created_at: now,
      updated_at: now,
    };
    const variant = { id: randomUUID(), project_id: projectId, artifact_id: artifact.id, slug: input.variant, created_at: now };
    const inserted = await db.transaction().execute(async (trx) => {
      const result = await trx
        .insertInto('artifacts')
        .values(artifact)
        .onConflict((oc) => oc.columns(['project_id', 'kind', 'slug']).doNothing())
        .executeTakeFirst();
      if (Number(result.numInsertedOrUpdatedRows ?? 0n) !== 1) return false;
      await trx.insertInto('variants').values(variant).execute();
      return true;
    });
    if (!inserted) {
      throw new AppError('conflict', `the project already has ${input.kind === 'environment' ? 'an' : 'a'} ${input.kind} "${input.slug}"; choose another slug`);
    }
    return { artifact, variant: { ...variant, latest_version: null } };
  }

  /** By id or slug (either may be given; both must then match). */
  async function findArtifact(projectId: string, kind: ArtifactKind, lookup: Lookup): Promise<ArtifactRecord | undefined> {
    if (!lookup.id && !lookup.slug) return undefined;
    let query = db.selectFrom('artifacts').selectAll().where('project_id', '=', projectId).where('kind', '=', kind);
    if (lookup.id) query = query.where('id', '=', lookup.id);
    if (lookup.slug) query = query.where('slug', '=', lookup.slug);
    return query.executeTakeFirst();
  }

  /** A path segment names an artifact by id or by slug. */
  async function artifactByIdOrSlug(projectId: string, kind: ArtifactKind, idOrSlug: string): Promise<ArtifactRecord | undefined> {
    return db
      .selectFrom('artifacts')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('kind', '=', kind)
      .where((eb) => eb.or([eb('id', '=', idOrSlug), eb('slug', '=', idOrSlug)]))
      .executeTakeFirst();
  }

  /** Changes an artifact's name or description (what is not given stays). */
  async function describeArtifact(artifact: ArtifactRecord, change: { name?: string | undefined; description?: string | undefined }): Promise<ArtifactRecord> {
    if (change.name === undefined && change.description === undefined) return artifact;
    const updated = { ...artifact, name: change.name ?? artifact.name, description: change.description ?? artifact.description, updated_at: nowIso() };
    await db.updateTable('artifacts').set({ name: updated.name, description: updated.description, updated_at: updated.updated_at }).where('id', '=', artifact.id).execute();
    return updated;
  }

  /** By slug (then id); a window's limit reads one more, as toListPage expects. */
  async function listArtifacts(projectId: string, kind: ArtifactKind, family?: string, window: ListWindow = {}): Promise<ArtifactRecord[]> {
    let query = db.selectFrom('artifacts').selectAll().where('project_id', '=', projectId).where('kind', '=', kind);
    if (family) query = query.where('family', '=', family);
    const { after, limit } = window;
    if (after) query = query.where((eb) => eb.or([eb('slug', '>', after.key), eb.and([eb('slug', '=', after.key), eb('id', '>', after.id)])]));
    if (limit !== undefined) query = query.limit(pageSize(limit) + 1);
    return query.orderBy('slug').orderBy('id').execute();
  }

  /** Oldest first: the first is the artifact's default variant. */
  async function variantsOf(artifactIds: readonly string[]): Promise<VariantRecord[]> {
    if (artifactIds.length === 0) return [];
    const rows = await variants().where('v.artifact_id', 'in', artifactIds).orderBy('v.created_at').orderBy('v.id').execute();
    return rows.map(toVariant);
  }

  /** Variants matching a lookup, within one artifact (or workflow family) when given; several only for a bare slug. */
  async function findVariants(projectId: string, kind: ArtifactKind, lookup: Lookup, artifactId?: string, family?: string): Promise<VariantRecord[]> {
    if (!lookup.id && !lookup.slug) return [];
    let query = variants()
      .innerJoin('artifacts as a', 'a.id', 'v.artifact_id')
      .where('v.project_id', '=', projectId)
      .where('a.kind', '=', kind);
    if (lookup.id) query = query.where('v.id', '=', lookup.id);
    if (lookup.slug) query = query.where('v.slug', '=', lookup.slug);
    if (artifactId) query = query.where('v.artifact_id', '=', artifactId);
    if (family) query = query.where('a.family', '=', family);
    const rows = await query.limit(10).execute();
    return rows.map(toVariant);
  }

  /** The artifact's variant of that slug, created when missing (committing to a new variant branches). */
  async function ensureVariant(projectId: string, artifactId: string, slug: string): Promise<VariantRecord> {
    await db
      .insertInto('variants')
      .values({ id: randomUUID(), project_id: projectId, artifact_id: artifactId, slug, created_at: nowIso() })
      .onConflict((oc) => oc.columns(['artifact_id', 'slug']).doNothing())
      .execute();
    return toVariant(await variants().where('v.artifact_id', '=', artifactId).where('v.slug', '=', slug).executeTakeFirstOrThrow());
  }

  /**
   * Writes the variant's next revision. The version is computed in the insert itself and guarded by
   * a unique index. Commits to one variant take turns: on PostgreSQL the variant's row is locked
   * for the commit (here or on another replica), and SQLite has one writer. So however many race,
   * none is refused, and `data` given as a function of the newest revision's data is a
   * read-modify-write that no other commit can slip into.
   */
  async function commit(
    projectId: string,
    variant: { id: string; artifact_id: string },
    data: Record<string, unknown> | ((latest: Record<string, unknown> | undefined) => Record<string, unknown>),
    options: { message?: string | undefined } = {},
  ): Promise<RevisionRecord> {
    for (let attempt = 0; attempt < COMMIT_ATTEMPTS; attempt++) {
      const id = randomUUID();
      const now = nowIso();
      const inserted = await db.transaction().execute(async (trx) => {
        if (engine === 'postgres') await trx.selectFrom('variants').select('id').where('id', '=', variant.id).forUpdate().execute();
        const latest = await trx.selectFrom('revisions').select(['version', 'data_json']).where('variant_id', '=', variant.id).orderBy('version', 'desc').limit(1).executeTakeFirst();
        const json = JSON.stringify(typeof data === 'function' ? data(latest && (fromJson<Record<string, unknown>>(latest.data_json) ?? {})) : data);
        const result = await trx
          .insertInto('revisions')
          .values({
            id,
            project_id: projectId,
            artifact_id: variant.artifact_id,
            variant_id: variant.id,
            version: Number(latest?.version ?? 0) + 1,
            slug: revisionSlug(),
            data_json: json,
            message: options.message ?? null,
            created_at: now,
          })
          .onConflict((oc) => oc.doNothing())
          .executeTakeFirst();
        if (Number(result.numInsertedOrUpdatedRows ?? 0n) !== 1) return false;
        await trx.updateTable('artifacts').set({ updated_at: now }).where('id', '=', variant.artifact_id).execute();
        return true;
      });
      if (inserted) return toRevision(await revisions().where('r.id', '=', id).executeTakeFirstOrThrow());
    }
    throw new AppError('conflict', 'too many commits raced for this variant; commit again');
  }

  /** By id or slug (revision slugs are unique in a project). */
  async function findRevision(projectId: string, kind: ArtifactKind, lookup: Lookup): Promise<RevisionRecord | undefined> {
    if (!lookup.id && !lookup.slug) return undefined;
    let query = revisions().where('r.project_id', '=', projectId).where('a.kind', '=', kind);
    if (lookup.id) query = query.where('r.id', '=', lookup.id);
    if (lookup.slug) query = query.where('r.slug', '=', lookup.slug);
    const row = await query.executeTakeFirst();
    return row && toRevision(row);
  }

  /** The variant's revision of that version, or its newest when no version is given. */
  async function revisionOf(variantId: string, version?: number): Promise<RevisionRecord | undefined> {
    let query = revisions().where('r.variant_id', '=', variantId);
    query = version === undefined ? query.orderBy('r.version', 'desc').limit(1) : query.where('r.version', '=', version);
    const row = await query.executeTakeFirst();
    return row && toRevision(row);
  }

  /**
   * Newest first, across the artifact's variants or within one. Revisions committed in the same
   * millisecond are ordered by version (then id), so a variant's list always reads v3, v2, v1.
   */
  async function listRevisions(artifactId: string, page: PageRequest, variantId?: string): Promise<Page<RevisionRecord>> {
    const limit = pageSize(page.limit);
    let query = revisions().where('r.artifact_id', '=', artifactId);
    if (variantId) query = query.where('r.variant_id', '=', variantId);
    if (page.cursor) {
      const after = decodeCursor(page.cursor);
      const rank = after.rank ?? Number.MAX_SAFE_INTEGER;
      query = query.where((eb) =>
        eb.or([
          eb('r.created_at', '<', after.at),
          eb.and([eb('r.created_at', '=', after.at), eb.or([eb('r.version', '<', rank), eb.and([eb('r.version', '=', rank), eb('r.id', '<', after.id)])])]),
        ]),
      );
    }
    const rows = await query.orderBy('r.created_at', 'desc').orderBy('r.version', 'desc').orderBy('r.id', 'desc').limit(limit + 1).execute();
    return toPage(rows, limit, (row) => ({ at: row.created_at, id: row.id, rank: row.version }), toRevision);
  }

  return { createArtifact, findArtifact, artifactByIdOrSlug, describeArtifact, listArtifacts, variantsOf, findVariants, ensureVariant, commit, findRevision, revisionOf, listRevisions };
}

export type ConfigsRepo = ReturnType<typeof createConfigsRepo>;
