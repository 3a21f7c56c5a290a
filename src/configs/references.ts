import { REFERENCE_FAMILIES, type Reference, type References } from '../contract/invoke.ts';
import { AGENT_WORKFLOW_URI, type EnvironmentData, type WorkflowFamily } from '../contract/configs.ts';
import { AppError } from '../errors.ts';
import type { ConfigsRepo, RevisionRecord } from '../store/configs.ts';
import type { ArtifactKind } from '../store/schema.ts';
import { own } from '../objects.ts';

const EXECUTION_FAMILIES = ['workflow', 'application', 'evaluator'] as const;

/** Which execution family the request's references point at (spec §2.4: at most one). */
export function referencedFamily(references: References | null | undefined, at = 'references'): WorkflowFamily | undefined {
  if (!references) return undefined;
  const populated = EXECUTION_FAMILIES.filter((family) => REFERENCE_FAMILIES[family].some((key) => references[key] != null));
  if (populated.length > 1) {
    throw new AppError(
      'conflicting-references',
      `${at} name ${populated.join(' and ')} at once; populate exactly one of workflow, application or evaluator (environment keys may accompany it)`,
    );
  }
  return populated[0];
}

export function hasReferences(references: References | null | undefined): references is References {
  return references != null && Object.values(references).some((r) => r != null);
}

export interface Selector {
  key?: string | null | undefined;
  path?: string | null | undefined;
}

const describe = (ref: Reference) => JSON.stringify(Object.fromEntries(Object.entries(ref).filter(([, v]) => v != null)));

/** Accepts 3, "3" and "v3", the forms clients (and the reference) write versions in. */
function parseVersion(version: Reference['version'], where: string): number | undefined {
  if (version == null) return undefined;
  const match = /^v?([1-9][0-9]{0,8})$/.exec(String(version));
  if (!match) throw new AppError('invalid-request', `version ${JSON.stringify(version)} at ${where} is not a revision version: use 3 or "v3"`);
  return Number(match[1]);
}

/**
 * The built-in agent workflow as a revision: inspect names it by its URI (it has no stored row),
 * so a client may hand that id back — to invoke, or as an evaluation's application step — and get
 * the agent with its default template.
 */
const BUILTIN_AGENT_REVISION: RevisionRecord = {
  id: AGENT_WORKFLOW_URI,
  slug: 'agent',
  version: 0,
  artifact: { id: AGENT_WORKFLOW_URI, slug: 'agent', kind: 'workflow', family: 'workflow', name: 'Agent', description: null },
  variant: { id: AGENT_WORKFLOW_URI, slug: 'default' },
  data: { uri: AGENT_WORKFLOW_URI, parameters: { agent: {} } },
  message: null,
  created_at: new Date(0).toISOString(),
};

const named = (ref: Reference | null | undefined): boolean => ref != null && (ref.id != null || ref.slug != null);

/** A reference given alongside the one that found the revision must name the same thing. */
function checkAgrees(found: { id: string; slug: string }, ref: Reference | null | undefined, at: string, key: string, revision: RevisionRecord): void {
  if (!ref) return;
  if ((ref.id != null && ref.id !== found.id) || (ref.slug != null && ref.slug !== found.slug)) {
    throw new AppError(
      'conflicting-references',
      `${at}.${key} ${describe(ref)} does not name what the other references resolve to: revision ${revision.id} (v${revision.version}) of ${revision.artifact.kind} "${revision.artifact.slug}", variant "${revision.variant.slug}"`,
    );
  }
}

/**
 * Finds one revision from an artifact's three references: the revision's own id or slug; else a
 * variant (or the artifact's first, its default) and a version in it, its newest when none is given.
 */
