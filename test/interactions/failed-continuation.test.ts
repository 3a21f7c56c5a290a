import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startMcpServer } from '../support/mcp-server.ts';
import { builtin, expectError, invokeBody, readJson, sid, startHarness, template, until, type Harness } from '../support/harness.ts';

/**
 * A continuation of answers given through the API whose start fails: tried again while the reason
 * may pass, told in the session's turns meanwhile, and recorded as failed once when it cannot work.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ logs: true, env: { AGENTD_MCP_TIMEOUT_MS: '2000' } });
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

function api(method: string, route: string, body?: unknown) {
  return fetch(`${h.url}${route}${route.includes('?') ? '&' : '?'}project_id=${h.projectId}`, {
    method,
    headers: { authorization: `ApiKey ${h.apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** An MCP server's port while it is down: every connection is cut at once, and counted. */
async function downServer(port = 0): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const agentOn = (port: number) => ({ ...template({ mode: 'allow_reads' }), mcps: [{ name: 'calc', connection: { type: 'http', url: `http://127.0.0.1:${port}/mcp` } }] });

/** A turn paused on the MCP server's `write_note`, then the server down: returns what answering needs. */
async function pausedWithServerDown(session: string) {
  const mcp = await startMcpServer();
  const port = Number(new URL(mcp.url).port);
  h.model.script([{ toolCalls: [{ name: 'calc__write_note', input: { text: 'hello' } }] }, { text: 'noted' }]);
  const paused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'note it' }], agentOn(port), { session_id: session })));
  expect(paused.data.outputs.stop_reason).toBe('paused');
  await mcp.close();
  const down = await downServer(port);
  return { port, down, id: paused.data.outputs.pending_interaction.id as string, turnId: paused.turn_id as string, messages: paused.data.outputs.messages as Array<Record<string, any>> };
}

/** Answers the pause through the API, and waits for the failed start to show among the session's turns. */
async function answeredAndFailed(session: string, id: string) {
  expect((await h.respond(id, { approved: true })).status).toBe(200);
  return until(
    () => sessionTurns(session),
    (turns) => turns.length === 2 && turns[0]!.status === 'failed',
  );
}

const sessionTurns = async (session: string) => (await (await api('GET', `/api/sessions/${session}`)).json()).turns as Array<Record<string, any>>;
const interaction = async (id: string) => (await api('GET', `/api/sessions/interactions/${id}`)).json();
const logged = (text: string, turnId: string) => h.logs.filter((line) => line.includes(text) && line.includes(turnId)).length;
const continuing = () => (h.app as unknown as { interactions: { continuing: Map<string, unknown> } }).interactions.continuing;

