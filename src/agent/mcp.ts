import { createHash } from 'node:crypto';
import type { CallToolResult, JSONRPCMessage, ListToolsResult, MCPClient, MCPClientConfig, MCPTransport } from '@ai-sdk/mcp';
import { dynamicTool } from '@ai-sdk/provider-utils';
import type { ToolSet } from 'ai';
import type { McpServer, ToolPermission } from '../contract/template.ts';
import { AppError, isAppError } from '../errors.ts';
import { bodyText, callFailure, connectFailure, noteUnreadable, type Answers, type HttpAnswer } from './mcp-failure.ts';
import { answerOneAtATime } from './mcp-answers.ts';
import { McpAddresses, refusalIn, refusedAt, refuseMcpAddresses } from './mcp-address.ts';
import { cancelAbandonedCalls } from './mcp-cancel.ts';
import { ToolListing, type ToolFault } from './mcp-listing.ts';
import { ToolError } from './tools/tool-error.ts';
import { own } from '../objects.ts';
import { secretForms } from '../telemetry/redact.ts';

/**
 * The template's MCP servers (`data.parameters.agent.mcps`) as AI SDK tools for one turn.
 *
 * Naming: a server's tool `t` is offered to the model as `<server>__<t>`. Provider tool names are
 * `^[A-Za-z0-9_-]{1,64}$` (the same rule as the template's client tools), while MCP server and tool
 * names may carry `.` and run to 128 characters; when `<server>__<t>` breaks the rule, every other
 * character becomes `_`, it is cut to fit, and `_<8 hex of sha256(server NUL tool)>` keeps it
 * unique. The name depends only on the two names, so a tool keeps it across turns and a
 * conversation's earlier calls still match. Two tools that still land on one name are a 400.
 */
export interface McpTools {
  tools: ToolSet;
  /** Tool names whose MCP annotations say `readOnlyHint: true`: reads, for `allow_reads`. */
  readOnly: ReadonlySet<string>;
  /** The server's `policy.permission`, for each of its tools, where the template sets one. */
  permissions: ReadonlyMap<string, ToolPermission>;
  /** Closes every client; safe to call more than once. */
  close(): Promise<void>;
}

export interface ConnectOptions {
  /** The request's `credentials`, sent as a bearer token to servers with `forward_credentials`. */
  credentials?: string | undefined;
  /** The request's `secrets`, which a server's url and header values name as `{{secrets.NAME}}`. */
  secrets?: Readonly<Record<string, string>> | undefined;
  /** Whether `stdio` servers may be spawned (AGENTD_ALLOW_STDIO_MCP). */
  allowStdio: boolean;
  /** Where HTTP and SSE servers may be (AGENTD_MCP_ALLOWED_HOSTS); by default anywhere but link-local and cloud metadata addresses. */
  addresses?: McpAddresses | undefined;
  /** Deadline for connecting to a server and listing its tools; servers connect in parallel. */
  timeoutMs: number;
  /** Deadline for one tool call; without it only the turn's abort signal ends a call. */
  callTimeoutMs?: number | undefined;
  /** Working folder of `stdio` servers: the session folder. */
  cwd?: string | undefined;
  signal?: AbortSignal | undefined;
}

const WHERE = 'data.parameters.agent.mcps';
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** A tool result is capped as `read`'s is: a server's 20 MB answer would otherwise go whole to the model, the stream and the store. */
export const MCP_MAX_OUTPUT_BYTES = 256 * 1024;

function capped(text: string): string {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= MCP_MAX_OUTPUT_BYTES) return text;
  // A cut inside a character is dropped by the decoder's replacement, not shown as half a character.
  const head = Buffer.from(text, 'utf8').subarray(0, MCP_MAX_OUTPUT_BYTES).toString('utf8').replace(/\uFFFD$/, '');
  return `${head}\n[output truncated: showed the first ${Buffer.byteLength(head, 'utf8')} of ${bytes} bytes]`;
}

const ANYWHERE_BUT_METADATA = new McpAddresses(undefined);

function addressesOf(opts: ConnectOptions): McpAddresses {
  return opts.addresses ?? ANYWHERE_BUT_METADATA;
}

