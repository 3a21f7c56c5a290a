import type { FastifyInstance, FastifyReply } from 'fastify';
import type { AgentEvent } from '../../contract/events.ts';
import { CONTRACT_VERSION, InvokeRequest, InvokeResponse } from '../../contract/invoke.ts';
import { continuedMessage } from '../../sessions/inbound.ts';
import type { LiveTurn } from '../../sessions/live-turn.ts';
import type { TurnService } from '../../sessions/turn-service.ts';
import type { Store } from '../../store/db.ts';
import { trimToTrailingUnit } from '../../stream/fold.ts';
import { streamMessageId, VERCEL_FORMAT_HEADERS, type VercelProjectorOptions } from '../../stream/vercel.ts';
import { nativeToUi } from '../../stream/ui-messages.ts';
import { authorize, SERVICES } from '../auth.ts';
import { INVOKE_HEADERS, readInvokeCall, type InvokeCall } from '../invoke-request.ts';
import { negotiate, negotiateStream } from '../negotiate.ts';
import { documented, type RouteDoc } from '../route-doc.ts';
import { TURN_ERRORS } from '../route-errors.ts';
import { replyHeaders, runHeaders } from '../run-headers.ts';
import { sessionIdParam } from '../session-request.ts';
import { writeStream } from '../stream-reply.ts';

export interface InvokeDeps {
  store: Store;
  turns: TurnService;
  /** Longest a stream is held back waiting for the turn's first output (see firstEvents). */
  streamHoldMs: number;
}

interface FirstEvents {
  head: AgentEvent[];
  rest: AsyncIterator<AgentEvent>;
  /** The read of `rest` still in flight when the hold ran out: the stream's next event. */
  pending?: Promise<IteratorResult<AgentEvent>>;
}

/**
 * Holds back a stream until the turn has produced something beyond its start, so a turn that
 * fails at once (bad provider key, rate limit) still answers with a JSON error carrying the real
 * status, as spec §4.2 asks. Held for `holdMs` at most: a model slow to its first output (one that
 * reasons first can take minutes) would otherwise keep the connection silent, headers and all,
 * long enough for a proxy to cut it; past that the stream starts, with the turn's start and then
 * keepalives, and a failure is told on it. A turn relayed from another replica is not held back:
 * its follower's stream starts at once, and what becomes of the turn (its process dying included)
 * is told on it.
 */
async function firstEvents(turn: LiveTurn, holdMs: number): Promise<FirstEvents> {
  const rest = turn.follow()[Symbol.asyncIterator]();
  const head: AgentEvent[] = [];
  if (turn.relayed) return { head, rest };
  let timer: NodeJS.Timeout | undefined;
  const held = new Promise<'held'>((resolve) => (timer = setTimeout(resolve, holdMs, 'held')));
  try {
    for (;;) {
      const pending = rest.next();
      const next = await Promise.race([pending, held]);
      if (next === 'held') return { head, rest, pending };
      if (next.done) break;
      head.push(next.value);
      if (next.value.type !== 'turn_start') break;
    }
  } finally {
    clearTimeout(timer);
  }
  return { head, rest };
}

async function* noEvents(): AsyncGenerator<AgentEvent> {}

async function* concat({ head, rest, pending }: FirstEvents): AsyncGenerator<AgentEvent> {
  yield* head;
  for (let next = await (pending ?? rest.next()); !next.done; next = await rest.next()) yield next.value;
}

/** Invoke bodies for a reader to copy (test/http/openapi.test.ts holds each to the body's schema). */
const INVOKE_EXAMPLES: RouteDoc['examples'] = {
  native: {
    summary: 'A turn with an inline template (native messages)',
    value: {
      session_id: 'chat-42',
      data: {
        inputs: { messages: [{ role: 'user', content: 'Write a haiku into haiku.txt' }] },
        parameters: { agent: { llm: { provider: 'openai', model: 'gpt-5-mini' }, tools: [{ type: 'builtin', name: 'write' }], runner: { permissions: { default: 'ask' } } } },
      },
    },
  },
  approval: {
    summary: 'Answering a pause in band: the paused tool-call message carries the decision',
    value: {
      session_id: 'chat-42',
      data: {
        inputs: {
          messages: [
            { role: 'user', content: 'Write a haiku into haiku.txt' },
            { role: 'tool', content: '', tool_call_id: 'call_1', tool_name: 'write', input: { path: 'haiku.txt', content: '…' }, approval: { id: '<interaction id>', approved: true } },
          ],
        },
      },
    },
  },
  references: {
    summary: 'Running what an environment deploys',
    value: { references: { application: { slug: 'support-bot' }, environment: { slug: 'production' } }, data: { inputs: { messages: [{ role: 'user', content: 'Hello' }] } } },
  },
  useChat: {
    summary: "The body useChat's DefaultChatTransport sends (with x-ag-messages-format: vercel)",
    value: { id: 'chat-42', trigger: 'submit-message', messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'Hello' }] }] },
  },
};

