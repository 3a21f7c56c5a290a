import { createServer as createHttpServer, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket, type AddressInfo } from 'node:net';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ToolSet } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { connectMcpServers, type ConnectOptions, type McpTools } from '../../src/agent/mcp.ts';
import { MCP_MAX_MESSAGE_BYTES } from '../../src/agent/mcp-fetch.ts';
import { MCP_MAX_TOOL_PAGES, MCP_MAX_TOOLS } from '../../src/agent/mcp-listing.ts';
import { mcpToolName } from '../../src/agent/mcp-tools.ts';
import type { McpServer } from '../../src/contract/template.ts';
import { AppError } from '../../src/errors.ts';
import { defaultMcpTools, mcpServersPerFile, startMcpServer, startRawMcpServer, type TestMcpServer } from '../support/mcp-server.ts';

/** design.md §4: a template's `mcps[]` become the agent's tools, named `<server>__<tool>`. */

// Deadlines longer than the test timeout: a test that waited for one would fail by timing out.
const OPTS: ConnectOptions = { allowStdio: false, timeoutMs: 60_000 };

const { servers, opened } = mcpServersPerFile();

function server(name: string, url: string, extra: Partial<McpServer> & { type?: 'http' | 'sse'; headers?: Record<string, string>; forward?: boolean } = {}): McpServer {
  const { type = 'http', headers, forward, ...rest } = extra;
  return {
    name,
    connection: { type, url, ...(headers ? { headers } : {}), ...(forward !== undefined ? { forward_credentials: forward } : {}) },
    ...rest,
  };
}

async function connect(servers: McpServer[], opts: Partial<ConnectOptions> = {}): Promise<McpTools> {
  const mcp = await connectMcpServers(servers, { ...OPTS, ...opts });
  opened.push(mcp);
  return mcp;
}

function run(tools: ToolSet, name: string, input: unknown): Promise<unknown> {
  const tool = tools[name];
  if (!tool?.execute) throw new Error(`no executable tool ${name}`);
  return Promise.resolve(tool.execute(input as never, { toolCallId: 'call-1', messages: [], context: {} } as never));
}

async function failure(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

/** A TCP server that accepts connections and never says a word. */
async function silentServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const tcp: TcpServer = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  const { port } = tcp.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
    },
  };
}

