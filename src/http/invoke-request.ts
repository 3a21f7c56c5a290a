import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { InvokeRequest, SESSION_ID_PATTERN, SessionId } from '../contract/invoke.ts';
import type { MessagesFormat } from '../contract/messages.ts';
import { describeIssue } from '../contract/zod-errors.ts';
import { parseTemplate } from '../agent/template.ts';
import { findEmbed } from '../configs/embeds.ts';
import { AppError } from '../errors.ts';
import { isObject } from '../objects.ts';
import { parameter, type Parameter } from './route-doc.ts';

export interface InvokeCall {
  request: InvokeRequest;
  format: MessagesFormat;
  sessionId: string | undefined;
  trim: boolean;
  force: boolean;
  streamFlag: boolean | undefined;
  /** Resolve `@ag.embed`s in the configuration (`flags.resolve`, else `x-ag-workflow-embeds`). */
  resolveEmbeds: boolean;
  /** Where the caller wrote the conversation, for errors: a chat body's is its own `messages`. */
  messagesAt: string;
}

/** `x-ag-workflow-embeds`, as `embedsHeader` reads it, for the docs of the routes that read it. */
export const EMBEDS_HEADER = { 'x-ag-workflow-embeds': parameter('resolve: resolve @ag.embed references in the configuration (flags.resolve wins)', z.enum(['resolve'])) };

/** Spec §4.1: what the invoke request's headers do, as `readInvokeCall` reads them; a body's `flags` win over them. */
export const INVOKE_HEADERS: Record<string, Parameter> = {
  'x-ag-messages-format': parameter('vercel: messages and frames in the Vercel AI SDK representation; absent (or native): the native one', z.enum(['vercel', 'native'])),
  'x-ag-messages-transcript': parameter('last: only the trailing unit of the turn (flags.trim); full: every message', z.enum(['last', 'full'])),
  'x-ag-session-control': parameter('force: take over the session\'s live turn, or attach to it when the body has no input (flags.force)', z.enum(['force'])),
  ...EMBEDS_HEADER,
  'x-ag-session-id': parameter('The session, when the body has no session_id', SessionId),
};

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * `useChat`'s `DefaultChatTransport` posts `{id, messages, trigger, messageId?, ...body}`. That
 * shape is accepted as-is so a front end needs no custom request code: its messages are the
 * conversation in the Vercel format, its chat id the session, and it wants a stream. A chat sends
 * again only once the user moved on (`stop()`, then a new message or `regenerate()`), so its new
 * input takes the session over as `force` does, instead of a 409 until the abandoned turn ends.
 */
function fromChatTransport(body: Record<string, unknown>): Record<string, unknown> | undefined {
  if (!Array.isArray(body.messages)) return undefined;
  const data = isObject(body.data) ? body.data : {};
  if (isObject(data.inputs) && data.inputs.messages != null) return undefined;
  const { messages, id, trigger: _trigger, messageId: _messageId, ...rest } = body;
  // The chat id names the session: one that cannot be a session id is refused, as an invalid
  // session_id is, rather than dropped for a minted one (the chat would lose its history).
  if (rest.session_id == null && id != null && (typeof id !== 'string' || !SESSION_ID_PATTERN.test(id))) {
    throw new AppError('invalid-session-id', 'the chat id is the session id: it must be 1-128 letters, digits, ".", "_", ":" or "-" (at id)');
  }
  const sessionId = rest.session_id ?? id;
  return { ...rest, ...(sessionId ? { session_id: sessionId } : {}), data: { ...data, inputs: { ...(isObject(data.inputs) ? data.inputs : {}), messages } } };
}

/**
 * Parameters holding `@ag.embed`s are not a template yet: they are validated once the embeds are
 * resolved (configs/run-config.ts), so they skip the schema here and are put back as sent.
 */
