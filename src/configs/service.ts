import { parseTemplate } from '../agent/template.ts';
import {
  AGENT_WORKFLOW_URI,
  type Deployment,
  type EnvironmentCreate,
  type EnvironmentData,
  type EnvironmentRevisionView,
  type EnvironmentView,
  type RevisionData,
  type RevisionView,
  type WorkflowFamily,
  type WorkflowView,
} from '../contract/configs.ts';
import { EvaluatorSpec } from '../contract/evaluations.ts';
import { REFERENCE_FAMILIES, type References } from '../contract/invoke.ts';
import { describeIssue } from '../contract/zod-errors.ts';
import { AppError } from '../errors.ts';
import { optional } from '../objects.ts';
import type { ArtifactRecord, ConfigsRepo, RevisionRecord, VariantRecord } from '../store/configs.ts';
import type { ListWindow, Page, PageRequest } from '../store/cursor.ts';
import { findEmbed, resolveEmbeds } from './embeds.ts';
import { referencedFamily, resolveReferences, type Selector } from './references.ts';
import { resolveRunConfig } from './run-config.ts';

/** What revisions may say runs them; issue 5's evaluators will add theirs. */
const KNOWN_URIS: readonly string[] = [AGENT_WORKFLOW_URI];

const ENVIRONMENT_VARIANT = 'default';

function toVariantView(variant: VariantRecord) {
  return { id: variant.id, slug: variant.slug, created_at: variant.created_at, ...optional('latest_version', variant.latest_version) };
}

function toWorkflowView(artifact: ArtifactRecord, variants: VariantRecord[]): WorkflowView {
  return {
    id: artifact.id,
    slug: artifact.slug,
    family: artifact.family as WorkflowFamily,
    ...optional('name', artifact.name),
    ...optional('description', artifact.description),
    created_at: artifact.created_at,
    updated_at: artifact.updated_at,
    variants: variants.filter((v) => v.artifact_id === artifact.id).map(toVariantView),
  };
}

function toRevisionView(revision: RevisionRecord): RevisionView {
  return {
    id: revision.id,
    slug: revision.slug,
    version: revision.version,
    workflow: { id: revision.artifact.id, slug: revision.artifact.slug, family: revision.artifact.family as WorkflowFamily },
    variant: revision.variant,
    data: revision.data as RevisionData,
    ...optional('message', revision.message),
    created_at: revision.created_at,
  };
}

function toEnvironmentRevisionView(revision: RevisionRecord): EnvironmentRevisionView {
  return {
    id: revision.id,
    slug: revision.slug,
    version: revision.version,
    data: { references: (revision.data as EnvironmentData).references ?? {} },
    ...optional('message', revision.message),
    created_at: revision.created_at,
  };
}

const notFound = (kind: 'workflow' | 'environment', idOrSlug: string) =>
  new AppError('not-found', `this project has no ${kind} "${idOrSlug}"; GET /api/${kind}s lists the ones it has`);

/**
 * Workflows, their revisions and environments, as the `/api` surface manages them. A revision is
 * checked when it is committed, as a turn or a run would check it (embeds resolved, the agent
 * template or built-in evaluator parsed), so a configuration that is accepted can run.
 */
export class ConfigService {
  private readonly repo: ConfigsRepo;
  private readonly defaultLlm: { provider: string; model: string };

  constructor(repo: ConfigsRepo, defaultLlm: { provider: string; model: string }) {
    this.repo = repo;
    this.defaultLlm = defaultLlm;
  }

  /** Refuses what no turn could run; `committingTo` is the variant the data is committed to, when it exists. */
  private async validate(projectId: string, data: RevisionData, committingTo: string | undefined): Promise<void> {
    if (data.uri !== undefined && !KNOWN_URIS.includes(data.uri)) {
      throw new AppError('invalid-request', `data.uri "${data.uri}" is not a workflow this server runs; known: ${KNOWN_URIS.join(', ')}`);
    }
    const parameters = data.parameters ?? {};
    const resolved = findEmbed(parameters, 'data.parameters')
      ? ((await resolveEmbeds(parameters, 'data.parameters', { repo: this.repo, projectId, ...(committingTo ? { committingTo } : {}) })) as Record<string, unknown>)
      : parameters;
    if (resolved.agent != null) parseTemplate(resolved.agent, this.defaultLlm);
    if (resolved.evaluator != null) {
      const evaluator = EvaluatorSpec.safeParse(resolved.evaluator);
      if (!evaluator.success) throw new AppError('invalid-request', describeIssue('data.parameters.evaluator', evaluator.error.issues[0]!));
    }
  }

