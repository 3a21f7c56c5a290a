import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { UIMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOf, connectionsApi, okJson } from '../connections/client.ts';
import { builtin, invokeBody, readFrames, sid, startHarness, type Harness } from '../support/harness.ts';
import { checkChunks, readFinal, responseChunks } from '../support/sdk-client.ts';

/**
 * Valid but unusual answers of real model APIs, from a loopback server of the test's own (the fake
 * model sends none of them): several output items in one answer, reasoning with and without a
 * summary, refusals, calls with empty arguments, calls streamed in fragments, answers cut by a
 * token limit, usage missing or detailed, event types no provider models, text split inside a
 * character or an escape sequence across network chunks, keep-alive comments, CRLF. Each answer
 * comes both ways (a JSON body to a call made without streaming, an event stream to a streamed
 * one), and each turn is read in every format: JSON, native SSE, NDJSON and the Vercel UI message
 * stream (and the Vercel JSON reply). Every format must tell the same turn: the same texts, calls,
 * results, stop reason and usage, or the same clear error.
 */

// ---------------------------------------------------------------------------------------------
// The wire: how each answer is written.

/** An answer as the server writes it: its body, cut into the pieces written one by one. */
interface Wire {
  contentType: string;
  pieces: Buffer[];
}

/** Between two pieces, long enough that the reader gets them as separate chunks. */
const PIECE_GAP_MS = 2;

/**
 * A body cut where a reader that decodes chunk by chunk goes wrong: inside every multi-byte UTF-8
 * character and right after every backslash (inside a JSON escape sequence).
 */
function awkwardPieces(body: string): Buffer[] {
  const bytes = Buffer.from(body, 'utf8');
  const pieces: Buffer[] = [];
  let from = 0;
  for (let i = 1; i < bytes.length; i++) {
    const insideCharacter = (bytes[i]! & 0xc0) === 0x80 && (bytes[i - 1]! & 0x80) !== 0;
    const afterBackslash = bytes[i - 1] === 0x5c;
    if (insideCharacter || afterBackslash) {
      pieces.push(bytes.subarray(from, i));
      from = i;
    }
  }
  pieces.push(bytes.subarray(from));
  return pieces;
}

function jsonWire(value: unknown): Wire {
  return { contentType: 'application/json', pieces: awkwardPieces(JSON.stringify(value)) };
}

interface SseOptions {
  /** Name each event on an `event:` line (the Responses API and Anthropic do; Chat Completions does not). */
  named?: boolean;
  /** Comments and keep-alives between the events, as proxies and servers send them. */
  comments?: boolean;
  /** CRLF line endings. */
  crlf?: boolean;
  /** Chat Completions' closing `data: [DONE]` (default: when the events are not named). */
  done?: boolean;
  /** The body closes after this many events, the rest of the answer never sent. */
  cutAfter?: number;
}

function sseWire(events: ReadonlyArray<Record<string, unknown>>, options: SseOptions = {}): Wire {
  const nl = options.crlf ? '\r\n' : '\n';
  let body = options.comments ? `: keep-alive${nl}${nl}` : '';
  for (const [i, event] of events.slice(0, options.cutAfter).entries()) {
    if (options.comments && i % 3 === 1) body += `:${nl}: ping ${i}${nl}${nl}`;
    if (options.named) body += `event: ${String(event.type)}${nl}`;
    body += `data: ${JSON.stringify(event)}${nl}${nl}`;
  }
  if ((options.done ?? !options.named) && options.cutAfter === undefined) body += `data: [DONE]${nl}${nl}`;
  return { contentType: 'text/event-stream', pieces: awkwardPieces(body) };
}

// ---------------------------------------------------------------------------------------------
// The Responses API.

type ResponsesItem =
  | { type: 'message'; id: string; parts: Array<{ text: string } | { refusal: string }> }
  | { type: 'reasoning'; id: string; summary: string[]; encrypted?: string }
  | { type: 'function_call'; id: string; call_id: string; name: string; arguments: string }
  /** An output item of a type no provider models (a newer API's). */
  | { type: 'other'; item: Record<string, unknown> };

interface ResponsesEnd {
  incomplete?: 'max_output_tokens' | 'content_filter';
  /** Absent: the answer carries no usage at all. */
  usage?: Record<string, unknown>;
}

interface ResponsesAnswer {
  items: ResponsesItem[];
  end?: ResponsesEnd;
  /** How a streamed text, summary or argument string is cut into deltas. */
  deltas?: (text: string) => string[];
  /** Event types no provider models, mixed in. */
  unknownEvents?: boolean;
  /** A message's text deltas alone, with no item or content part events around them (a minimal server's). */
  bare?: boolean;
  sse?: SseOptions;
}

const USAGE = { input_tokens: 10, output_tokens: 4, total_tokens: 14 };

function responseObject(extra: Record<string, unknown> = {}) {
  return { id: 'resp_1', object: 'response', created_at: 1, model: 'm', status: 'in_progress', output: [], ...extra };
}

function itemJson(item: ResponsesItem): Record<string, unknown> {
  switch (item.type) {
    case 'message':
      return {
        id: item.id,
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: item.parts.map((p) => ('text' in p ? { type: 'output_text', text: p.text, annotations: [] } : { type: 'refusal', refusal: p.refusal })),
      };
    case 'reasoning':
      return { id: item.id, type: 'reasoning', summary: item.summary.map((text) => ({ type: 'summary_text', text })), ...(item.encrypted ? { encrypted_content: item.encrypted } : {}) };
    case 'function_call':
      return { id: item.id, type: 'function_call', status: 'completed', call_id: item.call_id, name: item.name, arguments: item.arguments };
    case 'other':
      return item.item;
  }
}

function responsesFinal(answer: ResponsesAnswer): Record<string, unknown> {
  const end: ResponsesEnd = answer.end ?? { usage: USAGE };
  return responseObject({
    status: end.incomplete ? 'incomplete' : 'completed',
    ...(end.incomplete ? { incomplete_details: { reason: end.incomplete } } : {}),
    output: answer.items.map(itemJson),
    ...(end.usage ? { usage: end.usage } : {}),
  });
}

function responsesJson(answer: ResponsesAnswer): Wire {
  return jsonWire(responsesFinal(answer));
}

