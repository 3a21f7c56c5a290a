import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { z } from 'zod';
import type { McpTools } from '../../src/agent/mcp.ts';

/** One tool of a test MCP server; `input` is a zod shape, as the MCP SDK's `registerTool` takes it. */
export interface TestMcpTool {
  name: string;
  description?: string;
  input?: Record<string, z.ZodType>;
  annotations?: ToolAnnotations;
  /** `signal` aborts when the client cancels the call (`notifications/cancelled`) or the server closes. */
  handler: (args: Record<string, unknown>, extra: { signal: AbortSignal }) => CallToolResult | Promise<CallToolResult>;
}

export interface TestMcpServer {
  /** The endpoint a template's `connection.url` names (`/mcp` for http, `/sse` for sse). */
  url: string;
  /** Every HTTP request the server received, in order, with its headers. */
  requests: { method: string; path: string; query: string; headers: IncomingHttpHeaders }[];
  /** Every tool call the server ran, in order. */
  calls: { name: string; args: Record<string, unknown> }[];
  /** SSE streams still open (sse only): a closed client leaves none. */
  openStreams(): number;
  close(): Promise<void>;
}

const text = (value: string, isError = false): CallToolResult => ({ content: [{ type: 'text', text: value }], ...(isError ? { isError: true } : {}) });

/**
 * `add` reads (readOnlyHint true), `write_note` writes (readOnlyHint false), `fail` answers with
 * `isError: true`: one tool for each way the client must treat a result or a permission.
 */
export function defaultMcpTools(): TestMcpTool[] {
  return [
    {
      name: 'add',
      description: 'Add two numbers',
      input: { a: z.number(), b: z.number() },
      annotations: { readOnlyHint: true },
      handler: ({ a, b }) => text(String((a as number) + (b as number))),
    },
    {
      name: 'write_note',
      description: 'Store a note',
      input: { text: z.string() },
      annotations: { readOnlyHint: false },
      handler: ({ text: note }) => text(`stored: ${note as string}`),
    },
    {
      name: 'fail',
      description: 'Always fails',
      handler: () => text('the fail tool failed on purpose', true),
    },
  ];
}

/**
 * A real MCP server from the official SDK on a loopback port. `http` is Streamable HTTP in
 * stateless mode (a fresh server per POST, so no session bookkeeping); `sse` is the older
 * HTTP+SSE transport (GET /sse, then POST /messages?sessionId=…). `port` serves on that port: a
 * server closed and started again there is the same server back up.
 */