  private async workflow(projectId: string, idOrSlug: string): Promise<ArtifactRecord> {
    const artifact = await this.repo.artifactByIdOrSlug(projectId, 'workflow', idOrSlug);
    if (!artifact) throw notFound('workflow', idOrSlug);
    return artifact;
  }

  async createWorkflow(
    projectId: string,
    input: { slug: string; family: WorkflowFamily; name?: string | undefined; description?: string | undefined; variant: string; data?: RevisionData | undefined; message?: string | undefined },
  ): Promise<{ workflow: WorkflowView; revision?: RevisionView }> {
    if (input.data) await this.validate(projectId, input.data, undefined);
    const { artifact, variant } = await this.repo.createArtifact(projectId, { kind: 'workflow', family: input.family, slug: input.slug, name: input.name, description: input.description, variant: input.variant });
    if (!input.data) return { workflow: toWorkflowView(artifact, [variant]) };
    const revision = await this.repo.commit(projectId, variant, input.data, { message: input.message });
    return { workflow: toWorkflowView({ ...artifact, updated_at: revision.created_at }, [{ ...variant, latest_version: revision.version }]), revision: toRevisionView(revision) };
  }

  async listWorkflows(projectId: string, family?: WorkflowFamily, window: ListWindow = {}): Promise<WorkflowView[]> {
    const artifacts = await this.repo.listArtifacts(projectId, 'workflow', family, window);
    const variants = await this.repo.variantsOf(artifacts.map((a) => a.id));
    return artifacts.map((a) => toWorkflowView(a, variants));
  }

  async getWorkflow(projectId: string, idOrSlug: string): Promise<WorkflowView> {
    const artifact = await this.workflow(projectId, idOrSlug);
    return toWorkflowView(artifact, await this.repo.variantsOf([artifact.id]));
  }

  /** Commits the next revision of a variant; a variant that does not exist yet is branched off. */
  async commit(projectId: string, idOrSlug: string, input: { variant: string; data: RevisionData; message?: string | undefined }): Promise<RevisionView> {
    const artifact = await this.workflow(projectId, idOrSlug);
    const existing = (await this.repo.findVariants(projectId, 'workflow', { slug: input.variant }, artifact.id))[0];
    await this.validate(projectId, input.data, existing?.id);
    const variant = existing ?? (await this.repo.ensureVariant(projectId, artifact.id, input.variant));
    return toRevisionView(await this.repo.commit(projectId, variant, input.data, { message: input.message }));
  }

  async listRevisions(projectId: string, idOrSlug: string, page: PageRequest, variantSlug?: string): Promise<Page<RevisionView>> {
    const artifact = await this.workflow(projectId, idOrSlug);
    let variantId: string | undefined;
    if (variantSlug) {
      const variant = (await this.repo.findVariants(projectId, 'workflow', { slug: variantSlug }, artifact.id))[0];
      if (!variant) throw new AppError('not-found', `workflow "${artifact.slug}" has no variant "${variantSlug}"`);
      variantId = variant.id;
    }
    const found = await this.repo.listRevisions(artifact.id, page, variantId);
    return { items: found.items.map(toRevisionView), ...(found.next ? { next: found.next } : {}) };
  }

  /** What invoke would run for these references: the revision, and its parameters as a turn gets them. */
  async resolve(projectId: string, references: References, selector: Selector | undefined, resolveEmbeds: boolean): Promise<{ revision: RevisionView; parameters: Record<string, unknown> }> {
    const config = await resolveRunConfig(this.repo, projectId, { references, selector, resolveEmbeds });
    if (!config.revision) throw new AppError('invalid-request', 'references must name a workflow, an application or an evaluator (environment keys may accompany it)');
    return { revision: toRevisionView(config.revision), parameters: config.parameters };
  }

  async createEnvironment(projectId: string, input: EnvironmentCreate): Promise<EnvironmentView> {
    const { artifact } = await this.repo.createArtifact(projectId, { kind: 'environment', family: null, ...input, variant: ENVIRONMENT_VARIANT });
    return this.environmentView(artifact, undefined);
  }