function responsesSse(answer: ResponsesAnswer): Wire {
  const cut = answer.deltas ?? ((text: string) => (text === '' ? [] : [text]));
  const events: Array<Record<string, unknown>> = [
    { type: 'response.created', response: responseObject() },
    { type: 'response.in_progress', response: responseObject() },
  ];
  const unknown = (n: number) => (answer.unknownEvents ? [{ type: `response.future_event_${n}`, payload: { n } }] : []);
  for (const [output_index, item] of answer.items.entries()) {
    const done = itemJson(item);
    events.push(...unknown(output_index));
    if (answer.bare && item.type === 'message') {
      for (const [content_index, part] of item.parts.entries()) {
        for (const delta of cut('text' in part ? part.text : part.refusal)) events.push({ type: 'response.output_text.delta', item_id: item.id, output_index, content_index, delta, logprobs: [] });
      }
      continue;
    }
    switch (item.type) {
      case 'message': {
        events.push({ type: 'response.output_item.added', output_index, item: { ...done, status: 'in_progress', content: [] } });
        for (const [content_index, part] of item.parts.entries()) {
          const ids = { item_id: item.id, output_index, content_index };
          if ('text' in part) {
            events.push({ type: 'response.content_part.added', ...ids, part: { type: 'output_text', text: '', annotations: [] } });
            for (const delta of cut(part.text)) events.push({ type: 'response.output_text.delta', ...ids, delta, logprobs: [] });
            events.push({ type: 'response.output_text.done', ...ids, text: part.text, logprobs: [] });
            events.push({ type: 'response.content_part.done', ...ids, part: { type: 'output_text', text: part.text, annotations: [] } });
          } else {
            events.push({ type: 'response.content_part.added', ...ids, part: { type: 'refusal', refusal: '' } });
            for (const delta of cut(part.refusal)) events.push({ type: 'response.refusal.delta', ...ids, delta });
            events.push({ type: 'response.refusal.done', ...ids, refusal: part.refusal });
            events.push({ type: 'response.content_part.done', ...ids, part: { type: 'refusal', refusal: part.refusal } });
          }
        }
        break;
      }
      case 'reasoning': {
        events.push({ type: 'response.output_item.added', output_index, item: { ...done, summary: [] } });
        for (const [summary_index, text] of item.summary.entries()) {
          const ids = { item_id: item.id, output_index, summary_index };
          events.push({ type: 'response.reasoning_summary_part.added', ...ids, part: { type: 'summary_text', text: '' } });
          for (const delta of cut(text)) events.push({ type: 'response.reasoning_summary_text.delta', ...ids, delta });
          events.push({ type: 'response.reasoning_summary_text.done', ...ids, text });
          events.push({ type: 'response.reasoning_summary_part.done', ...ids, part: { type: 'summary_text', text } });
        }
        break;
      }
      case 'function_call': {
        events.push({ type: 'response.output_item.added', output_index, item: { ...done, status: 'in_progress', arguments: '' } });
        for (const delta of cut(item.arguments)) events.push({ type: 'response.function_call_arguments.delta', item_id: item.id, output_index, delta });
        events.push({ type: 'response.function_call_arguments.done', item_id: item.id, output_index, arguments: item.arguments });
        break;
      }
      case 'other':
        events.push({ type: 'response.output_item.added', output_index, item: done });
        break;
    }
    events.push({ type: 'response.output_item.done', output_index, item: done });
  }
  events.push(...unknown(answer.items.length));
  const final = responsesFinal(answer);
  events.push({ type: answer.end?.incomplete ? 'response.incomplete' : 'response.completed', response: final });
  return sseWire(
    events.map((e, sequence_number) => ({ ...e, sequence_number })),
    { named: true, ...answer.sse },
  );
}

// ---------------------------------------------------------------------------------------------
// Chat Completions.

interface ChatCall {
  id: string;
  name: string;
  arguments: string;
}

interface ChatAnswer {
  content: string | null;
  reasoning?: string;
  /** OpenAI's `refusal`, beside a null content. */
  refusal?: string;
  toolCalls?: ChatCall[];
  finish: 'stop' | 'tool_calls' | 'length' | 'content_filter';
  /** Absent: no usage. */
  usage?: Record<string, unknown>;
  /** The streamed chunks' deltas, as the server cuts them (default: one delta with everything). */
  chunks?: Array<Record<string, unknown>>;
  /** Stream usage only in a last chunk of its own, with no choices (OpenAI's `include_usage`). */
  usageChunk?: boolean;
  sse?: SseOptions;
}

const CHAT_USAGE = { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 };

function chatJson(answer: ChatAnswer): Wire {
  const message = {
    role: 'assistant',
    content: answer.content,
    ...(answer.reasoning ? { reasoning_content: answer.reasoning } : {}),
    ...(answer.refusal ? { refusal: answer.refusal } : {}),
    ...(answer.toolCalls ? { tool_calls: answer.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}),
  };
  return jsonWire({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'm',
    choices: [{ index: 0, message, finish_reason: answer.finish }],
    ...(answer.usage ? { usage: answer.usage } : {}),
  });
}