function parseBody(raw: Record<string, unknown>): InvokeRequest {
  const data = isObject(raw.data) ? raw.data : undefined;
  if (data && isObject(data.parameters) && findEmbed(data.parameters, 'data.parameters')) {
    const { parameters, ...rest } = data;
    const parsed = parseBody({ ...raw, data: rest });
    return { ...parsed, data: { ...parsed.data, parameters } };
  }
  const parsed = InvokeRequest.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const path = issue.path;
  if (path[0] === 'session_id') {
    throw new AppError('invalid-session-id', 'session_id must be 1-128 letters, digits, ".", "_", ":" or "-" (at session_id)');
  }
  if (path[0] === 'data' && path[1] === 'parameters' && path[2] === 'agent') {
    // The template parser knows which rule was broken (pre-migration shape, unknown key, mode).
    parseTemplate((raw.data as { parameters: { agent: unknown } }).parameters.agent, { provider: 'openai', model: 'x' });
  }
  throw new AppError('invalid-request', describeIssue('', issue));
}

/** Reads the invoke body and headers into one call description; every mistake is a 400 naming where. */
export function readInvokeCall(request: FastifyRequest): InvokeCall {
  // With no Content-Type there is no parser to notice the body is missing, so say it here.
  if (request.body === undefined) throw new AppError('invalid-json', 'the body is empty; send a JSON object with "Content-Type: application/json"');
  if (!isObject(request.body)) throw new AppError('invalid-request', 'the request body must be a JSON object');
  const chat = fromChatTransport(request.body);
  const body = parseBody(chat ?? request.body);

  const formatHeader = header(request, 'x-ag-messages-format')?.trim().toLowerCase();
  if (formatHeader && formatHeader !== 'vercel' && formatHeader !== 'native') {
    throw new AppError('invalid-request', `x-ag-messages-format must be "vercel" or "native" (absent: native), got "${formatHeader}"`);
  }
  const format: MessagesFormat = chat || formatHeader === 'vercel' ? 'vercel' : 'native';

  const transcript = header(request, 'x-ag-messages-transcript')?.trim().toLowerCase();
  if (transcript && transcript !== 'last' && transcript !== 'full') {
    throw new AppError('invalid-request', `x-ag-messages-transcript must be "last" or "full", got "${transcript}"`);
  }
  const control = header(request, 'x-ag-session-control')?.trim().toLowerCase();
  if (control && control !== 'force') {
    throw new AppError('invalid-request', `x-ag-session-control must be "force", got "${control}"`);
  }
  const embeds = embedsHeader(request);

  let sessionId = body.session_id ?? undefined;
  if (!sessionId) {
    const fromHeader = header(request, 'x-ag-session-id') ?? baggageSession(header(request, 'baggage'));
    if (fromHeader !== undefined) {
      if (!SESSION_ID_PATTERN.test(fromHeader)) {
        throw new AppError('invalid-session-id', 'the x-ag-session-id header (or the ag.session.id member of baggage) must be 1-128 letters, digits, ".", "_", ":" or "-"');
      }
      sessionId = fromHeader;
    }
  }

  return {
    request: body,
    format,
    sessionId,
    trim: body.flags?.trim ?? transcript === 'last',
    force: body.flags?.force ?? (control === 'force' || chat !== undefined),
    streamFlag: body.flags?.stream ?? (chat ? true : undefined),
    resolveEmbeds: body.flags?.resolve ?? embeds === 'resolve',
    messagesAt: chat ? 'messages' : 'data.inputs.messages',
  };
}

/** `x-ag-workflow-embeds`: "resolve", or absent. */
export function embedsHeader(request: FastifyRequest): 'resolve' | undefined {
  const embeds = header(request, 'x-ag-workflow-embeds')?.trim().toLowerCase();
  if (embeds && embeds !== 'resolve') {
    throw new AppError('invalid-request', `x-ag-workflow-embeds must be "resolve", got "${embeds}"`);
  }
  return embeds ? 'resolve' : undefined;
}

function baggageSession(baggage: string | undefined): string | undefined {
  if (!baggage) return undefined;
  for (const member of baggage.split(',')) {
    const [key, value] = member.split(';')[0]!.split('=');
    if (key?.trim() !== 'ag.session.id' || value === undefined) continue;
    try {
      return decodeURIComponent(value.trim());
    } catch {
      // Undecodable: returned raw, its "%" fails the session id pattern, so the caller gets a 400.
      return value.trim();
    }
  }
  return undefined;
}
