import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A loopback model server speaking OpenAI Chat Completions, OpenAI Responses and Anthropic
 * Messages, so tests, benchmarks and `agentd demo-model` drive the real AI SDK providers over real
 * HTTP instead of mocking them. The wire shapes follow what the installed providers parse; when a
 * provider upgrade changes its schemas, test/fake-model is where that shows up.
 */

export interface FakeToolCall {
  name: string;
  /** Serialized with JSON.stringify; a string is sent verbatim, which lets tests send broken arguments. */
  input: unknown;
  id?: string;
  /** Responses only: the namespace tool the function is in (Codex offers an MCP server's tools as one). */
  namespace?: string;
}

export interface FakeReply {
  text?: string;
  /** Responses: reasoning summary; Chat: `reasoning_content`; Anthropic: a thinking block. */
  reasoning?: string;
  toolCalls?: FakeToolCall[];
  /** Omitted: estimated from the text lengths, so usage is never zero. */
  usage?: { input: number; output: number };
  /** `body` replaces the default protocol-shaped error body; `message` only its text. */
  error?: { status: number; body?: unknown; headers?: Record<string, string>; message?: string };
  latencyMs?: number;
  /** Delay between SSE frames (every frame, including bookkeeping events). */
  chunkDelayMs?: number;
  hang?: boolean;
  malformed?: boolean;
}

export type FakeScript = FakeReply | FakeReply[] | ((req: RecordedRequest) => FakeReply | Promise<FakeReply>);

export type FakeProtocol = 'chat' | 'responses' | 'anthropic';

interface RecordedToolCall {
  id: string;
  name: string;
  /** The raw JSON text the model received. */
  arguments: string;
  /** `arguments` parsed; the raw string when it is not valid JSON. */
  input: unknown;
}

interface RecordedMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  tool_calls?: RecordedToolCall[];
  tool_call_id?: string;
  /** On tool results: the name of the tool whose call they answer, when the call is in the conversation. */
  name?: string;
  is_error?: boolean;
}

export interface RecordedRequest {
  protocol: FakeProtocol;
  path: string;
  headers: Record<string, string | undefined>;
  body: any;
  stream: boolean;
  model: string;
  /** Names of the tools offered to the model. */
  tools: string[];
  /** The conversation as the model received it, normalized across protocols. */
  messages: RecordedMessage[];
}

export interface FakeModelServer {
  url: string;
  requests: RecordedRequest[];
  script(s: FakeScript): void;
  readonly inFlight: number;
  readonly peakInFlight: number;
  /** `METHOD path` of each request the server had no route for, such as a protocol it does not serve. */
  readonly unrouted: string[];
  /** Forgets recorded and unrouted requests and restarts peakInFlight from the current load. */
  reset(): void;
  close(): Promise<void>;
}

export interface FakeModelOptions {
  port?: number;
  host?: string;
  /** Defaults to echoScript. */
  script?: FakeScript;
  /** Long benchmarks can turn recording off so memory stays flat. Default true. */
  record?: boolean;
  /** The protocols served; the others' paths get `unroutedStatus`, as on a server that lacks them. Default all. */
  protocols?: FakeProtocol[];
  /** What a path that is not served answers (404 unless told; small servers also say 400 or 501). */
  unroutedStatus?: number;
  /** Answer every POST as Chat Completions, whatever its path, as a server that routes nothing does. */
  chatEverywhere?: boolean;
}

const ITEM_MEMORY_LIMIT = 10_000;

export async function startFakeModel(opts: FakeModelOptions = {}): Promise<FakeModelServer> {
  const model = new FakeModel(opts.script ?? echoScript, opts.record ?? true, opts.protocols ?? ['chat', 'responses', 'anthropic'], opts.unroutedStatus ?? 404, opts.chatEverywhere ?? false);
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    model.server.once('error', reject);
    model.server.listen(opts.port ?? 0, host, () => {
      model.server.off('error', reject);
      resolve();
    });
  });
  const { port } = model.server.address() as AddressInfo;
  model.url = `http://${urlHost(host)}:${port}/v1`;
  return model;
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

class FakeModel implements FakeModelServer {
  url = '';
  requests: RecordedRequest[] = [];
  inFlight = 0;
  peakInFlight = 0;
  unrouted: string[] = [];
  readonly server: Server;