function chatSse(answer: ChatAnswer): Wire {
  const chunk = (delta: Record<string, unknown>, finish: string | null, extra: Record<string, unknown> = {}) => ({
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [{ index: 0, delta, finish_reason: finish }],
    ...extra,
  });
  const deltas = answer.chunks ?? [
    {
      role: 'assistant',
      content: answer.content,
      ...(answer.reasoning ? { reasoning_content: answer.reasoning } : {}),
      ...(answer.refusal ? { refusal: answer.refusal } : {}),
      ...(answer.toolCalls ? { tool_calls: answer.toolCalls.map((c, index) => ({ index, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}),
    },
  ];
  const events = deltas.map((delta) => chunk(delta, null));
  const usage = answer.usage ? { usage: answer.usage } : {};
  events.push(chunk({}, answer.finish, answer.usageChunk ? {} : usage));
  if (answer.usageChunk && answer.usage) events.push({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], ...usage });
  return sseWire(events, answer.sse);
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages.

type AnthropicBlock =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'redacted_thinking'; data: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown>; partialJson?: string[] };

interface AnthropicAnswer {
  blocks: AnthropicBlock[];
  stop: 'end_turn' | 'tool_use' | 'max_tokens';
  usage?: { input_tokens: number; output_tokens: number; cache_read_input_tokens?: number; cache_creation_input_tokens?: number };
  /** `ping` events between the others, as Anthropic sends them. */
  pings?: boolean;
  /** An event type no provider models (Anthropic may add event types), after the first. */
  unknownEvents?: boolean;
  sse?: SseOptions;
}

function anthropicBlockJson(block: AnthropicBlock): Record<string, unknown> {
  if (block.type === 'tool_use') return { type: 'tool_use', id: block.id, name: block.name, input: block.input };
  return block;
}

function anthropicJson(answer: AnthropicAnswer): Wire {
  return jsonWire({
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'claude-m',
    content: answer.blocks.map(anthropicBlockJson),
    stop_reason: answer.stop,
    stop_sequence: null,
    usage: answer.usage ?? { input_tokens: 10, output_tokens: 4 },
  });
}

function anthropicSse(answer: AnthropicAnswer): Wire {
  const usage = answer.usage ?? { input_tokens: 10, output_tokens: 4 };
  const events: Array<Record<string, unknown>> = [
    { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-m', content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } },
  ];
  const ping = () => (answer.pings ? [{ type: 'ping' }] : []);
  events.push(...ping());
  if (answer.unknownEvents) events.push({ type: 'future_event', detail: { n: 1 } });
  for (const [index, block] of answer.blocks.entries()) {
    switch (block.type) {
      case 'text':
        events.push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
        events.push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: block.text } });
        break;
      case 'thinking':
        events.push({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } });
        events.push({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: block.thinking } });
        events.push(...ping());
        events.push({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: block.signature } });
        break;
      case 'redacted_thinking':
        events.push({ type: 'content_block_start', index, content_block: block });
        break;
      case 'tool_use':
        events.push({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
        for (const piece of block.partialJson ?? [JSON.stringify(block.input)]) {
          events.push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } });
          events.push(...ping());
        }
        break;
    }
    events.push({ type: 'content_block_stop', index });
  }
  events.push({ type: 'message_delta', delta: { stop_reason: answer.stop, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } });
  events.push({ type: 'message_stop' });
  return sseWire(events, { named: true, ...answer.sse });
}

// ---------------------------------------------------------------------------------------------
// The server.

type Protocol = 'responses' | 'chat' | 'anthropic';

/** What each scenario answers a conversation's first call with, per protocol, each way. */
interface Scenario {
  responses?: ResponsesAnswer;
  chat?: ChatAnswer;
  anthropic?: AnthropicAnswer;
}

/** What every scenario answers once the tools have run: the turn's last step. */
const CLOSING = 'All done.';

function wireFor(protocol: Protocol, scenario: Scenario | undefined, stream: boolean, followUp: boolean): Wire | undefined {
  switch (protocol) {
    case 'responses': {
      const answer = followUp ? { items: [{ type: 'message' as const, id: 'msg_close', parts: [{ text: CLOSING }] }] } : scenario?.responses;
      return answer && (stream ? responsesSse(answer) : responsesJson(answer));
    }
    case 'chat': {
      const answer: ChatAnswer | undefined = followUp ? { content: CLOSING, finish: 'stop', usage: CHAT_USAGE } : scenario?.chat;
      return answer && (stream ? chatSse(answer) : chatJson(answer));
    }
    case 'anthropic': {
      const answer: AnthropicAnswer | undefined = followUp ? { blocks: [{ type: 'text', text: CLOSING }], stop: 'end_turn' } : scenario?.anthropic;
      return answer && (stream ? anthropicSse(answer) : anthropicJson(answer));
    }
  }
}

/** Whether the request carries results of calls: the conversation goes on after tools ran. */
function isFollowUp(protocol: Protocol, body: Record<string, any>): boolean {
  switch (protocol) {
    case 'responses':
      return (body.input as Array<{ type?: string }>).some((item) => item.type === 'function_call_output');
    case 'chat':
      return (body.messages as Array<{ role: string }>).some((m) => m.role === 'tool');
    case 'anthropic':
      return (body.messages as Array<{ content: unknown }>).some((m) => Array.isArray(m.content) && m.content.some((c: { type?: string }) => c.type === 'tool_result'));
  }
}

const scenarios: Record<string, Scenario> = {};
/** The bodies of the requests each scenario got, in order. */
const requests: Record<string, Array<Record<string, any>>> = {};

async function send(res: ServerResponse, wire: Wire): Promise<void> {
  res.writeHead(200, { 'content-type': wire.contentType });
  for (const [i, piece] of wire.pieces.entries()) {
    if (res.destroyed) return;
    res.write(piece);
    if (i < wire.pieces.length - 1) await new Promise((resolve) => setTimeout(resolve, PIECE_GAP_MS));
  }
  res.end();
}

function serve(req: IncomingMessage, res: ServerResponse, raw: string): void {
  const url = req.url ?? '';
  const protocol: Protocol | undefined = url.endsWith('/responses') ? 'responses' : url.endsWith('/chat/completions') ? 'chat' : url.endsWith('/messages') ? 'anthropic' : undefined;
  // Under /chat-only/ the server is one with no Responses API (llama.cpp, older vLLM).
  if (!protocol || (protocol === 'responses' && url.startsWith('/chat-only/'))) {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `no route ${url}`, type: 'not_found' } }));
    return;
  }
  const body = JSON.parse(raw) as Record<string, any>;
  const model = String(body.model);
  (requests[model] ??= []).push(body);
  const wire = wireFor(protocol, scenarios[model], body.stream === true, isFollowUp(protocol, body));
  if (!wire) {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `scenario ${model} has no ${protocol} answer`, type: 'invalid_request_error' } }));
    return;
  }
  void send(res, wire);
}

// ---------------------------------------------------------------------------------------------
// The turn, read in every format.

type Route = 'responses' | 'compatible' | 'openai-chat' | 'anthropic';

