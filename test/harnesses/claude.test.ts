import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, invokeBody, readFrames, readJson, sid, startHarness, type Harness } from '../support/harness.ts';
import { waitFor } from '../sessions-api/client.ts';
import { configsApi } from '../configs/client.ts';
import { startMcpServer } from '../support/mcp-server.ts';
import { agentdChat } from '../support/headless-chat.ts';

/** Issue 20: Claude Code as the agent of a turn, over ACP, against the fake model's Messages API. */

let h: Harness;
beforeAll(async () => {
  // No process waits for a next turn here, so each test sees only its own; parking has tests of its own.
  h = await startHarness({ env: (url) => ({ ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: 'sk-ant-test-key-7c1d', AGENTD_HARNESS_PARK_MS: '0' }) });
});
afterAll(async () => h.close());

const agent = (mode = 'allow', extra: Record<string, unknown> = {}) => ({
  instructions: { agents_md: 'You are a test agent.' },
  llm: { provider: 'anthropic', model: 'fake-model' },
  harness: { kind: 'claude' },
  runner: { permissions: { default: mode } },
  ...extra,
});

const write = (session: string, file = 'hello.txt', content = 'hi there') => ({ toolCalls: [{ name: 'Write', input: { file_path: path.join(h.sessionDir(session), file), content } }] });

/** The fake model writes a file with Claude's Write tool, then answers. */
function scriptWrite(session: string) {
  h.model.script([write(session), { text: 'Wrote it.' }]);
}

/**
 * A turn paused on Write under `ask`. The fake model asks for the same call again once the turn
 * goes on (the harness raises the gate anew in its new process), then answers.
 */
async function pausedOnWrite(session = sid('gate')) {
  h.model.script([write(session), write(session), { text: 'Done with the file.' }]);
  const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write hello.txt' }], agent('ask'), { session_id: session })));
  return { session, outputs: body.data.outputs };
}

/** The paused output re-posted with the decision on its gated call. */
function decided(outputs: { messages: Array<Record<string, unknown>> }, approved: boolean) {
  return outputs.messages.map((m) => (m.approval ? { ...m, approval: { ...(m.approval as object), approved } } : m));
}