  private environmentView(artifact: ArtifactRecord, latest: RevisionRecord | undefined): EnvironmentView {
    return {
      id: artifact.id,
      slug: artifact.slug,
      ...optional('name', artifact.name),
      ...optional('description', artifact.description),
      created_at: artifact.created_at,
      updated_at: latest && latest.created_at > artifact.updated_at ? latest.created_at : artifact.updated_at,
      ...(latest ? { revision: toEnvironmentRevisionView(latest) } : {}),
    };
  }

  private async environment(projectId: string, idOrSlug: string): Promise<{ artifact: ArtifactRecord; variant: VariantRecord }> {
    const artifact = await this.repo.artifactByIdOrSlug(projectId, 'environment', idOrSlug);
    if (!artifact) throw notFound('environment', idOrSlug);
    return { artifact, variant: (await this.repo.variantsOf([artifact.id]))[0]! };
  }

  async listEnvironments(projectId: string, window: ListWindow = {}): Promise<EnvironmentView[]> {
    const artifacts = await this.repo.listArtifacts(projectId, 'environment', undefined, window);
    const variants = await this.repo.variantsOf(artifacts.map((a) => a.id));
    return Promise.all(
      artifacts.map(async (artifact) => {
        const variant = variants.find((v) => v.artifact_id === artifact.id)!;
        return this.environmentView(artifact, await this.repo.revisionOf(variant.id));
      }),
    );
  }

  async getEnvironment(projectId: string, idOrSlug: string): Promise<EnvironmentView> {
    const { artifact, variant } = await this.environment(projectId, idOrSlug);
    return this.environmentView(artifact, await this.repo.revisionOf(variant.id));
  }

  async listEnvironmentRevisions(projectId: string, idOrSlug: string, page: PageRequest): Promise<Page<EnvironmentRevisionView>> {
    const { artifact } = await this.environment(projectId, idOrSlug);
    const found = await this.repo.listRevisions(artifact.id, page);
    return { items: found.items.map(toEnvironmentRevisionView), ...(found.next ? { next: found.next } : {}) };
  }

  /**
   * Commits the environment's next revision with one key changed, on top of whatever the newest
   * revision is when the commit takes its turn: concurrent deploys under different keys all land.
   */
  private async changeDeployments(
    projectId: string,
    idOrSlug: string,
    change: (deployed: Record<string, Deployment>) => Record<string, Deployment>,
    message: string | undefined,
  ): Promise<EnvironmentView> {
    const { artifact, variant } = await this.environment(projectId, idOrSlug);
    const committed = await this.repo.commit(projectId, variant, (latest) => ({ references: change((latest as EnvironmentData | undefined)?.references ?? {}) }), { message });
    return this.environmentView(artifact, committed);
  }

  /** Deploys the workflow revision the references name under `key` (default: the workflow's slug). */
  async deploy(projectId: string, idOrSlug: string, input: { references: References; key?: string | undefined; message?: string | undefined }): Promise<EnvironmentView> {
    if (REFERENCE_FAMILIES.environment.some((key) => input.references[key] != null)) {
      throw new AppError('invalid-request', 'references.environment* cannot be deployed: name the workflow, application or evaluator revision to deploy');
    }
    if (!referencedFamily(input.references)) {
      throw new AppError('invalid-request', 'references must name the workflow, application or evaluator revision to deploy');
    }
    const revision = (await resolveReferences(this.repo, projectId, input.references))!;
    const key = input.key ?? revision.artifact.slug;
    const deployment: Deployment = {
      workflow: { id: revision.artifact.id, slug: revision.artifact.slug },
      workflow_variant: revision.variant,
      workflow_revision: { id: revision.id, slug: revision.slug, version: revision.version },
    };
    return this.changeDeployments(projectId, idOrSlug, (deployed) => ({ ...deployed, [key]: deployment }), input.message);
  }

  async undeploy(projectId: string, idOrSlug: string, input: { key: string; message?: string | undefined }): Promise<EnvironmentView> {
    return this.changeDeployments(
      projectId,
      idOrSlug,
      (deployed) => {
        if (!Object.hasOwn(deployed, input.key)) {
          throw new AppError('not-found', `environment "${idOrSlug}" deploys nothing under "${input.key}"; it deploys: ${Object.keys(deployed).join(', ') || 'nothing'}`);
        }
        const { [input.key]: _removed, ...rest } = deployed;
        return rest;
      },
      input.message,
    );
  }
}