const ROUTES: Record<Route, { protocol: Protocol; llm: (model: string) => Record<string, unknown> }> = {
  responses: { protocol: 'responses', llm: (model) => ({ provider: 'openai', model }) },
  compatible: { protocol: 'chat', llm: (model) => ({ provider: 'openai-compatible', model, connection: { mode: 'self_managed', slug: 'upstream' } }) },
  'openai-chat': { protocol: 'chat', llm: (model) => ({ provider: 'openai', model, connection: { mode: 'project', slug: 'chat-only' } }) },
  anthropic: { protocol: 'anthropic', llm: (model) => ({ provider: 'anthropic', model }) },
};

const FORMATS = {
  json: { accept: 'application/json' },
  sse: { accept: 'text/event-stream' },
  ndjson: { accept: 'application/x-ndjson' },
  'vercel-sse': { accept: 'text/event-stream', 'x-ag-messages-format': 'vercel' },
  'vercel-json': { accept: 'application/json', 'x-ag-messages-format': 'vercel' },
} satisfies Record<string, Record<string, string>>;
type Format = keyof typeof FORMATS;

/** A turn as any format tells it. */
interface Told {
  /** The assistant's texts, each message (or text part) apart. */
  texts: string[];
  /** The reasoning, each thought apart: the streams tell it, the JSON replies do not. */
  thoughts?: string[];
  calls: Array<{ name: string; input: unknown }>;
  results: Array<{ error: boolean; content: string }>;
  stop?: string;
  usage?: { input: number; output: number; total: number };
  /** A failure: its status (the envelope's, or the error frame's) and message. */
  error?: { status?: number; type?: string; message: string };
}

const text = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));

function fromNativeMessages(messages: Array<Record<string, any>>): Pick<Told, 'texts' | 'calls' | 'results'> {
  return {
    texts: messages.filter((m) => m.role === 'assistant').map((m) => m.content as string),
    calls: messages.filter((m) => m.role === 'tool' && m.tool_name).map((m) => ({ name: m.tool_name, input: m.input })),
    results: messages.filter((m) => m.role === 'tool' && !m.tool_name).map((m) => ({ error: m.is_error === true, content: m.content })),
  };
}

function fromUiMessages(messages: UIMessage[]): Pick<Told, 'texts' | 'calls' | 'results'> {
  const parts = messages.filter((m) => m.role === 'assistant').flatMap((m) => m.parts as Array<Record<string, any>>);
  const tools = parts.filter((p) => typeof p.type === 'string' && p.type.startsWith('tool-'));
  return {
    texts: parts.filter((p) => p.type === 'text' && p.text !== '').map((p) => p.text as string),
    calls: tools.map((p) => ({ name: (p.type as string).slice(5), input: p.input })),
    results: tools.filter((p) => p.state === 'output-available' || p.state === 'output-error').map((p) => (p.state === 'output-error' ? { error: true, content: p.errorText } : { error: false, content: text(p.output) })),
  };
}

async function envelope(res: Response): Promise<Told> {
  const body = await res.json();
  return { texts: [], calls: [], results: [], error: { status: res.status, type: body.status.type, message: body.status.message } };
}

async function told(format: Format, res: Response): Promise<Told> {
  if (res.status !== 200) return envelope(res);
  switch (format) {
    case 'json': {
      const { data } = await res.json();
      return { ...fromNativeMessages(data.outputs.messages), stop: data.outputs.stop_reason, usage: data.outputs.usage };
    }
    case 'vercel-json': {
      const { data } = await res.json();
      return { ...fromUiMessages(data.outputs.messages), stop: data.outputs.stop_reason, usage: data.outputs.usage };
    }
    case 'sse':
    case 'ndjson': {
      const { frames } = await readFrames(res);
      const texts = new Map<string, string>();
      const thoughts = new Map<string, string>();
      for (const f of frames) {
        if (f.type === 'message_start') texts.set(f.data.id, '');
        if (f.type === 'message_delta') texts.set(f.data.id, (texts.get(f.data.id) ?? '') + f.data.delta);
        if (f.type === 'thought_start') thoughts.set(f.data.id, '');
        if (f.type === 'thought_delta') thoughts.set(f.data.id, (thoughts.get(f.data.id) ?? '') + f.data.delta);
      }
      const error = frames.find((f) => f.type === 'error')?.data;
      return {
        texts: [...texts.values()].filter((t) => t !== ''),
        thoughts: [...thoughts.values()],
        calls: frames.filter((f) => f.type === 'tool_call').map((f) => ({ name: f.data.name, input: f.data.input })),
        results: frames.filter((f) => f.type === 'tool_result').map((f) => ({ error: f.data.is_error, content: text(f.data.output) })),
        stop: frames.find((f) => f.type === 'done')?.data.stop_reason,
        usage: frames.find((f) => f.type === 'usage')?.data,
        ...(error ? { error: { status: error.code, type: error.type, message: error.message } } : {}),
      };
    }
    case 'vercel-sse': {
      const chunks = await responseChunks(res);
      // Each chunk as the SDK's schema has it, and the message useChat would build without a complaint.
      await checkChunks(chunks);
      const { message, errors } = await readFinal(chunks);
      expect(errors.filter((e) => !chunks.some((c) => c.type === 'error' && c.errorText === e))).toEqual([]);
      const finish = chunks.find((c) => c.type === 'finish') as { messageMetadata?: Record<string, any> } | undefined;
      const error = chunks.find((c) => c.type === 'error') as { errorText: string } | undefined;
      return {
        ...fromUiMessages(message ? [message] : []),
        thoughts: (message?.parts ?? []).flatMap((p) => (p.type === 'reasoning' ? [p.text] : [])),
        stop: finish?.messageMetadata?.stop_reason,
        usage: finish?.messageMetadata?.usage,
        ...(error ? { error: { message: error.errorText } } : {}),
      };
    }
  }
}

let upstream: Server;
let h: Harness;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (raw += c));
    req.on('end', () => serve(req, res, raw));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  h = await startHarness({
    env: {
      OPENAI_BASE_URL: `${origin}/v1`,
      ANTHROPIC_BASE_URL: origin,
      ANTHROPIC_API_KEY: 'ak-test',
      AGENTD_OPENAI_COMPATIBLE: JSON.stringify({ upstream: { base_url: `${origin}/v1` } }),
      // A turn that hangs fails the test by this, well within the test's own time.
      AGENTD_MODEL_TIMEOUT_MS: '8000',
    },
  });
  const admin = await adminOf(h);
  await okJson(await connectionsApi(h, 'POST', '', { as: admin, body: { slug: 'chat-only', provider: 'openai', base_url: `${origin}/chat-only/v1`, api_key: 'sk-chat-only' } }), 201);
});
afterAll(async () => {
  await h?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
});