export function mcpToolName(server: string, tool: string): string {
  const plain = `${server}__${tool}`;
  if (TOOL_NAME.test(plain)) return plain;
  const hash = createHash('sha256').update(`${server}\0${tool}`).digest('hex').slice(0, 8);
  return `${plain.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64 - hash.length - 1)}_${hash}`;
}

/**
 * Connects to every server, lists its tools and wraps them. A server that cannot be reached in
 * `timeoutMs`, answers as no MCP server does, fails the handshake or lists a tool the template
 * keeps that no provider takes is a 424 `mcp-unavailable` (mcp-failure.ts says which); a template
 * that asks for something a server cannot give is a 400. The caller's signal ends the attempt at
 * once. Either way nothing stays open.
 */
export async function connectMcpServers(templateServers: readonly McpServer[], opts: ConnectOptions): Promise<McpTools> {
  checkTemplate(templateServers, opts);
  const servers = withMcpSecrets(templateServers, opts.secrets ?? {});
  refuseMcpAddresses(servers, templateServers, addressesOf(opts));
  opts.signal?.throwIfAborted();
  if (servers.length === 0) return { tools: {}, readOnly: new Set(), permissions: new Map(), close: async () => {} };

  // One failure makes the others pointless: stop them instead of waiting out their deadlines.
  const siblings = new AbortController();
  const settled = await Promise.allSettled(
    servers.map((server, i) =>
      connectOne(server, templateServers[i]!, i, opts, siblings.signal).catch((error: unknown) => {
        siblings.abort();
        throw error;
      }),
    ),
  );
  const connected = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const closeAll = once(() => Promise.all(connected.map((c) => closeClient(c.client, opts.timeoutMs))).then(() => {}));
  const failures = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason as unknown] : []));
  if (failures.length > 0) {
    // A stopped turn ends now: a server may take up to the deadline to acknowledge its close.
    if (opts.signal?.aborted) {
      void closeAll();
      throw opts.signal.reason;
    }
    await closeAll();
    throw failures.find((f) => f !== SIBLING_FAILED) ?? failures[0];
  }

  try {
    return { ...assemble(servers, connected, opts), close: closeAll };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

function checkTemplate(servers: readonly McpServer[], opts: ConnectOptions): void {
  const seen = new Map<string, number>();
  for (const [i, server] of servers.entries()) {
    const first = seen.get(server.name);
    if (first !== undefined) {
      throw new AppError('invalid-request', `${WHERE}[${i}].name: "${server.name}" is already the name of ${WHERE}[${first}]; MCP server names must be unique`);
    }
    seen.set(server.name, i);
    if (server.connection.type === 'stdio' && !opts.allowStdio) {
      throw new AppError(
        'invalid-request',
        `${WHERE}[${i}].connection: stdio MCP servers are disabled on this server (they run a command on its host); the operator must set AGENTD_ALLOW_STDIO_MCP=1 to allow them`,
      );
    }
    if (server.connection.type !== 'stdio' && /^[a-z]+:\/\/[^/]*@/i.test(server.connection.url)) {
      // fetch refuses such URLs anyway; saying so here keeps the password out of every message.
      throw new AppError('invalid-request', `${WHERE}[${i}].connection.url must not carry a user name or password; send credentials in connection.headers`);
    }
    const filter = server.policy?.tools;
    if (filter?.mode === 'include' && filter.names === undefined) {
      throw new AppError('invalid-request', `${WHERE}[${i}].policy.tools.names is required when mode is "include"`);
    }
  }
}

const SECRET_REFERENCE = /\{\{\s*secrets\.([A-Za-z0-9_.-]+)\s*\}\}/g;

/**
 * The server with each `{{secrets.NAME}}` in its url and header values replaced by the request's
 * secret of that name, so a stored template need not hold the token. Like every secret of a run,
 * the values are kept out of what the turn records and of error messages.
 */
function withSecrets(server: McpServer, i: number, secrets: Readonly<Record<string, string>>): McpServer {
  const connection = server.connection;
  if (connection.type === 'stdio') return server;
  const fill = (text: string, where: string) =>
    text.replace(SECRET_REFERENCE, (_, name: string) => {
      const value = own(secrets, name);
      if (value === undefined) {
        throw new AppError('invalid-request', `${WHERE}[${i}].connection.${where} names the secret "${name}", which the request does not carry; send it in secrets.${name}`);
      }
      return value;
    });
  const headers = connection.headers && Object.fromEntries(Object.entries(connection.headers).map(([name, value]) => [name, fill(value, `headers.${name}`)]));
  return { ...server, connection: { ...connection, url: fill(connection.url, 'url'), ...(headers ? { headers } : {}) } };
}

/** Every server with the request's secrets filled in; a 400 naming the first secret the request lacks. */
export function withMcpSecrets(servers: readonly McpServer[], secrets: Readonly<Record<string, string>>): McpServer[] {
  return servers.map((server, i) => withSecrets(server, i, secrets));
}

interface Connected {
  client: MCPClient;
  listing: ListToolsResult['tools'];
  /** Tools of its listing that cannot be offered: refused when the template keeps one. */
  faults: ToolFault[];
}

const SIBLING_FAILED = Symbol('another MCP server failed');

async function connectOne(server: McpServer, template: McpServer, index: number, opts: ConnectOptions, siblings: AbortSignal): Promise<Connected> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), opts.timeoutMs);
  const signal = AbortSignal.any([deadline.signal, siblings, ...(opts.signal ? [opts.signal] : [])]);
  const answers: Answers = { odd: undefined, unreadable: false };
  let client: MCPClient | undefined;
  let stage: 'connect' | 'list' = 'connect';
  const work = (async () => {
    // Loaded with the first MCP server a turn uses, as the stdio transport is (below): 1–2 MB of heap a server without any keeps.
    const { createMCPClient } = await import('@ai-sdk/mcp');
    client = await createMCPClient({
      transport: await transportFor(server, opts, answers),
      clientName: 'agentd',
      initializationOptions: { signal },
      // Where the SDK reports what it could not read (a stdio server's log lines), not to the request
      // left waiting: noted, for the message of the failure that follows.
      onUncaughtError: (error) => noteUnreadable(answers, error),
    });
    answerOneAtATime(transportOf(client));
    stage = 'list';
    if (!client.initializeResult.capabilities.tools) {
      throw new AppError('mcp-unavailable', `${serverAt(server, opts)} offers no tools (its answer to the MCP handshake declares no "tools" capability): take it out of ${WHERE}[${index}]`);
    }
    const listed = await listAllTools(client, server, opts, signal);
    cancelAbandonedCalls(transportOf(client));
    return listed;
  })();
  try {
    // The client honours the signal on its own, but a transport that ignores it must not hang us.
    const { listing, faults } = await raceAbort(work, signal);
    return { client: client!, listing, faults };
  } catch (error) {
    // A client that connects after we gave up would otherwise stay open for good.
    void work.then(
      () => client && closeClient(client, opts.timeoutMs),
      () => client && closeClient(client, opts.timeoutMs),
    );
    if (opts.signal?.aborted) throw opts.signal.reason;
    if (siblings.aborted && !deadline.signal.aborted) throw SIBLING_FAILED;
    if (isAppError(error)) throw error;
    const refused = refusalIn(error);
    if (refused) throw refusedAt(index, scrub(refused.message, secretsOf(server, opts)));
    // No `cause`: the raw error quotes the URL, and causes end up in debug stack traces.
    throw connectFailure({
      name: server.name,
      endpoint: endpointFor(server, opts),
      stdio: server.connection.type === 'stdio',
      stage,
      error,
      timedOutAfter: deadline.signal.aborted ? opts.timeoutMs : undefined,
      answers,
      credentials: credentialsSent(template, opts),
      mask: (text) => scrub(text, secretsOf(server, opts)),
    });
  } finally {
    clearTimeout(timer);
  }
}

