import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeReply, FakeToolCall, RecordedRequest } from '../../src/testing/fake-model.ts';
import { harnessStateFolder, sessionFolder } from '../../src/sessions/folders.ts';
import { openStore } from '../../src/store/db.ts';
import { expectError, invokeBody, readFrames, readJson, sid, startHarness, type Harness } from '../support/harness.ts';
import { firstStartCredentials, postJson, startServe } from '../support/child-server.ts';
import { waitFor } from '../sessions-api/client.ts';
import { configsApi } from '../configs/client.ts';
import { startMcpServer } from '../support/mcp-server.ts';
import { agentdChat } from '../support/headless-chat.ts';

/**
 * What differs between the harnesses for the tests every harness must pass (issue 20): its model,
 * and how the fake model asks it to write, read and call an MCP tool.
 */
export interface HarnessProfile {
  kind: 'claude' | 'codex' | 'pi';
  llm: { provider: string; model: string };
  /** The server's environment for the harness's provider: its base URL (the fake model's) and key. */
  env(url: string): Record<string, string>;
  /** The provider key in that environment, which no file may hold. */
  key: string;
  /** The call that writes `content` to `file` in `folder`, and the harness's name for its tool. */
  write(folder: string, file: string, content: string): FakeToolCall;
  writeTool: string;
  /** agentd's built-in tool name whose `permission` reaches that tool. */
  writeEntry: string;
  /** What the pending approval of that call shows of its input. */
  writeInput(content: string): Record<string, unknown>;
  read(file: string): FakeToolCall;
  /** The call that runs a shell command line. */
  run(command: string): FakeToolCall;
  readTool: string;
  /** The call of an MCP server's tool; none for a harness that takes no MCP servers. */
  mcpCall?(server: string, tool: string, input: unknown): FakeToolCall;
  instructionsFile: string;
  /** A settings file agentd writes into the harness's state folder before each start. */
  settingsFile: string;
  skillsDir: string;
  /** A provider the harness does not speak, if there is one. */
  foreignProvider?: string;
}

/**
 * The harness went on in its own saved session (`session/load`): agentd did not have to retell the
 * conversation in a new one, which it does only when the harness lost its session.
 */
function expectLoaded(requests: readonly RecordedRequest[]): void {
  expect(JSON.stringify(requests.map((r) => r.messages))).not.toContain('The conversation so far');
}

/** The conformance tests every harness passes: one turn of today's contract each, through a real harness process. */
/** Every harness a server may offer (AGENTD_HARNESSES). */
const OFFERED = ['claude', 'codex', 'pi'];