async function plainHttp(handler: Parameters<typeof createHttpServer>[1]): Promise<{ url: string; server: HttpServer; close(): Promise<void> }> {
  const server = createHttpServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function freePort(): Promise<number> {
  const tcp = createTcpServer();
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  const { port } = tcp.address() as AddressInfo;
  await new Promise<void>((resolve) => tcp.close(() => resolve()));
  return port;
}

describe('tools', () => {
  for (const transport of ['http', 'sse'] as const) {
    it(`${transport}: lists every tool under <server>__<tool>, reads from readOnlyHint`, async () => {
      const url = transport === 'http' ? servers.http.url : servers.sse.url;
      const mcp = await connect([server('calc', url, { type: transport })]);
      expect(Object.keys(mcp.tools).sort()).toEqual(['calc__add', 'calc__fail', 'calc__write_note']);
      expect([...mcp.readOnly]).toEqual(['calc__add']);
      expect(mcp.permissions.size).toBe(0);
      expect(mcp.tools.calc__add).toMatchObject({ type: 'dynamic', description: 'Add two numbers' });
    });

    it(`${transport}: a tool runs on the server and its text is the output`, async () => {
      const target = transport === 'http' ? servers.http : servers.sse;
      const mcp = await connect([server('calc', target.url, { type: transport })]);
      expect(await run(mcp.tools, 'calc__add', { a: 2, b: 40 })).toBe('42');
      expect(await run(mcp.tools, 'calc__write_note', { text: 'hi' })).toBe('stored: hi');
      expect(target.calls.slice(-2)).toEqual([
        { name: 'add', args: { a: 2, b: 40 } },
        { name: 'write_note', args: { text: 'hi' } },
      ]);
    });
  }

  it('an isError result throws, with the server\'s text, so the model sees a failed call', async () => {
    const mcp = await connect([server('calc', servers.http.url)]);
    await expect(run(mcp.tools, 'calc__fail', {})).rejects.toThrow('the fail tool failed on purpose');
  });

  it('a call that outlives callTimeoutMs fails as a tool error; the turn\'s abort ends one too', async () => {
    const stuck = await startMcpServer({ tools: [{ name: 'hang', handler: () => new Promise(() => {}) }] });
    try {
      const mcp = await connect([server('s', stuck.url)], { callTimeoutMs: 300 });
      await expect(run(mcp.tools, 's__hang', {})).rejects.toThrow(/MCP server "s" could not run "hang": .*timed out/);

      const untimed = await connect([server('u', stuck.url)]);
      const controller = new AbortController();
      const call = Promise.resolve(untimed.tools.u__hang!.execute!({} as never, { toolCallId: 'c', messages: [], context: {}, abortSignal: controller.signal } as never));
      setTimeout(() => controller.abort(), 50);
      await expect(call).rejects.toThrow();
    } finally {
      await stuck.close();
    }
  });

  it('a call given up on, at its deadline or by the turn, is cancelled on the server, as MCP asks', async () => {
    // On `sse` a call is a POST the server answers at once: nothing dropped tells it the client left.
    const cancelled: string[] = [];
    const stuck = await startMcpServer({
      transport: 'sse',
      tools: [
        { name: 'hang', input: { why: z.string() }, handler: ({ why }, { signal }) => new Promise((resolve) => signal.addEventListener('abort', () => resolve(void cancelled.push(why as string) as never))) },
        { name: 'quick', handler: () => ({ content: [{ type: 'text', text: 'done' }] }) },
      ],
    });
    try {
      const mcp = await connect([server('s', stuck.url, { type: 'sse' })], { callTimeoutMs: 300 });
      expect(await run(mcp.tools, 's__quick', {})).toBe('done');
      await expect(run(mcp.tools, 's__hang', { why: 'deadline' })).rejects.toThrow(/timed out/);
      await expect.poll(() => cancelled).toEqual(['deadline']);

      const controller = new AbortController();
      const call = Promise.resolve(mcp.tools.s__hang!.execute!({ why: 'stop' } as never, { toolCallId: 'c', messages: [], context: {}, abortSignal: controller.signal } as never));
      await expect.poll(() => stuck.calls.length).toBe(3);
      controller.abort();
      await expect(call).rejects.toThrow();
      await expect.poll(() => cancelled).toEqual(['deadline', 'stop']);
    } finally {
      await stuck.close();
    }
  });

  it("a server's requests are answered one at a time: a stream of pings does not have agentd send as many requests back at once", async () => {
    let inFlight = 0;
    let most = 0;
    let answers = 0;
    const flood = await plainHttp((req, res) => {
      if (req.method !== 'POST') return void res.writeHead(405).end();
      let body = '';
      req.on('data', (chunk: Buffer) => (body += String(chunk)));
      req.on('end', () => {
        const message = JSON.parse(body) as { id?: number | string; method?: string };
        if (message.method === undefined) {
          // An answer of the client's: held a moment, so others would overlap it.
          most = Math.max(most, ++inFlight);
          answers++;
          return void setTimeout(() => {
            inFlight--;
            res.writeHead(202).end();
          }, 20);
        }
        if (message.id === undefined) return void res.writeHead(202).end();
        const reply = (result: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
        if (message.method === 'initialize') return reply({ protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '1.0.0' } });
        if (message.method === 'server/discover') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'method not found' } }));
        if (message.method === 'tools/list') return reply({ tools: [{ name: 'x', inputSchema: { type: 'object' } }] });
        // The call: a burst of pings, then its answer once some of them were answered.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(Array.from({ length: 2_000 }, (_, i) => `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: `ping-${i}`, method: 'ping' })}\n\n`).join(''));
        const done = setInterval(() => {
          if (answers === 0) return;
          clearInterval(done);
          res.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { content: [{ type: 'text', text: 'done' }] } })}\n\n`);
        }, 10);
      });
    });
    try {
      const mcp = await connect([server('f', `${flood.url}/mcp`)]);
      expect(await run(mcp.tools, 'f__x', {})).toBe('done');
      expect(answers).toBeGreaterThan(0);
      expect(most).toBe(1);
    } finally {
      await flood.close();
    }
  });

  it('a server that closes the connection before it answers a call fails the call at once, not at its deadline', async () => {
    const tools = { result: { tools: [{ name: 'x', inputSchema: { type: 'object' } }] } };
    const http = await startRawMcpServer((request, res) => {
      if (request.method === 'tools/list') return tools;
      // A progress note, then the stream ends without the call's answer.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } })}\n\n`);
      return undefined;
    });
    // An `sse` server answers on its one event stream; this one ends it when a call comes.
    let stream: ServerResponse | undefined;
    const sse = await plainHttp((req, res) => {
      if (req.method === 'GET') {
        stream = res.writeHead(200, { 'content-type': 'text/event-stream' });
        return void res.write('event: endpoint\ndata: /messages\n\n');
      }
      let body = '';
      req.on('data', (chunk: Buffer) => (body += String(chunk)));
      req.on('end', () => {
        res.writeHead(202).end();
        const message = JSON.parse(body) as { id?: number; method: string };
        if (message.method === 'tools/call') return void stream!.end();
        const result = message.method === 'initialize' ? { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '1.0.0' } } : tools.result;
        if (message.id !== undefined) stream!.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: message.id, result })}\n\n`);
      });
    });
    try {
      const mcp = await connect([server('h', http.url), server('s', `${sse.url}/sse`, { type: 'sse' })]);
      await expect(run(mcp.tools, 'h__x', {})).rejects.toThrow('MCP server "h" could not run "x": the server closed the connection before it answered');
      await expect(run(mcp.tools, 's__x', {})).rejects.toThrow('MCP server "s" could not run "x": the server closed the connection before it answered');
    } finally {
      await Promise.all([http.close(), sse.close()]);
    }
  });

  it("a call answered with something other than a tool result fails in agentd's words, never the SDK's validator dump", async () => {
    const answers: Record<string, [status: number, type: string, body: (id: unknown) => string]> = {
      text: [200, 'application/json', () => 'not json {'],
      rpc: [200, 'application/json', () => JSON.stringify({ hello: 'world' })],
      result: [200, 'application/json', (id) => JSON.stringify({ jsonrpc: '2.0', id, result: { content: 'a string' } })],
      other: [200, 'application/json', () => JSON.stringify({ jsonrpc: '2.0', id: 9999, result: { content: [] } })],
      page: [500, 'text/html', () => '<html><body>Internal Server Error</body></html>'],
      down: [503, 'text/plain', () => 'maintenance until noon'],
    };
    const http = await startRawMcpServer((request, res) => {
      if (request.method === 'tools/list') return { result: { tools: Object.keys(answers).map((name) => ({ name, inputSchema: { type: 'object' } })) } };
      const [status, type, body] = answers[(request.params as { name: string }).name]!;
      res.writeHead(status, { 'content-type': type }).end(body(request.id));
      return undefined;
    });
    try {
      const mcp = await connect([server('h', http.url)]);
      const why = async (tool: string) => (await run(mcp.tools, `h__${tool}`, {}).then(() => '', (e: Error) => e.message)).replace('MCP server "h" could not run ', '');
      expect(await why('text')).toBe('"text": the server answered with a body that is not JSON, not as an MCP server does');
      expect(await why('rpc')).toBe('"rpc": the server answered with JSON that is not a JSON-RPC message, not as an MCP server does');
      expect(await why('result')).toBe('"result": the server answered with a result that is not a tool result (a "content" array of text, image, audio or resource parts)');
      expect(await why('other')).toBe('"other": the server answered with the id of no request agentd sent, not with this call\'s');
      expect(await why('page')).toBe('"page": the server answered HTTP 500; it failed on its side');
      expect(await why('down')).toBe('"down": the server answered HTTP 503: maintenance until noon; it failed on its side');
    } finally {
      await http.close();
    }
  });

  it('an answer past MCP_MAX_MESSAGE_BYTES fails its call, as a JSON body and as an event, without reading it whole', async () => {
    const tools = { result: { tools: [{ name: 'json', inputSchema: { type: 'object' } }, { name: 'event', inputSchema: { type: 'object' } }] } };
    const sent = { json: 0, event: 0 };
    const http = await startRawMcpServer(async (request, res) => {
      if (request.method === 'tools/list') return tools;
      const kind = (request.params as { name: 'json' | 'event' }).name;
      const events = kind === 'event';
      res.writeHead(200, { 'content-type': events ? 'text/event-stream' : 'application/json' });
      // A small event first, which is no part of the large one; then one answer without end.
      if (events) res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } })}\n\n`);
      res.write(`${events ? 'event: message\ndata: ' : ''}{"jsonrpc":"2.0","id":${JSON.stringify(request.id)},"result":{"content":[{"type":"text","text":"`);
      const piece = 'a'.repeat(1024 * 1024);
      for (let i = 0; i < 64 && !res.destroyed; i++) {
        sent[kind] += piece.length;
        if (!res.write(piece)) await new Promise((resolve) => res.once('drain', resolve).once('close', resolve));
      }
      res.end();
      return undefined;
    });
    try {
      const mcp = await connect([server('big', http.url)]);
      const tooLarge = `MCP server "big" could not run`;
      await expect(run(mcp.tools, 'big__json', {})).rejects.toThrow(new RegExp(`^${tooLarge} "json": .*the server sent a message of more than ${MCP_MAX_MESSAGE_BYTES / 1048576} MB`));
      await expect(run(mcp.tools, 'big__event', {})).rejects.toThrow(`${tooLarge} "event": the server sent a message of more than ${MCP_MAX_MESSAGE_BYTES / 1048576} MB`);
      // Given up soon after the limit, not read to the end of what the server had to send.
      for (const bytes of Object.values(sent)) expect(bytes).toBeLessThan(2 * MCP_MAX_MESSAGE_BYTES);
    } finally {
      await http.close();
    }
  });

  it('joins text parts; binary parts are described, not inlined', async () => {
    const mixed = await startMcpServer({
      tools: [
        {
          name: 'mixed',
          handler: () => ({
            content: [
              { type: 'text', text: 'first' },
              { type: 'image', data: Buffer.from('png').toString('base64'), mimeType: 'image/png' },
              { type: 'resource', resource: { uri: 'file:///a.txt', text: 'embedded text' } },
              { type: 'text', text: 'last' },
            ],
          }),
        },
      ],
    });
    try {
      const mcp = await connect([server('m', mixed.url)]);
      expect(await run(mcp.tools, 'm__mixed', {})).toBe('first\n[image (image/png) content not shown]\nembedded text\nlast');
    } finally {
      await mixed.close();
    }
  });

  it('policy.tools include keeps only the named tools', async () => {
    const mcp = await connect([server('calc', servers.http.url, { policy: { tools: { mode: 'include', names: ['add', 'fail'] } } })]);
    expect(Object.keys(mcp.tools).sort()).toEqual(['calc__add', 'calc__fail']);
    expect([...mcp.readOnly]).toEqual(['calc__add']);
  });

  it('policy.tools include naming a tool the server lacks is a 400 naming both', async () => {
    const error = await failure(
      connectMcpServers([server('calc', servers.http.url, { policy: { tools: { mode: 'include', names: ['add', 'nope', 'gone'] } } })], OPTS),
    );
    expect(error.type).toBe('invalid-request');
    expect(error.status).toBe(400);
    expect(error.message).toContain('data.parameters.agent.mcps[0].policy.tools.names');
    expect(error.message).toContain('"calc"');
    expect(error.message).toContain('"nope", "gone"');
  });

  it('policy.tools include without names is a 400 before anything connects', async () => {
    const before = servers.http.requests.length;
    const error = await failure(connectMcpServers([server('calc', servers.http.url, { policy: { tools: { mode: 'include' } } })], OPTS));
    expect(error.status).toBe(400);
    expect(error.message).toContain('mcps[0].policy.tools.names');
    expect(servers.http.requests.length).toBe(before);
  });

  it('policy.permission applies to each of the server\'s tools', async () => {
    const mcp = await connect([server('calc', servers.http.url, { policy: { permission: 'ask', tools: { mode: 'include', names: ['add', 'write_note'] } } }), server('free', servers.sse.url, { type: 'sse' })]);
    expect(Object.fromEntries(mcp.permissions)).toEqual({ calc__add: 'ask', calc__write_note: 'ask' });
    expect(Object.keys(mcp.tools)).toHaveLength(5);
  });

  it('two servers with one name are a 400', async () => {
    const error = await failure(connectMcpServers([server('calc', servers.http.url), server('calc', servers.sse.url, { type: 'sse' })], OPTS));
    expect(error.status).toBe(400);
    expect(error.message).toContain('mcps[1].name');
  });

  it('two tools that would share a name are a 400', async () => {
    const other = await startMcpServer({ tools: [{ name: 'b__c', handler: () => ({ content: [] }) }] });
    const first = await startMcpServer({ tools: [{ name: 'c', handler: () => ({ content: [] }) }] });
    try {
      const error = await failure(connectMcpServers([server('a__b', first.url), server('a', other.url)], OPTS));
      expect(error.status).toBe(400);
      expect(error.message).toContain('"a__b__c"');
    } finally {
      await Promise.all([other.close(), first.close()]);
    }
  });
});