  #script: FakeScript;
  #cursor = 0;
  #record: boolean;
  #protocols: FakeProtocol[];
  #unroutedStatus: number;
  #chatEverywhere: boolean;
  #seq = 0;
  #closing = new AbortController();
  #hanging = new Set<ServerResponse>();
  #closed: Promise<void> | undefined;
  // The Responses provider sends earlier assistant text back as `item_reference`s when `store` is
  // on (its default), so the server must remember what it said to show the full conversation.
  #items = new Map<string, { text: string } | { call: RecordedToolCall }>();

  constructor(script: FakeScript, record: boolean, protocols: FakeProtocol[], unroutedStatus: number, chatEverywhere: boolean) {
    this.#script = script;
    this.#record = record;
    this.#protocols = protocols;
    this.#unroutedStatus = unroutedStatus;
    this.#chatEverywhere = chatEverywhere;
    this.server = createServer((req, res) => {
      this.#handle(req, res).catch((err: unknown) => this.#fail(res, err));
    });
    // Clients pool connections; a server that times them out first races the client's reuse.
    this.server.keepAliveTimeout = 30_000;
  }

  script(s: FakeScript): void {
    this.#script = s;
    this.#cursor = 0;
  }

  reset(): void {
    // In place, so a test holding `server.requests` keeps seeing the live list.
    this.requests.length = 0;
    this.unrouted.length = 0;
    this.peakInFlight = this.inFlight;
  }

  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve) => {
      this.#closing.abort();
      for (const res of this.#hanging) res.destroy();
      this.#hanging.clear();
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    return this.#closed;
  }

  #id(prefix: string): string {
    return `${prefix}_fake${(++this.#seq).toString(36)}`;
  }

  #fail(res: ServerResponse, err: unknown): void {
    if (res.headersSent || this.#closing.signal.aborted || isAbort(err)) {
      res.destroy();
      return;
    }
    const message = `fake model failed: ${err instanceof Error ? err.message : String(err)}`;
    sendJson(res, 500, JSON.stringify({ error: { message, type: 'server_error', code: 'server_error' } }));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.inFlight++;
    if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
    res.once('close', () => {
      this.inFlight--;
      this.#hanging.delete(res);
    });

    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);

    if (req.method === 'GET' && path.endsWith('/models')) {
      req.resume();
      sendJson(res, 200, JSON.stringify({ object: 'list', data: [{ id: 'fake-model', object: 'model', owned_by: 'agentd' }] }));
      return;
    }
    const named: FakeProtocol | undefined = path.endsWith('/chat/completions')
      ? 'chat'
      : path.endsWith('/responses')
        ? 'responses'
        : path.endsWith('/messages')
          ? 'anthropic'
          : undefined;
    // Served under /v1 only, as every OpenAI- or Anthropic-compatible server serves them.
    const protocol = this.#chatEverywhere ? 'chat' : named && this.#protocols.includes(named) && path.startsWith('/v1/') ? named : undefined;
    if (protocol === undefined || req.method !== 'POST') {
      req.resume();
      this.unrouted.push(`${req.method} ${path}`);
      const status = protocol === undefined ? this.#unroutedStatus : 405;
      sendJson(res, status, errorBody(protocol ?? 'chat', status, `fake model: no route for ${req.method} ${path}`));
      return;
    }

    const raw = await readBody(req);
    let body: any;
    try {
      body = JSON.parse(raw);
    } catch {
      sendJson(res, 400, errorBody(protocol, 400, 'fake model: request body is not valid JSON'));
      return;
    }
    if (body === null || typeof body !== 'object') {
      sendJson(res, 400, errorBody(protocol, 400, 'fake model: request body must be a JSON object'));
      return;
    }

    const recorded: RecordedRequest = {
      protocol,
      path,
      headers: flattenHeaders(req.headers),
      body,
      stream: body.stream === true,
      model: typeof body.model === 'string' ? body.model : 'fake-model',
      tools: toolNames(protocol, body.tools),
      messages:
        protocol === 'chat'
          ? normalizeChat(body)
          : protocol === 'responses'
            ? normalizeResponses(body, this.#items)
            : normalizeAnthropic(body),
    };
    if (this.#record) this.requests.push(recorded);

    let reply: FakeReply;
    try {
      reply = await this.#nextReply(recorded);
    } catch (err) {
      const message = `fake model script threw: ${err instanceof Error ? err.message : String(err)}`;
      reply = { error: { status: 500, message } };
    }
    if (res.destroyed) return;

    if (reply.hang) {
      if (this.#closing.signal.aborted) res.destroy();
      else this.#hanging.add(res);
      return;
    }
    if (reply.latencyMs !== undefined && reply.latencyMs > 0) {
      await sleep(reply.latencyMs, undefined, { signal: this.#closing.signal });
      if (res.destroyed) return;
    }
    if (reply.error !== undefined) {
      const { status, headers } = reply.error;
      const payload =
        reply.error.body === undefined
          ? errorBody(protocol, status, reply.error.message)
          : typeof reply.error.body === 'string'
            ? reply.error.body
            : JSON.stringify(reply.error.body);
      sendJson(res, status, payload, headers);
      return;
    }

    const usage = reply.usage ?? estimateUsage(recorded.messages, reply);
    const ctx: RenderContext = {
      model: recorded.model,
      created: Math.floor(Date.now() / 1000),
      usage,
      id: (prefix) => this.#id(prefix),
    };

    if (!recorded.stream) {
      const json = reply.malformed
        ? '{"id":"broken","object":'
        : protocol === 'chat'
          ? chatJson(reply, ctx)
          : protocol === 'responses'
            ? responsesJson(reply, ctx, this.#remember)
            : anthropicJson(reply, ctx);
      sendJson(res, 200, json);
      return;
    }

    const frames =
      protocol === 'chat'
        ? chatFrames(reply, ctx, body.stream_options?.include_usage === true)
        : protocol === 'responses'
          ? responsesFrames(reply, ctx, this.#remember)
          : anthropicFrames(reply, ctx);
    await this.#stream(res, frames, reply.chunkDelayMs ?? 0);
  }

  #remember = (id: string, item: { text: string } | { call: RecordedToolCall }): void => {
    if (this.#items.size >= ITEM_MEMORY_LIMIT) {
      const oldest = this.#items.keys().next();
      if (oldest.done !== true) this.#items.delete(oldest.value);
    }
    this.#items.set(id, item);
  };

  #nextReply(req: RecordedRequest): FakeReply | Promise<FakeReply> {
    const script = this.#script;
    if (typeof script === 'function') return script(req);
    if (!Array.isArray(script)) return script;
    const index = this.#cursor++;
    const reply = script[index];
    if (reply !== undefined) return reply;
    return {
      error: {
        status: 500,
        message:
          `fake model script exhausted: ${script.length} scripted ${script.length === 1 ? 'reply was' : 'replies were'} ` +
          `used up, request #${index + 1} (${req.protocol} ${req.path}) has none`,
      },
    };
  }

  async #stream(res: ServerResponse, frames: string[], delayMs: number): Promise<void> {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
    });
    if (delayMs <= 0) {
      // One syscall for the whole stream keeps the server cheap under benchmark load.
      res.cork();
      for (const frame of frames) res.write(frame);
      res.uncork();
      res.end();
      return;
    }
    for (let i = 0; i < frames.length; i++) {
      if (i > 0) {
        await sleep(delayMs, undefined, { signal: this.#closing.signal });
        if (res.destroyed) return;
      }
      res.write(frames[i]);
    }
    res.end();
  }
}

function isAbort(err: unknown): boolean {
  return err instanceof Error && err.name === 'AbortError';
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: string, headers?: Record<string, string>): void {
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

function flattenHeaders(h: IncomingMessage['headers']): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const key in h) {
    const v = h[key];
    out[key] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

const OPENAI_ERRORS: Record<number, [type: string, code: string | null, message: string]> = {
  400: ['invalid_request_error', null, 'Bad request'],
  401: ['invalid_request_error', 'invalid_api_key', 'Incorrect API key provided'],
  403: ['permission_denied', 'permission_denied', 'Permission denied'],
  404: ['invalid_request_error', 'not_found', 'Not found'],
  429: ['requests', 'rate_limit_exceeded', 'Rate limit reached'],
};

const ANTHROPIC_ERRORS: Record<number, [type: string, message: string]> = {
  400: ['invalid_request_error', 'Bad request'],
  401: ['authentication_error', 'invalid x-api-key'],
  403: ['permission_error', 'Permission denied'],
  404: ['not_found_error', 'Not found'],
  413: ['request_too_large', 'Request too large'],
  429: ['rate_limit_error', 'Rate limit reached'],
  529: ['overloaded_error', 'Overloaded'],
};

function errorBody(protocol: FakeProtocol, status: number, message?: string): string {
  if (protocol === 'anthropic') {
    const [type, fallback] =
      ANTHROPIC_ERRORS[status] ??
      (status >= 500 ? ['api_error', 'Internal server error'] : ['invalid_request_error', `HTTP ${status}`]);
    return JSON.stringify({ type: 'error', error: { type, message: message ?? `${fallback} (fake model)` } });
  }
  const [type, code, fallback] =
    OPENAI_ERRORS[status] ??
    (status >= 500
      ? ['server_error', 'server_error', 'The server had an error while processing your request']
      : ['invalid_request_error', null, `HTTP ${status}`]);
  return JSON.stringify({ error: { message: message ?? `${fallback} (fake model)`, type, param: null, code } });
}

// ---------------------------------------------------------------------------------------------
// Normalizing what the model received

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (content == null) return '';
  if (Array.isArray(content)) {
    let s = '';
    for (const part of content) {
      if (typeof part === 'string') s += part;
      else if (part !== null && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') {
        s += (part as { text: string }).text;
      }
    }
    return s;
  }
  return JSON.stringify(content);
}

function parseArgs(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

function asArray(v: unknown): any[] {
  return Array.isArray(v) ? v : [];
}

function toolNames(protocol: FakeProtocol, tools: unknown): string[] {
  const names: string[] = [];
  for (const t of asArray(tools)) {
    const name = protocol === 'chat' ? t?.function?.name : t?.name;
    if (typeof name === 'string') names.push(name);
  }
  return names;
}

function normalRole(role: unknown): RecordedMessage['role'] {
  return role === 'developer' || role === 'system'
    ? 'system'
    : role === 'assistant'
      ? 'assistant'
      : role === 'tool'
        ? 'tool'
        : 'user';
}

/** Tool results name the call they answer only by id; the name is what scripts branch on. */
function nameToolResults(messages: RecordedMessage[]): RecordedMessage[] {
  let names: Map<string, string> | undefined;
  for (const m of messages) {
    if (m.tool_calls) {
      names ??= new Map();
      for (const c of m.tool_calls) names.set(c.id, c.name);
    } else if (m.role === 'tool' && m.name === undefined && m.tool_call_id !== undefined) {
      const name = names?.get(m.tool_call_id);
      if (name !== undefined) m.name = name;
    }
  }
  return messages;
}

function normalizeChat(body: any): RecordedMessage[] {
  const out: RecordedMessage[] = [];
  for (const m of asArray(body.messages)) {
    const msg: RecordedMessage = { role: normalRole(m?.role), content: textOf(m?.content) };
    if (Array.isArray(m?.tool_calls)) {
      msg.tool_calls = m.tool_calls.map((c: any): RecordedToolCall => {
        const args = typeof c?.function?.arguments === 'string' ? c.function.arguments : JSON.stringify(c?.function?.arguments ?? {});
        return { id: String(c?.id ?? ''), name: String(c?.function?.name ?? ''), arguments: args, input: parseArgs(args) };
      });
    }
    if (typeof m?.tool_call_id === 'string') msg.tool_call_id = m.tool_call_id;
    if (typeof m?.name === 'string' && msg.role === 'tool') msg.name = m.name;
    out.push(msg);
  }
  return nameToolResults(out);
}

function normalizeResponses(body: any, items: Map<string, { text: string } | { call: RecordedToolCall }>): RecordedMessage[] {
  const out: RecordedMessage[] = [];
  if (typeof body.instructions === 'string' && body.instructions !== '') {
    out.push({ role: 'system', content: body.instructions });
  }
  if (typeof body.input === 'string') {
    out.push({ role: 'user', content: body.input });
    return out;
  }
  // Responses splits one assistant turn into a message item plus function_call items.
  const assistant = (): RecordedMessage => {
    const last = out[out.length - 1];
    if (last?.role === 'assistant') return last;
    const msg: RecordedMessage = { role: 'assistant', content: '' };
    out.push(msg);
    return msg;
  };
  const addCall = (call: RecordedToolCall): void => {
    const msg = assistant();
    (msg.tool_calls ??= []).push(call);
  };
  for (const item of asArray(body.input)) {
    const type = item?.type ?? (item?.role !== undefined ? 'message' : undefined);
    switch (type) {
      case 'message': {
        const role = normalRole(item.role);
        if (role === 'assistant') assistant().content += textOf(item.content);
        else out.push({ role, content: textOf(item.content) });
        break;
      }
      case 'function_call': {
        const args = typeof item.arguments === 'string' ? item.arguments : JSON.stringify(item.arguments ?? {});
        addCall({ id: String(item.call_id ?? item.id ?? ''), name: String(item.name ?? ''), arguments: args, input: parseArgs(args) });
        break;
      }
      case 'function_call_output':
        out.push({ role: 'tool', content: textOf(item.output), tool_call_id: String(item.call_id ?? '') });
        break;
      case 'item_reference': {
        const known = items.get(item.id);
        if (known === undefined) break;
        if ('text' in known) assistant().content += known.text;
        else addCall(known.call);
        break;
      }
      default:
        // reasoning and hosted-tool items carry nothing the normalized view models.
        break;
    }
  }
  return nameToolResults(out);
}

function normalizeAnthropic(body: any): RecordedMessage[] {
  const out: RecordedMessage[] = [];
  if (body.system !== undefined) {
    const system = textOf(body.system);
    if (system !== '') out.push({ role: 'system', content: system });
  }
  for (const m of asArray(body.messages)) {
    if (typeof m?.content === 'string') {
      out.push({ role: m.role === 'assistant' ? 'assistant' : 'user', content: m.content });
      continue;
    }
    if (m?.role === 'assistant') {
      const msg: RecordedMessage = { role: 'assistant', content: '' };
      for (const block of asArray(m.content)) {
        if (block?.type === 'text') msg.content += String(block.text ?? '');
        else if (block?.type === 'tool_use') {
          const args = JSON.stringify(block.input ?? {});
          const call = { id: String(block.id ?? ''), name: String(block.name ?? ''), arguments: args, input: block.input ?? {} };
          (msg.tool_calls ??= []).push(call);
        }
      }
      out.push(msg);
      continue;
    }
    let text = '';
    let hasText = false;
    for (const block of asArray(m?.content)) {
      if (block?.type === 'tool_result') {
        const msg: RecordedMessage = { role: 'tool', content: textOf(block.content), tool_call_id: String(block.tool_use_id ?? '') };
        if (block.is_error === true) msg.is_error = true;
        out.push(msg);
      } else if (block?.type === 'text') {
        text += String(block.text ?? '');
        hasText = true;
      }
    }
    if (hasText) out.push({ role: 'user', content: text });
  }
  return nameToolResults(out);
}

// ---------------------------------------------------------------------------------------------
// Rendering replies

interface RenderContext {
  model: string;
  created: number;
  usage: { input: number; output: number };
  id: (prefix: string) => string;
}

type Remember = (id: string, item: { text: string } | { call: RecordedToolCall }) => void;

function estimateUsage(messages: RecordedMessage[], reply: FakeReply): { input: number; output: number } {
  let inChars = 0;
  for (const m of messages) inChars += m.content.length;
  let outChars = (reply.text?.length ?? 0) + (reply.reasoning?.length ?? 0);
  for (const c of reply.toolCalls ?? []) outChars += c.name.length + argsOf(c).length;
  return { input: Math.max(1, Math.ceil(inChars / 4)), output: Math.max(1, Math.ceil(outChars / 4)) };
}

function argsOf(call: FakeToolCall): string {
  return typeof call.input === 'string' ? call.input : JSON.stringify(call.input ?? {});
}

/** Splits into at most `n` pieces, never between the halves of a surrogate pair. */
function pieces(s: string, n: number): string[] {
  if (s.length <= 1 || n <= 1) return [s];
  const size = Math.ceil(s.length / n);
  const out: string[] = [];
  let i = 0;
  while (i < s.length) {
    let j = Math.min(i + size, s.length);
    const code = s.charCodeAt(j - 1);
    if (j < s.length && code >= 0xd800 && code <= 0xdbff) j++;
    out.push(s.slice(i, j));
    i = j;
  }
  return out;
}

const TEXT_PIECES = 3;
const ARG_PIECES = 2;

/** Whether to emit an (possibly empty) text item: a reply with nothing else still answers with text. */
function hasText(reply: FakeReply): boolean {
  return (reply.text !== undefined && reply.text !== '') || ((reply.toolCalls?.length ?? 0) === 0 && !reply.reasoning);
}

function sse(data: unknown): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

// Chat Completions

function chatJson(reply: FakeReply, ctx: RenderContext): string {
  const calls = reply.toolCalls ?? [];
  const message: Record<string, unknown> = { role: 'assistant', content: hasText(reply) ? (reply.text ?? '') : null };
  if (reply.reasoning) message.reasoning_content = reply.reasoning;
  if (calls.length > 0) {
    message.tool_calls = calls.map((c) => ({
      id: c.id ?? ctx.id('call'),
      type: 'function',
      function: { name: c.name, arguments: argsOf(c) },
    }));
  }
  return JSON.stringify({
    id: ctx.id('chatcmpl'),
    object: 'chat.completion',
    created: ctx.created,
    model: ctx.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: calls.length > 0 ? 'tool_calls' : 'stop' }],
    usage: chatUsage(ctx.usage),
  });
}

function chatUsage(u: { input: number; output: number }) {
  return { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output };
}

function chatFrames(reply: FakeReply, ctx: RenderContext, includeUsage: boolean): string[] {
  const id = ctx.id('chatcmpl');
  const chunk = (delta: unknown, finish: string | null = null) =>
    sse({
      id,
      object: 'chat.completion.chunk',
      created: ctx.created,
      model: ctx.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
  const frames = [chunk({ role: 'assistant', content: '' })];
  if (reply.malformed) {
    frames.push(`data: {"id":"${id}","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"oo\n\n`);
    return frames;
  }
  if (reply.reasoning) for (const p of pieces(reply.reasoning, TEXT_PIECES)) frames.push(chunk({ reasoning_content: p }));
  if (reply.text) for (const p of pieces(reply.text, TEXT_PIECES)) frames.push(chunk({ content: p }));
  const calls = reply.toolCalls ?? [];
  calls.forEach((c, index) => {
    const callId = c.id ?? ctx.id('call');
    frames.push(chunk({ tool_calls: [{ index, id: callId, type: 'function', function: { name: c.name, arguments: '' } }] }));
    for (const p of pieces(argsOf(c), ARG_PIECES)) frames.push(chunk({ tool_calls: [{ index, function: { arguments: p } }] }));
  });
  frames.push(chunk({}, calls.length > 0 ? 'tool_calls' : 'stop'));
  if (includeUsage) {
    const usage = chatUsage(ctx.usage);
    frames.push(sse({ id, object: 'chat.completion.chunk', created: ctx.created, model: ctx.model, choices: [], usage }));
  }
  frames.push('data: [DONE]\n\n');
  return frames;
}

// Responses

function responsesUsage(u: { input: number; output: number }) {
  return {
    input_tokens: u.input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.input + u.output,
  };
}

interface ResponsesOutput {
  reasoning?: { id: string; text: string };
  message?: { id: string; text: string };
  calls: Array<{ id: string; call_id: string; name: string; arguments: string; namespace?: string }>;
}

function responsesOutput(reply: FakeReply, ctx: RenderContext, remember: Remember): ResponsesOutput {
  const out: ResponsesOutput = { calls: [] };
  if (reply.reasoning) out.reasoning = { id: ctx.id('rs'), text: reply.reasoning };
  if (hasText(reply)) {
    out.message = { id: ctx.id('msg'), text: reply.text ?? '' };
    remember(out.message.id, { text: out.message.text });
  }
  for (const c of reply.toolCalls ?? []) {
    const call = { id: ctx.id('fc'), call_id: c.id ?? ctx.id('call'), name: c.name, arguments: argsOf(c), ...(c.namespace ? { namespace: c.namespace } : {}) };
    out.calls.push(call);
    remember(call.id, { call: { id: call.call_id, name: call.name, arguments: call.arguments, input: parseArgs(call.arguments) } });
  }
  return out;
}

function reasoningItem(r: { id: string; text: string }) {
  return { type: 'reasoning', id: r.id, summary: [{ type: 'summary_text', text: r.text }] };
}

function messageItem(m: { id: string; text: string }) {
  return {
    type: 'message',
    id: m.id,
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text: m.text, annotations: [], logprobs: [] }],
  };
}

function callItem(c: ResponsesOutput['calls'][number]) {
  return { type: 'function_call', status: 'completed', ...c };
}

function outputItems(o: ResponsesOutput): unknown[] {
  const items: unknown[] = [];
  if (o.reasoning) items.push(reasoningItem(o.reasoning));
  if (o.message) items.push(messageItem(o.message));
  for (const c of o.calls) items.push(callItem(c));
  return items;
}

function responseObject(id: string, ctx: RenderContext, status: string, output: unknown[], usage: unknown) {
  return {
    id,
    object: 'response',
    created_at: ctx.created,
    status,
    error: null,
    incomplete_details: null,
    model: ctx.model,
    output,
    usage,
  };
}

function responsesJson(reply: FakeReply, ctx: RenderContext, remember: Remember): string {
  const output = outputItems(responsesOutput(reply, ctx, remember));
  return JSON.stringify(responseObject(ctx.id('resp'), ctx, 'completed', output, responsesUsage(ctx.usage)));
}

function responsesFrames(reply: FakeReply, ctx: RenderContext, remember: Remember): string[] {
  const respId = ctx.id('resp');
  let seq = 0;
  const frames: string[] = [];
  const event = (type: string, data: Record<string, unknown>) => {
    frames.push(sse({ type, sequence_number: seq++, ...data }));
  };
  event('response.created', { response: responseObject(respId, ctx, 'in_progress', [], null) });
  if (reply.malformed) {
    frames.push(`data: {"type":"response.output_text.delta","item_id":"msg_broken","delta":\n\n`);
    return frames;
  }

  const o = responsesOutput(reply, ctx, remember);
  let index = 0;
  if (o.reasoning) {
    const r = o.reasoning;
    const output_index = index++;
    event('response.output_item.added', { output_index, item: { type: 'reasoning', id: r.id, summary: [] } });
    const part = (text: string) => ({ item_id: r.id, output_index, summary_index: 0, part: { type: 'summary_text', text } });
    event('response.reasoning_summary_part.added', part(''));
    for (const delta of pieces(r.text, TEXT_PIECES)) {
      event('response.reasoning_summary_text.delta', { item_id: r.id, output_index, summary_index: 0, delta });
    }
    event('response.reasoning_summary_text.done', { item_id: r.id, output_index, summary_index: 0, text: r.text });
    event('response.reasoning_summary_part.done', part(r.text));
    event('response.output_item.done', { output_index, item: reasoningItem(r) });
  }
  if (o.message) {
    const m = o.message;
    const output_index = index++;
    const part = (text: string) => ({ item_id: m.id, output_index, content_index: 0, part: { type: 'output_text', text, annotations: [] } });
    const item = { type: 'message', id: m.id, status: 'in_progress', role: 'assistant', content: [] };
    event('response.output_item.added', { output_index, item });
    event('response.content_part.added', part(''));
    if (m.text !== '') {
      for (const delta of pieces(m.text, TEXT_PIECES)) {
        event('response.output_text.delta', { item_id: m.id, output_index, content_index: 0, delta, logprobs: [] });
      }
    }
    event('response.output_text.done', { item_id: m.id, output_index, content_index: 0, text: m.text, logprobs: [] });
    event('response.content_part.done', part(m.text));
    event('response.output_item.done', { output_index, item: messageItem(m) });
  }
  for (const c of o.calls) {
    const output_index = index++;
    const item = { type: 'function_call', id: c.id, call_id: c.call_id, name: c.name, ...(c.namespace ? { namespace: c.namespace } : {}), arguments: '', status: 'in_progress' };
    event('response.output_item.added', { output_index, item });
    for (const delta of pieces(c.arguments, ARG_PIECES)) {
      event('response.function_call_arguments.delta', { item_id: c.id, output_index, delta });
    }
    event('response.function_call_arguments.done', { item_id: c.id, output_index, arguments: c.arguments });
    event('response.output_item.done', { output_index, item: callItem(c) });
  }
  event('response.completed', { response: responseObject(respId, ctx, 'completed', outputItems(o), responsesUsage(ctx.usage)) });
  return frames;
}

// Anthropic Messages

function anthropicInput(call: FakeToolCall): unknown {
  if (typeof call.input !== 'string') return call.input ?? {};
  try {
    return JSON.parse(call.input);
  } catch {
    return call.input;
  }
}

function anthropicJson(reply: FakeReply, ctx: RenderContext): string {
  const content: unknown[] = [];
  if (reply.reasoning) content.push({ type: 'thinking', thinking: reply.reasoning, signature: 'fake-signature' });
  if (hasText(reply)) content.push({ type: 'text', text: reply.text ?? '' });
  const calls = reply.toolCalls ?? [];
  for (const c of calls) content.push({ type: 'tool_use', id: c.id ?? ctx.id('toolu'), name: c.name, input: anthropicInput(c) });
  return JSON.stringify({
    id: ctx.id('msg'),
    type: 'message',
    role: 'assistant',
    model: ctx.model,
    content,
    stop_reason: calls.length > 0 ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: ctx.usage.input, output_tokens: ctx.usage.output },
  });
}