/** What the invoke reply is with a streaming Accept, beside its JSON. */
const INVOKE_STREAMS: RouteDoc['streams'] = {
  'text/event-stream': {
    description:
      'With Accept: text/event-stream (or flags.stream): one SSE `data:` line per native event (AgentEvent: turn_start, message_start/delta/end, thought_*, tool_call, tool_result, interaction_request, usage, error, and exactly one final done), no terminator. With x-ag-messages-format: vercel it is the AI SDK UI message stream instead, ending with `data: [DONE]`, and the reply carries x-vercel-ai-ui-message-stream: v1.',
    example:
      'data: {"type":"turn_start","data":{"turn_id":"…","session_id":"chat-42","trace_id":"…"}}\n\ndata: {"type":"message_delta","data":{"id":"m1","delta":"Hello"}}\n\ndata: {"type":"done","data":{"stop_reason":"end_turn","stopReason":"end_turn"}}\n\n',
  },
  'application/x-ndjson': {
    description: 'With Accept: application/x-ndjson or application/jsonl: the same native events, one JSON object per line.',
    example: '{"type":"turn_start","data":{"turn_id":"…","session_id":"chat-42","trace_id":"…"}}\n{"type":"done","data":{"stop_reason":"end_turn","stopReason":"end_turn"}}\n',
  },
};

export async function invokeRoutes(app: FastifyInstance, deps: InvokeDeps): Promise<void> {
  app.post(
    '/services/agent/v0/invoke',
    documented({
      summary: 'Run one agent turn (JSON, SSE, NDJSON or the Vercel UI message stream, by Accept and flags)',
      role: 'editor',
      errors: TURN_ERRORS,
      body: InvokeRequest,
      headers: INVOKE_HEADERS,
      examples: INVOKE_EXAMPLES,
      streams: INVOKE_STREAMS,
      ok: { status: 200, schema: InvokeResponse, description: 'The turn: one JSON reply, or a stream (below) with a streaming Accept. A failure before the first frame is the JSON error envelope with its real status, whatever was asked for.' },
    }),
    async (request, reply) => {
      const principal = await authorize(deps.store, request, SERVICES);
      const call = readInvokeCall(request);
      request.run = { sessionId: call.sessionId };
      const { stream, wire } = negotiate(request.headers.accept, call.streamFlag);

      const turn = await deps.turns.start({
        projectId: principal.projectId,
        request: call.request,
        sessionId: call.sessionId,
        format: call.format,
        traceparent: typeof request.headers.traceparent === 'string' ? request.headers.traceparent : undefined,
        force: call.force,
        resolveEmbeds: call.resolveEmbeds,
        streaming: stream,
        messagesAt: call.messagesAt,
      });
      const run = { sessionId: turn.sessionId, traceId: turn.traceId, spanId: turn.spanId };
      request.run = run;
      const headers = runHeaders(run);
      if (!stream) return replyJson(reply, turn, call, headers);

      const first = await firstEvents(turn, deps.streamHoldMs);
      if (turn.failure && first.head.some((e) => e.type === 'error')) throw turn.failure;
      reply.hijack();
      await writeStream(reply.raw, { ...replyHeaders(reply), ...headers }, concat(first), {
        wire: wire === 'json' ? 'sse' : wire,
        // The caller that sent the continued message holds it; one that attached does not.
        vercel: call.format === 'vercel' ? vercelStart(turn, continuedMessage(call.request, call.format) === undefined) : undefined,
      });
    },
  );

  // useChat's `resume: true` asks for the chat's live turn after a reload (reference/vercel-ai-sdk.md
  // §5): the turn from its start, as the Vercel stream, and 204 when none runs. The transport puts
  // `/{chatId}/stream` before `api`'s query string, so a chat whose `api` is the invoke URL lands
  // here with nothing more configured.
  app.get(
    '/services/agent/v0/invoke/:session_id/stream',
    documented({
      summary: "The session's live turn from its start, as the Vercel UI message stream: what useChat's resume asks for after a reload",
      role: 'viewer',
      errors: ['not-acceptable'],
      ok: {
        status: 200,
        description: 'The Vercel UI message stream of the live turn (its chunks as NDJSON lines with Accept: application/x-ndjson or application/jsonl); 204 when the session runs none',
        content: 'text/event-stream',
      },
    }),
    async (request, reply) => {
      const principal = await authorize(deps.store, request, SERVICES);
      const sessionId = sessionIdParam(request);
      const turn = await deps.turns.liveTurn(principal.projectId, sessionId);
      // No body, so nothing to negotiate: whatever the Accept, no live turn is a 204.
      if (!turn) return reply.code(204).send();
      // As with invoke: an Accept that allows no stream is a 406, and a reader of NDJSON gets the chunks as lines.
      const wire = negotiateStream(request.headers.accept);
      reply.hijack();
      const run = { sessionId: turn.sessionId, traceId: turn.traceId, spanId: turn.spanId };
      request.run = run;
      // A HEAD (Fastify answers one for every GET) has no body to wait for: following the turn held it to the turn's end.
      const events = request.method === 'HEAD' ? noEvents() : turn.follow();
      await writeStream(reply.raw, { ...replyHeaders(reply), ...runHeaders(run) }, events, {
        wire,
        vercel: vercelStart(turn, true),
      });
    },
  );
}