describe('hostile listings', () => {
  it('a listing that pages without end is a 424 at its page limit, not a wait for the deadline', async () => {
    let pages = 0;
    const endless = await startRawMcpServer(() => ({ result: { tools: [{ name: `t${++pages}`, inputSchema: { type: 'object' } }], nextCursor: 'more' } }));
    try {
      const error = await failure(connectMcpServers([server('pager', endless.url)], OPTS));
      expect(error.type).toBe('mcp-unavailable');
      expect(error.message).toContain(`"pager"`);
      expect(error.message).toContain(`did not end within ${MCP_MAX_TOOL_PAGES} pages`);
      expect(pages).toBe(MCP_MAX_TOOL_PAGES);
    } finally {
      await endless.close();
    }
  });

  it('a listing of more than MCP_MAX_TOOLS tools is a 424 whether it pages or not (one page of 200,000 overflowed the stack)', async () => {
    const tool = (i: number) => ({ name: `t${i}`, inputSchema: { type: 'object' } });
    const oneRequest = await startRawMcpServer(() => ({ result: { tools: Array.from({ length: 200_000 }, (_, i) => tool(i)) } }));
    let pages = 0;
    // Two pages, each under the limit, together past it.
    const twoPages = await startRawMcpServer((request) => {
      const first = pages++ * 6_000;
      return { result: { tools: Array.from({ length: 6_000 }, (_, i) => tool(first + i)), ...(request.params?.cursor ? {} : { nextCursor: 'more' }) } };
    });
    try {
      for (const [target, count] of [[oneRequest, 200_000], [twoPages, 12_000]] as const) {
        const error = await failure(connectMcpServers([server('many', target.url)], OPTS));
        expect(error.type).toBe('mcp-unavailable');
        expect(error.message).toBe(`MCP server "many" at ${target.url} answered tools/list with more than ${MCP_MAX_TOOLS} tools (${count} so far), more than agentd offers a model: see the server's logs`);
      }
      const under = await startRawMcpServer(() => ({ result: { tools: Array.from({ length: MCP_MAX_TOOLS }, (_, i) => tool(i)) } }));
      try {
        expect(Object.keys((await connect([server('many', under.url)])).tools)).toHaveLength(MCP_MAX_TOOLS);
      } finally {
        await under.close();
      }
    } finally {
      await Promise.all([oneRequest.close(), twoPages.close()]);
    }
  });

  it('a tool whose input schema no provider takes is a 424 naming it, and can be left out', async () => {
    const nested = (depth: number): object => (depth === 0 ? { type: 'string' } : { type: 'object', properties: { a: nested(depth - 1) } });
    const odd = await startRawMcpServer(() => ({
      result: {
        tools: [
          { name: 'fine', inputSchema: { type: 'object', properties: { q: { type: 'string' } } } },
          { name: 'scalar', inputSchema: { type: 'string' } },
          { name: 'deep', inputSchema: nested(1000) },
        ],
      },
    }));
    try {
      const scalar = await failure(connectMcpServers([server('odd', odd.url, { policy: { tools: { mode: 'include', names: ['fine', 'scalar'] } } })], OPTS));
      expect({ type: scalar.type, status: scalar.status }).toEqual({ type: 'mcp-unavailable', status: 424 });
      expect(scalar.message).toBe('MCP server "odd" lists the tool "scalar" with an input schema of type "string", not "object", which no model provider takes; leave the tool out with data.parameters.agent.mcps[0].policy.tools');
      const deep = await failure(connectMcpServers([server('odd', odd.url, { policy: { tools: { mode: 'include', names: ['deep'] } } })], OPTS));
      expect(deep.message).toContain('the tool "deep" with an input schema nested more than 64 levels deep');
      const mcp = await connect([server('odd', odd.url, { policy: { tools: { mode: 'include', names: ['fine'] } } })]);
      expect(Object.keys(mcp.tools)).toEqual(['odd__fine']);
    } finally {
      await odd.close();
    }
  });
});