function serverAt(server: McpServer, opts: ConnectOptions): string {
  return `MCP server "${server.name}" at ${endpointFor(server, opts)}`;
}

/** The server's address for a message, masked. */
function endpointFor(server: McpServer, opts: ConnectOptions): string {
  // The whole URL is on the list for errors that quote it; the address, cut before its query
  // string, is that URL too whenever it has none, and scrubbing it whole would name no server.
  const whole = urlForms(server);
  return scrub(endpointOf(server), secretsOf(server, opts).filter((s) => !whole.includes(s)));
}

/**
 * The credentials agentd sends a server, by name and never by value, for a server that refuses
 * them: the template's headers (and the request secrets they are filled from), the request's
 * forwarded credentials.
 */
function credentialsSent(server: McpServer, opts: ConnectOptions): string {
  const connection = server.connection;
  if (connection.type === 'stdio') return '';
  const forwarded = connection.forward_credentials === true && opts.credentials !== undefined;
  const from = (text: string) => {
    const names = [...text.matchAll(SECRET_REFERENCE)].map((m) => `secrets.${m[1]}`);
    return names.length > 0 ? ` (from ${names.join(', ')})` : '';
  };
  const sent = Object.entries(connection.headers ?? {})
    // A forwarded token replaces the template's own Authorization header (transportFor).
    .filter(([name]) => !(forwarded && name.toLowerCase() === 'authorization'))
    .map(([name, value]) => `the header "${name}"${from(value)}`);
  if (forwarded) sent.push("the request's credentials, as Authorization (forward_credentials)");
  if (from(connection.url)) sent.push(`its URL${from(connection.url)}`);
  const unforwarded = connection.forward_credentials && !forwarded ? '; forward_credentials is set, but the request carried no credentials to forward' : '';
  if (sent.length === 0) {
    return `agentd sent none${unforwarded || ": set connection.headers (a value may name a request secret as {{secrets.NAME}}), or forward_credentials to send the request's credentials"}`;
  }
  return `agentd sent ${sent.join(', ')}; check ${sent.length > 1 ? 'their values' : 'its value'}${unforwarded}`;
}