/**
 * How a turn's Vercel stream starts. A continuation goes on with the message it continues; a
 * reader that does not hold that message (it joined later) gets it rebuilt first.
 */
function vercelStart(turn: LiveTurn, rebuild: boolean): VercelProjectorOptions {
  const continued = turn.continues;
  return {
    messageId: streamMessageId(turn.id, continued),
    startMetadata: { session_id: turn.sessionId, trace_id: turn.traceId, ...(turn.revision ? { revision: turn.revision } : {}) },
    continues: continued !== undefined,
    ...(continued && rebuild ? { rebuilds: continued } : {}),
  };
}

async function replyJson(reply: FastifyReply, turn: LiveTurn, call: InvokeCall, headers: Record<string, string>): Promise<InvokeResponse> {
  const folded = await turn.done;
  if (turn.failure) throw turn.failure;
  // A continuation's results and text belong to the message it continues, as on the stream;
  // alone they would be a second assistant message holding results of calls it never made. In
  // that format a message holds its tool parts, so the trailing unit is the last message whole.
  const messages =
    call.format === 'vercel'
      ? nativeToUi(folded.messages, { idPrefix: `msg-${turn.id}`, messageId: streamMessageId(turn.id, turn.continues), continues: turn.continues }).slice(call.trim ? -1 : 0)
      : call.trim
        ? trimToTrailingUnit(folded.messages)
        : folded.messages;
  const outputs: InvokeResponse extends { data?: { outputs: infer O } } ? O : never = {
    messages,
    ...(folded.stop_reason ? { stop_reason: folded.stop_reason } : {}),
    ...(folded.pending_interaction ? { pending_interaction: folded.pending_interaction } : {}),
    ...(folded.usage ? { usage: folded.usage } : {}),
  };
  // A JSON reply whose messages are UIMessages says so, as the NDJSON chunks of that format do.
  reply.headers(call.format === 'vercel' ? { ...headers, ...VERCEL_FORMAT_HEADERS } : headers);
  return {
    version: CONTRACT_VERSION,
    status: { code: 200, message: 'ok' },
    trace_id: turn.traceId,
    span_id: turn.spanId,
    session_id: turn.sessionId,
    turn_id: turn.id,
    ...(turn.revision ? { revision: turn.revision } : {}),
    data: { outputs },
  };
}