describe('listings the SDK would refuse whole', () => {
  /** A server whose tools/list answers `tools`, and whose tools answer "ran <name>". */
  const listing = (tools: unknown, extra: Record<string, unknown> = {}) =>
    startRawMcpServer((request) =>
      request.method === 'tools/list' ? { result: { tools, ...extra } } : { result: { content: [{ type: 'text', text: `ran ${String(request.params?.name)}` }] } },
    );
  const OBJECT = { type: 'object' };
  // What the SDK says of a listing it refuses: none of it may reach a message.
  const SDK_WORDS = /Failed to parse|invalid_type|"path"|Invalid input/;

  it('a tool without an input schema is a 424 naming it in agentd\'s words, and can be left out', async () => {
    const odd = await listing([{ name: 'fine', inputSchema: OBJECT }, { name: 'bare', description: 'no schema' }]);
    try {
      const error = await failure(connectMcpServers([server('odd', odd.url)], OPTS));
      expect({ type: error.type, status: error.status }).toEqual({ type: 'mcp-unavailable', status: 424 });
      expect(error.message).toBe('MCP server "odd" lists the tool "bare" without an input schema, which no model provider takes; leave the tool out with data.parameters.agent.mcps[0].policy.tools');
      const mcp = await connect([server('odd', odd.url, { policy: { tools: { mode: 'include', names: ['fine'] } } })]);
      expect(Object.keys(mcp.tools)).toEqual(['odd__fine']);
      expect(await run(mcp.tools, 'odd__fine', {})).toBe('ran fine');
    } finally {
      await odd.close();
    }
  });

  it('a tool without a usable name is named by its place in the listing, and left out by naming the others', async () => {
    const cases: [unknown, string][] = [
      [{ inputSchema: OBJECT }, 'without a name'],
      [{ name: 7, inputSchema: OBJECT }, 'whose name is a number, not a string'],
      [{ name: '', inputSchema: OBJECT }, 'with an empty name'],
      ['tool', 'that is a string, not an object'],
    ];
    for (const [entry, why] of cases) {
      const odd = await listing([{ name: 'fine', inputSchema: OBJECT }, entry]);
      try {
        const error = await failure(connectMcpServers([server('odd', odd.url)], OPTS));
        expect(error.type).toBe('mcp-unavailable');
        expect(error.message).toBe(
          `MCP server "odd" lists a tool (entry 1 of its tools/list) ${why}; leave it out with data.parameters.agent.mcps[0].policy.tools, mode "include" naming the tools to keep`,
        );
        const mcp = await connect([server('odd', odd.url, { policy: { tools: { mode: 'include', names: ['fine'] } } })]);
        expect(Object.keys(mcp.tools)).toEqual(['odd__fine']);
      } finally {
        await odd.close();
      }
    }
  });

  it('a name listed twice is a 424 when the template keeps it: a call of it could run either', async () => {
    const twins = await listing([{ name: 'twin', inputSchema: OBJECT }, { name: 'other', inputSchema: OBJECT }, { name: 'twin', inputSchema: { type: 'object', properties: { a: { type: 'string' } } } }]);
    try {
      const message = 'MCP server "twins" lists the tool "twin" twice (entries 0 and 2), so a call of it could run either; leave the tool out with data.parameters.agent.mcps[0].policy.tools';
      expect((await failure(connectMcpServers([server('twins', twins.url)], OPTS))).message).toBe(message);
      expect((await failure(connectMcpServers([server('twins', twins.url, { policy: { tools: { mode: 'include', names: ['twin'] } } })], OPTS))).message).toBe(message);
      const mcp = await connect([server('twins', twins.url, { policy: { tools: { mode: 'include', names: ['other'] } } })]);
      expect(Object.keys(mcp.tools)).toEqual(['twins__other']);
    } finally {
      await twins.close();
    }
  });

  it('an input schema whose properties are not an object is refused like any schema no provider takes', async () => {
    const odd = await listing([{ name: 'props', inputSchema: { type: 'object', properties: ['a'] } }]);
    try {
      const error = await failure(connectMcpServers([server('odd', odd.url)], OPTS));
      expect(error.message).toBe(
        'MCP server "odd" lists the tool "props" with an input schema whose "properties" is an array, not an object, which no model provider takes; leave the tool out with data.parameters.agent.mcps[0].policy.tools',
      );
    } finally {
      await odd.close();
    }
  });

  it('what only describes a tool is dropped where it is malformed, and the tool offered without it', async () => {
    const odd = await listing(
      [
        { name: 'loose', title: 7, description: 42, annotations: { readOnlyHint: 'yes', title: false }, outputSchema: 'text', _meta: [1], inputSchema: OBJECT },
        { name: 'reads', description: 'Reads', annotations: 'read-only', inputSchema: OBJECT },
        { name: 'hinted', annotations: { readOnlyHint: true, destructiveHint: 'no' }, inputSchema: OBJECT },
      ],
      // "No more", as some servers say it.
      { nextCursor: null },
    );
    try {
      const mcp = await connect([server('odd', odd.url)]);
      expect(Object.keys(mcp.tools)).toEqual(['odd__loose', 'odd__reads', 'odd__hinted']);
      expect(mcp.tools.odd__loose!.description).toBeUndefined();
      expect(mcp.tools.odd__reads!.description).toBe('Reads');
      // A hint that is not `true` leaves a tool gated as a write.
      expect([...mcp.readOnly]).toEqual(['odd__hinted']);
      expect(await run(mcp.tools, 'odd__loose', {})).toBe('ran loose');
    } finally {
      await odd.close();
    }
  });

  it('an answer to tools/list that is no listing is a 424 saying so', async () => {
    for (const [result, why] of [
      [{ tools: 'all of them' }, 'with a result whose "tools" is a string, not an array'],
      [{ items: [] }, 'with a result that has no "tools" array'],
      [{ tools: [], nextCursor: 2 }, 'with a result whose "nextCursor" is a number, not a string'],
    ] as const) {
      const odd = await startRawMcpServer(() => ({ result }));
      try {
        const error = await failure(connectMcpServers([server('odd', odd.url)], OPTS));
        expect(error.type).toBe('mcp-unavailable');
        expect(error.message).toBe(`MCP server "odd" at ${odd.url} answered tools/list ${why}, which is no tool listing: see the server's logs`);
        expect(error.message).not.toMatch(SDK_WORDS);
      } finally {
        await odd.close();
      }
    }
  });
});

