import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeReply, RecordedRequest } from '../../src/testing/fake-model.ts';
import { AgentdError, createClient, type AgentdClient, type InvokeBody, type InvokeManyProgress, type Outcome } from '../../src/client/index.ts';
import { builtin, sid, startHarness, template as harnessTemplate, type Harness } from '../support/harness.ts';

/**
 * The typed client (src/client) against a real agentd and a real fake model: invoke and its
 * errors, streams in every format and transport, one real call on every namespace, and
 * invokeMany's order, concurrency, retries, cancellation and session modes.
 */

let h: Harness;
let client: AgentdClient;

/** When the model was called, per last user message, to script "fails first, then succeeds". */
const calls = new Map<string, number[]>();
/** Until set, `ev-broken` cases fail on every attempt. */
let healed = false;

const userText = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';

function script(req: RecordedRequest): FakeReply {
  const text = userText(req);
  const times = calls.get(text) ?? [];
  times.push(Date.now());
  calls.set(text, times);
  const n = times.length;
  const answer = { text: `answer to ${text}` };
  if (text.startsWith('write please')) {
    if (req.messages.at(-1)?.role === 'tool') return { text: 'written, thanks' };
    return { toolCalls: [{ name: 'write', input: { path: 'approved.txt', content: 'approved content' } }] };
  }
  if (text.includes('upstream-401')) return { error: { status: 401 } };
  if (text.includes('upstream-429')) return { error: { status: 429, headers: { 'retry-after': '7' }, message: 'slow down' } };
  const order = /^order-(\d+)$/.exec(text);
  if (order) return { ...answer, latencyMs: (5 - Number(order[1])) * 80 };
  if (text.startsWith('conc-')) return { ...answer, latencyMs: 100 };
  if (text.startsWith('limited-') && n === 1) return { error: { status: 429, headers: { 'retry-after': '1' }, message: 'slow down' } };
  if (text === 'cancel-0') return { ...answer, latencyMs: 10 };
  if (text.startsWith('cancel-')) return { ...answer, latencyMs: 1500 };
  if (text.startsWith('ev-broken') && !healed) return { error: { status: 500, message: 'always down' } };
  if (text.startsWith('ev-slow')) return { ...answer, latencyMs: 2000 };
  return answer;
}

/** The harness's template, typed as the client's request type declares a template. */
type Agent = NonNullable<NonNullable<NonNullable<InvokeBody['data']>['parameters']>['agent']>;
const template = (options: Parameters<typeof harnessTemplate>[0] = {}) => harnessTemplate(options) as Agent;
const user = (text: string) => ({ role: 'user', content: text });
const turn = (text: string, extra: Partial<InvokeBody> = {}): InvokeBody => ({ ...extra, data: { inputs: { messages: [user(text)] }, parameters: { agent: template() } } });
const lastContent = (reply: { data?: { outputs: { messages: unknown[] } } }) => (reply.data?.outputs.messages.at(-1) as { content?: unknown } | undefined)?.content;

/** The AgentdError a promise rejects with; fails the test when it resolves or throws anything else. */
async function rejection(promise: Promise<unknown>): Promise<AgentdError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(AgentdError);
    return error as AgentdError;
  }
  throw new Error('expected the call to fail');
}

async function collect<T>(frames: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const frame of frames) out.push(frame);
  return out;
}