export async function startMcpServer(options: { tools?: TestMcpTool[]; transport?: 'http' | 'sse'; name?: string; port?: number } = {}): Promise<TestMcpServer> {
  const tools = options.tools ?? defaultMcpTools();
  const kind = options.transport ?? 'http';
  const requests: TestMcpServer['requests'] = [];
  const calls: TestMcpServer['calls'] = [];
  const sseSessions = new Map<string, SSEServerTransport>();
  const open = new Set<{ close(): Promise<void> }>();

  const build = () => {
    const server = new McpServer({ name: options.name ?? 'agentd-test', version: '1.0.0' });
    for (const spec of tools) {
      const handler = async (args: Record<string, unknown>, extra: { signal: AbortSignal }) => {
        calls.push({ name: spec.name, args });
        return spec.handler(args, extra);
      };
      server.registerTool(
        spec.name,
        {
          ...(spec.description ? { description: spec.description } : {}),
          ...(spec.input ? { inputSchema: spec.input } : {}),
          ...(spec.annotations ? { annotations: spec.annotations } : {}),
        },
        // The SDK's callback type depends on the literal shape; ours is only known at run time.
        (spec.input ? (args: Record<string, unknown>, extra: { signal: AbortSignal }) => handler(args, extra) : (extra: { signal: AbortSignal }) => handler({}, extra)) as never,
      );
    }
    return server;
  };

  const fail = (res: ServerResponse, status: number, message: string) => {
    if (!res.headersSent) res.writeHead(status, { 'content-type': 'text/plain' }).end(message);
  };

  const http = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    requests.push({ method: req.method ?? '', path: url.pathname, query: url.search, headers: req.headers });
    void (async () => {
      if (kind === 'http') {
        if (url.pathname !== '/mcp') return fail(res, 404, 'not found');
        // Stateless mode has no standalone stream or session to delete.
        if (req.method !== 'POST') return fail(res, 405, 'method not allowed');
        const server = build();
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
        const entry = { close: () => server.close() };
        open.add(entry);
        res.on('close', () => {
          open.delete(entry);
          void server.close();
        });
        await server.connect(transport);
        await transport.handleRequest(req, res);
        return;
      }
      if (req.method === 'GET' && url.pathname === '/sse') {
        const server = build();
        const transport = new SSEServerTransport('/messages', res);
        sseSessions.set(transport.sessionId, transport);
        const entry = { close: () => server.close() };
        open.add(entry);
        res.on('close', () => {
          open.delete(entry);
          sseSessions.delete(transport.sessionId);
          void server.close();
        });
        await server.connect(transport);
        return;
      }
      if (req.method === 'POST' && url.pathname === '/messages') {
        const transport = sseSessions.get(url.searchParams.get('sessionId') ?? '');
        if (!transport) return fail(res, 404, 'unknown session');
        await transport.handlePostMessage(req, res);
        return;
      }
      fail(res, 404, 'not found');
    })().catch((error: unknown) => fail(res, 500, String(error)));
  });

  await new Promise<void>((resolve) => http.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${kind === 'http' ? '/mcp' : '/sse'}`,
    requests,
    calls,
    openStreams: () => sseSessions.size,
    async close() {
      await Promise.allSettled([...open].map((entry) => entry.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** A JSON-RPC request as a raw server receives it. */
export interface RawRequest {
  id: number | string;
  method: string;
  params?: Record<string, unknown>;
}

/**
 * A Streamable HTTP MCP server written by hand, for what the SDK's server will not do: answers
 * `initialize` (protocol 2025-06-18, tools only) and refuses newer discovery itself; every other
 * request goes to `handle`, which returns the JSON-RPC reply's `result`/`error`, or answers on
 * `res` itself and returns `undefined`. With `handshake: false`, `initialize` goes to `handle` too.
 */
export async function startRawMcpServer(
  handle: (request: RawRequest, res: ServerResponse) => { result: unknown } | { error: { code: number; message: string } } | undefined | Promise<unknown>,
  options: { handshake?: boolean } = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const http = createServer((req, res) => {
    // No standalone stream: the client reads every answer from its POST.
    if (req.method !== 'POST') return void res.writeHead(405).end();
    void (async () => {
      let body = '';
      for await (const chunk of req) body += String(chunk);
      const message = JSON.parse(body) as Partial<RawRequest>;
      if (message.id === undefined) return void res.writeHead(202).end();
      const request = message as RawRequest;
      const reply =
        request.method === 'initialize' && options.handshake !== false
          ? { result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '1.0.0' } } }
          : request.method === 'server/discover'
            ? { error: { code: -32601, message: 'method not found' } }
            : await handle(request, res);
      if (reply) res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: request.id, ...reply }));
    })();
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/**
 * An MCP server that takes the connection and `initialize` and never answers: `asked` resolves
 * when `initialize` comes, `closed` when its connection goes (a client that gave up closed it).
 */
export async function startSilentMcpServer(): Promise<{ url: string; asked: Promise<void>; closed: Promise<void>; close(): Promise<void> }> {
  const asked = Promise.withResolvers<void>();
  const closed = Promise.withResolvers<void>();
  const server = await startRawMcpServer(
    (request, res) => {
      if (request.method !== 'initialize') return { error: { code: -32601, message: 'method not found' } };
      res.on('close', () => closed.resolve());
      asked.resolve();
      return new Promise(() => {});
    },
    { handshake: false },
  );
  return { ...server, asked: asked.promise, closed: closed.promise };
}

/**
 * An `http` and an `sse` test server for a test file's tests, started before them and closed
 * after, and the tools its tests connect (each test pushes them on `opened`), closed after each.
 */
export function mcpServersPerFile(): { servers: { http: TestMcpServer; sse: TestMcpServer }; opened: McpTools[] } {
  const servers = {} as { http: TestMcpServer; sse: TestMcpServer };
  const opened: McpTools[] = [];
  beforeAll(async () => {
    [servers.http, servers.sse] = await Promise.all([startMcpServer({ transport: 'http' }), startMcpServer({ transport: 'sse' })]);
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((m) => m.close()));
  });
  afterAll(async () => {
    await Promise.all([servers.http.close(), servers.sse.close()]);
  });
  return { servers, opened };
}