describe('tool names', () => {
  it('are <server>__<tool> when that is a valid provider tool name', () => {
    expect(mcpToolName('calc', 'add')).toBe('calc__add');
  });

  it('are made valid, short and still distinct otherwise, and stable', () => {
    const dotted = mcpToolName('my.server', 'tool.one');
    expect(dotted).toMatch(/^my_server__tool_one_[0-9a-f]{8}$/);
    expect(mcpToolName('my_server', 'tool.one')).not.toBe(dotted);
    expect(mcpToolName('my.server', 'tool.one')).toBe(dotted);
    const long = mcpToolName('s'.repeat(100), 't'.repeat(100));
    expect(long).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    expect(long).not.toBe(mcpToolName('s'.repeat(100), `${'t'.repeat(99)}u`));
  });
});

describe('credentials', () => {
  const lastPost = (s: TestMcpServer) => s.requests.filter((r) => r.method === 'POST').at(-1)!;

  it('go to a server whose connection opts in, as a bearer token', async () => {
    const mcp = await connect([server('calc', servers.http.url, { forward: true })], { credentials: 'user-token-123' });
    await run(mcp.tools, 'calc__add', { a: 1, b: 1 });
    expect(lastPost(servers.http).headers.authorization).toBe('Bearer user-token-123');
  });

  it('replace a template Authorization header rather than join it', async () => {
    const mcp = await connect([server('calc', servers.sse.url, { type: 'sse', forward: true, headers: { Authorization: 'Bearer template', 'x-extra': 'kept' } })], { credentials: 'user-token-123' });
    await run(mcp.tools, 'calc__add', { a: 1, b: 1 });
    expect(lastPost(servers.sse).headers.authorization).toBe('Bearer user-token-123');
    expect(lastPost(servers.sse).headers['x-extra']).toBe('kept');
  });

  it('never go to a server that does not opt in', async () => {
    const before = servers.http.requests.length;
    const mcp = await connect([server('calc', servers.http.url), server('calc2', servers.http.url, { forward: false })], { credentials: 'user-token-123' });
    await run(mcp.tools, 'calc__add', { a: 1, b: 1 });
    const seen = servers.http.requests.slice(before);
    expect(seen.length).toBeGreaterThan(2);
    expect(seen.every((r) => r.headers.authorization === undefined)).toBe(true);
  });

  it('the template\'s own headers are sent', async () => {
    const mcp = await connect([server('calc', servers.http.url, { headers: { 'x-api-key': 'abc' } })]);
    await run(mcp.tools, 'calc__add', { a: 1, b: 1 });
    expect(lastPost(servers.http).headers['x-api-key']).toBe('abc');
  });
});