async function transportFor(server: McpServer, opts: ConnectOptions, answers: Answers): Promise<MCPClientConfig['transport']> {
  const connection = server.connection;
  if (connection.type === 'stdio') {
    const { StdioMCPTransport } = await import('@ai-sdk/mcp/mcp-stdio');
    // The child gets the SDK's minimal environment (PATH, HOME, …), never the server's API keys;
    // its stderr is dropped so it cannot flood or forge the server's log.
    return new StdioMCPTransport({
      command: connection.command,
      ...(connection.args ? { args: connection.args } : {}),
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      stderr: 'ignore',
    });
  }
  const headers = { ...connection.headers };
  if (connection.forward_credentials && opts.credentials) {
    // A template's own Authorization header would be sent alongside ours, as one merged value.
    for (const key of Object.keys(headers)) if (key.toLowerCase() === 'authorization') delete headers[key];
    headers.authorization = `Bearer ${opts.credentials}`;
  }
  // 'error' is the SDK's default too; spelled out because following a redirect would carry the
  // bearer token to wherever the server points.
  return { type: connection.type, url: connection.url, headers, redirect: 'error', fetch: answeringFetch(connection.type, answers, addressesOf(opts).dispatcherFor()) };
}

/**
 * fetch for one server's transport, for what the SDK leaves open:
 *
 * - It waits for a request's answer until the call's deadline (AGENTD_MCP_CALL_TIMEOUT_MS, two
 *   minutes by default) even once the event stream that was to carry it has ended, closed or cut
 *   off: so when one ends, an error answer is added at its end for each request it may have owed
 *   (the request of a Streamable HTTP POST; every request sent, for the stream of an `sse`
 *   server). An answer that already came makes its added one an answer to nothing, which the SDK
 *   drops.
 * - It reads a message whole however large, before any cap on a tool's output applies: a server
 *   sending gigabytes would fill the heap of a server every project shares. A message (a JSON
 *   body, an event of a stream) past MCP_MAX_MESSAGE_BYTES ends its stream the same way, its
 *   answer an error that says so.
 * - Its errors say what went wrong in its own words, an HTTP error's whole body included: so the
 *   answer to the request sent last is noted in `answers` when no MCP client can read it (an
 *   HTTP error, a redirect, a web page), for a failure to say what the server answered instead.
 */
