import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { Testcase, TestsetQuery, TestsetView } from '../contract/evaluations.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { optional, own } from '../objects.ts';
import type { ArtifactRecord, ConfigsRepo, RevisionRecord } from '../store/configs.ts';
import type { ListWindow } from '../store/cursor.ts';

/**
 * Test sets are artifacts of kind `testset` (store/configs.ts): each edit commits a new revision
 * holding every row, so a run keeps reading the rows it started with. A row keeps its id across
 * revisions when it is sent back with it.
 */

type JsonObject = Record<string, unknown>;

interface TestsetRevisionData {
  testcases: Testcase[];
  tags?: JsonObject;
  meta?: JsonObject;
  flags?: JsonObject;
}

export interface TestsetInput {
  slug?: string | undefined;
  name?: string | undefined;
  description?: string | undefined;
  tags?: JsonObject | undefined;
  meta?: JsonObject | undefined;
  flags?: JsonObject | undefined;
  data: { testcases: { id?: string | undefined; data: JsonObject; tags?: JsonObject | undefined; meta?: JsonObject | undefined; flags?: JsonObject | undefined }[] };
  message?: string | undefined;
}

const VARIANT = 'default';

function withIds(rows: TestsetInput['data']['testcases']): Testcase[] {
  const seen = new Set<string>();
  return rows.map((row, i) => {
    const id = row.id ?? newId();
    if (seen.has(id)) throw new AppError('invalid-request', `testset.data.testcases[${i}].id "${id}" is used by an earlier row; row ids are unique in a test set`);
    seen.add(id);
    return { id, data: row.data, ...(row.tags ? { tags: row.tags } : {}), ...(row.meta ? { meta: row.meta } : {}), ...(row.flags ? { flags: row.flags } : {}) };
  });
}

function revisionData(input: TestsetInput, previous?: TestsetRevisionData): TestsetRevisionData {
  const tags = input.tags ?? previous?.tags;
  const meta = input.meta ?? previous?.meta;
  const flags = input.flags ?? previous?.flags;
  return { testcases: withIds(input.data.testcases), ...(tags ? { tags } : {}), ...(meta ? { meta } : {}), ...(flags ? { flags } : {}) };
}

function toTestsetView(artifact: ArtifactRecord, revision: RevisionRecord, withRows = true): TestsetView {
  const data = revision.data as unknown as TestsetRevisionData;
  return {
    id: artifact.id,
    slug: artifact.slug,
    ...optional('name', artifact.name),
    ...optional('description', artifact.description),
    ...(data.tags ? { tags: data.tags } : {}),
    ...(data.meta ? { meta: data.meta } : {}),
    ...(data.flags ? { flags: data.flags } : {}),
    revision_id: revision.id,
    variant_id: revision.variant.id,
    version: revision.version,
    created_at: artifact.created_at,
    updated_at: revision.created_at > artifact.updated_at ? revision.created_at : artifact.updated_at,
    data: { testcase_ids: data.testcases.map((t) => t.id), ...(withRows ? { testcases: data.testcases } : {}) },
  };
}

const notFound = (id: string, what = 'test set') => new AppError('not-found', `this project has no ${what} "${id}"; GET /api/simple/testsets/ lists the ones it has`);

export class TestsetService {
  private readonly repo: ConfigsRepo;

  constructor(repo: ConfigsRepo) {
    this.repo = repo;
  }

  /** Creates the test set and commits its rows as the first revision of its one variant. */
  async create(projectId: string, input: TestsetInput): Promise<TestsetView> {
    const data = revisionData(input);
    const slug = input.slug ?? `testset-${randomBytes(4).toString('hex')}`;
    const { artifact, variant } = await this.repo.createArtifact(projectId, { kind: 'testset', family: null, slug, name: input.name, description: input.description, variant: VARIANT });
    const revision = await this.repo.commit(projectId, variant, data as unknown as JsonObject, { message: input.message });
    return toTestsetView(artifact, revision);
  }