function anthropicFrames(reply: FakeReply, ctx: RenderContext): string[] {
  const frames: string[] = [];
  const event = (type: string, data: Record<string, unknown>) => {
    frames.push(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  };
  event('message_start', {
    message: {
      id: ctx.id('msg'),
      type: 'message',
      role: 'assistant',
      model: ctx.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: ctx.usage.input, output_tokens: 1 },
    },
  });
  if (reply.malformed) {
    frames.push(`event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":\n\n`);
    return frames;
  }
  let index = 0;
  if (reply.reasoning) {
    const i = index++;
    event('content_block_start', { index: i, content_block: { type: 'thinking', thinking: '' } });
    for (const thinking of pieces(reply.reasoning, TEXT_PIECES)) {
      event('content_block_delta', { index: i, delta: { type: 'thinking_delta', thinking } });
    }
    event('content_block_delta', { index: i, delta: { type: 'signature_delta', signature: 'fake-signature' } });
    event('content_block_stop', { index: i });
  }
  if (hasText(reply)) {
    const i = index++;
    event('content_block_start', { index: i, content_block: { type: 'text', text: '' } });
    if (reply.text) {
      for (const text of pieces(reply.text, TEXT_PIECES)) event('content_block_delta', { index: i, delta: { type: 'text_delta', text } });
    }
    event('content_block_stop', { index: i });
  }
  const calls = reply.toolCalls ?? [];
  for (const c of calls) {
    const i = index++;
    event('content_block_start', { index: i, content_block: { type: 'tool_use', id: c.id ?? ctx.id('toolu'), name: c.name, input: {} } });
    for (const partial_json of pieces(argsOf(c), ARG_PIECES)) {
      event('content_block_delta', { index: i, delta: { type: 'input_json_delta', partial_json } });
    }
    event('content_block_stop', { index: i });
  }
  event('message_delta', {
    delta: { stop_reason: calls.length > 0 ? 'tool_use' : 'end_turn', stop_sequence: null },
    usage: { output_tokens: ctx.usage.output },
  });
  event('message_stop', {});
  return frames;
}