async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> {
  for (let i = 0; i < 800; i++) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${what}: not reached in time`);
}

/** Waits until no model call is in flight, so concurrency measurements start from zero. */
const idle = () => until(async () => h.model.inFlight, (n) => n === 0, 'model idle');

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  h = await startHarness({ script });
  client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
});
afterAll(async () => h?.close());

describe('invoke', () => {
  it('returns the JSON reply of one turn', async () => {
    const session = sid('invoke');
    const reply = await client.invoke(turn('hello there', { session_id: session }));
    expect(reply.session_id).toBe(session);
    expect(reply.status).toMatchObject({ code: 200 });
    expect(reply.turn_id).toEqual(expect.any(String));
    expect(reply.data?.outputs.stop_reason).toBe('end_turn');
    expect(lastContent(reply)).toBe('answer to hello there');
    expect(h.model.requests.at(-1)?.messages.at(-1)).toMatchObject({ role: 'user', content: 'hello there' });
  });

  it('an invalid session id is a 400 invalid-session-id AgentdError', async () => {
    const error = await rejection(client.invoke(turn('never runs', { session_id: 'bad id' })));
    expect(error.status).toMatchObject({ code: 400, type: 'invalid-session-id' });
    expect(error.status.message).toMatch(/session_id/);
    expect(error.retryable).toBe(false);
    expect((error.body as any).status.code).toBe(400);
    expect(error.message).toMatch(/^400 invalid-session-id: /);
  });

  it('a wrong API key is a 401 unauthenticated AgentdError', async () => {
    const wrong = createClient({ baseUrl: h.url, apiKey: 'not-a-real-key', projectId: h.projectId });
    const error = await rejection(wrong.invoke(turn('never runs')));
    expect(error.status).toMatchObject({ code: 401, type: 'unauthenticated' });
    expect(error.status.message.length).toBeGreaterThan(0);
    expect(error.retryable).toBe(false);
  });

  it('a key holding a character no key has is a 401 naming it and where, not a network error, and is not sent', async () => {
    const sent: string[] = [];
    for (const [key, char, at] of [[`${h.apiKey}\u200B`, 'U+200B', h.apiKey.length + 1], ['agd_…', 'U+2026', 5], ['agd_two words', 'U+0020', 8]] as const) {
      const pasted = createClient({ baseUrl: h.url, apiKey: key, fetch: (input, init) => (sent.push(String(input)), fetch(input, init)) });
      const error = await rejection(pasted.keys.self());
      expect(error.status).toMatchObject({ code: 401, type: 'unauthenticated' });
      expect(error.status.message).toContain(`holds ${char} at character ${at}, which no key has`);
      expect(error.status.message).not.toContain(h.apiKey);
      expect(error.retryable).toBe(false);
    }
    expect(sent).toEqual([]);
  });

  it('a server that is not running is a network AgentdError (code 0) saying what to check', async () => {
    const port = await closedPort();
    const down = createClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: h.apiKey, projectId: h.projectId });
    const error = await rejection(down.invoke(turn('never runs')));
    expect(error.status).toMatchObject({ code: 0, type: 'network' });
    expect(error.status.message).toContain(`could not reach http://127.0.0.1:${port}`);
    expect(error.status.message).toMatch(/is agentd running there\?/);
    expect(error.retryable).toBe(true);
    expect(error.cause).toBeDefined();
    // A stream reaches the same failure.
    const streamed = await rejection(collect(down.stream(turn('never runs'))));
    expect(streamed.status).toMatchObject({ code: 0, type: 'network' });
  });
});

describe('stream', () => {
  const deltas = (frames: Array<{ type: string; data?: any }>) =>
    frames
      .filter((f) => f.type === 'message_delta')
      .map((f) => f.data.delta)
      .join('');

  it('native frames over SSE, turn_start … done', async () => {
    const session = sid('sse');
    const frames = await collect(client.stream(turn('stream me', { session_id: session })));
    const types = frames.map((f) => f.type);
    expect(types[0]).toBe('turn_start');
    expect(types.at(-1)).toBe('done');
    expect(types.filter((t) => t === 'done')).toHaveLength(1);
    expect(types).toContain('message_start');
    expect(types).toContain('message_end');
    expect((frames[0] as any).data.session_id).toBe(session);
    expect((frames.at(-1) as any).data.stop_reason).toBe('end_turn');
    expect(deltas(frames as any)).toBe('answer to stream me');
  });

  it('native frames over NDJSON: the same frames as SSE', async () => {
    // A fetch that records what was asked for and what came back (the `fetch` option).
    const seen: Array<{ accept: string | null; type: string | null }> = [];
    const recording = createClient({
      baseUrl: h.url,
      apiKey: h.apiKey,
      projectId: h.projectId,
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        seen.push({ accept: new Headers(init?.headers).get('accept'), type: res.headers.get('content-type') });
        return res;
      },
    });
    const viaSse = await collect(recording.stream(turn('same frames'), { transport: 'sse' }));
    const viaNdjson = await collect(recording.stream(turn('same frames'), { transport: 'ndjson' }));
    expect(seen).toEqual([
      { accept: 'text/event-stream', type: expect.stringMatching(/^text\/event-stream/) },
      { accept: 'application/x-ndjson', type: expect.stringMatching(/^application\/x-ndjson/) },
    ]);
    expect(viaNdjson[0]?.type).toBe('turn_start');
    expect(viaNdjson.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'end_turn' } });
    expect(viaNdjson.map((f) => f.type)).toEqual(viaSse.map((f) => f.type));
    expect(deltas(viaNdjson as any)).toBe('answer to same frames');
  });

  it("format 'vercel' yields UI message chunks, start … finish, and [DONE] never leaks as a frame", async () => {
    const session = sid('vercel');
    const body: InvokeBody = {
      session_id: session,
      data: { inputs: { messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'vercel hi' }] }] }, parameters: { agent: template() } },
    };
    const chunks = await collect(client.stream(body, { format: 'vercel' }));
    expect(chunks.every((c) => typeof c === 'object' && c !== null && typeof c.type === 'string')).toBe(true);
    expect(chunks[0]).toMatchObject({ type: 'start', messageMetadata: { session_id: session } });
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', messageMetadata: { stop_reason: 'end_turn' } });
    expect(
      chunks
        .filter((c) => c.type === 'text-delta')
        .map((c) => c.delta)
        .join(''),
    ).toBe('answer to vercel hi');
    expect(JSON.stringify(chunks)).not.toContain('[DONE]');
  });

  it("resume follows a session's live turn from its start as Vercel chunks, and yields nothing when none runs", async () => {
    const session = sid('resume');
    const running = client.invoke(turn('cancel-resume', { session_id: session }));
    await until(() => client.sessions.get(session).catch(() => undefined), (view) => view?.live_turn != null, 'the turn running');
    const chunks = await collect(client.resume(session));
    expect(chunks[0]).toMatchObject({ type: 'start', messageMetadata: { session_id: session } });
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', messageMetadata: { stop_reason: 'end_turn' } });
    const text = chunks.flatMap((c) => (c.type === 'text-delta' ? [c.delta] : [])).join('');
    expect(text).toBe('answer to cancel-resume');
    expect(lastContent(await running)).toBe(text);
    expect(await collect(client.resume(session))).toEqual([]);
  });

  it('a failure before the first frame throws the real error: upstream 401 → 424 upstream-auth', async () => {
    const error = await rejection(collect(client.stream(turn('stream upstream-401'))));
    expect(error.status).toMatchObject({ code: 424, type: 'upstream-auth' });
    expect(error.retryable).toBe(false);
    const ndjson = await rejection(collect(client.stream(turn('ndjson upstream-401'), { transport: 'ndjson' })));
    expect(ndjson.status).toMatchObject({ code: 424, type: 'upstream-auth' });
  });

  it('a failure before the first frame throws the real error: upstream 429 → 429 with its retry-after', async () => {
    const error = await rejection(collect(client.stream(turn('stream upstream-429'))));
    expect(error.status).toMatchObject({ code: 429, type: 'upstream-rate-limited' });
    expect(error.retryAfterMs).toBe(7000);
    expect(error.retryable).toBe(true);
    const body: InvokeBody = { data: { inputs: { messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'vercel upstream-429' }] }] }, parameters: { agent: template() } } };
    const vercel = await rejection(collect(client.stream(body, { format: 'vercel' })));
    expect(vercel.status).toMatchObject({ code: 429, type: 'upstream-rate-limited' });
  });
});

