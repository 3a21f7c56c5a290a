import type { UIMessage } from 'ai';
import type { Config } from '../config.ts';
import { CONTRACT_VERSIONS, type InvokeRequest } from '../contract/invoke.ts';
import type { EventOf } from '../contract/events.ts';
import type { Message, MessagesFormat } from '../contract/messages.ts';
import { parseTemplate, type EffectiveTemplate } from '../agent/template.ts';
import { AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { traceparentFromData } from '../telemetry/trace-context.ts';
import type { Attachment } from '../stream/inbound-files.ts';
import { checkAttachments } from './attachments.ts';
import { checkAnswerable, continuedMessage, inboundMessages } from './inbound.ts';
import { inlineRevisionParameters, resolveRunConfig } from '../configs/run-config.ts';
import type { ConfigsRepo } from '../store/configs.ts';

export interface StartTurn {
  projectId: string;
  request: InvokeRequest;
  /** Already resolved by the caller: body, then header; minted here when absent. */
  sessionId: string | undefined;
  format: MessagesFormat;
  traceparent: string | undefined;
  /** Take over the session's live turn (with input), or attach to it (without). */
  force: boolean;
  /** Resolve `@ag.embed`s in the configuration. */
  resolveEmbeds: boolean;
  /** Whether the caller reads the turn as it is written (a stream) or only its end. */
  streaming: boolean;
  /** Where the caller wrote the conversation, named by its errors (`data.inputs.messages` unless said). */
  messagesAt?: string;
}

/** What a turn runs, however it was asked for: an invoke, or the continuation of a paused turn. */
export interface TurnPlan {
  projectId: string;
  sessionId: string;
  template: EffectiveTemplate;
  messages: Message[];
  /** Files the user messages carry, put into the session folder before the turn starts. */
  attachments?: Attachment[];
  /**
   * Results of calls the caller answered through the API (a client tool's), already in `messages`:
   * no message the caller holds has them, so the turn tells them first, as its own.
   */
  told?: EventOf<'tool_result'>['data'][];
  secrets: Record<string, string>;
  credentials: string | undefined;
  traceparent: string | undefined;
  /** Recorded on the turn: tags, meta, links, references, or what it continues. */
  record: Record<string, unknown>;
  force: boolean;
  /** Whether anyone reads the turn as it is written; without, the model is called without streaming. */
  streaming: boolean;
  /** Interactions answered through the API that this turn consumes (`responded` → `resolved`). */
  outOfBand?: ReadonlySet<string>;
  /**
   * The caller made the session for this turn alone and names it to nobody before the turn ends
   * (an evaluation case). No other turn can meet it, so it takes no lease, and the session and
   * its turn are written once, when the turn ends: four statements fewer on the path of every case.
   */
  privateSession?: boolean;
  /** The server made the session id for this turn: no turn came before it, so nothing in it waits on an answer. */
  newSession?: boolean;
  /** The Vercel-format message this turn continues, as its client sent it (see LiveTurn). */
  continues?: UIMessage;
  /** Stops the turn, from its setup on, as its own controller does (an evaluation run's stop). */
  signal?: AbortSignal;
}

export interface PlanDeps {
  config: Pick<Config, 'defaultLlm' | 'maxUploadBytes' | 'maxAttachments'>;
  configs: ConfigsRepo;
}

/** A request's `version`: absent, or one this server speaks (design.md §4 "Versions"). */
export function checkVersion(version: string | null | undefined): void {
  if (version != null && !(CONTRACT_VERSIONS as readonly string[]).includes(version)) {
    throw new AppError('unsupported-version', `version "${version}" is not supported; supported: ${CONTRACT_VERSIONS.join(', ')}`);
  }
}

/**
 * Reads an invoke into the turn it asks for, resolving the configuration it names and checking
 * everything else that can be checked before the session is taken, so a bad request is refused
 * before anything runs. No input with `force` means attach.
 */
export async function planInvoke(params: StartTurn, deps: PlanDeps): Promise<{ plan: TurnPlan } | { attach: { sessionId: string } }> {
  const { request, projectId } = params;
  checkVersion(request.version);
  const inlineParameters = inlineRevisionParameters(request.data?.revision, 'data.revision');
  const configuration = await resolveRunConfig(deps.configs, projectId, {
    references: request.references,
    selector: request.selector,
    parameters: request.data?.parameters ?? inlineParameters,
    parametersAt: request.data?.parameters != null ? 'data.parameters' : 'data.revision.data.parameters',
    resolveEmbeds: params.resolveEmbeds,
  });
  const template = parseTemplate(configuration.agent, deps.config.defaultLlm, configuration.agentAt);
  const { revision } = configuration;

  const messagesAt = params.messagesAt ?? 'data.inputs.messages';
  const inbound = inboundMessages(request, params.format, messagesAt);
  const messages = inbound?.messages;
  const attachments = inbound?.attachments ?? [];
  const continues = continuedMessage(request, params.format);
  const sessionId = params.sessionId ?? newId().replaceAll('-', '');
  if (!messages?.length) {
    if (!params.force) {
      const fromTestcase = request.data?.inputs == null && request.data?.testcase != null;
      throw new AppError(
        'invalid-messages',
        fromTestcase
          ? 'data.testcase.data.messages is required: the test case must hold the conversation in a "messages" column (an array with at least one message)'
          : `${messagesAt} is required: an array with at least one message`,
      );
    }
    return { attach: { sessionId } };
  }
  checkAnswerable(messages, messagesAt);
  // Before the session is taken: a file too large must not cancel the turn a forced re-post replaces.
  checkAttachments(attachments, deps.config);
  return {
    plan: {
      projectId,
      sessionId,
      template,
      messages,
      ...(attachments.length ? { attachments } : {}),
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
        revision: revision && { id: revision.id, slug: revision.slug, version: revision.version, workflow: revision.artifact.slug, variant: revision.variant.slug },
        // For a replica that follows the turn: its stream starts from the record.
        continues,
      },
      force: params.force,
      streaming: params.streaming,
      ...(params.sessionId === undefined ? { newSession: true } : {}),
      ...(continues ? { continues } : {}),
    },
  };
}