describe('harness claude', () => {
  it('runs a tool turn end to end: the file is in the session folder, the output in spec order', async () => {
    const session = sid('claude');
    scriptWrite(session);
    const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write hello.txt' }], agent(), { session_id: session })));
    expect(await readFile(path.join(h.sessionDir(session), 'hello.txt'), 'utf8')).toBe('hi there');
    const messages = body.data.outputs.messages;
    expect(messages.map((m: { role: string; tool_name?: string }) => m.tool_name ?? m.role)).toEqual(['Write', 'tool', 'assistant']);
    expect(messages[0]).toMatchObject({ role: 'tool', tool_name: 'Write', input: { content: 'hi there' } });
    expect(messages[1]).toMatchObject({ role: 'tool', is_error: false });
    expect(messages[2]).toMatchObject({ role: 'assistant', content: 'Wrote it.' });
    expect(body.data.outputs.stop_reason).toBe('end_turn');
    expect(await readFile(path.join(h.sessionDir(session), 'CLAUDE.md'), 'utf8')).toContain('You are a test agent.');
  }, 60_000);

  it('streams the same turn as native SSE frames, ending with done', async () => {
    const session = sid('claude-sse');
    scriptWrite(session);
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'write hello.txt' }], agent(), { session_id: session }), { headers: { accept: 'text/event-stream' } });
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
    expect(outputs.pending_interaction).toMatchObject({ kind: 'user_approval', tool: 'Write', payload: { input: { content: 'hi there' } } });
    expect(existsSync(path.join(h.sessionDir(session), 'hello.txt'))).toBe(false);

    const history = [{ role: 'user', content: 'write hello.txt' }, ...decided(outputs, true)];
    const body = await readJson(await h.invoke(invokeBody(history, agent('ask'), { session_id: session })));
    expect(await readFile(path.join(h.sessionDir(session), 'hello.txt'), 'utf8')).toBe('hi there');
    // The continuation tells the result of the call that was paused, then the answer.
    const callId = outputs.pending_interaction.payload.tool_call_id;
    expect(body.data.outputs.messages[0]).toMatchObject({ role: 'tool', tool_call_id: callId, is_error: false });
    expect(body.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Done with the file.' });
    expect((await h.store.interactions.get(h.projectId, outputs.pending_interaction.id))?.status).toBe('resolved');
  }, 60_000);

  it('ask: a denial in band leaves no file, and the harness is told', async () => {
    const { session, outputs } = await pausedOnWrite();
    const history = [{ role: 'user', content: 'write hello.txt' }, ...decided(outputs, false)];
    const body = await readJson(await h.invoke(invokeBody(history, agent('ask'), { session_id: session })));
    expect(existsSync(path.join(h.sessionDir(session), 'hello.txt'))).toBe(false);
    expect(body.status, JSON.stringify(body)).toMatchObject({ code: 200 });
    expect(body.data.outputs.messages[0]).toMatchObject({ role: 'tool', is_error: true });
  }, 60_000);

  it('ask: approving through /respond continues the turn by itself', async () => {
    const { session, outputs } = await pausedOnWrite();
    expect((await h.respond(outputs.pending_interaction.id, { approved: true })).status).toBe(200);
    await waitFor(async () => (await h.store.interactions.get(h.projectId, outputs.pending_interaction.id))?.status === 'resolved', 'the continuation');
    await waitFor(async () => (await h.store.leases.get(h.projectId, session)) === undefined, 'the continuation to end');
    expect(await readFile(path.join(h.sessionDir(session), 'hello.txt'), 'utf8')).toBe('hi there');
  }, 60_000);

  it('ask gates reads too; allow_reads lets them run; deny refuses and goes on', async () => {
    const read = (session: string) => ({ toolCalls: [{ name: 'Read', input: { file_path: path.join(h.sessionDir(session), 'notes.txt') } }] });
    const asked = sid('read-ask');
    h.model.script([read(asked), { text: 'read it' }]);
    const paused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'read notes' }], agent('ask'), { session_id: asked })));
    expect(paused.data.outputs).toMatchObject({ stop_reason: 'paused', pending_interaction: { tool: 'Read' } });

    const reads = sid('read-allow');
    h.model.script([read(reads), { text: 'read it' }]);
    const ran = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'read notes' }], agent('allow_reads'), { session_id: reads })));
    expect(ran.data.outputs.stop_reason).toBe('end_turn');

    const denied = sid('deny');
    h.model.script([write(denied), { text: 'could not write' }]);
    const refused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write' }], agent('deny'), { session_id: denied })));
    expect(refused.data.outputs.stop_reason).toBe('end_turn');
    expect(refused.data.outputs.messages[1]).toMatchObject({ role: 'tool', is_error: true });
    expect(existsSync(path.join(h.sessionDir(denied), 'hello.txt'))).toBe(false);
  }, 60_000);

  it('keeps its state outside the session folder, and no provider key in any file there', async () => {
    const session = sid('claude-key');
    scriptWrite(session);
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write hello.txt' }], agent(), { session_id: session })));
    for (const file of await readdir(h.sessionDir(session), { recursive: true })) {
      const text = await readFile(path.join(h.sessionDir(session), file)).catch(() => Buffer.alloc(0));
      expect(text.includes('sk-ant-test-key-7c1d'), file).toBe(false);
    }
  }, 60_000);

  it('refuses what it cannot run: an unknown kind lists the known ones, codex is not available yet, an OpenAI model is a 400', async () => {
    await expectError(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], { harness: { kind: 'nope' } })), 400, 'unsupported-kind', /claude/);
    await expectError(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], { harness: { kind: 'codex' } })), 501, 'not-implemented', /codex/);
    await expectError(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], { ...agent(), llm: { provider: 'openai', model: 'fake-model' } })), 400, 'invalid-request', /anthropic/);
  });
});

