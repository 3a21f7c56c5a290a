import { AGENT_WORKFLOW_URI } from '../contract/configs.ts';
import type { References } from '../contract/invoke.ts';
import { AppError } from '../errors.ts';
import { isObject } from '../objects.ts';
import type { ConfigsRepo, RevisionRecord } from '../store/configs.ts';
import { findEmbed, resolveEmbeds } from './embeds.ts';
import { hasReferences, referencedFamily, resolveReferences, type Selector } from './references.ts';
import { selectPath } from './select-path.ts';

export interface RunConfigRequest {
  references?: References | null | undefined;
  selector?: Selector | null | undefined;
  /** `data.parameters`, or an inline revision's: when given, it runs and references only name the run. */
  parameters?: Record<string, unknown> | null | undefined;
  /** `x-ag-workflow-embeds: resolve` or `flags.resolve`. */
  resolveEmbeds: boolean;
}

export interface RunConfig {
  /** The raw agent template; undefined runs the default one. */
  agent: unknown;
  parameters: Record<string, unknown>;
  /** The stored revision that supplied the parameters. */
  revision?: RevisionRecord;
  /** True when embeds were resolved, so a request made from this one must ask for that too. */
  embedded: boolean;
}

/** The parameters a stored revision gives a run: its `data.parameters`, or the selector's sub-path. */
function parametersOf(revision: RevisionRecord, path: string | null | undefined): Record<string, unknown> {
  const uri = revision.data.uri;
  if (uri !== undefined && uri !== AGENT_WORKFLOW_URI) {
    throw new AppError('invalid-request', `revision ${revision.slug} of "${revision.artifact.slug}" runs ${String(uri)}, not the agent workflow (${AGENT_WORKFLOW_URI})`);
  }
  if (!path) return isObject(revision.data.parameters) ? revision.data.parameters : {};
  const selected = selectPath(revision.data, path, 'selector.path');
  if (!isObject(selected)) throw new AppError('invalid-request', `selector.path "${path}" selects a ${Array.isArray(selected) ? 'list' : typeof selected}; it must select parameters or an agent template`);
  // A path may stop at the parameters (`parameters`) or go on to the template (`parameters.agent`).
  return Object.hasOwn(selected, 'agent') ? selected : { agent: selected };
}

/**
 * What a run's parameters are (spec §2.4.3): the inline ones when sent; else the stored revision
 * the references name. `@ag.embed`s are resolved when the caller asked for it, and refused
 * otherwise — a template with unresolved embeds cannot run.
 */
export async function resolveRunConfig(repo: ConfigsRepo, projectId: string, request: RunConfigRequest): Promise<RunConfig> {
  referencedFamily(request.references);
  let parameters: Record<string, unknown> = request.parameters ?? {};
  let revision: RevisionRecord | undefined;
  if (request.parameters == null && hasReferences(request.references)) {
    revision = await resolveReferences(repo, projectId, request.references, request.selector);
    if (revision) {
      parameters = parametersOf(revision, request.selector?.path);
      if (parameters.agent == null) {
        throw new AppError('invalid-request', `revision ${revision.slug} of "${revision.artifact.slug}" has no agent template at data.parameters.agent; it cannot run as an agent`);
      }
    }
  }
  const embedAt = findEmbed(parameters, 'data.parameters');
  if (embedAt) {
    if (!request.resolveEmbeds) {
      throw new AppError('unresolved-embed', `${embedAt} is an @ag.embed; send x-ag-workflow-embeds: resolve (or flags.resolve: true) to have it resolved`);
    }
    parameters = (await resolveEmbeds(parameters, 'data.parameters', { repo, projectId, root: revision })) as Record<string, unknown>;
  }
  return { agent: parameters.agent, parameters, ...(revision ? { revision } : {}), embedded: embedAt !== undefined };
}