async function resolveChain(
  repo: ConfigsRepo,
  projectId: string,
  kind: ArtifactKind,
  /** Where the references are, for errors: the request's `references`, or an embed's. */
  at: string,
  label: string,
  refs: { artifact?: Reference | null | undefined; variant?: Reference | null | undefined; revision?: Reference | null | undefined },
): Promise<RevisionRecord> {
  const keys = { artifact: label, variant: `${label}_variant`, revision: `${label}_revision` };
  let found: RevisionRecord | undefined;
  if (kind === 'workflow' && refs.revision?.id === AGENT_WORKFLOW_URI) {
    found = BUILTIN_AGENT_REVISION;
  } else if (refs.revision && named(refs.revision)) {
    found = await repo.findRevision(projectId, kind, refs.revision);
    if (!found) throw new AppError('unknown-reference', `${at}.${keys.revision} ${describe(refs.revision)} names no revision of this project`);
    const version = parseVersion(refs.revision.version, `${at}.${keys.revision}.version`);
    if (version !== undefined && version !== found.version) {
      throw new AppError('conflicting-references', `${at}.${keys.revision} names revision ${found.slug}, which is v${found.version}, not v${version}`);
    }
  } else {
    let artifactId: string | undefined;
    if (refs.artifact) {
      if (!named(refs.artifact)) throw new AppError('invalid-request', `${at}.${keys.artifact} needs an id or a slug`);
      const artifact = await repo.findArtifact(projectId, kind, refs.artifact);
      if (!artifact) throw new AppError('unknown-reference', `${at}.${keys.artifact} ${describe(refs.artifact)} names no ${kind} of this project`);
      artifactId = artifact.id;
    }
    let variantId: string;
    let variantSlug: string;
    if (refs.variant) {
      if (!named(refs.variant)) throw new AppError('invalid-request', `${at}.${keys.variant} needs an id or a slug`);
      // An application or evaluator variant is looked for among that family only: another
      // family's variant of the same slug (every workflow has a "default") is not a candidate.
      const family = kind === 'workflow' && label !== 'workflow' ? label : undefined;
      const variants = await repo.findVariants(projectId, kind, refs.variant, artifactId, family);
      if (variants.length === 0) throw new AppError('unknown-reference', `${at}.${keys.variant} ${describe(refs.variant)} names no variant ${artifactId ? `of that ${kind}` : 'of this project'}`);
      if (variants.length > 1) {
        throw new AppError('ambiguous-reference', `${at}.${keys.variant} ${describe(refs.variant)} names variants of ${variants.length} ${kind}s; add ${at}.${keys.artifact} or use the variant's id`);
      }
      variantId = variants[0]!.id;
      variantSlug = variants[0]!.slug;
    } else if (artifactId) {
      const first = (await repo.variantsOf([artifactId]))[0]!;
      variantId = first.id;
      variantSlug = first.slug;
    } else {
      throw new AppError('invalid-request', `${at}.${keys.revision} needs an id or a slug, or the ${keys.artifact} or ${keys.variant} its version belongs to`);
    }
    const version =
      parseVersion(refs.revision?.version, `${at}.${keys.revision}.version`) ??
      parseVersion(refs.variant?.version, `${at}.${keys.variant}.version`) ??
      parseVersion(refs.artifact?.version, `${at}.${keys.artifact}.version`);
    found = await repo.revisionOf(variantId, version);
    if (!found && kind === 'environment') {
      // An environment's one variant is an implementation detail: it is deployed to, not committed.
      throw new AppError(
        'unknown-reference',
        version === undefined ? `${at}.${keys.artifact} names an environment that deploys nothing yet; deploy a revision to it first` : `${at}.${keys.artifact} names an environment that has no revision v${version}`,
      );
    }
    if (!found) {
      throw new AppError(
        'unknown-reference',
        version === undefined ? `variant "${variantSlug}" has no revision yet; commit one first` : `variant "${variantSlug}" has no revision v${version}`,
      );
    }
  }
  checkAgrees(found.artifact, refs.artifact, at, keys.artifact, found);
  checkAgrees(found.variant, refs.variant, at, keys.variant, found);
  return found;
}

/** An application or evaluator reference must land on a workflow of that family. */
function checkFamily(revision: RevisionRecord, family: WorkflowFamily, at: string): void {
  if (family !== 'workflow' && revision.artifact.family !== family) {
    throw new AppError('unknown-reference', `${at} name an ${family}, but "${revision.artifact.slug}" is a${revision.artifact.family === 'application' ? 'n' : ''} ${revision.artifact.family}`);
  }
}

export interface ResolveOptions {
  /** Environment references with no key and no workflow name the environment revision itself (embeds). */
  environmentItself?: boolean;
  /** Where the references and the selector are, for errors; the request's own unless told. */
  at?: { references: string; selector: string };
}

const REQUEST_PATHS = { references: 'references', selector: 'selector' };

/**
 * What stored revision the references (and the selector's `key`) point at, or undefined when
 * they point at nothing. Environment references go through the environment's newest (or named)
 * revision to the workflow revision deployed under the key: `selector.key`, else the referenced
 * workflow's slug.
 */
export async function resolveReferences(
  repo: ConfigsRepo,
  projectId: string,
  references: References | null | undefined,
  selector?: Selector | null,
  options: ResolveOptions = {},
): Promise<RevisionRecord | undefined> {
  if (!hasReferences(references)) return undefined;
  const at = options.at ?? REQUEST_PATHS;
  const family = referencedFamily(references, at.references);
  const familyRefs = family && {
    artifact: references[family],
    variant: references[`${family}_variant`],
    revision: references[`${family}_revision`],
  };
  const environmentGiven = REFERENCE_FAMILIES.environment.some((key) => references[key] != null);
  if (!environmentGiven) {
    const revision = await resolveChain(repo, projectId, 'workflow', at.references, family!, familyRefs!);
    checkFamily(revision, family!, at.references);
    return revision;
  }

  const environment = await resolveChain(repo, projectId, 'environment', at.references, 'environment', {
    artifact: references.environment,
    variant: references.environment_variant,
    revision: references.environment_revision,
  });
  const deployed = (environment.data as EnvironmentData).references ?? {};
  let key = selector?.key ?? undefined;
  if (!key && familyRefs?.artifact && named(familyRefs.artifact)) {
    key = familyRefs.artifact.slug ?? (await repo.findArtifact(projectId, 'workflow', familyRefs.artifact))?.slug;
  }
  if (!key) {
    if (options.environmentItself && !family) return environment;
    throw new AppError(
      'invalid-request',
      `${at.selector}.key must name what to run from environment "${environment.artifact.slug}" (or add the workflow's reference); it deploys: ${Object.keys(deployed).join(', ') || 'nothing yet'}`,
    );
  }
  const entry = own(deployed, key);
  if (!entry) {
    throw new AppError(
      'unknown-reference',
      `environment "${environment.artifact.slug}" (v${environment.version}) deploys nothing under "${key}"; it deploys: ${Object.keys(deployed).join(', ') || 'nothing yet'}`,
    );
  }
  const revision = await repo.findRevision(projectId, 'workflow', { id: entry.workflow_revision.id });
  if (!revision) throw new AppError('unknown-reference', `environment "${environment.artifact.slug}" deploys revision ${entry.workflow_revision.id}, which no longer exists`);
  if (familyRefs) {
    checkAgrees(revision.artifact, familyRefs.artifact, at.references, family!, revision);
    checkAgrees(revision.variant, familyRefs.variant, at.references, `${family}_variant`, revision);
    checkAgrees(revision, familyRefs.revision, at.references, `${family}_revision`, revision);
    checkFamily(revision, family!, at.references);
  }
  return revision;
}