describe('harness claude, through every way in', () => {
  it('the Vercel stream: useChat pauses on the approval, approves, re-posts, and ends with one message', async () => {
    const session = sid('claude-chat');
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
    const part = chat.messages.at(-1)!.parts.find((p) => p.type === 'tool-Write') as { state: string; approval: { id: string } };
    expect(part.state).toBe('approval-requested');
    await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    const assistants = chat.messages.filter((m) => m.role === 'assistant');
    expect(assistants).toHaveLength(1);
    expect(assistants[0]!.parts.find((p) => p.type === 'tool-Write')).toMatchObject({ state: 'output-available' });
    expect(await readFile(path.join(h.sessionDir(session), 'hello.txt'), 'utf8')).toBe('hi there');
  }, 60_000);

  it('a pause answered through another agentd on the same data goes on there, from the harness’s saved session', async () => {
    const { session, outputs } = await pausedOnWrite();
    const other = await startHarness({ dataDir: h.dataDir, databaseUrl: h.databaseUrl, env: (url) => ({ ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: 'sk-ant-test-key-7c1d' }) });
    try {
      other.model.script([write(session), { text: 'Done elsewhere.' }]);
      expect((await other.respond(outputs.pending_interaction.id, { approved: true })).status).toBe(200);
      await waitFor(async () => (await other.store.interactions.get(other.projectId, outputs.pending_interaction.id))?.status === 'resolved', 'the continuation');
      await waitFor(async () => (await other.store.leases.get(other.projectId, session)) === undefined, 'the continuation to end');
      expect(await readFile(path.join(h.sessionDir(session), 'hello.txt'), 'utf8')).toBe('hi there');
      // The harness was told to go on, in the session it saved: the model saw the first prompt too.
      expect(JSON.stringify(other.model.requests[0]!.messages)).toContain('write hello.txt');
    } finally {
      await other.close();
    }
  }, 60_000);

  it('force take-over ends the old turn and its process', async () => {
    const session = sid('claude-force');
    // Only the first call is slow: Claude also makes calls of its own around a turn.
    h.model.reset();
    let first = true;
    h.model.script(() => (first ? ((first = false), { text: 'slow', latencyMs: 20_000 }) : { text: 'the new turn' }));
    const slow = h.invoke(invokeBody([{ role: 'user', content: 'take your time' }], agent(), { session_id: session }), { headers: { accept: 'text/event-stream' } });
    await waitFor(async () => h.model.requests.length > 0, 'the first turn to reach the model');
    const second = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'now this' }], agent(), { session_id: session }), { headers: { 'x-ag-session-control': 'force' } }));
    expect(second.data.outputs.messages.at(-1)).toMatchObject({ content: 'the new turn' });
    await (await slow).text();
    const turns = (await h.store.turns.listForSessionPage(h.projectId, session, { limit: 10 })).items;
    expect(turns.map((t) => t.status).sort()).toEqual(['cancelled', 'completed']);
    expect(spawnSync('pgrep', ['-f', h.sessionDir(session)], { encoding: 'utf8' }).stdout.trim()).toBe('');
  }, 60_000);

  it('cannot write outside its session folder, nor read another session’s', async () => {
    const mine = sid('claude-jail');
    const theirs = sid('claude-other');
    scriptWrite(theirs);
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write' }], agent(), { session_id: theirs })));
    h.model.script([
      { toolCalls: [{ name: 'Write', input: { file_path: path.join(h.sessionDir(theirs), 'planted.txt'), content: 'x' } }] },
      { toolCalls: [{ name: 'Read', input: { file_path: path.join(h.sessionDir(theirs), 'hello.txt') } }] },
      { text: 'tried' },
    ]);
    const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'escape' }], agent(), { session_id: mine })));
    // Inside, the data folder is not there at all: a write lands in the sandbox's private /tmp or
    // fails, and the read finds nothing.
    expect(existsSync(path.join(h.sessionDir(theirs), 'planted.txt'))).toBe(false);
    const results = body.data.outputs.messages.filter((m: { role: string; is_error?: boolean }) => m.role === 'tool' && m.is_error !== undefined);
    expect(results).toHaveLength(2);
    expect(results[1].is_error).toBe(true);
    expect(JSON.stringify(body)).not.toContain('hi there');
  }, 60_000);
});