describe('namespaces', () => {
  it('inspect shows the workflow that would run and a ready request', async () => {
    const session = sid('inspect');
    const inspected = await client.inspect({ session_id: session });
    expect(inspected.revision).toMatchObject({ slug: 'agent', version: 0, data: { uri: 'agenta:builtin:agent:v0' } });
    expect((inspected.revision as any).data.parameters.agent.llm).toMatchObject({ model: 'fake-model' });
    expect(inspected.request).toMatchObject({ session_id: session });
  });

  it('sessions: writeFile, listFiles, readFile, get, delete', async () => {
    const session = sid('files');
    expect(await client.sessions.writeFile(session, 'in/data.txt', 'hello, file')).toEqual({ path: 'in/data.txt', size: 11 });
    expect(await client.sessions.listFiles(session, 'in')).toEqual({ path: 'in', entries: [{ name: 'data.txt', type: 'file', size: 11 }] });
    expect(new TextDecoder().decode(await client.sessions.readFile(session, 'in/data.txt'))).toBe('hello, file');
    const root = await client.sessions.listFiles(session);
    expect(root.entries.map((e) => e.name)).toContain('in');

    const reply = await client.invoke(turn('a turn to record', { session_id: session }));
    const view = await client.sessions.get(session);
    expect(view.session).toMatchObject({ id: session, project_id: h.projectId });
    expect(view.turns).toHaveLength(1);
    expect(view.turns[0]).toMatchObject({ id: reply.turn_id, status: 'completed', stop_reason: 'end_turn' });
    expect(await client.sessions.get(session, { limit: 1 })).toMatchObject({ turns: [{ id: reply.turn_id }] });

    const missing = await rejection(client.sessions.readFile(session, 'in/nope.txt'));
    expect(missing.status).toMatchObject({ code: 404, type: 'not-found' });
    const escape = await rejection(client.sessions.readFile(session, '../outside.txt'));
    expect(escape.status).toMatchObject({ code: 400, type: 'invalid-request' });

    expect(await client.sessions.delete(session)).toBeUndefined();
    const gone = await rejection(client.sessions.get(session));
    expect(gone.status).toMatchObject({ code: 404, type: 'not-found' });
  });

  it('an id of "." or ".." (a session may have one) is refused before it is sent: a URL would take it as a step to another resource', async () => {
    const sent: string[] = [];
    const counted = createClient({ ...client.options, fetch: (input, init) => (sent.push(String(input)), fetch(input, init)) });
    for (const session of ['.', '..']) {
      expect((await counted.invoke(turn(`in ${session}`, { session_id: session }))).session_id).toBe(session);
      sent.length = 0;
      for (const refused of [counted.sessions.get(session), counted.sessions.listFiles(session), counted.sessions.writeFile(session, 'x.txt', 'x'), counted.sessions.stop(session)]) {
        const error = await rejection(refused);
        expect(error.status).toMatchObject({ code: 400, type: 'invalid-request' });
        expect(error.status.message).toContain(`the id "${session}" cannot be named in a URL path (`);
        expect(error.retryable).toBe(false);
      }
      await expect(counted.resume(session).next()).rejects.toThrow(/cannot be named in a URL path/);
      expect(sent).toEqual([]);
    }
    // Dots within an id are only characters of it.
    await counted.invoke(turn('in ...', { session_id: '...' }));
    expect((await counted.sessions.get('...')).session.id).toBe('...');
  });

  it('interactions: a paused turn is queried, responded to, and resolved by its continuation', async () => {
    const session = sid('approve');
    const agent = template({ tools: [builtin('write')], mode: 'ask' });
    const paused = await client.invoke({ session_id: session, data: { inputs: { messages: [user('write please')] }, parameters: { agent } } });
    expect(paused.data?.outputs.stop_reason).toBe('paused');
    const pending = paused.data?.outputs.pending_interaction as { id: string; kind: string; tool?: string } | undefined;
    expect(pending).toMatchObject({ kind: 'user_approval', tool: 'write' });

    const listed = await client.interactions.query({ session_id: session });
    expect(listed.count).toBe(1);
    expect(listed.interactions[0]).toMatchObject({ id: pending!.id, status: 'pending', kind: 'user_approval', session_id: session, turn_id: paused.turn_id });
    expect((await client.interactions.query({ session_id: session, status: 'resolved' })).count).toBe(0);

    const responded = await client.interactions.respond(pending!.id, { approved: true });
    expect(responded).toMatchObject({ id: pending!.id, status: 'responded', answer: { approved: true } });
    const again = await rejection(client.interactions.respond(pending!.id, { approved: true }));
    expect(again.status).toMatchObject({ code: 409 });

    const record = await until(() => client.interactions.get(pending!.id), (r) => r.status === 'resolved', 'interaction resolved');
    expect(record).toMatchObject({ id: pending!.id, status: 'resolved', resolution: { via: 'out_of_band' } });
    const view = await until(() => client.sessions.get(session), (v) => v.turns.length === 2 && v.turns[0]!.status !== 'running', 'continuation ended');
    expect(view.turns[0]).toMatchObject({ status: 'completed', stop_reason: 'end_turn' });
    expect(JSON.stringify(view.turns[0]!.outputs)).toContain('written, thanks');
    expect(record.resolution).toMatchObject({ turn_id: view.turns[0]!.id });
    expect(new TextDecoder().decode(await client.sessions.readFile(session, 'approved.txt'))).toBe('approved content');
  });

  it('connections: an admin creates, lists, gets and deletes; an editor may not create', async () => {
    const admin = createClient({ baseUrl: h.url, apiKey: (await h.store.apiKeys.create(h.projectId, 'admin')).key, projectId: h.projectId });
    const created = await admin.connections.create({ slug: 'team-openai', provider: 'openai', api_key: 'sk-test-connection-key-9876', model: 'fake-model' });
    expect(created).toMatchObject({ slug: 'team-openai', provider: 'openai', model: 'fake-model', key_hint: '…9876', project_id: h.projectId });
    expect(JSON.stringify(created)).not.toContain('sk-test-connection-key');
    expect(await client.connections.get('team-openai')).toEqual(created);
    const list = await client.connections.list();
    expect(list).toMatchObject({ count: 1, connections: [{ slug: 'team-openai', id: created.id }] });
    const dup = await rejection(admin.connections.create({ slug: 'team-openai', provider: 'openai', api_key: 'sk-other' }));
    expect(dup.status).toMatchObject({ code: 409, type: 'conflict' });
    const forbidden = await rejection(client.connections.create({ slug: 'editor-made', provider: 'openai', api_key: 'sk-editor' }));
    expect(forbidden.status).toMatchObject({ code: 403, type: 'forbidden' });
    expect(await admin.connections.delete('team-openai')).toBeUndefined();
    const gone = await rejection(client.connections.get('team-openai'));
    expect(gone.status).toMatchObject({ code: 404, type: 'not-found' });
  });

  it('workflows: create, get, list, commit, revisions, resolve — and invoke by reference', async () => {
    const slug = sid('wf').toLowerCase();
    const first = template();
    const second = { ...template(), instructions: { agents_md: 'Second version.' } };
    const created = await client.workflows.create({ slug, name: 'Client workflow', data: { parameters: { agent: first } }, message: 'v1' });
    expect(created.workflow).toMatchObject({ slug, name: 'Client workflow' });
    expect(created.revision).toMatchObject({ version: 1 });
    expect(await client.workflows.get(slug)).toMatchObject({ id: created.workflow.id, slug });
    expect((await client.workflows.get(created.workflow.id)).slug).toBe(slug);
    expect((await client.workflows.list()).workflows.map((w) => w.slug)).toContain(slug);

    const v2 = await client.workflows.commit(slug, { data: { parameters: { agent: second } }, message: 'v2' });
    expect(v2).toMatchObject({ version: 2, message: 'v2', workflow: { id: created.workflow.id } });
    const revisions = await client.workflows.revisions(slug);
    expect(revisions.revisions.map((r) => r.version)).toEqual([2, 1]);
    expect(revisions.revisions[0]!.id).toBe(v2.id);
    expect((await client.workflows.revisions(slug, { limit: 1 })).revisions.map((r) => r.version)).toEqual([2]);

    const resolved = await client.workflows.resolve({ references: { workflow: { slug } } });
    expect(resolved.revision).toMatchObject({ id: v2.id, version: 2 });
    expect((resolved.parameters as any).agent.instructions).toEqual({ agents_md: 'Second version.' });
    const pinned = await client.workflows.resolve({ references: { workflow_revision: { id: created.revision!.id } } });
    expect(pinned.revision).toMatchObject({ id: created.revision!.id, version: 1 });

    const reply = await client.invoke({ references: { workflow: { slug } }, data: { inputs: { messages: [user('by reference')] } } });
    expect(lastContent(reply)).toBe('answer to by reference');
    expect(h.model.requests.at(-1)?.messages[0]?.content).toContain('Second version.');

    const taken = await rejection(client.workflows.create({ slug }));
    expect(taken.status).toMatchObject({ code: 409, type: 'conflict' });
  });

  it('environments: create, deploy, get, revisions, undeploy', async () => {
    const wf = sid('envwf').toLowerCase();
    const created = await client.workflows.create({ slug: wf, data: { parameters: { agent: template() } } });
    const env = sid('env').toLowerCase();
    const environment = await client.environments.create({ slug: env, name: 'Staging' });
    expect(environment).toMatchObject({ slug: env, name: 'Staging' });
    expect((environment as any).revision).toBeUndefined();
    expect((await client.environments.list()).environments.map((e) => e.slug)).toContain(env);

    const deployed = await client.environments.deploy(env, { references: { workflow: { slug: wf } }, message: 'ship' });
    expect(deployed.revision).toMatchObject({ version: 1, message: 'ship' });
    expect(deployed.revision!.data.references[wf]).toMatchObject({
      workflow: { id: created.workflow.id, slug: wf },
      workflow_revision: { id: created.revision!.id, version: 1 },
    });
    expect(await client.environments.get(env)).toEqual(deployed);
    expect(await client.environments.get(environment.id)).toEqual(deployed);

    const reply = await client.invoke({ references: { workflow: { slug: wf }, environment: { slug: env } }, data: { inputs: { messages: [user('via environment')] } } });
    expect(lastContent(reply)).toBe('answer to via environment');

    const undeployed = await client.environments.undeploy(env, { key: wf, message: 'pull' });
    expect(undeployed.revision).toMatchObject({ version: 2, message: 'pull', data: { references: {} } });
    const history = await client.environments.revisions(env);
    expect(history.count).toBe(2);
    expect(history.revisions.map((r) => r.version)).toEqual([2, 1]);
    const page = await client.environments.revisions(env, { limit: 1 });
    expect(page.revisions.map((r) => r.version)).toEqual([2]);
    expect(page.next).toEqual(expect.any(String));
    const nothing = await rejection(client.environments.undeploy(env, { key: wf }));
    expect(nothing.status).toMatchObject({ code: 404, type: 'not-found' });
  });

  it('testsets: create, get, list, edit, import (CSV)', async () => {
    const created = await client.testsets.create({ name: 'client set', data: { testcases: [{ data: { messages: [user('q1')], expected: 'a1' } }] } });
    expect(created.count).toBe(1);
    expect(created.testset).toMatchObject({ name: 'client set', version: 1 });
    expect(created.testset.data.testcase_ids).toHaveLength(1);
    const id = created.testset.id;
    expect((await client.testsets.get(id)).testset).toEqual(created.testset);
    expect((await client.testsets.list()).testsets.map((t) => t.id)).toContain(id);

    const keptId = created.testset.data.testcase_ids[0]!;
    const edited = await client.testsets.edit(id, { data: { testcases: [{ id: keptId, data: { messages: [user('q1')], expected: 'a1' } }, { data: { messages: [user('q2')], expected: 'a2' } }] } });
    expect(edited.testset).toMatchObject({ id, version: 2 });
    expect(edited.testset.data.testcase_ids[0]).toBe(keptId);
    expect(edited.testset.data.testcase_ids).toHaveLength(2);
    expect((await client.testsets.get(id)).testset.version).toBe(2);

    const slug = sid('csv').toLowerCase();
    const csv = 'question,expected\n"Capital of France, in one word?",Paris\nWhat is 2+2?,4\n';
    const imported = await client.testsets.import(csv, { format: 'csv', slug, name: 'capitals' });
    expect(imported.testset).toMatchObject({ slug, name: 'capitals', version: 1 });
    expect(imported.testset.data.testcases!.map((t) => t.data)).toEqual([
      { question: 'Capital of France, in one word?', expected: 'Paris', messages: [user('Capital of France, in one word?')] },
      { question: 'What is 2+2?', expected: '4', messages: [user('What is 2+2?')] },
    ]);
    const bad = await rejection(client.testsets.import('question,expected\nfine,1\nnot, fine, at all\n', { format: 'csv' }));
    expect(bad.status).toMatchObject({ code: 400, type: 'invalid-request' });
    expect(bad.status.message).toMatch(/CSV line 3/);
  });

  it('evaluations: create, get (until ended), list, results, metrics, rerunFailed, stop', async () => {
    const app = await client.workflows.create({ slug: sid('evalapp').toLowerCase(), data: { parameters: { agent: template() } } });
    const set = await client.testsets.create({
      name: 'eval set',
      data: { testcases: [{ data: { messages: [user('ev-ok')], expected: 'answer to ev-ok' } }, { data: { messages: [user('ev-broken')], expected: 'answer to ev-broken' } }] },
    });
    healed = false;
    const created = await client.evaluations.create({
      name: 'client run',
      data: {
        testset_steps: { [set.testset.revision_id]: 'custom' },
        application_steps: { [app.revision!.id]: 'auto' },
        evaluators: [{ kind: 'exact_match' }],
        concurrency: { batch_size: 2, max_retries: 0, retry_delay: 0 },
      },
    });
    expect(created.count).toBe(1);
    expect(created.evaluation.data.progress.total).toBe(2);
    const ended = (id: string) => until(() => client.evaluations.get(id), (r) => !['pending', 'running'].includes(r.evaluation.data.status), 'evaluation ended');

    const run = (await ended(created.evaluation.id)).evaluation;
    expect(run.data.status).toBe('errors');
    expect(run.data.progress).toEqual({ total: 2, pending: 0, running: 0, success: 1, failure: 1, cancelled: 0 });
    expect((await client.evaluations.list()).evaluations.map((e) => e.id)).toContain(run.id);
    expect((await client.evaluations.list({ limit: 1 })).evaluations).toHaveLength(1);

    const results = await client.evaluations.results({ result: { run_id: run.id }, windowing: { limit: 50 } });
    expect(results.count).toBe(2);
    expect(results.results.map((r) => r.status).sort()).toEqual(['failure', 'success']);
    const success = results.results.find((r) => r.status === 'success')!;
    expect((success.outputs as any).messages.at(-1).content).toBe('answer to ev-ok');
    expect(success.scores).toEqual([{ name: 'exact_match', kind: 'exact_match', score: 1, pass: true }]);
    const failure = results.results.find((r) => r.status === 'failure')!;
    expect(failure.error).toMatchObject({ code: 502, type: 'upstream-error' });

    const metrics = await client.evaluations.metrics({ metrics: { run_id: run.id } });
    expect(metrics.count).toBe(1);
    expect((metrics.metrics[0]!.data as any)[`application-${app.workflow.slug}`].errors).toMatchObject({ count: 2, sum: 1, mean: 0.5 });

    const stillEnded = await client.evaluations.stop(run.id);
    expect(stillEnded.evaluation.data.status).toBe('errors');

    healed = true;
    const rerun = await client.evaluations.rerunFailed(run.id);
    expect(rerun.evaluation.data.status).toBe('running');
    const after = (await ended(run.id)).evaluation;
    expect(after.data).toMatchObject({ status: 'success', progress: { success: 2, failure: 0 } });
    const rerunAgain = await rejection(client.evaluations.rerunFailed(run.id));
    expect(rerunAgain.status).toMatchObject({ code: 409, type: 'conflict' });

    const slowSet = await client.testsets.create({ name: 'slow set', data: { testcases: [{ data: { messages: [user('ev-slow-1')] } }, { data: { messages: [user('ev-slow-2')] } }] } });
    const slow = await client.evaluations.create({ name: 'slow run', data: { testset_steps: [slowSet.testset.revision_id], application_steps: [app.revision!.id], concurrency: { batch_size: 2 } } });
    await until(() => client.evaluations.get(slow.evaluation.id), (r) => r.evaluation.data.progress.running >= 1, 'slow run running');
    const stopped = await client.evaluations.stop(slow.evaluation.id);
    expect(stopped.evaluation.data).toMatchObject({ status: 'cancelled', progress: { total: 2, cancelled: 2 } });
    expect((await client.evaluations.get(slow.evaluation.id)).evaluation.data.status).toBe('cancelled');
  });
});

