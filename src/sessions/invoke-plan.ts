import { randomUUID } from 'node:crypto';
import type { Config } from '../config.ts';
import { CONTRACT_VERSIONS, type InvokeRequest } from '../contract/invoke.ts';
import type { Message, MessagesFormat } from '../contract/messages.ts';
import { parseTemplate, type EffectiveTemplate } from '../agent/template.ts';
import { AppError } from '../errors.ts';
import { traceparentFromData } from '../telemetry/trace-context.ts';
import { inboundMessages } from './inbound.ts';
import { referencedFamily } from './references.ts';

export interface StartTurn {
  projectId: string;
  request: InvokeRequest;
  /** Already resolved by the caller: body, then header; minted here when absent. */
  sessionId: string | undefined;
  format: MessagesFormat;
  traceparent: string | undefined;
  /** Take over the session's live turn (with input), or attach to it (without). */
  force: boolean;
}

/** What a turn runs, however it was asked for: an invoke, or the continuation of a paused turn. */
export interface TurnPlan {
  projectId: string;
  sessionId: string;
  template: EffectiveTemplate;
  messages: Message[];
  secrets: Record<string, string>;
  credentials: string | undefined;
  traceparent: string | undefined;
  /** Recorded on the turn: tags, meta, links, references, or what it continues. */
  record: Record<string, unknown>;
  force: boolean;
  /** Interactions answered through the API that this turn consumes (`responded` → `resolved`). */
  outOfBand?: ReadonlySet<string>;
}

/**
 * Reads an invoke into the turn it asks for, checking everything that can be checked without the
 * store, so a bad request is refused before anything runs. No input with `force` means attach.
 */
export function planInvoke(params: StartTurn, config: Pick<Config, 'defaultLlm'>): { plan: TurnPlan } | { attach: { sessionId: string } } {
  const { request, projectId } = params;
  if (request.version != null && !(CONTRACT_VERSIONS as readonly string[]).includes(request.version)) {
    throw new AppError('unsupported-version', `version "${request.version}" is not supported; supported: ${CONTRACT_VERSIONS.join(', ')}`);
  }
  referencedFamily(request.references);
  const rawTemplate = request.data?.parameters?.agent ?? (request.data?.revision?.data as { parameters?: { agent?: unknown } } | undefined)?.parameters?.agent;
  if (rawTemplate == null && request.references && Object.values(request.references).some((r) => r != null)) {
    throw new AppError('not-implemented', 'running a stored configuration by reference is not available yet; send the template in data.parameters.agent');
  }
  const template = parseTemplate(rawTemplate, config.defaultLlm);

  const messages = inboundMessages(request, params.format);
  const sessionId = params.sessionId ?? randomUUID().replaceAll('-', '');
  if (!messages?.length) {
    if (!params.force) throw new AppError('invalid-messages', 'data.inputs.messages is required: an array with at least one message');
    return { attach: { sessionId } };
  }
  return {
    plan: {
      projectId,
      sessionId,
      template,
      messages,
      secrets: request.secrets ?? {},
      credentials: request.credentials ?? undefined,
      traceparent: params.traceparent ?? traceparentFromData(request.data?.trace),
      record: {
        version: request.version ?? CONTRACT_VERSIONS[0],
        tags: request.tags ?? undefined,
        meta: request.meta ?? undefined,
        links: request.links ?? undefined,
        references: request.references ?? undefined,
        selector: request.selector ?? undefined,
      },
      force: params.force,
    },
  };
}