function answeringFetch(type: 'http' | 'sse', answers: Answers, dispatcher: object | undefined): typeof fetch {
  const sent = new Set<string | number>();
  return async (input, init) => {
    const id = requestId(init);
    // A request that asks for an answer (http's optional GET stream and a closing DELETE do not);
    // for an `sse` server, its stream's GET too. A failure is the last one's.
    const asks = id !== undefined || (type === 'sse' && (init?.method ?? 'GET') === 'GET');
    if (asks) answers.odd = undefined;
    // Refused as the SDK asks, but seen first, so the refusal can name it.
    const refuse = init?.redirect === 'error';
    // Node's fetch takes undici's `dispatcher`, which the DOM's RequestInit does not name.
    let response = await fetch(input, { ...init, ...(refuse ? { redirect: 'manual' } : {}), ...(dispatcher ? { dispatcher } : {}) } as RequestInit);
    if (refuse && response.status >= 300 && response.status < 400) {
      void response.body?.cancel().catch(() => undefined);
      if (asks) answers.odd = { status: response.status, contentType: '' };
      throw new TypeError(`the server answered HTTP ${response.status}, a redirect, which is not followed`);
    }
    if (asks) response = await noted(response, type === 'sse' ? (init?.method === 'POST' ? undefined : 'text/event-stream') : 'application/json or text/event-stream', answers);
    if (id !== undefined) sent.add(id);
    const body = response.body;
    if (!body) return response;
    const events = response.headers.get('content-type')?.includes('text/event-stream') === true;
    const owed = () => (init?.method === 'POST' ? (id === undefined ? [] : [id]) : [...sent]);
    const reader = body.getReader();
    let cancelled = false;
    /** Bytes of the message being read: since the last event's end, or of the whole body. */
    let message = 0;
    let before: number[] = [];
    const answered = new ReadableStream<Uint8Array>({
      async pull(controller) {
        let why = ENDED;
        let failure: unknown;
        try {
          const { done, value } = await reader.read();
          if (!done) {
            const end = events ? lastEventEnd(value, before) : -1;
            message = end === -1 ? message + value.length : value.length - end;
            before = [...before, ...value.subarray(-2)].slice(-2);
            if (message <= MCP_MAX_MESSAGE_BYTES) return controller.enqueue(value);
            why = TOO_LARGE;
            failure = new Error(TOO_LARGE);
            void reader.cancel().catch(() => undefined);
          }
        } catch (error) {
          // Cut off: a stream is told below, as an end is.
          failure = error;
        }
        // Closed by the client itself: nobody reads on.
        if (cancelled) return;
        if (!events) {
          // A JSON body is read whole by the SDK: its failure, with its reason, is the call's.
          if (failure === undefined) controller.close();
          else controller.error(failure);
          return;
        }
        // The blank line ends an event the server broke off mid-way, so ours is read on its own.
        const errors = owed().map((owedId) => `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: owedId, error: { code: -32000, message: why } })}\n\n`);
        controller.enqueue(new TextEncoder().encode(`\n\n${errors.join('')}`));
        controller.close();
      },
      cancel: (reason) => {
        cancelled = true;
        return reader.cancel(reason);
      },
    });
    return new Response(answered, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/** Enough of an HTTP error's body for its reason; the rest is not read. */
const MAX_ERROR_BODY = 64 * 1024;

/**
 * The response, noted in `answers` when no MCP client can read it: an HTTP error (whose body is
 * read here, its start kept as the reason), or content of a type other than `expected`.
 */
async function noted(response: Response, expected: string | undefined, answers: Answers): Promise<Response> {
  const contentType = response.headers.get('content-type') ?? '';
  if (response.ok) {
    // 202 answers a notification; a request's answer then comes on a stream.
    if (expected && response.status !== 202 && !expected.split(' or ').some((t) => contentType.includes(t))) answers.odd = { status: response.status, contentType, expected };
    return response;
  }
  const body = await headOf(response, MAX_ERROR_BODY);
  const text = bodyText(body, contentType);
  answers.odd = { status: response.status, contentType, ...(text ? { text } : {}) } satisfies HttpAnswer;
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** The first `max` bytes of a body, as text; the rest is not waited for. */
async function headOf(response: Response, max: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < max) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } catch {
    // Cut off: what came says enough.
  } finally {
    void reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).subarray(0, max).toString('utf8');
}

/** Far above any tool listing or answer a model could use (its output is cut to MCP_MAX_OUTPUT_BYTES anyway). */
export const MCP_MAX_MESSAGE_BYTES = 32 * 1024 * 1024;
const TOO_LARGE = `the server sent a message of more than ${MCP_MAX_MESSAGE_BYTES / 1024 / 1024} MB`;

/**
 * Where the last event of `chunk` ends (just past its blank line), or -1 when none ends in it.
 * `before` holds the last two bytes read before it: a blank line may begin in the chunk before.
 */
function lastEventEnd(chunk: Uint8Array, before: readonly number[]): number {
  const at = (i: number) => (i >= 0 ? chunk[i] : before[before.length + i]);
  for (let i = chunk.length - 1; i >= 0; i--) if (chunk[i] === 10 && (at(i - 1) === 10 || (at(i - 1) === 13 && at(i - 2) === 10))) return i + 1;
  return -1;
}

const ENDED = 'the server closed the connection before it answered';

function requestId(init: RequestInit | undefined): string | number | undefined {
  if (init?.method !== 'POST' || typeof init.body !== 'string') return undefined;
  try {
    const message = JSON.parse(init.body) as { id?: unknown; method?: unknown };
    return typeof message.method === 'string' && (typeof message.id === 'number' || typeof message.id === 'string') ? message.id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A listing longer than this is a server paging without end (a `nextCursor` on every page): read
 * to the deadline, it would fill the heap and then be reported as a server that never answered.
 */
export const MCP_MAX_TOOL_PAGES = 100;
export const MCP_MAX_TOOLS = 10_000;

async function listAllTools(client: MCPClient, server: McpServer, opts: ConnectOptions, signal: AbortSignal): Promise<{ listing: ListToolsResult['tools']; faults: ToolFault[] }> {
  const check = new ToolListing(MCP_MAX_TOOLS);
  let malformed: string | undefined;
  const transport = transportOf(client);
  const deliver = transport.onmessage!;
  // Every answer that comes while the listing is read answers tools/list: nothing else is asked meanwhile.
  transport.onmessage = (message) => {
    if (!('result' in message)) return deliver(message);
    const page = check.page(message.result);
    if (typeof page !== 'string') return deliver({ ...message, result: page } as JSONRPCMessage);
    malformed = page;
    // Refused here: the SDK would validate every tool of a page agentd is about to refuse anyway.
    deliver({ jsonrpc: '2.0', id: message.id, error: { code: -32000, message: page } });
  };
  const tools: ListToolsResult['tools'] = [];
  let cursor: string | undefined;
  let pages = 0;
  try {
    do {
      const page = await client.listTools({ ...(cursor ? { params: { cursor } } : {}), options: { signal } }).catch((error: unknown) => {
        if (malformed === undefined) throw error;
        throw new AppError('mcp-unavailable', `${serverAt(server, opts)} answered tools/list ${malformed}: see the server's logs`);
      });
      tools.push(...page.tools);
      cursor = page.nextCursor ?? undefined;
      if (cursor && (++pages >= MCP_MAX_TOOL_PAGES || tools.length >= MCP_MAX_TOOLS)) {
        throw new AppError(
          'mcp-unavailable',
          `${serverAt(server, opts)} lists tools without end: its tools/list did not end within ${MCP_MAX_TOOL_PAGES} pages or ${MCP_MAX_TOOLS} tools (a "nextCursor" on every page); see the server's logs`,
        );
      }
    } while (cursor);
  } finally {
    transport.onmessage = deliver;
  }
  return { listing: tools, faults: check.faults };
}

/**
 * The transport the SDK made for `client` from its config. The SDK offers no hook between a
 * message's arrival and its validation, which refuses a whole tool listing over one tool it
 * cannot read; the transport's `onmessage`, which it sets to its own handler, is that place.
 * test/mcp/connect.test.ts ("listings the SDK would refuse whole") holds an SDK update to it.
 */
function transportOf(client: MCPClient): MCPTransport {
  const transport = (client as unknown as { transport?: MCPTransport }).transport;
  if (typeof transport?.onmessage !== 'function') throw new Error('@ai-sdk/mcp no longer keeps its transport where transportOf (src/agent/mcp.ts) reads it');
  return transport;
}

function assemble(servers: readonly McpServer[], connected: Connected[], opts: ConnectOptions): Omit<McpTools, 'close'> {
  const tools: ToolSet = {};
  const readOnly = new Set<string>();
  const permissions = new Map<string, ToolPermission>();
  const origin = new Map<string, string>();
  for (const [i, server] of servers.entries()) {
    const { client, listing, faults } = connected[i]!;
    const secrets = secretsOf(server, opts);
    // The SDK turns each listed tool's JSON Schema into an input schema; a tool it drops (bad
    // header bindings on the newest protocol) does not exist for us either.
    const built = client.toolsFromDefinitions({ tools: listing });
    const available = listing.filter((t) => Object.hasOwn(built, t.name));
    const filter = server.policy?.tools;
    let chosen = available;
    // A tool the template leaves out may be as broken as it likes.
    let refused = faults;
    if (filter?.mode === 'include') {
      const wanted = new Set(filter.names);
      refused = faults.filter((f) => f.name !== undefined && wanted.has(f.name));
      const missing = [...wanted].filter((name) => !available.some((t) => t.name === name) && !refused.some((f) => f.name === name));
      if (missing.length > 0) {
        throw new AppError(
          'invalid-request',
          `${WHERE}[${i}].policy.tools.names: MCP server "${server.name}" has no tool ${missing.map((n) => `"${n}"`).join(', ')}; it has ${available.map((t) => `"${t.name}"`).join(', ') || 'none'}`,
        );
      }
      chosen = available.filter((t) => wanted.has(t.name));
    }
    const fault = refused[0];
    if (fault) throw faultyTool(server, i, fault);
    for (const definition of chosen) {
      const name = mcpToolName(server.name, definition.name);
      const clash = origin.get(name);
      if (clash !== undefined) {
        throw new AppError('invalid-request', `${WHERE}[${i}]: the tool "${definition.name}" of MCP server "${server.name}" would be named "${name}", like ${clash}; rename one server`);
      }
      origin.set(name, `the tool "${definition.name}" of MCP server "${server.name}"`);
      const base = built[definition.name]!;
      tools[name] = dynamicTool({
        ...(base.description !== undefined ? { description: base.description } : {}),
        inputSchema: base.inputSchema,
        metadata: { ...base.metadata, server: server.name },
        execute: (input, options) => callTool(client, server, secrets, definition.name, input, options.abortSignal, opts.callTimeoutMs),
      });
      // Hints are the server's word; the template author chose to trust this server.
      if (definition.annotations?.readOnlyHint === true) readOnly.add(name);
      if (server.policy?.permission) permissions.set(name, server.policy.permission);
    }
  }
  return { tools, readOnly, permissions };
}

/** A 424 for a tool the template keeps that cannot be offered, in the words of the input schema refusals. */
function faultyTool(server: McpServer, i: number, fault: ToolFault): AppError {
  const leave =
    fault.name === undefined
      ? `leave it out with ${WHERE}[${i}].policy.tools, mode "include" naming the tools to keep`
      : `leave the tool out with ${WHERE}[${i}].policy.tools`;
  const tool = fault.name === undefined ? `a tool (entry ${fault.index} of its tools/list)` : `the tool "${fault.name}"`;
  return new AppError('mcp-unavailable', `MCP server "${server.name}" lists ${tool} ${fault.why}; ${leave}`);
}

async function callTool(client: MCPClient, server: McpServer, secrets: string[], tool: string, input: unknown, signal: AbortSignal | undefined, timeout: number | undefined): Promise<string> {
  let result: CallToolResult;
  try {
    result = await client.callTool({
      name: tool,
      arguments: (input ?? {}) as Record<string, unknown>,
      options: { ...(signal ? { signal } : {}), ...(timeout ? { timeout } : {}) },
    });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw new ToolError(`MCP server "${server.name}" could not run "${tool}": ${callFailure(error, (text) => scrub(text, secrets))}`);
  }
  const text = capped(resultText(result));
  // Thrown so the AI SDK reports a tool error: the model must see the call failed.
  if ('isError' in result && result.isError) throw new ToolError(text || `the MCP tool "${tool}" reported an error without a message`);
  return text;
}

/**
 * The result as the text a native tool message carries. Binary content is described, not
 * inlined: base64 in a transcript costs tokens and tells the model nothing.
 */
function resultText(result: CallToolResult): string {
  if ('toolResult' in result) return typeof result.toolResult === 'string' ? result.toolResult : JSON.stringify(result.toolResult);
  const content = result.content ?? [];
  if (content.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return content
    .map((part) => {
      const p = part as Record<string, unknown> & { type: string };
      if (p.type === 'text' && typeof p.text === 'string') return p.text;
      if (p.type === 'resource') {
        const resource = p.resource as { uri?: string; text?: string; mimeType?: string };
        if (typeof resource.text === 'string') return resource.text;
        return `[resource ${resource.uri ?? ''}${resource.mimeType ? ` (${resource.mimeType})` : ''}: binary content not shown]`;
      }
      if (p.type === 'resource_link') return `[resource link ${String(p.uri)}${p.name ? ` "${String(p.name)}"` : ''}]`;
      return `[${p.type}${typeof p.mimeType === 'string' ? ` (${p.mimeType})` : ''} content not shown]`;
    })
    .join('\n');
}

/** Where a server is, for messages: no userinfo, no query string (either may hold a secret). */
function endpointOf(server: McpServer): string {
  const connection = server.connection;
  if (connection.type === 'stdio') return `command "${connection.command}"`;
  try {
    const url = new URL(connection.url);
    return `${url.origin}${url.pathname}`;
  } catch {
    return 'its URL';
  }
}

/**
 * What must not reach a message: transport errors quote the URL (query strings carry API keys),
 * and a server may echo a header back in its error body.
 */
function secretsOf(server: McpServer, opts: ConnectOptions): string[] {
  const connection = server.connection;
  if (connection.type === 'stdio') return [];
  // Short header values are flags and content types, and would blot out ordinary words. A server
  // that refuses `Bearer <token>` tends to quote the token alone, as one refusing `?key=<token>`
  // quotes the key: each is masked on its own too.
  const headerValues = Object.values(connection.headers ?? {});
  const tokens = headerValues.map((v) => /^[A-Za-z][\w.+-]*\s+(\S+)$/.exec(v)?.[1]).filter((v) => v !== undefined);
  const secrets = [...urlForms(server), ...[...headerValues, ...tokens].filter((v) => v.length >= 8)];
  // The request's secrets that the url or a header was filled with, short ones too (not a letter or
  // two), and as the URL carries them: a value with a space or a quote in it reaches the server,
  // and its errors, percent-encoded.
  for (const value of Object.values(opts.secrets ?? {})) {
    if (value.length >= 4 && [connection.url, ...headerValues].some((text) => text.includes(value))) secrets.push(...secretForms(value));
  }
  try {
    const url = new URL(connection.url);
    if (url.search) secrets.push(url.search.slice(1));
    for (const value of url.searchParams.values()) if (value.length >= 8) secrets.push(...secretForms(value));
  } catch {
    // Not a URL: nothing more to hide.
  }
  if (connection.forward_credentials && opts.credentials) secrets.push(opts.credentials);
  return secrets.filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
}

/** A remote server's URL as given and as parsed (`http://h` reads back as `http://h/`). */
function urlForms(server: McpServer): string[] {
  const connection = server.connection;
  if (connection.type === 'stdio') return [];
  return URL.canParse(connection.url) ? [connection.url, new URL(connection.url).href] : [connection.url];
}

function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) out = out.split(secret).join('[redacted]');
  return out;
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** Closing sends a DELETE to a Streamable HTTP server; a server that hangs must not hold us. */
async function closeClient(client: MCPClient, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    client.close().catch(() => {}),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    }),
  ]);
  clearTimeout(timer);
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn());
}