export function harnessSuite(profile: HarnessProfile, extra?: (h: () => Harness) => void): void {
  let h: Harness;
  beforeAll(async () => {
    // No process waits for a next turn here, so each test sees only its own; parking has tests of its own.
    h = await startHarness({ env: (url) => ({ ...profile.env(url), AGENTD_HARNESS_PARK_MS: '0' }) });
  });
  afterAll(async () => h.close());

  const agent = (mode = 'allow', more: Record<string, unknown> = {}) => ({
    instructions: { agents_md: 'You are a test agent.' },
    llm: profile.llm,
    harness: { kind: profile.kind },
    runner: { permissions: { default: mode } },
    ...more,
  });
  const write = (session: string, file = 'hello.txt', content = 'hi there'): FakeReply => ({ toolCalls: [profile.write(h.sessionDir(session), file, content)] });
  const user = (text: string) => [{ role: 'user', content: text }];
  const ask = async (session: string, mode = 'allow', text = 'write hello.txt', more: Record<string, unknown> = {}) =>
    readJson(await h.invoke(invokeBody(user(text), agent(mode, more), { session_id: session })));
  const fileOf = (session: string, file = 'hello.txt') => readFile(path.join(h.sessionDir(session), file), 'utf8');

  /**
   * A turn paused on the write under `ask`. The fake model asks for the same call again once the
   * turn goes on (the harness raises the gate anew in its new process), then answers.
   */
  async function pausedOnWrite(session = sid('gate')) {
    h.model.script([write(session), write(session), { text: 'Done with the file.' }]);
    const body = await ask(session, 'ask');
    return { session, outputs: body.data.outputs };
  }

  /** The paused output re-posted with the decision on its gated call. */
  const decided = (outputs: { messages: Array<Record<string, unknown>> }, approved: boolean) =>
    outputs.messages.map((m) => (m.approval ? { ...m, approval: { ...(m.approval as object), approved } } : m));

  describe(`harness ${profile.kind}`, () => {
    it('runs a tool turn end to end: the file is in the session folder, the output in spec order', async () => {
      const session = sid(profile.kind);
      h.model.script([write(session), { text: 'Wrote it.' }]);
      const body = await ask(session);
      expect(await fileOf(session)).toBe('hi there');
      const messages = body.data.outputs.messages;
      expect(messages.map((m: { role: string; tool_name?: string }) => m.tool_name ?? m.role)).toEqual([profile.writeTool, 'tool', 'assistant']);
      expect(messages[0]).toMatchObject({ role: 'tool', tool_name: profile.writeTool, input: profile.writeInput('hi there') });
      expect(messages[1]).toMatchObject({ role: 'tool', is_error: false });
      expect(messages[2]).toMatchObject({ role: 'assistant', content: 'Wrote it.' });
      expect(body.data.outputs.stop_reason).toBe('end_turn');
      expect(await fileOf(session, profile.instructionsFile)).toContain('You are a test agent.');
    }, 60_000);

    it('streams the same turn as native SSE frames, ending with done', async () => {
      const session = sid(`${profile.kind}-sse`);
      h.model.script([write(session), { text: 'Wrote it.' }]);
      const res = await h.invoke(invokeBody(user('write hello.txt'), agent(), { session_id: session }), { headers: { accept: 'text/event-stream' } });
      const { frames } = await readFrames(res);
      const types = frames.map((f) => f.type);
      expect(types[0]).toBe('turn_start');
      expect(types.indexOf('tool_call')).toBeLessThan(types.indexOf('tool_result'));
      expect(types.indexOf('tool_result')).toBeLessThan(types.indexOf('message_delta'));
      expect(frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'end_turn' } });
    }, 60_000);

    it('ask: pauses before the write with a user_approval on the harness’s tool; approving in band writes it', async () => {
      const { session, outputs } = await pausedOnWrite();
      expect(outputs.stop_reason).toBe('paused');
      expect(outputs.pending_interaction).toMatchObject({ kind: 'user_approval', tool: profile.writeTool, payload: { input: profile.writeInput('hi there') } });
      expect(existsSync(path.join(h.sessionDir(session), 'hello.txt'))).toBe(false);

      const body = await readJson(await h.invoke(invokeBody([...user('write hello.txt'), ...decided(outputs, true)], agent('ask'), { session_id: session })));
      expect(await fileOf(session)).toBe('hi there');
      // The continuation tells the result of the call that was paused, then the answer.
      const callId = outputs.pending_interaction.payload.tool_call_id;
      expect(body.data.outputs.messages[0]).toMatchObject({ role: 'tool', tool_call_id: callId, is_error: false });
      expect(body.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Done with the file.' });
      expect((await h.store.interactions.get(h.projectId, outputs.pending_interaction.id))?.status).toBe('resolved');
      expectLoaded(h.model.requests);
    }, 60_000);

    it('ask: a denial in band leaves no file, and the turn ends cleanly with the denial in the output', async () => {
      const { session, outputs } = await pausedOnWrite();
      const body = await readJson(await h.invoke(invokeBody([...user('write hello.txt'), ...decided(outputs, false)], agent('ask'), { session_id: session })));
      expect(existsSync(path.join(h.sessionDir(session), 'hello.txt'))).toBe(false);
      expect(body.status, JSON.stringify(body)).toMatchObject({ code: 200 });
      expect(body.data.outputs.messages[0]).toMatchObject({ role: 'tool', tool_call_id: outputs.pending_interaction.payload.tool_call_id, is_error: true });
      expect(body.data.outputs.stop_reason).toBe('end_turn');
    }, 60_000);

    // Codex asks about a step's calls together, in any order: the pause may come on either, and the
    // turn that answers it may be asked about the other first.
    it('ask: a call approved in band runs to its result though the harness asks about the next one meanwhile', async () => {
      const session = sid('two-gated');
      const both = { toolCalls: [profile.write(h.sessionDir(session), 'one.txt', '1'), profile.write(h.sessionDir(session), 'two.txt', '2')] };
      h.model.script([both, both, { text: 'Done.' }, { text: 'Done.' }]);
      const first = (await ask(session, 'ask', 'write both')).data.outputs;
      expect(first.stop_reason).toBe('paused');
      const firstCall = first.messages.find((m: { approval?: unknown }) => m.approval).tool_call_id;
      const [approvedFile, otherFile] = JSON.stringify(first.pending_interaction.payload.input).includes('one.txt') ? ['one.txt', 'two.txt'] : ['two.txt', 'one.txt'];
      const messages = [...user('write both'), ...decided(first, true)];
      const second = (await readJson(await h.invoke(invokeBody(messages, agent('ask'), { session_id: session })))).data.outputs;
      expect(second.stop_reason).toBe('paused');
      expect(second.pending_interaction.payload.tool_call_id).not.toBe(firstCall);
      expect(second.messages).toContainEqual(expect.objectContaining({ role: 'tool', tool_call_id: firstCall, is_error: false }));
      expect(await fileOf(session, approvedFile)).toBe(approvedFile === 'one.txt' ? '1' : '2');
      expect(existsSync(path.join(h.sessionDir(session), otherFile))).toBe(false);
      // The whole conversation re-posted with the second answer too, as useChat does: no answer is refused as spent.
      const third = await h.invoke(invokeBody([...messages, ...decided(second, true)], agent('ask'), { session_id: session }));
      expect(third.status, JSON.stringify(await third.clone().json())).toBe(200);
    }, 60_000);

    it('ask: approving through /respond continues the turn by itself', async () => {
      const { session, outputs } = await pausedOnWrite();
      expect((await h.respond(outputs.pending_interaction.id, { approved: true })).status).toBe(200);
      await waitFor(async () => (await h.store.interactions.get(h.projectId, outputs.pending_interaction.id))?.status === 'resolved', 'the continuation');
      await waitFor(async () => (await h.store.leases.get(h.projectId, session)) === undefined, 'the continuation to end');
      expect(await fileOf(session)).toBe('hi there');
    }, 60_000);

    it('ask gates reads too; allow_reads lets them run; deny refuses and the turn ends cleanly', async () => {
      const read: FakeReply = { toolCalls: [profile.read('notes.txt')] };
      h.model.script([read, { text: 'read it' }]);
      const paused = await ask(sid('read-ask'), 'ask', 'read notes');
      expect(paused.data.outputs).toMatchObject({ stop_reason: 'paused', pending_interaction: { tool: profile.readTool } });

      h.model.script([read, { text: 'read it' }]);
      const ran = await ask(sid('read-allow'), 'allow_reads', 'read notes');
      expect(ran.data.outputs.stop_reason).toBe('end_turn');
      expect(ran.data.outputs.messages.at(-1)).toMatchObject({ content: 'read it' });

      const denied = sid('deny');
      h.model.script([write(denied), { text: 'could not write' }]);
      const refused = await ask(denied, 'deny');
      expect(refused.data.outputs.stop_reason).toBe('end_turn');
      expect(refused.data.outputs.messages[1]).toMatchObject({ role: 'tool', is_error: true });
      expect(existsSync(path.join(h.sessionDir(denied), 'hello.txt'))).toBe(false);
    }, 60_000);

    it('a tool entry’s own permission reaches the harness’s tool of that name: it asks under allow', async () => {
      const session = sid(`${profile.kind}-entry`);
      h.model.script([write(session), { text: 'Wrote it.' }]);
      const tools = [{ type: 'builtin', name: profile.writeEntry, permission: 'ask' }];
      const body = await ask(session, 'allow', 'write hello.txt', { tools });
      expect(body.data.outputs).toMatchObject({ stop_reason: 'paused', pending_interaction: { tool: profile.writeTool } });
      expect(existsSync(path.join(h.sessionDir(session), 'hello.txt'))).toBe(false);
    }, 60_000);

    it('keeps no provider key in any file of the data folder (session, harness state, SQLite) nor in the stored turns, even one its model repeats', async () => {
      const session = sid(`${profile.kind}-key`);
      // The harness keeps what its model answered in its own transcript, in the state folder.
      h.model.script([write(session), { text: `Wrote it with ${profile.key}.` }]);
      await ask(session);
      // The data folder holds the session folders, the harnesses' state folders and a SQLite database.
      for (const file of await readdir(h.dataDir, { recursive: true })) {
        const text = await readFile(path.join(h.dataDir, file)).catch(() => Buffer.alloc(0));
        expect(text.includes(profile.key), file).toBe(false);
      }
      const turns = (await h.store.turns.listForSessionPage(h.projectId, session, { limit: 10 })).items;
      expect(JSON.stringify(turns)).not.toContain(profile.key);
    }, 60_000);

    it('keeps the provider key out of its sandbox: not in any process’s environment there', async () => {
      const session = sid(`${profile.kind}-env`);
      h.model.script([{ toolCalls: [profile.run("env; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; echo listed")] }, { text: 'ok' }]);
      const body = await ask(session, 'allow', 'show your environment');
      expect(body.data.outputs.messages[1]).toMatchObject({ role: 'tool', content: expect.stringContaining('listed') });
      expect(JSON.stringify(body)).toContain('PATH=');
      expect(JSON.stringify(body)).not.toContain(profile.key);
    }, 60_000);

    it('with the network off (the default) its commands reach nothing, its model only through agentd; on, they reach the host', async () => {
      const port = new URL(h.model.url).port;
      const probe = profile.run(`bash -c '(exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null && echo port-reached || echo port-blocked'`);
      const tried = async (network: string) => {
        h.model.script([{ toolCalls: [probe] }, { text: 'probed' }]);
        const body = await ask(sid(`${profile.kind}-net`), 'allow', 'probe', { sandbox: { permissions: { network: { mode: network } } } });
        expect(body.data.outputs.messages.at(-1)).toMatchObject({ content: 'probed' });
        return JSON.stringify(body.data.outputs.messages[1]);
      };
      expect(await tried('off')).toContain('port-blocked');
      expect(await tried('on')).toContain('port-reached');
    }, 60_000);

    it('puts the template’s skills where the harness reads them', async () => {
      const session = sid(`${profile.kind}-skill`);
      h.model.reset();
      h.model.script({ text: 'ok' });
      const skill = { name: 'haiku', description: 'Write a haiku', body: 'Three lines: 5, 7, 5.' };
      await ask(session, 'allow', 'hi', { skills: [skill] });
      expect(await fileOf(session, `${profile.skillsDir}/haiku/SKILL.md`)).toContain('Three lines: 5, 7, 5.');
      // The harness found it there: the model is told of it.
      expect(JSON.stringify(h.model.requests.map((r) => r.body))).toContain('Write a haiku');
    }, 60_000);

    it('a file attached to the message is in its working folder, and its prompt names it', async () => {
      const session = sid(`${profile.kind}-attach`);
      h.model.reset();
      h.model.script({ text: 'ok' });
      const url = `data:text/plain;base64,${Buffer.from('attached words').toString('base64')}`;
      const message = { role: 'user', content: [{ type: 'text', text: 'what does it say?' }, { type: 'file', url, filename: 'note.txt' }] };
      const body = await readJson(await h.invoke(invokeBody([message], agent(), { session_id: session })));
      expect(body.data.outputs.stop_reason).toBe('end_turn');
      expect(await fileOf(session, 'attachments/note.txt')).toBe('attached words');
      expect(JSON.stringify(h.model.requests.map((r) => r.body))).toContain('[attached file: attachments/note.txt (text/plain, 14 bytes)]');
    }, 60_000);

    it('harness.extras: `system` replaces its own system prompt, `append_system` follows it; a turn without them has its own again', async () => {
      const session = sid(`${profile.kind}-system`);
      const systemOf = async (extras?: Record<string, string>) => {
        h.model.reset();
        h.model.script({ text: 'ok' });
        const body = await ask(session, 'allow', 'hi', extras ? { harness: { kind: profile.kind, extras } } : {});
        expect(body.data.outputs.stop_reason).toBe('end_turn');
        return h.model.requests[0]!.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');
      };
      const replaced = await systemOf({ system: 'SYSTEM-MARK-31: answer tersely.' });
      const appended = await systemOf({ append_system: 'APPEND-MARK-47: sign every answer.' });
      const own = await systemOf();
      expect(replaced).toContain('SYSTEM-MARK-31');
      expect(replaced.length).toBeLessThan(own.length / 2);
      expect(appended).toContain('APPEND-MARK-47');
      expect(appended.length).toBeGreaterThan(own.length);
      expect(own).not.toMatch(/SYSTEM-MARK|APPEND-MARK/);
    }, 90_000);

    const mcpCall = profile.mcpCall;
    it.runIf(mcpCall !== undefined)('connects to the template’s MCP servers itself, secrets filled in, and runs their tools', async () => {
      const mcp = await startMcpServer({ name: 'calc' });
      try {
        h.model.script([{ toolCalls: [mcpCall!('calc', 'add', { a: 2, b: 3 })] }, { text: 'It is 5.' }]);
        const mcps = [{ name: 'calc', connection: { type: 'http', url: mcp.url, headers: { authorization: 'Bearer {{secrets.token}}' } } }];
        const body = await readJson(await h.invoke(invokeBody(user('add'), agent('allow', { mcps }), { secrets: { token: 'mcp-token-5e1f' } })));
        expect(mcp.calls).toEqual([{ name: 'add', args: { a: 2, b: 3 } }]);
        expect(body.data.outputs.messages[0]).toMatchObject({ role: 'tool', tool_name: 'mcp__calc__add', input: { a: 2, b: 3 } });
        expect(mcp.requests.some((r) => r.headers.authorization === 'Bearer mcp-token-5e1f')).toBe(true);
        expect(body.data.outputs.messages.at(-1)).toMatchObject({ content: 'It is 5.' });
        expect(JSON.stringify(body)).not.toContain('mcp-token-5e1f');
      } finally {
        await mcp.close();
      }
    }, 60_000);

    it.runIf(mcpCall !== undefined)('refuses an MCP server naming a secret the request lacks before the turn starts: nothing is recorded', async () => {
      const session = sid();
      const mcps = [{ name: 'calc', connection: { type: 'http', url: 'http://127.0.0.1:9/mcp', headers: { authorization: 'Bearer {{secrets.token}}' } } }];
      await expectError(await h.invoke(invokeBody(user('add'), agent('allow', { mcps }), { session_id: session })), 400, 'invalid-request', /secrets\.token/);
      expect(await h.store.turns.listForSession(h.projectId, session, { limit: 10 })).toEqual([]);
    });

    it.runIf(mcpCall !== undefined)('refuses an MCP server at a link-local or cloud metadata address before the turn starts, naming the field: the relay never reaches it', async () => {
      const session = sid();
      for (const url of ['http://169.254.169.254/latest/meta-data/', 'http://[::ffff:169.254.169.254]/mcp', 'http://[fd00:ec2::254]/mcp']) {
        const mcps = [{ name: 'calc', connection: { type: 'http', url } }];
        await expectError(await h.invoke(invokeBody(user('add'), agent('allow', { mcps }), { session_id: session })), 400, 'invalid-request', /^data\.parameters\.agent\.mcps\[0\]\.connection\.url: its host .*AGENTD_MCP_ALLOWED_HOSTS/);
      }
      expect(await h.store.turns.listForSession(h.projectId, session, { limit: 10 })).toEqual([]);
    });

    it.runIf(mcpCall === undefined)('refuses MCP servers, which it cannot take, with a 400 that names it', async () => {
      const mcps = [{ name: 'calc', connection: { type: 'http', url: 'http://127.0.0.1:9/mcp' } }];
      await expectError(await h.invoke(invokeBody(user('add'), agent('allow', { mcps }))), 400, 'invalid-request', new RegExp(`harness "${profile.kind}".*mcps`));
    });
  });

  describe(`harness ${profile.kind}, through every way in`, () => {
    it('the Vercel stream: useChat pauses on the approval, approves, re-posts, and ends with one message', async () => {
      const session = sid(`${profile.kind}-chat`);
      h.model.script([write(session), write(session), { text: 'Done with the file.' }]);
      const chat = agentdChat({
        id: session,
        api: `${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`,
        apiKey: h.apiKey,
        body: { data: { parameters: { agent: agent('ask') } } },
        sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      });
      await chat.sendMessage({ text: 'write hello.txt' });
      await chat.untilFinished(1);
      expect(chat.error).toBeUndefined();
      const part = chat.messages.at(-1)!.parts.find((p) => p.type === `tool-${profile.writeTool}`) as { state: string; approval: { id: string } };
      expect(part.state).toBe('approval-requested');
      await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
      await chat.untilFinished(2);
      expect(chat.error).toBeUndefined();
      const assistants = chat.messages.filter((m) => m.role === 'assistant');
      expect(assistants).toHaveLength(1);
      expect(assistants[0]!.parts.find((p) => p.type === `tool-${profile.writeTool}`)).toMatchObject({ state: 'output-available' });
      expect(await fileOf(session)).toBe('hi there');
    }, 60_000);

    it('a pause answered through another agentd on the same data goes on there, from the harness’s saved session', async () => {
      const { session, outputs } = await pausedOnWrite();
      const other = await startHarness({ dataDir: h.dataDir, databaseUrl: h.databaseUrl, env: profile.env });
      try {
        other.model.script([write(session), { text: 'Done elsewhere.' }]);
        expect((await other.respond(outputs.pending_interaction.id, { approved: true })).status).toBe(200);
        await waitFor(async () => (await other.store.interactions.get(other.projectId, outputs.pending_interaction.id))?.status === 'resolved', 'the continuation');
        await waitFor(async () => (await other.store.leases.get(other.projectId, session)) === undefined, 'the continuation to end');
        expect(await fileOf(session)).toBe('hi there');
        // The harness was told to go on, in the session it saved: the model saw the first prompt too.
        expect(JSON.stringify(other.model.requests[0]!.messages)).toContain('write hello.txt');
        expectLoaded(other.model.requests);
      } finally {
        await other.close();
      }
    }, 60_000);

    it('an agentd that does not offer the harness (AGENTD_HARNESSES) refuses its turns and an answer to its pause with a 424, and loses nothing', async () => {
      const { session, outputs } = await pausedOnWrite();
      const others = OFFERED.filter((kind) => kind !== profile.kind).join(',');
      const other = await startHarness({ dataDir: h.dataDir, databaseUrl: h.databaseUrl, env: (url) => ({ ...profile.env(url), AGENTD_HARNESSES: others }) });
      try {
        const refusal = `harness "${profile.kind}" is turned off on this server (AGENTD_HARNESSES: ${others.replace(',', ', ')})`;
        const answer = await expectError(await other.respond(outputs.pending_interaction.id, { approved: true }), 424, 'harness-unavailable');
        expect(answer.status.message).toContain(`because its turn could not go on: ${refusal}`);
        expect(answer.status.message).toMatch(/Answer it through a server that runs the harness: the interaction stays pending$/);
        const turn = await expectError(await other.invoke(invokeBody(user('hi'), agent(), { session_id: sid('off') })), 424, 'harness-unavailable');
        expect(turn.status.message.startsWith(refusal)).toBe(true);
        expect(other.model.requests).toHaveLength(0);
        expect((await h.store.interactions.get(h.projectId, outputs.pending_interaction.id))?.status).toBe('pending');
      } finally {
        await other.close();
      }
      // Still answerable where the harness runs.
      expect((await h.respond(outputs.pending_interaction.id, { approved: true })).status).toBe(200);
      await waitFor(async () => (await h.store.interactions.get(h.projectId, outputs.pending_interaction.id))?.status === 'resolved', 'the continuation');
      await waitFor(async () => (await h.store.leases.get(h.projectId, session)) === undefined, 'the continuation to end');
      expect(await fileOf(session)).toBe('hi there');
    }, 60_000);

    it('a session whose process is parked on one agentd goes on through another on the same data, from the saved session', async () => {
      const parking = await startHarness({ env: (url) => ({ ...profile.env(url), AGENTD_HARNESS_PARK_MS: '60000' }) });
      try {
        const session = sid(`${profile.kind}-moved`);
        parking.model.script({ text: 'first answer' });
        await readJson(await parking.invoke(invokeBody(user('remember the word tangerine'), agent(), { session_id: session })));
        const other = await startHarness({ dataDir: parking.dataDir, databaseUrl: parking.databaseUrl, env: (url) => ({ ...profile.env(url), AGENTD_HARNESS_PARK_MS: '0' }) });
        try {
          other.model.script({ text: 'second answer' });
          const body = await readJson(await other.invoke(invokeBody(user('which word?'), agent(), { session_id: session })));
          expect(body.data.outputs.messages.at(-1)).toMatchObject({ content: 'second answer' });
          // The harness loaded its own session: the first turn is in the conversation as it was, not retold.
          const seen = JSON.stringify(other.model.requests.map((r) => r.messages));
          expect(seen).toContain('remember the word tangerine');
          expect(seen).toContain('first answer');
          expectLoaded(other.model.requests);
        } finally {
          await other.close();
        }
      } finally {
        await parking.close();
      }
    }, 60_000);

    it('a pause survives agentd killed with SIGKILL: the restarted server continues it through session/load', async () => {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), `agentd-${profile.kind}-kill-`));
      const env = { ...profile.env(h.model.url), AGENTD_DATA_DIR: dataDir };
      const session = 'killed';
      const writeIn = (projectId: string): FakeReply => ({ toolCalls: [profile.write(sessionFolder(dataDir, projectId, session), 'hello.txt', 'hi there')] });
      try {
        const first = await startServe(env);
        let auth: ReturnType<typeof firstStartCredentials>;
        let paused;
        try {
          auth = firstStartCredentials(first.output());
          h.model.script([writeIn(auth.projectId), { text: 'never reached' }]);
          paused = await (await postJson(first.url, '/services/agent/v0/invoke', auth, invokeBody(user('write hello.txt'), agent('ask'), { session_id: session }))).json();
          expect(paused.data.outputs.stop_reason).toBe('paused');
        } finally {
          // Killed whatever happened above: a failed assertion must not leave a server running.
          first.child.kill('SIGKILL');
          await first.exited;
        }
        h.model.reset();
        h.model.script([writeIn(auth.projectId), { text: 'continued after restart' }]);
        const second = await startServe(env);
        try {
          const res = await postJson(second.url, `/api/sessions/interactions/${paused.data.outputs.pending_interaction.id}/respond`, auth, { answer: { approved: true } });
          expect(res.status).toBe(200);
          const store = await openStore({ dataDir });
          try {
            await waitFor(async () => (await store.turns.listForSession(auth.projectId, session, { limit: 5 }))[0]?.status === 'completed', 'the continuation');
            const [latest] = await store.turns.listForSession(auth.projectId, session, { limit: 5 });
            expect(JSON.stringify(latest!.output)).toContain('continued after restart');
          } finally {
            await store.close();
          }
          expect(await readFile(path.join(sessionFolder(dataDir, auth.projectId, session), 'hello.txt'), 'utf8')).toBe('hi there');
          // The new process loaded the harness's saved session: the model saw the first prompt.
          expect(JSON.stringify(h.model.requests.map((r) => r.messages))).toContain('write hello.txt');
          expectLoaded(h.model.requests);
        } finally {
          second.child.kill('SIGTERM');
          await second.exited;
        }
        expect(spawnSync('pgrep', ['-f', dataDir], { encoding: 'utf8' }).stdout.trim()).toBe('');
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    }, 90_000);

    it('force take-over ends the old turn and its process', async () => {
      const session = sid(`${profile.kind}-force`);
      // Only the first call is slow: a harness may make calls of its own around a turn.
      h.model.reset();
      let first = true;
      h.model.script(() => (first ? ((first = false), { text: 'slow', latencyMs: 20_000 }) : { text: 'the new turn' }));
      const slow = h.invoke(invokeBody(user('take your time'), agent(), { session_id: session }), { headers: { accept: 'text/event-stream' } });
      await waitFor(async () => h.model.requests.length > 0, 'the first turn to reach the model');
      const pids = () => spawnSync('pgrep', ['-f', h.sessionDir(session)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
      const old = pids();
      expect(old).not.toEqual([]);
      const second = await readJson(await h.invoke(invokeBody(user('now this'), agent(), { session_id: session }), { headers: { 'x-ag-session-control': 'force' } }));
      expect(second.data.outputs.messages.at(-1)).toMatchObject({ content: 'the new turn' });
      await (await slow).text();
      const turns = (await h.store.turns.listForSessionPage(h.projectId, session, { limit: 10 })).items;
      expect(turns.map((t) => t.status).sort()).toEqual(['cancelled', 'completed']);
      // The old turn's process was killed with it; the new one's ends once it has closed its session.
      expect(pids().filter((pid) => old.includes(pid))).toEqual([]);
      await waitFor(async () => pids().length === 0, 'the new turn’s process to end');
    }, 60_000);

    it('a turn past AGENTD_TURN_TIMEOUT_MS ends with a 504, and its process with it', async () => {
      const timed = await startHarness({ env: (url) => ({ ...profile.env(url), AGENTD_TURN_TIMEOUT_MS: '4000', AGENTD_HARNESS_PARK_MS: '0' }) });
      try {
        const session = sid(`${profile.kind}-timeout`);
        timed.model.script(() => ({ text: 'too late', latencyMs: 30_000 }));
        await expectError(await timed.invoke(invokeBody(user('take forever'), agent(), { session_id: session })), 504, 'turn-timeout', /AGENTD_TURN_TIMEOUT_MS/);
        await waitFor(async () => spawnSync('pgrep', ['-f', timed.sessionDir(session)], { encoding: 'utf8' }).stdout.trim() === '', 'the timed-out turn’s process to end');
      } finally {
        await timed.close();
      }
    }, 60_000);

    it.each([
      { status: 500, reply: { error: { status: 500, message: 'boom' } }, type: 'upstream-error', expected: 502, retryAfter: null },
      { status: 429, reply: { error: { status: 429, headers: { 'retry-after': '7' }, message: 'slow down' } }, type: 'upstream-rate-limited', expected: 429, retryAfter: '7' },
      { status: 401, reply: { error: { status: 401, message: 'bad key' } }, type: 'upstream-auth', expected: 424, retryAfter: null },
    ])('a model that answers $status ends the turn as the built-in loop does: $expected $type, after one call', async ({ reply, type, expected, retryAfter }) => {
      h.model.reset();
      h.model.script(() => reply);
      const res = await h.invoke(invokeBody(user('hi'), agent(), { session_id: sid(`${profile.kind}-model-${expected}`) }));
      await expectError(res, expected, type);
      expect(res.headers.get('retry-after')).toBe(retryAfter);
      expect(h.model.requests).toHaveLength(1);
    }, 60_000);

    it('a model that sends nothing for AGENTD_MODEL_TIMEOUT_MS ends the turn with a 504', async () => {
      const timed = await startHarness({ env: (url) => ({ ...profile.env(url), AGENTD_MODEL_TIMEOUT_MS: '1500', AGENTD_HARNESS_PARK_MS: '0' }) });
      try {
        timed.model.script(() => ({ hang: true }));
        await expectError(await timed.invoke(invokeBody(user('hi'), agent(), { session_id: sid(`${profile.kind}-silent`) })), 504, 'upstream-timeout', /AGENTD_MODEL_TIMEOUT_MS/);
      } finally {
        await timed.close();
      }
    }, 60_000);

    it('cannot write outside its session folder, nor read another session’s', async () => {
      const mine = sid(`${profile.kind}-jail`);
      const theirs = sid(`${profile.kind}-other`);
      h.model.script([write(theirs), { text: 'Wrote it.' }]);
      await ask(theirs);
      h.model.script([{ toolCalls: [profile.write(h.sessionDir(theirs), 'planted.txt', 'x')] }, { toolCalls: [profile.read(path.join(h.sessionDir(theirs), 'hello.txt'))] }, { text: 'tried' }]);
      const body = await ask(mine, 'allow', 'escape');
      // Inside, the data folder is not there at all: a write lands in the sandbox's private /tmp or
      // fails, and the read finds nothing.
      expect(existsSync(path.join(h.sessionDir(theirs), 'planted.txt'))).toBe(false);
      const results = body.data.outputs.messages.filter((m: { role: string; is_error?: boolean }) => m.role === 'tool' && m.is_error !== undefined);
      expect(results).toHaveLength(2);
      expect(JSON.stringify(body)).not.toContain('hi there');
    }, 60_000);

    it('writes its instructions and settings as files of its own: a link the agent left in their place leads nowhere outside, a FIFO holds nothing up', async () => {
      const session = sid(`${profile.kind}-links`);
      // On the host, out of the sandbox's sight: where agentd would write through the links.
      const outside = await mkdtemp(path.join(os.tmpdir(), 'agentd-outside-'));
      try {
        const state = harnessStateFolder(h.dataDir, h.projectId, session);
        const links = [path.join(h.sessionDir(session), profile.instructionsFile), path.join(state, profile.settingsFile)];
        const fifo = path.join(state, 'acp-session.json');
        const command = `${links.map((at, i) => `ln -sfn ${outside}/${i} ${at}`).join(' && ')} && rm ${fifo} && mkfifo ${fifo} && echo linked`;
        h.model.script([{ toolCalls: [profile.run(command)] }, { text: 'linked' }]);
        const first = await ask(session, 'allow', 'link');
        expect(JSON.stringify(first.data.outputs.messages[1])).toContain('linked');
        h.model.script({ text: 'next' });
        const second = await ask(session, 'allow', 'hi');
        expect(second.data.outputs.messages.at(-1)).toMatchObject({ content: 'next' });
        expect(await readdir(outside)).toEqual([]);
        expect(await fileOf(session, profile.instructionsFile)).toContain('You are a test agent.');
      } finally {
        await rm(outside, { recursive: true, force: true });
      }
    }, 60_000);

    it('an evaluation over the harness agent with batch_size 2 runs every case, never more than two harnesses at once', async () => {
      const slug = `${profile.kind}-agent`;
      expect((await configsApi(h, 'POST', '/workflows', { slug, data: { parameters: { agent: agent() } } })).status).toBe(201);
      const revision = (await (await configsApi(h, 'GET', `/workflows/${slug}/revisions`)).json()).revisions[0].id as string;
      const rows = ['a', 'b', 'c', 'd'].map((x) => ({ data: { messages: [{ role: 'user', content: `say ${x}` }] } }));
      const testset = (await (await configsApi(h, 'POST', '/simple/testsets/', { testset: { data: { testcases: rows } } })).json()).testset;
      h.model.script(() => ({ text: 'said', latencyMs: 300 }));
      const run = (await (await configsApi(h, 'POST', '/simple/evaluations/', { evaluation: { data: { testset_steps: [testset.revision_id], application_steps: [revision], concurrency: { batch_size: 2 } } } })).json()).evaluation;
      let most = 0;
      let status = 'running';
      while (status === 'running') {
        // Each harness runs under a bwrap that binds its session folder: one folder, one harness.
        const lines = spawnSync('pgrep', ['-af', 'bwrap'], { encoding: 'utf8' }).stdout.split('\n');
        most = Math.max(most, new Set(lines.filter((l) => l.includes(h.dataDir)).map((l) => /--bind (\S+)/.exec(l)?.[1])).size);
        status = (await (await configsApi(h, 'GET', `/simple/evaluations/${run.id}`)).json()).evaluation.data.status;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(status).toBe('success');
      expect(most).toBeGreaterThan(0);
      expect(most).toBeLessThanOrEqual(2);
    }, 120_000);

    it('says which template keys it has no place for', async () => {
      const client = { type: 'client', name: 'pick', description: 'pick' };
      await expectError(await h.invoke(invokeBody(user('hi'), agent('allow', { tools: [client] }))), 400, 'invalid-request', /client tools/);
      const stdio = { name: 's', connection: { type: 'stdio', command: 'true' } };
      await expectError(await h.invoke(invokeBody(user('hi'), agent('allow', { mcps: [stdio] }))), 400, 'invalid-request', /AGENTD_ALLOW_STDIO_MCP/);
      if (profile.foreignProvider) {
        const llm = { provider: profile.foreignProvider, model: 'fake-model' };
        await expectError(await h.invoke(invokeBody(user('hi'), { ...agent(), llm })), 400, 'invalid-request', new RegExp(profile.llm.provider));
      }
    });
  });

  extra?.(() => h);

  describe(`harness ${profile.kind}, after every turn`, () => {
    it('leaves no harness process running', async () => {
      expect(spawnSync('pgrep', ['-f', h.dataDir], { encoding: 'utf8' }).stdout.trim()).toBe('');
    });
  });
}