describe('unreachable servers', () => {
  it('a closed port is a 424 naming the server, at once, without the query string', async () => {
    const port = await freePort();
    const error = await failure(connectMcpServers([server('gone', `http://127.0.0.1:${port}/mcp?token=secret-in-query`)], OPTS));
    expect(error.type).toBe('mcp-unavailable');
    expect(error.status).toBe(424);
    expect(error.message).toMatch(new RegExp(`^MCP server "gone" at http://127\\.0\\.0\\.1:${port}/mcp could not be reached: .*ECONNREFUSED`));
    expect(error.message).not.toContain('secret-in-query');
  });

  // The address is what tells the operator which server to look at; it holds no query string to hide.
  it('a closed port with no query string names the address', async () => {
    const port = await freePort();
    const error = await failure(connectMcpServers([server('gone', `http://127.0.0.1:${port}/mcp`)], OPTS));
    expect(error.message).toMatch(new RegExp(`^MCP server "gone" at http://127\\.0\\.0\\.1:${port}/mcp could not be reached`));
  });

  it('a secret filled into the path stays hidden in the address', async () => {
    const port = await freePort();
    const error = await failure(
      connectMcpServers([server('gone', `http://127.0.0.1:${port}/k/{{secrets.MCP_TOKEN}}/mcp`)], { ...OPTS, secrets: { MCP_TOKEN: 'path-secret-123' } }),
    );
    expect(error.message).toMatch(/^MCP server "gone" at http:\/\/127\.0\.0\.1:\d+\/k\/\[redacted\]\/mcp could not be reached/);
    expect(error.message).not.toContain('path-secret-123');
  });

  it('a URL with a user name or password is a 400 that does not repeat it', async () => {
    const error = await failure(connectMcpServers([server('calc', 'http://user:hunter2@127.0.0.1:1/mcp')], OPTS));
    expect(error.status).toBe(400);
    expect(error.message).toContain('mcps[0].connection.url');
    expect(error.message).not.toContain('hunter2');
  });

  for (const transport of ['http', 'sse'] as const) {
    it(`${transport}: a server that accepts and never answers is a 424 within the deadline`, async () => {
      const silent = await silentServer();
      try {
        const started = Date.now();
        const error = await failure(connectMcpServers([server('mute', silent.url, { type: transport })], { ...OPTS, timeoutMs: 400 }));
        const elapsed = Date.now() - started;
        expect(elapsed).toBeGreaterThanOrEqual(390);
        expect(error.type).toBe('mcp-unavailable');
        expect(error.message).toContain('"mute"');
        expect(error.message).toContain('no answer within 400 ms');
      } finally {
        await silent.close();
      }
    });
  }

  it('a server that answers something other than MCP is a 424, without waiting for the deadline', async () => {
    const web = await plainHttp((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>hello</html>'));
    try {
      const error = await failure(connectMcpServers([server('web', `${web.url}/mcp`)], OPTS));
      expect(error.type).toBe('mcp-unavailable');
      expect(error.message).toContain('content type');
    } finally {
      await web.close();
    }
  });

  it('a refusal is a 424 that quotes the server, but never the forwarded token', async () => {
    const echo = await plainHttp((req, res) => res.writeHead(401, { 'content-type': 'text/plain' }).end(`rejected ${req.headers.authorization}`));
    try {
      const error = await failure(connectMcpServers([server('strict', `${echo.url}/mcp`, { forward: true })], { ...OPTS, credentials: 'tok-abcdef-123' }));
      expect(error.type).toBe('mcp-unavailable');
      expect(error.message).toContain('HTTP 401');
      expect(error.message).toContain('rejected Bearer [redacted]');
      expect(error.message).not.toContain('tok-abcdef-123');
    } finally {
      await echo.close();
    }
  });

  it('a redirect is not followed: 424, and the target never sees the bearer token', async () => {
    const target = await startMcpServer();
    const redirector = await plainHttp((_req, res) => res.writeHead(307, { location: target.url }).end());
    try {
      const error = await failure(connectMcpServers([server('moved', `${redirector.url}/mcp`, { forward: true })], { ...OPTS, credentials: 'tok' }));
      expect(error.type).toBe('mcp-unavailable');
      expect(error.message).toBe(
        `MCP server "moved" at ${redirector.url}/mcp answered HTTP 307, a redirect, which agentd does not follow (it would take the credentials along): set connection.url to the address it redirects to`,
      );
      expect(target.requests).toHaveLength(0);
    } finally {
      await Promise.all([target.close(), redirector.close()]);
    }
  });

  it('when one server fails the others are closed and not waited for', async () => {
    const streams = await startMcpServer({ transport: 'sse' });
    const silent = await silentServer();
    // Fails once the healthy server is surely connected, so there is something to close.
    const slowJunk = await plainHttp((_req, res) => void setTimeout(() => res.writeHead(500).end('broken'), 300));
    try {
      const error = await failure(
        connectMcpServers([server('ok', streams.url, { type: 'sse' }), server('mute', silent.url), server('junk', `${slowJunk.url}/mcp`)], OPTS),
      );
      expect(error.type).toBe('mcp-unavailable');
      expect(error.message).toContain('"junk"');
      expect(error.message).toContain('HTTP 500');
      expect(streams.requests.some((r) => r.path === '/sse')).toBe(true);
      await expect.poll(() => streams.openStreams()).toBe(0);
    } finally {
      await Promise.all([streams.close(), silent.close(), slowJunk.close()]);
    }
  });

  it('the caller\'s abort does not wait for a connected server to acknowledge its close', async () => {
    // A Streamable HTTP server that keeps sessions (protocol 2025-06-18) and never answers the
    // DELETE that ends one.
    const deleted = Promise.withResolvers<void>();
    const listed = Promise.withResolvers<void>();
    const sticky = await plainHttp((req, res) => {
      if (req.method === 'DELETE') return deleted.resolve();
      if (req.method !== 'POST') return void res.writeHead(405).end();
      let body = '';
      req.on('data', (chunk: Buffer) => (body += String(chunk)));
      req.on('end', () => {
        const message = JSON.parse(body) as { id?: number; method: string };
        if (message.id === undefined) return void res.writeHead(202).end();
        const reply =
          message.method === 'initialize'
            ? { result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'sticky', version: '1' } } }
            : message.method === 'tools/list'
              ? { result: { tools: [{ name: 't', inputSchema: { type: 'object' } }] } }
              : { error: { code: -32601, message: 'method not found' } };
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'session-1' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, ...reply }));
        if (message.method === 'tools/list') listed.resolve();
      });
    });
    const silent = await silentServer();
    try {
      const controller = new AbortController();
      const pending = connectMcpServers([server('sticky', `${sticky.url}/mcp`), server('mute', silent.url)], { ...OPTS, timeoutMs: 5_000, signal: controller.signal });
      await listed.promise;
      // Its answer read: connected, with a session to end.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const stopped = Date.now();
      controller.abort(new Error('turn stopped'));
      await expect(pending).rejects.toThrow('turn stopped');
      expect(Date.now() - stopped).toBeLessThan(2_500);
      // Closed all the same.
      await deleted.promise;
    } finally {
      await Promise.all([sticky.close(), silent.close()]);
    }
  });

  it('the caller\'s abort ends the connection attempt with its reason', async () => {
    const silent = await silentServer();
    try {
      const controller = new AbortController();
      const pending = connectMcpServers([server('mute', silent.url)], { ...OPTS, signal: controller.signal });
      setTimeout(() => controller.abort(new Error('turn cancelled')), 50);
      await expect(pending).rejects.toThrow('turn cancelled');
    } finally {
      await silent.close();
    }
  });
});