const TOOLS = [builtin('write'), builtin('ls')];

/** Runs the scenario's turn once in each format, each in a session of its own. */
async function runEverywhere(route: Route, model: string, formats: Format[] = Object.keys(FORMATS) as Format[], extra: Record<string, unknown> = {}): Promise<Record<Format, Told & { session: string }>> {
  const out = {} as Record<Format, Told & { session: string }>;
  for (const format of formats) {
    const session = sid(`variants-${format}`);
    const userMessage = format.startsWith('vercel') ? { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'go' }] } : { role: 'user', content: 'go' };
    const agent = { llm: ROUTES[route].llm(model), tools: TOOLS, runner: { permissions: { default: 'allow' } } };
    const res = await h.invoke(invokeBody([userMessage], agent, { ...extra, session_id: session }), { headers: FORMATS[format] });
    out[format] = { ...(await told(format, res)), session };
  }
  return out;
}

async function fileIn(session: string, name: string): Promise<string | undefined> {
  return readFile(path.join(h.sessionDir(session), name), 'utf8').catch(() => undefined);
}

let counter = 0;
/** Registers a scenario under a fresh model name. */
function scenario(s: Scenario): string {
  const name = `scenario-${++counter}`;
  scenarios[name] = s;
  return name;
}

// ---------------------------------------------------------------------------------------------
// What every format must tell.

const ALL = Object.keys(FORMATS) as Format[];
const STREAMS: Format[] = ['sse', 'ndjson', 'vercel-sse'];
const JSON_REPLIES: Format[] = ['json', 'vercel-json'];

/** One model call's usage, and two (a step with calls, then the closing answer). */
const ONE_CALL = { input: 10, output: 4, total: 14 };
const TWO_CALLS = { input: 20, output: 8, total: 28 };

interface Outcome {
  texts: string[];
  calls?: Told['calls'];
  results?: Array<{ error: boolean; content: unknown }>;
  /** Checked on the streams, which tell the reasoning. */
  thoughts?: string[];
  stop: string;
  /** Default: one model call's, or two when there are calls. */
  usage?: Told['usage'];
  /** What the calls wrote into the session folder. */
  files?: Record<string, string>;
}

/** Runs the scenario in every format (or those given) and holds each to the same outcome. */
async function expectTurn(route: Route, s: Scenario, want: Outcome, formats: Format[] = ALL, extra: Record<string, unknown> = {}): Promise<string> {
  const model = scenario(s);
  const all = await runEverywhere(route, model, formats, extra);
  for (const [format, got] of Object.entries(all)) {
    const { session, thoughts, ...told } = got;
    expect({ format, ...told }).toEqual({
      format,
      texts: want.texts,
      calls: want.calls ?? [],
      results: want.results ?? [],
      stop: want.stop,
      usage: want.usage ?? (want.calls?.length ? TWO_CALLS : ONE_CALL),
    });
    if (want.thoughts && thoughts) expect({ format, thoughts }).toEqual({ format, thoughts: want.thoughts });
    for (const [name, content] of Object.entries(want.files ?? {})) expect({ format, name, content: await fileIn(session, name) }).toEqual({ format, name, content });
  }
  return model;
}

/** Runs the scenario in every format (or those given): each fails alike, and the turn is stored failed. */
async function expectFailure(route: Route, s: Scenario, want: { status: number; type: string; message: RegExp }, formats: Format[] = ALL): Promise<void> {
  const all = await runEverywhere(route, scenario(s), formats);
  for (const [format, got] of Object.entries(all)) {
    const message = expect.stringMatching(want.message);
    // Once the Vercel stream has begun, its error chunk carries the message alone.
    const error = format === 'vercel-sse' && got.error?.status === undefined ? { message } : { status: want.status, type: want.type, message };
    expect({ format, error: got.error }).toEqual({ format, error });
    const [record] = await h.store.turns.listForSession(h.projectId, got.session, { limit: 1 });
    expect({ format, status: record?.status, type: (record?.error as { type?: string } | null)?.type }).toEqual({ format, status: 'failed', type: want.type });
  }
}

const TRICKY = 'Hé "quoted" \\ back\\slash\n😀 你好 — tab\t end';
const wrote = (content: string, file: string) => `wrote ${Buffer.byteLength(content)} bytes to ${file}`;
/** What a turn shows whose two `ls` calls (arguments "" and "{}") each ran on `{}` in an empty folder. */
const TWO_EMPTY_LS = {
  texts: ['All done.'],
  calls: [
    { name: 'ls', input: {} },
    { name: 'ls', input: {} },
  ],
  results: [
    { error: false, content: '(empty folder)' },
    { error: false, content: '(empty folder)' },
  ],
  stop: 'end_turn',
};
/** What a turn whose two `write` calls wrote `a` into a.txt and `b` into b.txt shows. */
const wroteBoth = (a: string, b: string) => ({
  calls: [
    { name: 'write', input: { path: 'a.txt', content: a } },
    { name: 'write', input: { path: 'b.txt', content: b } },
  ],
  results: [
    { error: false, content: wrote(a, 'a.txt') },
    { error: false, content: wrote(b, 'b.txt') },
  ],
  files: { 'a.txt': a, 'b.txt': b },
});
const writeArgs = (file: string, content: string) => JSON.stringify({ path: file, content });
/** Deltas of one UTF-16 unit each: an emoji's halves come in two events. */
const byUnit = (t: string) => t.split('');
const pieces = (t: string, size: number) => t.match(new RegExp(`[^]{1,${size}}`, 'gu')) ?? [];

