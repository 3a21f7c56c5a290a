import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MCP_MAX_OUTPUT_BYTES } from '../../src/agent/mcp-tools.ts';
import { startMcpServer, startSilentMcpServer, type TestMcpServer } from '../support/mcp-server.ts';
import { expectError, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/** A template's MCP servers become the agent's tools, end to end through invoke. */

let h: Harness;
let mcp: TestMcpServer;
beforeAll(async () => {
  h = await startHarness({ env: { AGENTD_MCP_TIMEOUT_MS: '1500' } });
  mcp = await startMcpServer();
});
afterAll(async () => {
  await mcp.close();
  await h.close();
});
beforeEach(() => {
  h.model.reset();
  mcp.calls.length = 0;
  mcp.requests.length = 0;
});

const agent = (mcps: unknown[], mode = 'allow_reads') => ({ ...template({ mode }), mcps });
const calc = (extra: Record<string, unknown> = {}) => ({ name: 'calc', connection: { type: 'http', url: mcp.url }, ...extra });
const turn = (mcps: unknown[], extra: Record<string, unknown> = {}, mode?: string) =>
  h.invoke(invokeBody([{ role: 'user', content: 'use the server' }], agent(mcps, mode), { session_id: sid('mcp'), ...extra }));

describe('MCP servers', () => {
  it('run a read-only tool without asking and give its result to the model', async () => {
    h.model.script([{ toolCalls: [{ name: 'calc__add', input: { a: 2, b: 3 } }] }, { text: 'it is 5' }]);
    const body = await readJson(await turn([calc()]));
    expect(body.data.outputs.stop_reason).toBe('end_turn');
    expect(body.data.outputs.messages[1]).toMatchObject({ role: 'tool', content: '5', is_error: false });
    expect(mcp.calls).toEqual([{ name: 'add', args: { a: 2, b: 3 } }]);
    expect(h.model.requests[0]!.tools).toEqual(expect.arrayContaining(['calc__add', 'calc__write_note', 'calc__fail']));
  });

  it('pause a tool that is not read-only under allow_reads, and run it only once approved', async () => {
    const session = sid('mcp-ask');
    h.model.script([{ toolCalls: [{ name: 'calc__write_note', input: { text: 'hello' } }] }, { text: 'noted' }]);
    const first = [{ role: 'user', content: 'note it' }];
    const paused = await readJson(await h.invoke(invokeBody(first, agent([calc()]), { session_id: session })));
    expect(paused.data.outputs.pending_interaction).toMatchObject({ kind: 'user_approval', tool: 'calc__write_note' });
    expect(mcp.calls).toEqual([]);
    const decided = paused.data.outputs.messages.map((m: { approval?: object }) => (m.approval ? { ...m, approval: { ...m.approval, approved: true } } : m));
    const done = await readJson(await h.invoke(invokeBody([...first, ...decided], agent([calc()]), { session_id: session })));
    expect(done.data.outputs.messages.at(-1).content).toBe('noted');
    expect(mcp.calls).toEqual([{ name: 'write_note', args: { text: 'hello' } }]);
  });

  it('honour the server policy: include filters tools, permission deny refuses them', async () => {
    h.model.script([{ toolCalls: [{ name: 'calc__add', input: { a: 1, b: 1 } }] }, { text: 'refused' }]);
    const body = await readJson(await turn([calc({ policy: { tools: { mode: 'include', names: ['add'] }, permission: 'deny' } })], {}, 'allow'));
    expect(h.model.requests[0]!.tools).toEqual(['calc__add']);
    expect(body.data.outputs.messages[1]).toMatchObject({ is_error: true });
    expect(mcp.calls).toEqual([]);
  });

  it("cap a tool's result as read caps a file: a 20 MB answer reaches neither the model, the reply nor the store whole", async () => {
    const big = await startMcpServer({ name: 'big', tools: [{ name: 'dump', description: 'Returns a lot', annotations: { readOnlyHint: true }, handler: () => ({ content: [{ type: 'text', text: 'é'.repeat(10 * 1024 * 1024) }] }) }] });
    try {
      h.model.script([{ toolCalls: [{ name: 'big__dump', input: {} }] }, { text: 'read it' }]);
      const body = await readJson(await turn([{ name: 'big', connection: { type: 'http', url: big.url } }]));
      const result = body.data.outputs.messages[1].content as string;
      expect(result).toMatch(new RegExp(`\\[output truncated: showed the first ${MCP_MAX_OUTPUT_BYTES} of ${20 * 1024 * 1024} bytes\\]$`));
      expect(Buffer.byteLength(result)).toBeLessThan(MCP_MAX_OUTPUT_BYTES + 100);
      expect(result.startsWith('éé')).toBe(true);
      expect(JSON.stringify(h.model.requests[1]!.messages).length).toBeLessThan(2 * MCP_MAX_OUTPUT_BYTES);
    } finally {
      await big.close();
    }
  });

  it('report a tool error to the model without failing the turn', async () => {
    h.model.script([{ toolCalls: [{ name: 'calc__fail', input: {} }] }, { text: 'it failed' }]);
    const body = await readJson(await turn([calc()], {}, 'allow'));
    expect(body.data.outputs.messages[1]).toMatchObject({ is_error: true });
    expect(body.data.outputs.messages[1].content).toContain('failed on purpose');
  });

  it('forward the request credentials only to a server that opts in, and never echo them', async () => {
    h.model.script({ text: 'hi' });
    const credentials = 'cred-token-for-mcp-123456';
    await readJson(await turn([calc({ connection: { type: 'http', url: mcp.url, forward_credentials: true } })], { credentials }));
    expect(mcp.requests.some((r) => r.headers.authorization === `Bearer ${credentials}`)).toBe(true);
    mcp.requests.length = 0;
    await readJson(await turn([calc()], { credentials }));
    expect(mcp.requests.every((r) => r.headers.authorization === undefined)).toBe(true);
  });

  it("fill {{secrets.NAME}} in a server's headers and url from the request's secrets, and keep them out of what is stored", async () => {
    h.model.script([{ toolCalls: [{ name: 'calc__add', input: { a: 2, b: 3 } }] }, { text: 'five' }]);
    const token = 'mcp-token-from-the-request-987';
    const session = sid('mcp-secret');
    const server = calc({ connection: { type: 'http', url: `${mcp.url}?tenant={{secrets.TENANT}}`, headers: { authorization: 'Bearer {{ secrets.MCP_TOKEN }}' } } });
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'add' }], agent([server], 'allow'), { session_id: session, secrets: { MCP_TOKEN: token, TENANT: 'acme-tenant' } }));
    const body = await readJson(res);
    expect(body.data.outputs.messages.at(-1).content).toBe('five');
    expect(mcp.requests.length).toBeGreaterThan(0);
    expect(mcp.requests.every((r) => r.headers.authorization === `Bearer ${token}` && r.query === '?tenant=acme-tenant')).toBe(true);
    const stored = JSON.stringify(await h.store.turns.listForSession(h.projectId, session, { limit: 5 }));
    expect(stored).not.toContain(token);
    expect(JSON.stringify(body)).not.toContain(token);
  });

  it("mask a secret a tool's result or error repeats, for the model's next request as for the reply and the store", async () => {
    const token = 'mcp-token-the-server-echoes-42';
    const echo = await startMcpServer({
      name: 'echo',
      tools: [
        { name: 'say', handler: () => ({ content: [{ type: 'text', text: `you sent ${token}` }] }) },
        { name: 'fail', handler: () => ({ content: [{ type: 'text', text: `refused ${token}` }], isError: true }) },
      ],
    });
    try {
      h.model.script([{ toolCalls: [{ name: 'echo__say', input: {} }, { name: 'echo__fail', input: {} }] }, { text: 'done' }]);
      const session = sid('mcp-echo');
      const server = { name: 'echo', connection: { type: 'http', url: echo.url, headers: { 'x-api-key': '{{secrets.MCP_TOKEN}}' } } };
      const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent([server], 'allow'), { session_id: session, secrets: { MCP_TOKEN: token } })));
      expect(body.data.outputs.messages.filter((m: { is_error?: boolean }) => m.is_error !== undefined).map((m: { content: string }) => m.content)).toEqual(['you sent [redacted]', 'refused [redacted]']);
      const next = JSON.stringify(h.model.requests[1]!.messages);
      expect(next).toContain('you sent [redacted]');
      expect(next).not.toContain(token);
      expect(JSON.stringify(await h.store.turns.listForSession(h.projectId, session, { limit: 5 }))).not.toContain(token);
    } finally {
      await echo.close();
    }
  });

  it('refuse an answer through the API to a pause whose server needs a secret of the paused request; in band it goes on', async () => {
    const session = sid('mcp-secret-pause');
    h.model.script([{ toolCalls: [{ name: 'calc__write_note', input: { text: 'later' } }] }, { text: 'noted' }]);
    const server = calc({ connection: { type: 'http', url: mcp.url, headers: { authorization: 'Bearer {{secrets.MCP_TOKEN}}' } } });
    const first = [{ role: 'user', content: 'note it' }];
    const secrets = { MCP_TOKEN: 'mcp-token-of-the-paused-request' };
    const paused = await readJson(await h.invoke(invokeBody(first, agent([server]), { session_id: session, secrets })));
    const id = paused.data.outputs.pending_interaction.id;
    await expectError(await h.respond(id, { approved: true }), 400, 'invalid-request', /"MCP_TOKEN".*never stored.*in band/);
    expect((await h.store.interactions.get(h.projectId, id))?.status).toBe('pending');

    const decided = paused.data.outputs.messages.map((m: { approval?: object }) => (m.approval ? { ...m, approval: { ...m.approval, approved: true } } : m));
    const done = await readJson(await h.invoke(invokeBody([...first, ...decided], agent([server]), { session_id: session, secrets })));
    expect(done.data.outputs.messages.at(-1).content).toBe('noted');
    expect(mcp.calls).toEqual([{ name: 'write_note', args: { text: 'later' } }]);
  });

  it('refuse a server that names a secret the request does not carry, before connecting to anything', async () => {
    const server = calc({ connection: { type: 'http', url: mcp.url, headers: { 'x-api-key': '{{secrets.MISSING_KEY}}' } } });
    await expectError(await turn([server]), 400, 'invalid-request', 'mcps[0].connection.headers.x-api-key names the secret "MISSING_KEY"');
    expect(mcp.requests).toHaveLength(0);
    expect(h.model.requests).toHaveLength(0);
  });

  it('refuse a server at a link-local or cloud metadata address with a 400 naming the field and the setting, before connecting to anything', async () => {
    for (const url of ['http://169.254.169.254/latest/meta-data/', 'http://2852039166/mcp', 'http://[::ffff:169.254.169.254]/mcp', 'http://[fd00:ec2::254]/mcp']) {
      const res = await turn([calc({ connection: { type: 'http', url } })]);
      await expectError(res, 400, 'invalid-request', 'data.parameters.agent.mcps[0].connection.url: its host');
    }
    await expectError(await turn([calc({ connection: { type: 'sse', url: 'http://169.254.169.254/sse' } })]), 400, 'invalid-request', 'AGENTD_MCP_ALLOWED_HOSTS names the address');
    expect(h.model.requests).toHaveLength(0);
  });

  it('refuse a header name HTTP cannot carry, naming where, before connecting to anything (it failed as a 424 at connect)', async () => {
    const server = calc({ connection: { type: 'http', url: mcp.url, headers: { 'bad header': 'x' } } });
    await expectError(await turn([server]), 400, 'invalid-request', 'the key "bad header" is not allowed (an HTTP header name is letters, digits and !#$%&\'*+-.^_`|~ only) at data.parameters.agent.mcps[0].connection.headers');
    expect(mcp.requests).toHaveLength(0);
  });

  it('fail with a clear 424, not a hang, when a server cannot be reached or never answers', async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    await expectError(await turn([{ name: 'gone', connection: { type: 'http', url: `http://127.0.0.1:${port}/mcp` } }]), 424, 'mcp-unavailable', /gone/);

    const silent = net.createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      // A server that accepts and never answers: the connect deadline (AGENTD_MCP_TIMEOUT_MS) ends it.
      const url = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}/mcp`;
      await expectError(await turn([{ name: 'mute', connection: { type: 'http', url } }]), 424, 'mcp-unavailable', /mute/);
    } finally {
      silent.close();
    }
    expect(h.model.requests).toHaveLength(0);
  });

  it('refuse an MCP tool that shadows a tool of the template', async () => {
    const shadow = { ...template({ tools: [{ type: 'client', name: 'calc__add' }] }), mcps: [calc()] };
    await expectError(await h.invoke(invokeBody([{ role: 'user', content: 'x' }], shadow)), 400, 'invalid-request', /calc__add/);
  });
});

describe('a turn stopped while its MCP servers connect', () => {
  // Far longer than any stop may take: a stop that waited for the connect deadline would show.
  const DEADLINE_MS = 20_000;
  let r: Harness;
  beforeAll(async () => {
    r = await startHarness({ env: { AGENTD_MCP_TIMEOUT_MS: String(DEADLINE_MS), AGENTD_ALLOW_STDIO_MCP: '1' } });
  });
  afterAll(async () => r.close());

  const stop = (session: string) => fetch(`${r.url}/api/sessions/${session}/stop?project_id=${r.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${r.apiKey}` } });
  const mute = (url: string) => ({ ...template(), mcps: [{ name: 'mute', connection: { type: 'http', url } }] });

  it('ends at once on POST .../stop, cancelled, with the half-open connection closed', async () => {
    const server = await startSilentMcpServer();
    try {
      const session = sid('mcp-stop');
      const caller = r.invoke(invokeBody([{ role: 'user', content: 'hi' }], mute(server.url), { session_id: session }));
      await server.asked;
      const asked = Date.now();
      const res = await stop(session);
      expect(res.status).toBe(200);
      expect(Date.now() - asked).toBeLessThan(DEADLINE_MS / 4);
      const { turn_id } = await res.json();
      expect((await r.store.turns.get(r.projectId, turn_id))?.status).toBe('cancelled');
      await expectError(await caller, 409, 'turn-cancelled', 'the turn was stopped on request');
      await server.closed;
      expect(r.model.requests).toHaveLength(0);
      // The session is free at once.
      r.model.script({ text: 'next' });
      expect((await readJson(await r.invoke(invokeBody([{ role: 'user', content: 'hi' }], template(), { session_id: session })))).data.outputs.messages.at(-1).content).toBe('next');
    } finally {
      await server.close();
    }
  });

  it("takes back the folder it made for a stdio server, as a refused turn does", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-mcp-stop-'));
    const started = path.join(dir, 'started');
    try {
      const session = sid('mcp-stop-stdio');
      // Runs in the session folder, made for it, and says so outside it; never answers.
      const script = "require('fs').writeFileSync(process.argv[1], 'yes'); setInterval(() => {}, 1000)";
      const mcps = [{ name: 'quiet', connection: { type: 'stdio', command: process.execPath, args: ['-e', script, started] } }];
      const caller = r.invoke(invokeBody([{ role: 'user', content: 'hi' }], { ...template(), mcps }, { session_id: session }));
      await expect.poll(() => existsSync(started), { timeout: 10_000 }).toBe(true);
      expect(existsSync(r.sessionDir(session))).toBe(true);
      expect((await stop(session)).status).toBe(200);
      await expectError(await caller, 409, 'turn-cancelled');
      expect(existsSync(r.sessionDir(session))).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('ends at once when a new turn takes the session over; a streamed caller is told as a JSON one is', async () => {
    const server = await startSilentMcpServer();
    try {
      const session = sid('mcp-takeover');
      const caller = r.invoke(invokeBody([{ role: 'user', content: 'hi' }], mute(server.url), { session_id: session }), { headers: { accept: 'text/event-stream' } });
      await server.asked;
      const asked = Date.now();
      r.model.script({ text: 'the new turn' });
      const res = await r.invoke(invokeBody([{ role: 'user', content: 'again' }], template(), { session_id: session }), { headers: { 'x-ag-session-control': 'force' } });
      expect((await readJson(res)).data.outputs.messages.at(-1).content).toBe('the new turn');
      expect(Date.now() - asked).toBeLessThan(DEADLINE_MS / 4);
      await expectError(await caller, 409, 'turn-cancelled', 'a newer turn took over the session');
      await server.closed;
      const turns = await r.store.turns.listForSession(r.projectId, session, { limit: 5 });
      expect(turns.map((t) => t.status).sort()).toEqual(['cancelled', 'completed']);
    } finally {
      await server.close();
    }
  });
});