/** Each says what the server did, in agentd's words (none of the SDK's), and what to do. */
describe('why a connection failed', () => {
  const FIX_ADDRESS = 'check that connection.url is its MCP endpoint, and connection.type its transport ("http" for Streamable HTTP, "sse" for the older HTTP+SSE)';

  it('a name that does not resolve could not be reached, and says what to check', async () => {
    const error = await failure(connectMcpServers([server('nowhere', 'http://agentd-mcp-test.invalid/mcp')], OPTS));
    expect(error.type).toBe('mcp-unavailable');
    expect(error.message).toMatch(/^MCP server "nowhere" at http:\/\/agentd-mcp-test\.invalid\/mcp could not be reached: getaddrinfo (ENOTFOUND|EAI_AGAIN) agentd-mcp-test\.invalid; check that it is running and that agentd can reach that address$/);
  });

  for (const transport of ['http', 'sse'] as const) {
    it(`${transport}: an HTTP error answered it, not MCP: the status is named, a web page's body is not`, async () => {
      const web = await plainHttp((_req, res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<html><body>Not here. Session token: abc</body></html>'));
      try {
        const error = await failure(connectMcpServers([server('web', `${web.url}/mcp`, { type: transport })], OPTS));
        expect(error.type).toBe('mcp-unavailable');
        expect(error.message).toBe(`MCP server "web" at ${web.url}/mcp answered HTTP 404, not as an MCP server: ${FIX_ADDRESS}`);
      } finally {
        await web.close();
      }
    });

    it(`${transport}: a refusal says which credentials were refused, by name, never by value`, async () => {
      const strict = await plainHttp((_req, res) => res.writeHead(401, { 'content-type': 'text/plain' }).end('invalid key'));
      try {
        const headers = { 'x-api-key': '{{secrets.MCP_KEY}}', 'x-team': 'team-seven-plain' };
        const error = await failure(
          connectMcpServers([server('strict', `${strict.url}/mcp`, { type: transport, headers, forward: true })], { ...OPTS, secrets: { MCP_KEY: 'key-value-123456' }, credentials: 'user-token-7890' }),
        );
        expect(error.type).toBe('mcp-unavailable');
        expect(error.message).toBe(
          `MCP server "strict" at ${strict.url}/mcp refused the credentials agentd sent (HTTP 401: invalid key): agentd sent the header "x-api-key" (from secrets.MCP_KEY), the header "x-team", the request's credentials, as Authorization (forward_credentials); check their values`,
        );
        expect(error.message).not.toMatch(/key-value-123456|team-seven-plain|user-token-7890/);
      } finally {
        await strict.close();
      }
    });

    it(`${transport}: a page that is no MCP answer names its content type`, async () => {
      const web = await plainHttp((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>hello</html>'));
      try {
        const error = await failure(connectMcpServers([server('web', `${web.url}/mcp`, { type: transport })], OPTS));
        const expected = transport === 'http' ? 'application/json or text/event-stream' : 'text/event-stream';
        expect(error.message).toBe(`MCP server "web" at ${web.url}/mcp answered with content type text/html, not as an MCP server (${expected}): ${FIX_ADDRESS}`);
      } finally {
        await web.close();
      }
    });
  }

  it('a refusal of no credentials says how to send some', async () => {
    const strict = await plainHttp((_req, res) => res.writeHead(403).end());
    try {
      const error = await failure(connectMcpServers([server('strict', `${strict.url}/mcp`, { forward: true })], OPTS));
      expect(error.message).toBe(
        `MCP server "strict" at ${strict.url}/mcp refused the credentials agentd sent (HTTP 403): agentd sent none; forward_credentials is set, but the request carried no credentials to forward`,
      );
      const bare = await failure(connectMcpServers([server('strict', `${strict.url}/mcp`)], OPTS));
      expect(bare.message).toContain('agentd sent none: set connection.headers (a value may name a request secret as {{secrets.NAME}}), or forward_credentials');
    } finally {
      await strict.close();
    }
  });

  it("a server error quotes the start of its text, masked, and points at the server's logs", async () => {
    const broken = await plainHttp((req, res) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`database down; caller key ${String(req.headers['x-api-key'])}\n${'trace '.repeat(200)}`));
    try {
      const error = await failure(connectMcpServers([server('broken', `${broken.url}/mcp`, { headers: { 'x-api-key': 'key-value-123456' } })], OPTS));
      expect(error.message).toMatch(/^MCP server "broken" at \S+ answered HTTP 500: database down; caller key \[redacted\] (trace )+[a-z]*…, not as an MCP server: it failed on its side; see its logs/);
      expect(error.message).not.toContain('key-value-123456');
    } finally {
      await broken.close();
    }
  });

  it("a refusal that quotes a template header's bearer token, or a query parameter's value, alone shows neither", async () => {
    const token = 'literal-bearer-token-5678';
    const key = 'query key/98765';
    const strict = await plainHttp((req, res) => {
      const sent = new URL(req.url ?? '/', 'http://h').searchParams.get('key');
      res.writeHead(401, { 'content-type': 'text/plain' }).end(`token ${String(req.headers.authorization).split(' ')[1]} is unknown; key ${sent} is unknown`);
    });
    try {
      const url = `${strict.url}/mcp?key=${encodeURIComponent(key)}&v=1`;
      const error = await failure(connectMcpServers([server('strict', url, { headers: { authorization: `Bearer ${token}` } })], OPTS));
      expect(error.message).toContain('(HTTP 401: token [redacted] is unknown; key [redacted] is unknown)');
      expect(error.message).not.toMatch(/literal-bearer|98765/);
    } finally {
      await strict.close();
    }
  });

  it('a body that is not JSON, or JSON that is not JSON-RPC, is no MCP answer', async () => {
    for (const [body, what] of [
      ['not json', 'with a body that is not JSON'],
      ['{"hello":1}', 'with JSON that is not a JSON-RPC message'],
    ]) {
      const odd = await plainHttp((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(body));
      try {
        const error = await failure(connectMcpServers([server('odd', `${odd.url}/mcp`)], OPTS));
        expect(error.message).toBe(`MCP server "odd" at ${odd.url}/mcp answered ${what}, not as an MCP server: ${FIX_ADDRESS}`);
      } finally {
        await odd.close();
      }
    }
  });

  it('sse: a stream that ends before it names where to send messages is no MCP server', async () => {
    const odd = await plainHttp((_req, res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end('event: hello\ndata: hi\n\n'));
    try {
      const error = await failure(connectMcpServers([server('odd', `${odd.url}/sse`, { type: 'sse' })], OPTS));
      expect(error.message).toBe(`MCP server "odd" at ${odd.url}/sse ended its event stream before naming where to send messages, as an "sse" MCP server does first: ${FIX_ADDRESS}`);
    } finally {
      await odd.close();
    }
  });

  /** An MCP server that answers `initialize` with `reply`, and lists one tool. */
  const handshake = (reply: { result: unknown } | { error: { code: number; message: string } }) =>
    startRawMcpServer((request) => (request.method === 'initialize' ? reply : { result: { tools: [{ name: 't', inputSchema: { type: 'object' } }] } }), { handshake: false });

  it("a handshake the server refuses quotes the server's message, masked", async () => {
    const refusing = await handshake({ error: { code: -32001, message: 'licence expired for key key-value-123456' } });
    try {
      const error = await failure(connectMcpServers([server('lic', refusing.url, { headers: { 'x-api-key': 'key-value-123456' } })], OPTS));
      expect({ type: error.type, status: error.status }).toEqual({ type: 'mcp-unavailable', status: 424 });
      expect(error.message).toBe(`MCP server "lic" at ${refusing.url} refused the MCP handshake (initialize): licence expired for key [redacted]; see the server's logs`);
    } finally {
      await refusing.close();
    }
  });

  it('a protocol version the client does not speak is named', async () => {
    const old = await handshake({ result: { protocolVersion: '2023-01-01', capabilities: { tools: {} }, serverInfo: { name: 'old', version: '0.1' } } });
    try {
      const error = await failure(connectMcpServers([server('old', old.url)], OPTS));
      expect(error.message).toBe(`MCP server "old" at ${old.url} speaks MCP protocol version "2023-01-01", which agentd's MCP client does not: run a version of the server that speaks a current one`);
    } finally {
      await old.close();
    }
  });

  it('an answer to the handshake that is no initialize result names what it lacks', async () => {
    const odd = await handshake({ result: { capabilities: { tools: {} } } });
    try {
      const error = await failure(connectMcpServers([server('odd', odd.url)], OPTS));
      expect(error.message).toBe(`MCP server "odd" at ${odd.url} answered the MCP handshake (initialize) with something that is not an initialize result (protocolVersion, serverInfo): ${FIX_ADDRESS}`);
    } finally {
      await odd.close();
    }
  });

  it('a server that offers no tools says so, and which entry of the template it is', async () => {
    const none = await handshake({ result: { protocolVersion: '2025-06-18', capabilities: { prompts: {} }, serverInfo: { name: 'prompts', version: '1' } } });
    try {
      const error = await failure(connectMcpServers([server('calc', servers.http.url), server('prompts', none.url)], OPTS));
      expect(error.message).toBe(`MCP server "prompts" at ${none.url} offers no tools (its answer to the MCP handshake declares no "tools" capability): take it out of data.parameters.agent.mcps[1]`);
    } finally {
      await none.close();
    }
  });

  it("a tool listing the server fails quotes the server's message", async () => {
    const failing = await startRawMcpServer(() => ({ error: { code: -32603, message: 'tool registry unavailable' } }));
    try {
      const error = await failure(connectMcpServers([server('reg', failing.url)], OPTS));
      expect(error.message).toBe(`MCP server "reg" at ${failing.url} could not list its tools (tools/list): tool registry unavailable; see the server's logs`);
    } finally {
      await failing.close();
    }
  });

  it('stdio: a command that ends at once, or writes its logs where messages go, is told so', async () => {
    const node = (script: string): McpServer => ({ name: 'local', connection: { type: 'stdio', command: process.execPath, args: ['-e', script] } });
    const ended = await failure(connectMcpServers([node('process.exit(3)')], { ...OPTS, allowStdio: true }));
    expect(ended.message).toBe(
      `MCP server "local" at command "${process.execPath}" ended before it answered the MCP handshake: check that connection.command and connection.args start an MCP server on its standard input and output`,
    );
    const chatty = await failure(connectMcpServers([node('console.log("server starting")')], { ...OPTS, allowStdio: true }));
    expect(chatty.message).toBe(
      `MCP server "local" at command "${process.execPath}" sent something that is not a JSON-RPC message, and no answer: an MCP server on stdio writes nothing but MCP messages to its standard output (its logs go to standard error)`,
    );
  });
});

describe('stdio', () => {
  const stdio = (): McpServer => ({ name: 'local', connection: { type: 'stdio', command: process.execPath, args: [path.resolve('test/support/mcp-stdio-server.ts')] } });

  it('is refused unless the operator allows it', async () => {
    const error = await failure(connectMcpServers([server('calc', servers.http.url), stdio()], OPTS));
    expect(error.type).toBe('invalid-request');
    expect(error.status).toBe(400);
    expect(error.message).toContain('data.parameters.agent.mcps[1].connection');
    expect(error.message).toContain('AGENTD_ALLOW_STDIO_MCP=1');
  });

  it('runs the command in the session folder, without the server\'s environment', async () => {
    const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'agentd-mcp-')));
    process.env.AGENTD_TEST_PROVIDER_KEY = 'sk-must-not-leak';
    try {
      const mcp = await connect([stdio()], { allowStdio: true, cwd: dir });
      expect([...mcp.readOnly]).toEqual(['local__where']);
      const answer = JSON.parse((await run(mcp.tools, 'local__where', { env: 'AGENTD_TEST_PROVIDER_KEY' })) as string);
      expect(answer).toEqual({ cwd: dir, hasEnv: false });
    } finally {
      delete process.env.AGENTD_TEST_PROVIDER_KEY;
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a command that does not exist is a 424', async () => {
    const error = await failure(connectMcpServers([{ name: 'nothing', connection: { type: 'stdio', command: '/nonexistent/agentd-mcp' } }], { ...OPTS, allowStdio: true }));
    expect(error.type).toBe('mcp-unavailable');
    expect(error.message).toBe('MCP server "nothing" at command "/nonexistent/agentd-mcp" could not be started: spawn /nonexistent/agentd-mcp ENOENT; check connection.command, and that it is installed where agentd runs');
  });
});

describe('close', () => {
  it('is safe to call twice, and a closed client\'s tools fail as tool errors', async () => {
    const streams = await startMcpServer({ transport: 'sse' });
    try {
      const mcp = await connectMcpServers([server('calc', streams.url, { type: 'sse' })], OPTS);
      expect(streams.openStreams()).toBe(1);
      await mcp.close();
      await mcp.close();
      await expect.poll(() => streams.openStreams()).toBe(0);
      await expect(run(mcp.tools, 'calc__add', { a: 1, b: 2 })).rejects.toThrow(/MCP server "calc" could not run "add"/);
    } finally {
      await streams.close();
    }
  });

  it('an empty list connects nothing', async () => {
    const mcp = await connectMcpServers([], OPTS);
    expect(mcp.tools).toEqual({});
    await mcp.close();
    await mcp.close();
  });

  it('the default tools are the helper\'s documented ones', () => {
    expect(defaultMcpTools().map((t) => [t.name, t.annotations?.readOnlyHint])).toEqual([
      ['add', true],
      ['write_note', false],
      ['fail', undefined],
    ]);
  });
});