describe('the Responses API', () => {
  it('several output items in one answer: reasoning with and without a summary, two messages (one of two parts), a refusal', async () => {
    await expectTurn(
      'responses',
      {
        responses: {
          items: [
            { type: 'reasoning', id: 'rs_1', summary: ['Plan: ', 'write the file.'] },
            { type: 'reasoning', id: 'rs_2', summary: [], encrypted: 'enc-xyz' },
            { type: 'message', id: 'msg_1', parts: [{ text: 'First.' }] },
            { type: 'message', id: 'msg_2', parts: [{ text: 'Part one. ' }, { text: 'Part two.' }] },
            { type: 'message', id: 'msg_3', parts: [{ refusal: "I can't help with that." }] },
          ],
        },
      },
      // A message's parts are one text, as the stream tells them; a refusal is the model's answer.
      { texts: ['First.', 'Part one. Part two.', "I can't help with that."], thoughts: ['Plan: ', 'write the file.', ''], stop: 'end_turn' },
    );
  });

  it('a call with empty arguments ("") and one with "{}", in parallel: each runs on {}, and goes back to the model as "{}"', async () => {
    const model = await expectTurn(
      'responses',
      {
        responses: {
          items: [
            { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'ls', arguments: '' },
            { type: 'function_call', id: 'fc_2', call_id: 'call_2', name: 'ls', arguments: '{}' },
          ],
        },
      },
      TWO_EMPTY_LS,
    );
    const followUps = requests[model]!.filter((b) => isFollowUp('responses', b));
    expect(followUps).toHaveLength(ALL.length);
    for (const body of followUps) {
      const items = body.input as Array<Record<string, unknown>>;
      expect(items.filter((i) => i.type === 'function_call').map((i) => [i.call_id, i.arguments])).toEqual([
        ['call_1', '{}'],
        ['call_2', '{}'],
      ]);
      expect(items.filter((i) => i.type === 'function_call_output').map((i) => i.call_id)).toEqual(['call_1', 'call_2']);
    }
  });

  it('parallel calls with their arguments streamed in pieces: each runs with its own arguments', async () => {
    await expectTurn(
      'responses',
      {
        responses: {
          deltas: (t) => pieces(t, 3),
          items: [
            { type: 'message', id: 'msg_1', parts: [{ text: 'Writing two files.' }] },
            { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'write', arguments: writeArgs('a.txt', 'A é') },
            { type: 'function_call', id: 'fc_2', call_id: 'call_2', name: 'write', arguments: writeArgs('b.txt', 'B 😀') },
          ],
        },
      },
      {
        texts: ['Writing two files.', 'All done.'],
        ...wroteBoth('A é', 'B 😀'),
        stop: 'end_turn',
      },
    );
  });

  it('incomplete at max_output_tokens: what came, and the turn says max_tokens', async () => {
    await expectTurn(
      'responses',
      { responses: { items: [{ type: 'message', id: 'msg_1', parts: [{ text: 'The answer is cut' }] }], end: { incomplete: 'max_output_tokens', usage: USAGE } } },
      { texts: ['The answer is cut'], stop: 'max_tokens' },
    );
  });

  it('incomplete by the content filter: a clear error, not a reply cut short that reads as whole', async () => {
    await expectFailure(
      'responses',
      { responses: { items: [{ type: 'message', id: 'msg_1', parts: [{ text: 'Here is how to' }] }], end: { incomplete: 'content_filter', usage: USAGE } } },
      { status: 502, type: 'upstream-rejected', message: /content filter/ },
    );
  });

  it('text deltas with no item events around them: one message, whole and ended on every stream', async () => {
    // A text's tail that could begin a secret is held back until its end: an end that never came
    // lost the final "." here.
    const secrets = { HELD_TOKEN: '.-a-secret-the-answer-never-holds' };
    const model = await expectTurn(
      'responses',
      { responses: { bare: true, deltas: (t) => pieces(t, 5), items: [{ type: 'message', id: 'msg_1', parts: [{ text: 'Bare deltas, nothing else.' }] }] } },
      { texts: ['Bare deltas, nothing else.'], stop: 'end_turn' },
      ALL,
      { secrets },
    );
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'go' }], { llm: ROUTES.responses.llm(model), tools: TOOLS }, { secrets }), { headers: FORMATS.sse });
    const { frames } = await readFrames(res);
    const ids = (type: string) => frames.filter((f) => f.type === type).map((f) => f.data.id as string);
    expect(ids('message_start')).toHaveLength(1);
    expect(ids('message_end')).toEqual(ids('message_start'));
    expect(frames.findIndex((f) => f.type === 'message_end')).toBeLessThan(frames.findIndex((f) => f.type === 'done'));
  });

  it('usage missing: zeros, alike in every format', async () => {
    await expectTurn('responses', { responses: { items: [{ type: 'message', id: 'msg_1', parts: [{ text: 'No usage.' }] }], end: {} } }, { texts: ['No usage.'], stop: 'end_turn', usage: { input: 0, output: 0, total: 0 } });
  });

  it('usage with cached and reasoning token details: the totals, cached tokens among the input', async () => {
    const usage = { input_tokens: 100, input_tokens_details: { cached_tokens: 80 }, output_tokens: 50, output_tokens_details: { reasoning_tokens: 30 }, total_tokens: 150 };
    await expectTurn('responses', { responses: { items: [{ type: 'message', id: 'msg_1', parts: [{ text: 'Detailed.' }] }], end: { usage } } }, { texts: ['Detailed.'], stop: 'end_turn', usage: { input: 100, output: 50, total: 150 } });
  });

  it('event types no provider models, mixed in: passed over', async () => {
    await expectTurn('responses', { responses: { unknownEvents: true, items: [{ type: 'message', id: 'msg_1', parts: [{ text: 'Unknown events around.' }] }] } }, { texts: ['Unknown events around.'], stop: 'end_turn' });
  });

  it('text split inside characters and escape sequences, one UTF-16 unit a delta, keep-alive comments, CRLF: every character arrives', async () => {
    await expectTurn(
      'responses',
      {
        responses: {
          deltas: byUnit,
          sse: { crlf: true, comments: true },
          items: [
            { type: 'reasoning', id: 'rs_1', summary: [TRICKY] },
            { type: 'message', id: 'msg_1', parts: [{ text: TRICKY }] },
            { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'write', arguments: writeArgs('t.txt', TRICKY) },
          ],
        },
      },
      {
        texts: [TRICKY, 'All done.'],
        thoughts: [TRICKY],
        calls: [{ name: 'write', input: { path: 't.txt', content: TRICKY } }],
        results: [{ error: false, content: wrote(TRICKY, 't.txt') }],
        stop: 'end_turn',
        files: { 't.txt': TRICKY },
      },
    );
  });

  // The provider reads an output item of a type it does not know when it streams, and refuses the
  // whole answer when it does not (report.md): the JSON replies fail, saying what it could not read.
  it('an output item of a type no provider models: the streams pass over it; a JSON reply fails naming it', async () => {
    const s: Scenario = { responses: { items: [{ type: 'other', item: { id: 'fut_1', type: 'future_item', status: 'completed' } }, { type: 'message', id: 'msg_1', parts: [{ text: 'After a future item.' }] }] } };
    await expectTurn('responses', s, { texts: ['After a future item.'], stop: 'end_turn' }, STREAMS);
    await expectFailure('responses', s, { status: 502, type: 'upstream-error', message: /answered \(HTTP 200\) with a response that could not be read: at output\[0\]\.type \("future_item"\)/ }, JSON_REPLIES);
  });

  it('a call cut off by max_output_tokens: the model is told, and the output posted back goes on', async () => {
    const s: Scenario = {
      responses: { items: [{ type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'write', arguments: '{"path":"x.txt","content":"ab' }], end: { incomplete: 'max_output_tokens', usage: USAGE } },
    };
    const model = await expectTurn('responses', s, {
      texts: ['All done.'],
      calls: [{ name: 'write', input: '{"path":"x.txt","content":"ab' }],
      results: [{ error: true, content: expect.stringMatching(/^Invalid input for tool write: .*JSON/) }],
      stop: 'end_turn',
    });
    for (const format of JSON_REPLIES) {
      const vercel = format === 'vercel-json';
      const first = vercel ? { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'go' }] } : { role: 'user', content: 'go' };
      const next = vercel ? { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'again' }] } : { role: 'user', content: 'again' };
      const agent = { llm: ROUTES.responses.llm(model), tools: TOOLS, runner: { permissions: { default: 'allow' } } };
      const session = sid('posted-back');
      const out = await (await h.invoke(invokeBody([first], agent, { session_id: session }), { headers: FORMATS[format] })).json();
      requests[model] = [];
      const again = await h.invoke(invokeBody([first, ...out.data.outputs.messages, next], agent, { session_id: session }), { headers: FORMATS[format] });
      expect({ format, status: again.status }).toEqual({ format, status: 200 });
      // The model reads the call as it did in the turn that made it: arguments {} and its error.
      const input = requests[model]![0]!.input as Array<Record<string, unknown>>;
      expect(input.find((i) => i.type === 'function_call')).toMatchObject({ call_id: 'call_1', arguments: '{}' });
      expect(input.find((i) => i.type === 'function_call_output')).toMatchObject({ call_id: 'call_1', output: expect.stringContaining('Invalid input for tool write') });
    }
  });
});

