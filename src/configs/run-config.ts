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
  /** Where those parameters are in the request, for errors (default `data.parameters`). */
  parametersAt?: string;
  /** `x-ag-workflow-embeds: resolve` or `flags.resolve`. */
  resolveEmbeds: boolean;
}

export interface RunConfig {
  /** The raw agent template; undefined runs the default one. */
  agent: unknown;
  /** Where the template is in the request, for its errors. */
  agentAt: string;
  parameters: Record<string, unknown>;
  /** The stored revision that supplied the parameters. */
  revision?: RevisionRecord;
  /** True when embeds were resolved, so a request made from this one must ask for that too. */
  embedded: boolean;
}

/**
 * The parameters an inline revision (`data.revision`, spec §2.2) gives a run, checked as a stored
 * one is at commit: its data an object, its `uri` the agent workflow, its parameters an object.
 * Undefined when it carries none (the references, if any, then decide).
 */
export function inlineRevisionParameters(revision: Record<string, unknown> | null | undefined, where: string): Record<string, unknown> | undefined {
  if (revision == null || revision.data == null) return undefined;
  const data = revision.data;
  if (!isObject(data)) throw new AppError('invalid-request', `${where}.data must be an object with the revision's parameters`);
  if (data.uri != null && data.uri !== AGENT_WORKFLOW_URI) {
    throw new AppError('invalid-request', `${where}.data.uri ${JSON.stringify(data.uri)} is not a workflow this server runs; known: ${AGENT_WORKFLOW_URI}`);
  }
  if (data.parameters == null) return undefined;
  if (!isObject(data.parameters)) throw new AppError('invalid-request', `${where}.data.parameters must be an object (with the agent template under "agent")`);
  return data.parameters;
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
  const at = (request.parameters != null && request.parametersAt) || 'data.parameters';
  const embedAt = findEmbed(parameters, at);
  if (embedAt) {
    if (!request.resolveEmbeds) {
      throw new AppError('unresolved-embed', `${embedAt} is an @ag.embed; send x-ag-workflow-embeds: resolve (or flags.resolve: true) to have it resolved`);
    }
    const resolved = await resolveEmbeds(parameters, at, { repo, projectId, root: revision });
    // An embed in place of the parameters themselves must bring parameters, not a text or a list.
    if (!isObject(resolved)) throw new AppError('invalid-request', `the @ag.embed at ${embedAt} resolves to a ${Array.isArray(resolved) ? 'list' : typeof resolved}; parameters must be an object`);
    parameters = resolved;
  }
  // Sent parameters without a template but with other keys are a mistake (`agnet`, `llm` beside
  // it): run as they are, the default template would answer in its place, and say nothing. An
  // `agent: null` is the template left out, as a null for any optional field is.
  const keys = Object.keys(parameters).filter((key) => key !== 'agent');
  if (!revision && parameters.agent == null && keys.length > 0) {
    throw new AppError('invalid-request', `${at} has no "agent" (it has ${keys.map((k) => `"${k}"`).join(', ')}): the agent template goes in ${at}.agent`);
  }
  return { agent: parameters.agent, agentAt: `${at}.agent`, parameters, ...(revision ? { revision } : {}), embedded: embedAt !== undefined };
}