describe('a continuation whose start fails', () => {
  it('is told as a failed turn while the MCP server is down, tried again, and runs once it is back', async () => {
    const session = sid('retry');
    const { port, down, id, turnId, messages } = await pausedWithServerDown(session);
    // What a client reads meanwhile: a failed turn that continues the paused one, saying why and what happens next.
    const [failed] = await answeredAndFailed(session, id);
    expect(failed).toMatchObject({ stop_reason: 'error', request: { continues: turnId, via: 'out_of_band' }, error: { code: 424, type: 'mcp-unavailable' } });
    expect(failed!.error.message).toMatch(/tries the continuation again until it starts/);
    expect(await interaction(id)).toMatchObject({ status: 'responded' });
    // No turn runs, so a client attaching to the session's stream is told so at once.
    expect((await api('GET', `/services/agent/v0/invoke/${session}/stream`)).status).toBe(204);
    // A client that re-posts the same answer in band runs the continuation itself, and is told why it cannot.
    const decided = messages.map((m) => (m.approval ? { ...m, approval: { ...m.approval, approved: true } } : m));
    await expectError(await h.invoke(invokeBody([{ role: 'user', content: 'note it' }, ...decided], agentOn(port), { session_id: session })), 424, 'mcp-unavailable');

    // It is tried again, and neither recorded nor logged again.
    const seen = down.connections();
    await until(async () => down.connections(), (count) => count > seen);
    expect((await sessionTurns(session)).length).toBe(2);
    expect(logged('could not continue a paused turn', turnId)).toBe(1);

    // The server is back: the next try runs the continuation, and the tool's result lands.
    await down.close();
    const mcp = await startMcpServer({ port });
    try {
      const [continued] = await until(
        () => sessionTurns(session),
        (turns) => turns.length === 3 && turns[0]!.status !== 'running',
      );
      expect(continued).toMatchObject({ status: 'completed', request: { continues: turnId, via: 'out_of_band' } });
      expect(JSON.stringify(continued!.outputs.messages)).toContain('stored: hello');
      expect(mcp.calls).toEqual([{ name: 'write_note', args: { text: 'hello' } }]);
      expect(await interaction(id)).toMatchObject({ status: 'resolved', resolution: { via: 'out_of_band', turn_id: continued!.id } });
      await until(async () => logged('continued a paused turn whose start had failed', turnId), (n) => n === 1);
      expect(continuing().size).toBe(0);

      // The session goes on as usual.
      h.model.script({ text: 'next answer' });
      const next = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'and now?' }], agentOn(port), { session_id: session })));
      expect(next.data.outputs.stop_reason).toBe('end_turn');
    } finally {
      await mcp.close();
    }
  });

  it('stops being tried once its answers are cancelled', async () => {
    const session = sid('retry-cancel');
    const { down, id, turnId } = await pausedWithServerDown(session);
    try {
      await answeredAndFailed(session, id);
      expect((await api('POST', '/api/sessions/interactions/transition', { interaction_id: id, status: 'cancelled' })).status).toBe(200);
      await until(async () => continuing().has(turnId), (still) => !still);
      expect(logged('stopped trying to continue a paused turn', turnId)).toBe(1);
      expect((await sessionTurns(session)).map((t) => t.status)).toEqual(['failed', 'paused']);
    } finally {
      await down.close();
    }
  });

  it('that can never work is recorded as failed once, taking its answers up, and the session goes on', async () => {
    const session = sid('retry-never');
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'a' } }] }, { text: 'written' }]);
    const agent = template({ tools: [builtin('write')], mode: 'ask' });
    const paused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write it' }], agent, { session_id: session })));
    const id = paused.data.outputs.pending_interaction.id as string;
    // The state kept for the continuation is gone (a restore from an older backup, say).
    await h.store.pausedStates.removeSession(h.projectId, session);
    expect((await h.respond(id, { approved: true })).status).toBe(200);

    const [failed] = await until(
      () => sessionTurns(session),
      (turns) => turns.length === 2 && turns[0]!.status === 'failed',
    );
    expect(failed).toMatchObject({ request: { continues: paused.turn_id, via: 'out_of_band' }, error: { type: 'internal' } });
    expect(failed!.error.message).toMatch(/state stored at the pause is missing.*not tried again/);
    expect(await interaction(id)).toMatchObject({ status: 'resolved', resolution: { via: 'out_of_band', turn_id: failed!.id } });
    await until(async () => continuing().has(paused.turn_id), (still) => !still);
    expect(logged('could not continue a paused turn', paused.turn_id)).toBe(1);

    h.model.script({ text: 'fresh start' });
    const next = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'try again' }], agent, { session_id: session })));
    expect(next.data.outputs.stop_reason).toBe('end_turn');
  });

  it('waiting to be tried again does not hold up a server that stops', async () => {
    const session = sid('retry-stop');
    const { down, id, turnId } = await pausedWithServerDown(session);
    try {
      await answeredAndFailed(session, id);
      expect(continuing().has(turnId)).toBe(true);
      await (h.app as unknown as { interactions: { close(): Promise<void> } }).interactions.close();
      expect(continuing().size).toBe(0);
      // Left for the next start to pick up.
      expect(await interaction(id)).toMatchObject({ status: 'responded' });
    } finally {
      await down.close();
    }
  });
});