describe('harness processes are bounded', () => {
  it('past AGENTD_HARNESS_MAX_PROCESSES a turn gets 503 with retry-after; a seat freed is taken again', async () => {
    const small = await startHarness({ env: (url) => ({ ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: 'sk-ant-test-key-7c1d', AGENTD_HARNESS_MAX_PROCESSES: '1' }) });
    try {
      small.model.reset();
      let first = true;
      small.model.script(() => (first ? ((first = false), { text: 'slow', latencyMs: 3_000 }) : { text: 'quick' }));
      const slow = small.invoke(invokeBody([{ role: 'user', content: 'slow' }], agent(), { session_id: sid('seat-a') }));
      await waitFor(async () => small.model.requests.length > 0, 'the first turn to reach the model');
      const refused = await small.invoke(invokeBody([{ role: 'user', content: 'quick' }], agent(), { session_id: sid('seat-b') }));
      expect(refused.headers.get('retry-after')).toBe('5');
      await expectError(refused, 503, 'unavailable', /AGENTD_HARNESS_MAX_PROCESSES/);
      expect((await slow).status).toBe(200);
      expect((await small.invoke(invokeBody([{ role: 'user', content: 'quick' }], agent(), { session_id: sid('seat-c') }))).status).toBe(200);
    } finally {
      await small.close();
    }
  }, 60_000);

  it('an evaluation over a harness agent with batch_size 2 runs every case, never more than two harnesses at once', async () => {
    const created = await configsApi(h, 'POST', '/workflows', { slug: 'claude-agent', data: { parameters: { agent: agent() } } });
    expect(created.status).toBe(201);
    const revision = (await (await configsApi(h, 'GET', '/workflows/claude-agent/revisions')).json()).revisions[0].id as string;
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
});

describe('harness claude, with what the template brings', () => {
  it('connects to the template’s MCP servers itself, secrets filled in, and runs their tools', async () => {
    const mcp = await startMcpServer({ name: 'calc' });
    try {
      h.model.script([{ toolCalls: [{ name: 'mcp__calc__add', input: { a: 2, b: 3 } }] }, { text: 'It is 5.' }]);
      const template = agent('allow', { mcps: [{ name: 'calc', connection: { type: 'http', url: mcp.url, headers: { authorization: 'Bearer {{secrets.token}}' } } }] });
      const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'add' }], template, { secrets: { token: 'mcp-token-5e1f' } })));
      expect(mcp.calls).toEqual([{ name: 'add', args: { a: 2, b: 3 } }]);
      expect(mcp.requests.some((r) => r.headers.authorization === 'Bearer mcp-token-5e1f')).toBe(true);
      expect(body.data.outputs.messages.at(-1)).toMatchObject({ content: 'It is 5.' });
      expect(JSON.stringify(body)).not.toContain('mcp-token-5e1f');
    } finally {
      await mcp.close();
    }
  }, 60_000);

  it('puts the template’s skills where Claude reads them', async () => {
    const session = sid('claude-skill');
    h.model.script({ text: 'ok' });
    const skill = { name: 'haiku', description: 'Write a haiku', body: 'Three lines: 5, 7, 5.' };
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], agent('allow', { skills: [skill] }), { session_id: session })));
    expect(await readFile(path.join(h.sessionDir(session), '.claude/skills/haiku/SKILL.md'), 'utf8')).toContain('Three lines: 5, 7, 5.');
  }, 60_000);

  it('says which template keys it has no place for', async () => {
    const client = { type: 'client', name: 'pick', description: 'pick' };
    await expectError(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], agent('allow', { tools: [client] }))), 400, 'invalid-request', /client tools/);
    const stdio = { name: 's', connection: { type: 'stdio', command: 'true' } };
    await expectError(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], agent('allow', { mcps: [stdio] }))), 400, 'invalid-request', /AGENTD_ALLOW_STDIO_MCP/);
  });
});

describe('a process parked for the session’s next turn', () => {
  it('is reused by the next turn, not by a turn started otherwise, and ends after its time or with the server', async () => {
    const parking = await startHarness({ env: (url) => ({ ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: 'sk-ant-test-key-7c1d', AGENTD_HARNESS_PARK_MS: '1500' }) });
    // The bwrap that binds the session folder: one per harness process of the session.
    const pids = (session: string) => spawnSync('pgrep', ['-f', '--', `--bind ${parking.sessionDir(session)} `], { encoding: 'utf8' }).stdout.trim();
    try {
      const session = sid('parked');
      const turn = async (text: string, mode = 'allow') => {
        parking.model.script({ text });
        const body = await readJson(await parking.invoke(invokeBody([{ role: 'user', content: text }], agent(mode), { session_id: session })));
        expect(body.data.outputs.messages.at(-1)).toMatchObject({ content: text });
      };
      await turn('one');
      const first = pids(session);
      expect(first).not.toBe('');
      await turn('two');
      expect(pids(session)).toBe(first);
      // Another mode means other settings: a process started with the old ones is not reused.
      await turn('three', 'ask');
      const third = pids(session);
      expect(third).not.toBe('');
      expect(third).not.toBe(first);
      await waitFor(async () => pids(session) === '', 'the parked process to end after its time');
      await turn('four');
      // A deleted session's parked process goes with it: a session made anew under the id gets a
      // process started on its new folder, and what it writes lands there.
      expect(pids(session)).not.toBe('');
      expect((await fetch(`${parking.url}/api/sessions/${session}`, { method: 'DELETE', headers: { authorization: `ApiKey ${parking.apiKey}` } })).status).toBe(204);
      await waitFor(async () => pids(session) === '', 'the deleted session’s parked process to end');
      parking.model.script([{ toolCalls: [{ name: 'Write', input: { file_path: path.join(parking.sessionDir(session), 'again.txt'), content: 'new' } }] }, { text: 'ok' }]);
      await readJson(await parking.invoke(invokeBody([{ role: 'user', content: 'write' }], agent(), { session_id: session })));
      expect(await readFile(path.join(parking.sessionDir(session), 'again.txt'), 'utf8')).toBe('new');
    } finally {
      await parking.close();
    }
    expect(spawnSync('pgrep', ['-f', parking.dataDir], { encoding: 'utf8' }).stdout.trim()).toBe('');
  }, 90_000);
});

describe('after every turn', () => {
  it('leaves no harness process running', async () => {
    expect(spawnSync('pgrep', ['-f', h.dataDir], { encoding: 'utf8' }).stdout.trim()).toBe('');
  });
});