  private async latest(projectId: string, idOrSlug: string): Promise<{ artifact: ArtifactRecord; revision: RevisionRecord }> {
    const artifact = await this.repo.artifactByIdOrSlug(projectId, 'testset', idOrSlug);
    if (!artifact) throw notFound(idOrSlug);
    return { artifact, revision: await this.newest(artifact) };
  }

  private async newest(artifact: ArtifactRecord): Promise<RevisionRecord> {
    const variant = (await this.repo.variantsOf([artifact.id]))[0]!;
    return (await this.repo.revisionOf(variant.id))!;
  }

  /**
   * A test set's newest revision, by the test set's id or slug; or one revision, by its own id
   * (what creation answers with and what a run names in `testset_steps`).
   */
  async get(projectId: string, id: string): Promise<TestsetView> {
    const artifact = await this.repo.artifactByIdOrSlug(projectId, 'testset', id);
    if (artifact) return toTestsetView(artifact, await this.newest(artifact));
    const revision = await this.repo.findRevision(projectId, 'testset', { id });
    const owner = revision && (await this.repo.artifactByIdOrSlug(projectId, 'testset', revision.artifact.id));
    if (!revision || !owner) throw notFound(id, 'test set or test set revision');
    return toTestsetView(owner, revision);
  }

  /** Every test set (in the window) with its newest revision's row ids (rows themselves: read one test set). */
  async list(projectId: string, window: ListWindow = {}): Promise<TestsetView[]> {
    const artifacts = await this.repo.listArtifacts(projectId, 'testset', undefined, window);
    return Promise.all(
      artifacts.map(async (artifact) => {
        const { revision } = await this.latest(projectId, artifact.id);
        return toTestsetView(artifact, revision, false);
      }),
    );
  }

  /**
   * The test sets the reference's query asks for: named ones, whose given attributes all match.
   * The attributes are matched here, not by the database, so the window's limit applies to the
   * matches (one more than it, as toListPage expects) while its start is the database's.
   */
  async query(projectId: string, query: TestsetQuery, window: ListWindow = {}): Promise<TestsetView[]> {
    const { testset: filter = {}, testset_refs: refs } = query;
    const matches = (view: TestsetView) =>
      (filter.name === undefined || view.name === filter.name) &&
      (filter.slug === undefined || view.slug === filter.slug) &&
      (['tags', 'meta', 'flags'] as const).every((field) => Object.entries(filter[field] ?? {}).every(([key, value]) => isDeepStrictEqual(own(view[field] ?? {}, key), value))) &&
      (refs === undefined || refs.some((ref) => (ref.id === undefined || ref.id === view.id) && (ref.slug === undefined || ref.slug === view.slug)));
    const found = (await this.list(projectId, { after: window.after })).filter(matches);
    return window.limit === undefined ? found : found.slice(0, window.limit + 1);
  }

  /** Commits the rows as they now are; tags, meta and flags carry over unless sent. */
  async edit(projectId: string, idOrSlug: string, input: TestsetInput): Promise<TestsetView> {
    const { artifact, revision } = await this.latest(projectId, idOrSlug);
    const renamed = await this.repo.describeArtifact(artifact, { name: input.name, description: input.description });
    // What carries over is read when the commit takes its turn, so a concurrent edit's tags are kept.
    const data = (latest: Record<string, unknown> | undefined) => revisionData(input, (latest ?? revision.data) as unknown as TestsetRevisionData) as unknown as JsonObject;
    const committed = await this.repo.commit(projectId, { id: revision.variant.id, artifact_id: artifact.id }, data, { message: input.message });
    return toTestsetView(renamed, committed);
  }

  /** A test set revision's rows, by the revision's id (or the test set's, for its newest revision). */
  async rows(projectId: string, id: string): Promise<{ revision: RevisionRecord; testcases: Testcase[] } | undefined> {
    const revision = (await this.repo.findRevision(projectId, 'testset', { id })) ?? (await this.latest(projectId, id).then((l) => l.revision).catch(() => undefined));
    return revision && { revision, testcases: (revision.data as unknown as TestsetRevisionData).testcases };
  }
}