// The OpenAI-compatible provider, and OpenAI's own Chat Completions model (taken for a server with
// no Responses API): the same answers, through both.
describe.each(['compatible', 'openai-chat'] as const)('Chat Completions (%s)', (route) => {
  it('a call streamed in fragments over many chunks, its id only in the first: it runs with the whole arguments', async () => {
    const args = writeArgs('f.txt', TRICKY);
    await expectTurn(
      route,
      {
        chat: {
          content: null,
          finish: 'tool_calls',
          usage: CHAT_USAGE,
          toolCalls: [{ id: 'call_a', name: 'write', arguments: args }],
          chunks: [
            { role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'write', arguments: '' } }] },
            ...pieces(args, 4).map((piece) => ({ tool_calls: [{ index: 0, function: { arguments: piece } }] })),
          ],
        },
      },
      { texts: ['All done.'], calls: [{ name: 'write', input: { path: 'f.txt', content: TRICKY } }], results: [{ error: false, content: wrote(TRICKY, 'f.txt') }], stop: 'end_turn', files: { 'f.txt': TRICKY } },
    );
  });

  it('two calls interleaved by index, and usage only in a last chunk with no choices', async () => {
    await expectTurn(
      route,
      {
        chat: {
          content: null,
          finish: 'tool_calls',
          usage: CHAT_USAGE,
          usageChunk: true,
          toolCalls: [
            { id: 'call_a', name: 'write', arguments: writeArgs('a.txt', 'A') },
            { id: 'call_b', name: 'write', arguments: writeArgs('b.txt', 'B') },
          ],
          chunks: [
            { role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'write', arguments: '{"path":' } }] },
            { tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'write', arguments: '{"path":"b.txt",' } }] },
            { tool_calls: [{ index: 0, function: { arguments: '"a.txt","content":"A"}' } }] },
            { tool_calls: [{ index: 1, function: { arguments: '"content":"B"}' } }] },
          ],
        },
      },
      {
        texts: ['All done.'],
        ...wroteBoth('A', 'B'),
        stop: 'end_turn',
      },
    );
  });

  it('content null beside tool_calls, one with empty arguments ("") and one with "{}": each runs on {}', async () => {
    await expectTurn(
      route,
      {
        chat: {
          content: null,
          finish: 'tool_calls',
          usage: CHAT_USAGE,
          toolCalls: [
            { id: 'call_e', name: 'ls', arguments: '' },
            { id: 'call_o', name: 'ls', arguments: '{}' },
          ],
        },
      },
      TWO_EMPTY_LS,
    );
  });

  it('finish_reason "length": what came, and the turn says max_tokens', async () => {
    await expectTurn(route, { chat: { content: 'Cut short', finish: 'length', usage: CHAT_USAGE } }, { texts: ['Cut short'], stop: 'max_tokens' });
  });

  it.each([
    ['after some text', 'Here is how to'],
    ['with no text at all', null],
  ])('finish_reason "content_filter" %s: a clear error, not a reply that reads as whole', async (_, content) => {
    await expectFailure(route, { chat: { content, finish: 'content_filter', usage: CHAT_USAGE } }, { status: 502, type: 'upstream-rejected', message: /content filter/ });
  });

  it("a refusal (OpenAI's `refusal` beside a null content) is the model's answer", async () => {
    await expectTurn(route, { chat: { content: null, refusal: "I can't help with that.", finish: 'stop', usage: CHAT_USAGE } }, { texts: ["I can't help with that."], stop: 'end_turn' });
  });

  it('usage only in a last chunk with no choices, with cached and reasoning token details', async () => {
    const usage = { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150, prompt_tokens_details: { cached_tokens: 80 }, completion_tokens_details: { reasoning_tokens: 30 } };
    await expectTurn(route, { chat: { content: 'Usage at the end.', finish: 'stop', usage, usageChunk: true } }, { texts: ['Usage at the end.'], stop: 'end_turn', usage: { input: 100, output: 50, total: 150 } });
  });

  it('no usage at all: zeros, alike in every format', async () => {
    await expectTurn(route, { chat: { content: 'No usage.', finish: 'stop' } }, { texts: ['No usage.'], stop: 'end_turn', usage: { input: 0, output: 0, total: 0 } });
  });

  it('no [DONE] at the end (the body closes), CRLF, keep-alive comments', async () => {
    await expectTurn(route, { chat: { content: TRICKY, finish: 'stop', usage: CHAT_USAGE, usageChunk: true, sse: { done: false, crlf: true, comments: true } } }, { texts: [TRICKY], stop: 'end_turn' });
  });
});