// ---------------------------------------------------------------------------------------------
// The demo brain

const TOOL_COMMAND = /^\/tool\s+(\S+)(?:\s+([\s\S]*))?$/;

/**
 * Replies "You said: <last user text>"; "/tool <name> <json>" calls that tool; after tool results
 * it reports what each returned, so a tool round trip ends in a text answer.
 */
export function echoScript(req: RecordedRequest): FakeReply {
  const messages = req.messages;
  const last = messages[messages.length - 1];
  if (last?.role === 'tool') {
    let first = messages.length - 1;
    while (first > 0 && messages[first - 1]!.role === 'tool') first--;
    const lines: string[] = [];
    for (let i = first; i < messages.length; i++) {
      const m = messages[i]!;
      lines.push(`Tool ${m.name ?? m.tool_call_id ?? 'unknown'} returned: ${m.content.slice(0, 200)}`);
    }
    return { text: lines.join('\n') };
  }
  let userText = '';
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]!.role === 'user') {
      userText = messages[i]!.content;
      break;
    }
  }
  const command = TOOL_COMMAND.exec(userText.trim());
  if (command) {
    const name = command[1]!;
    const json = command[2]?.trim();
    if (json === undefined || json === '') return { toolCalls: [{ name, input: {} }] };
    try {
      return { toolCalls: [{ name, input: JSON.parse(json) }] };
    } catch {
      return { text: `Invalid JSON input for tool ${name}: ${json}` };
    }
  }
  return { text: `You said: ${userText}` };
}
