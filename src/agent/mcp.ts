import type { MCPClient } from '@ai-sdk/mcp';
import type { McpServer } from '../contract/template.ts';
import { AppError, isAppError } from '../errors.ts';
import { connectFailure, noteUnreadable, type Answers } from './mcp-failure.ts';
import { answerOneAtATime } from './mcp-answers.ts';
import { McpAddresses, refusalIn, refusedAt, refuseMcpAddresses } from './mcp-address.ts';
import { cancelAbandonedCalls } from './mcp-cancel.ts';
import { listAllTools } from './mcp-listing.ts';
import { credentialsSent, endpointFor, secretsOf, withMcpSecrets, type RequestSecrets } from './mcp-secrets.ts';
import { checkTemplate, MCP_WHERE } from './mcp-template.ts';
import { offeredTools, type ConnectedServer, type OfferedTools } from './mcp-tools.ts';
import { transportFor, transportOf } from './mcp-transport.ts';
import { maskIn } from '../telemetry/redact.ts';
import { within } from '../within.ts';

/**
 * The template's MCP servers (`data.parameters.agent.mcps`) as AI SDK tools for one turn
 * (mcp-tools.ts names and calls them).
 */
export interface McpTools extends OfferedTools {
  /** Closes every client; safe to call more than once. */
  close(): Promise<void>;
}

export interface ConnectOptions extends RequestSecrets {
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

const ANYWHERE_BUT_METADATA = new McpAddresses(undefined);

function addressesOf(opts: ConnectOptions): McpAddresses {
  return opts.addresses ?? ANYWHERE_BUT_METADATA;
}

/**
 * Connects to every server, lists its tools and wraps them. A server that cannot be reached in
 * `timeoutMs`, answers as no MCP server does, fails the handshake or lists a tool the template
 * keeps that no provider takes is a 424 `mcp-unavailable` (mcp-failure.ts says which); a template
 * that asks for something a server cannot give is a 400. The caller's signal ends the attempt at
 * once. Either way nothing stays open.
 */
export async function connectMcpServers(templateServers: readonly McpServer[], opts: ConnectOptions): Promise<McpTools> {
  checkTemplate(templateServers, opts.allowStdio);
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
    return { ...offeredTools(servers, connected, opts), close: closeAll };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

const SIBLING_FAILED = Symbol('another MCP server failed');

async function connectOne(server: McpServer, template: McpServer, index: number, opts: ConnectOptions, siblings: AbortSignal): Promise<ConnectedServer> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), opts.timeoutMs);
  const signal = AbortSignal.any([deadline.signal, siblings, ...(opts.signal ? [opts.signal] : [])]);
  const answers: Answers = { odd: undefined, unreadable: false };
  let client: MCPClient | undefined;
  let stage: 'connect' | 'list' = 'connect';
  const work = (async () => {
    // Loaded with the first MCP server a turn uses, as the stdio transport is (mcp-transport.ts): 1–2 MB of heap a server without any keeps.
    const { createMCPClient } = await import('@ai-sdk/mcp');
    client = await createMCPClient({
      transport: await transportFor(server, opts, addressesOf(opts), answers),
      clientName: 'agentd',
      initializationOptions: { signal },
      // Where the SDK reports what it could not read (a stdio server's log lines), not to the request
      // left waiting: noted, for the message of the failure that follows.
      onUncaughtError: (error) => noteUnreadable(answers, error),
    });
    answerOneAtATime(transportOf(client));
    stage = 'list';
    if (!client.initializeResult.capabilities.tools) {
      throw new AppError('mcp-unavailable', `${serverAt(server, opts)} offers no tools (its answer to the MCP handshake declares no "tools" capability): take it out of ${MCP_WHERE}[${index}]`);
    }
    const listed = await listAllTools(client, () => serverAt(server, opts), signal);
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
    if (refused) throw refusedAt(index, maskIn(secretsOf(server, opts), refused.message));
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
      mask: (text) => maskIn(secretsOf(server, opts), text),
    });
  } finally {
    clearTimeout(timer);
  }
}

function serverAt(server: McpServer, opts: ConnectOptions): string {
  return `MCP server "${server.name}" at ${endpointFor(server, opts)}`;
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
  await within(client.close().catch(() => {}), timeoutMs);
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn());
}