describe('invokeMany', () => {
  const inputs = (texts: string[]) => texts.map((t) => turn(t));

  it('returns outcomes in input order although they finish in another order', async () => {
    const texts = [0, 1, 2, 3, 4].map((i) => `order-${i}`);
    const completed: number[] = [];
    const outcomes = await client.invokeMany(inputs(texts), { concurrency: 5, onOutcome: (o) => completed.push(o.index) });
    expect(outcomes).toHaveLength(5);
    expect(outcomes.map((o) => o.index)).toEqual([0, 1, 2, 3, 4]);
    expect(outcomes.map((o) => (o.ok ? lastContent(o.response) : o.error.message))).toEqual(texts.map((t) => `answer to ${t}`));
    expect(outcomes.every((o) => o.ok && o.attempts === 1)).toBe(true);
    expect([...completed].sort()).toEqual([0, 1, 2, 3, 4]);
    // Lower indexes were scripted slower: they did not finish in input order.
    expect(completed).not.toEqual([0, 1, 2, 3, 4]);
  });

  it('never has more than `concurrency` inputs in flight at the model, and reaches it', async () => {
    await idle();
    h.model.reset();
    const texts = Array.from({ length: 12 }, (_, i) => `conc-${i}`);
    const progress: InvokeManyProgress[] = [];
    const outcomes = await client.invokeMany(inputs(texts), { concurrency: 3, onProgress: (p) => progress.push(p) });
    expect(outcomes.map((o) => o.ok)).toEqual(texts.map(() => true));
    expect(h.model.requests).toHaveLength(12);
    expect(h.model.peakInFlight).toBeLessThanOrEqual(3);
    expect(h.model.peakInFlight).toBe(3);
    expect(Math.max(...progress.map((p) => p.inFlight))).toBe(3);
    expect(progress.at(-1)).toEqual({ total: 12, done: 12, failed: 0, inFlight: 0 });
  });

  it('retries a 429 after its retry-after and succeeds; a 4xx is not retried and touches no other input', async () => {
    const texts = ['limited-a', 'fine-b', 'not retried', 'many upstream-401'];
    const batch = inputs(texts);
    batch[2] = turn('not retried', { session_id: 'bad id' });
    const progress: InvokeManyProgress[] = [];
    const outcomes = await client.invokeMany(batch, { concurrency: 4, retryDelay: 0, onProgress: (p) => progress.push(p) });

    const [limited, fine, badId, auth] = outcomes as [Outcome, Outcome, Outcome, Outcome];
    expect(limited).toMatchObject({ index: 0, ok: true, attempts: 2 });
    expect(limited.ok && lastContent(limited.response)).toBe('answer to limited-a');
    const times = calls.get('limited-a')!;
    expect(times).toHaveLength(2);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(1000);

    expect(fine).toMatchObject({ index: 1, ok: true, attempts: 1 });
    expect(fine.ok && lastContent(fine.response)).toBe('answer to fine-b');

    expect(badId).toMatchObject({ index: 2, ok: false, attempts: 1 });
    expect(!badId.ok && badId.error.status).toMatchObject({ code: 400, type: 'invalid-session-id' });
    expect(calls.has('not retried')).toBe(false);

    expect(auth).toMatchObject({ index: 3, ok: false, attempts: 1 });
    expect(!auth.ok && auth.error.status).toMatchObject({ code: 424, type: 'upstream-auth' });
    expect(calls.get('many upstream-401')).toHaveLength(1);

    expect(progress.at(-1)).toEqual({ total: 4, done: 4, failed: 2, inFlight: 0 });
  });

  it('a key the server refuses stops the run: no input is sent after the 401, and each ends with it', async () => {
    const refusedClient = createClient({ baseUrl: h.url, apiKey: 'not-a-key', projectId: h.projectId });
    const outcomes = await refusedClient.invokeMany(inputs(['k0', 'k1', 'k2', 'k3', 'k4']), { concurrency: 2, retryDelay: 0 });
    expect(outcomes.map((o) => !o.ok && o.error.status.code)).toEqual([401, 401, 401, 401, 401]);
    // The two in flight when it came were sent; none after.
    expect(outcomes.map((o) => o.attempts)).toEqual([1, 1, 0, 0, 0]);
  });

  it('fresh sessions are `${sessionId}-${i}`; none gets server-minted distinct ids', async () => {
    const prefix = sid('fresh');
    const fresh = await client.invokeMany(inputs(['f0', 'f1', 'f2']), { session: 'fresh', sessionId: prefix });
    expect(fresh.map((o) => o.ok && o.response.session_id)).toEqual([`${prefix}-0`, `${prefix}-1`, `${prefix}-2`]);

    const none = await client.invokeMany(
      inputs(['n0', 'n1', 'n2']).map((b) => ({ ...b, session_id: 'would-be-dropped' })),
      { session: 'none', sessionId: 'ignored' },
    );
    const ids = none.map((o) => (o.ok ? o.response.session_id : undefined));
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(3);
    expect(ids).not.toContain('would-be-dropped');
    expect(ids.some((id) => id!.startsWith('ignored'))).toBe(false);
    expect(none.map((o) => o.ok && lastContent(o.response))).toEqual(['answer to n0', 'answer to n1', 'answer to n2']);
  });

  it('shared runs inputs one at a time in one session, each turn carrying the history so far', async () => {
    await idle();
    h.model.reset();
    const session = sid('shared');
    const progress: InvokeManyProgress[] = [];
    const outcomes = await client.invokeMany(inputs(['shared-a', 'shared-b', 'shared-c']), { session: 'shared', sessionId: session, concurrency: 8, onProgress: (p) => progress.push(p) });
    expect(outcomes.map((o) => o.ok && o.response.session_id)).toEqual([session, session, session]);
    expect(outcomes.map((o) => o.ok && lastContent(o.response))).toEqual(['answer to shared-a', 'answer to shared-b', 'answer to shared-c']);
    expect(h.model.peakInFlight).toBe(1);
    expect(Math.max(...progress.map((p) => p.inFlight))).toBe(1);

    expect(h.model.requests).toHaveLength(3);
    const convo = (i: number) => h.model.requests[i]!.messages.filter((m) => m.role !== 'system').map((m) => [m.role, m.content]);
    expect(convo(0)).toEqual([['user', 'shared-a']]);
    expect(convo(1)).toEqual([
      ['user', 'shared-a'],
      ['assistant', 'answer to shared-a'],
      ['user', 'shared-b'],
    ]);
    expect(convo(2)).toEqual([
      ['user', 'shared-a'],
      ['assistant', 'answer to shared-a'],
      ['user', 'shared-b'],
      ['assistant', 'answer to shared-b'],
      ['user', 'shared-c'],
    ]);
    const view = await client.sessions.get(session);
    expect(view.turns.map((t) => t.status)).toEqual(['completed', 'completed', 'completed']);
    expect(progress.at(-1)).toEqual({ total: 3, done: 3, failed: 0, inFlight: 0 });
  });

  it('cancellation: inputs not finished end cancelled, nothing new starts, and the promise resolves', async () => {
    const texts = Array.from({ length: 6 }, (_, i) => `cancel-${i}`);
    const controller = new AbortController();
    const completed: Outcome[] = [];
    const progress: InvokeManyProgress[] = [];
    const outcomes = await client.invokeMany(inputs(texts), {
      concurrency: 3,
      signal: controller.signal,
      onOutcome: (o) => {
        completed.push(o);
        if (completed.length === 1) controller.abort();
      },
      onProgress: (p) => progress.push(p),
    });
    expect(outcomes).toHaveLength(6);
    expect(outcomes.map((o) => o.index)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(outcomes[0]).toMatchObject({ ok: true, attempts: 1 });
    expect(outcomes[0]!.ok && lastContent(outcomes[0]!.response)).toBe('answer to cancel-0');
    for (const outcome of outcomes.slice(1)) {
      expect(outcome.ok).toBe(false);
      if (!outcome.ok) {
        expect(outcome.error).toBeInstanceOf(AgentdError);
        expect(outcome.error.status).toMatchObject({ code: 0, type: 'cancelled' });
      }
    }
    // Inputs 1 and 2 were in flight; 3-5 never started.
    expect(outcomes.slice(1).map((o) => o.attempts)).toEqual([1, 1, 0, 0, 0]);
    for (const text of ['cancel-3', 'cancel-4', 'cancel-5']) expect(calls.has(text)).toBe(false);
    expect(completed).toHaveLength(6);
    expect(progress.at(-1)).toEqual({ total: 6, done: 6, failed: 5, inFlight: 0 });
    await idle();
  });
});