describe('Chat Completions reasoning (compatible)', () => {
  it('reasoning_content before a call: the streams tell the thought', async () => {
    await expectTurn(
      'compatible',
      { chat: { content: 'Calling.', reasoning: 'Thinking first.', finish: 'tool_calls', usage: CHAT_USAGE, toolCalls: [{ id: 'call_x', name: 'ls', arguments: '' }] } },
      { texts: ['Calling.', 'All done.'], thoughts: ['Thinking first.'], calls: [{ name: 'ls', input: {} }], results: [{ error: false, content: '(empty folder)' }], stop: 'end_turn' },
    );
  });
});

describe('Anthropic Messages', () => {
  it('thinking (signed), redacted thinking and text, with pings between: the text, the thoughts', async () => {
    await expectTurn(
      'anthropic',
      { anthropic: { pings: true, stop: 'end_turn', blocks: [{ type: 'thinking', thinking: 'Let me think.', signature: 'sig-1' }, { type: 'redacted_thinking', data: 'opaque' }, { type: 'text', text: TRICKY }] } },
      { texts: [TRICKY], thoughts: ['Let me think.', ''], stop: 'end_turn' },
    );
  });

  it('tool_use input streamed in partial_json pieces after thinking: it runs, and the thinking goes back signed', async () => {
    const model = await expectTurn(
      'anthropic',
      {
        anthropic: {
          pings: true,
          stop: 'tool_use',
          blocks: [
            { type: 'thinking', thinking: 'Let me think.', signature: 'sig-1' },
            { type: 'redacted_thinking', data: 'opaque' },
            { type: 'text', text: 'Writing.' },
            { type: 'tool_use', id: 'toolu_1', name: 'write', input: { path: 'p.txt', content: TRICKY }, partialJson: pieces(writeArgs('p.txt', TRICKY), 5) },
          ],
        },
      },
      { texts: ['Writing.', 'All done.'], calls: [{ name: 'write', input: { path: 'p.txt', content: TRICKY } }], results: [{ error: false, content: wrote(TRICKY, 'p.txt') }], stop: 'end_turn', files: { 'p.txt': TRICKY } },
    );
    const followUps = requests[model]!.filter((b) => isFollowUp('anthropic', b));
    expect(followUps).toHaveLength(ALL.length);
    for (const body of followUps) {
      const said = (body.messages as Array<{ role: string; content: unknown }>).find((m) => m.role === 'assistant')!.content;
      expect(said).toEqual([
        { type: 'thinking', thinking: 'Let me think.', signature: 'sig-1' },
        { type: 'redacted_thinking', data: 'opaque' },
        { type: 'text', text: 'Writing.' },
        { type: 'tool_use', id: 'toolu_1', name: 'write', input: { path: 'p.txt', content: TRICKY } },
      ]);
    }
  });

  it('stop_reason max_tokens: what came, and the turn says max_tokens', async () => {
    await expectTurn('anthropic', { anthropic: { stop: 'max_tokens', blocks: [{ type: 'text', text: 'Cut by the limit' }] } }, { texts: ['Cut by the limit'], stop: 'max_tokens' });
  });

  it('max_tokens inside a tool_use: the call is told it failed, and the model goes on', async () => {
    await expectTurn(
      'anthropic',
      { anthropic: { stop: 'max_tokens', blocks: [{ type: 'tool_use', id: 'toolu_1', name: 'write', input: {}, partialJson: ['{"path": "x.txt", "cont'] }] } },
      { texts: ['All done.'], calls: [{ name: 'write', input: '{"path": "x.txt", "cont' }], results: [{ error: true, content: expect.stringMatching(/^Invalid input for tool write: .*JSON/) }], stop: 'end_turn' },
      STREAMS,
    );
  });

  it('usage with cache reads and writes: all of it is input', async () => {
    const usage = { input_tokens: 10, cache_read_input_tokens: 70, cache_creation_input_tokens: 20, output_tokens: 4 };
    await expectTurn('anthropic', { anthropic: { stop: 'end_turn', usage, blocks: [{ type: 'text', text: 'Cached.' }] } }, { texts: ['Cached.'], stop: 'end_turn', usage: { input: 100, output: 4, total: 104 } });
  });

  it.each([
    ['after message_start', 1],
    ['before any event', 0],
  ])('a stream that ends %s, before anything was said: an answer broken off, not an empty one', async (_, cutAfter) => {
    await expectFailure('anthropic', { anthropic: { stop: 'end_turn', blocks: [{ type: 'text', text: 'never sent' }], sse: { cutAfter } } }, { status: 502, type: 'upstream-error', message: /broke off/ }, STREAMS);
  });

  // Anthropic says new event types may come and should be passed over; the provider refuses them
  // (report.md). The streamed turn fails saying what it could not read.
  it('an event type no provider models: the JSON replies are whole; a streamed turn fails naming it', async () => {
    const s: Scenario = { anthropic: { unknownEvents: true, stop: 'end_turn', blocks: [{ type: 'text', text: 'Hello' }] } };
    await expectTurn('anthropic', s, { texts: ['Hello'], stop: 'end_turn' }, JSON_REPLIES);
    await expectFailure('anthropic', s, { status: 502, type: 'upstream-error', message: /could not be read: at type \("future_event"\)/ }, STREAMS);
  });
});
