import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { lastAssistantMessageIsCompleteWithToolCalls, type UIMessage } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { continuePausedTurn } from '../../src/interactions/continuation.ts';
import { startFakeModel, type FakeModelServer } from '../../src/testing/fake-model.ts';
import { adminOf, connectionsApi } from '../connections/client.ts';
import { agentdChat } from '../support/headless-chat.ts';
import { responseChunks } from '../support/sdk-client.ts';
import { builtin, expectError, invokeBody, okJsonText, readFrames, readJson, sid, startHarness, type Harness } from '../support/harness.ts';
import { otherProject, waitFor } from '../sessions-api/client.ts';

/**
 * Issue 18: a client written for the reference service works against agentd as it is. The bodies
 * below are shaped as the reference's clients send them (its SDK, its web playground's chat, its
 * QA scripts; `../shared/reference/agenta-agent-service.md`, "What the reference's own clients send
 * and read"), and each test asserts what such a client reads.
 */

let h: Harness;
/** A provider endpoint of the project's own, named by a connection. */
let platform: FakeModelServer;
beforeAll(async () => {
  h = await startHarness();
  platform = await startFakeModel();
  const admin = await adminOf(h);
  const created = await connectionsApi(h, 'POST', '', { as: admin, body: { slug: 'team-openai', provider: 'openai', base_url: platform.url, api_key: 'sk-platform-kept', model: 'fake-model' } });
  expect(created.status).toBe(201);
});
afterAll(async () => {
  await h.close();
  await platform.close();
});
beforeEach(() => {
  h.model.reset();
  platform.reset();
});

/** A call on the `/api` surface as the reference's SDK makes it: the key, and no `project_id`. */
function api(method: string, path: string, body?: unknown, query = ''): Promise<Response> {
  return fetch(`${h.url}/api${path}${query}`, {
    method,
    headers: { authorization: `ApiKey ${h.apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

const ok = async (res: Response) => (await okJsonText(res)).body;

/** The template the reference's playground sends: a platform connection with no slug, and empty extras. */
function referenceTemplate(overrides: Record<string, unknown> = {}) {
  return {
    instructions: { agents_md: 'You are a test agent.' },
    llm: { provider: 'openai', model: 'fake-model', connection: { mode: 'agenta', slug: null }, extras: {} },
    tools: [],
    harness: { kind: 'agentd' },
    runner: { kind: 'sidecar', permissions: { default: 'allow' } },
    sandbox: { kind: 'local' },
    ...overrides,
  };
}

describe('/api without project_id: the project is the key’s', () => {
  it('creates and reads test sets, interactions and sessions in the key’s project', async () => {
    const { testset } = await ok(await api('POST', '/simple/testsets/', { testset: { name: 'no project id', data: { testcases: [{ data: { messages: [{ role: 'user', content: 'hi' }] } }] } } }));
    expect(testset.id).toEqual(expect.any(String));
    expect((await h.store.configs.artifactByIdOrSlug(h.projectId, 'testset', testset.id))?.id).toBe(testset.id);
    expect((await ok(await api('GET', `/simple/testsets/${testset.id}`))).testset.id).toBe(testset.id);

    const session = sid('noproj');
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], referenceTemplate(), { session_id: session })));
    expect((await ok(await api('GET', `/sessions/${session}`))).turns).toHaveLength(1);
    expect((await ok(await api('POST', '/sessions/interactions/query', { query: { session_id: session } }))).count).toBe(0);
  });

  it('a project_id of another project is still 403; invoke still needs its project_id', async () => {
    const stranger = await otherProject(h, 'compat-stranger');
    await expectError(await api('GET', '/simple/testsets/', undefined, `?project_id=${stranger.projectId}`), 403, 'forbidden');
    const invoke = await fetch(`${h.url}/services/agent/v0/invoke`, {
      method: 'POST',
      headers: { authorization: `ApiKey ${h.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(invokeBody([{ role: 'user', content: 'hi' }], referenceTemplate())),
    });
    await expectError(invoke, 400, 'missing-project-id');
  });

  it('a key of another project reads its own project, never this one', async () => {
    const stranger = await otherProject(h, 'compat-other-key');
    const session = sid('mine');
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], referenceTemplate(), { session_id: session })));
    const res = await fetch(`${h.url}/api/sessions/${session}`, { headers: { authorization: `ApiKey ${stranger.key}` } });
    await expectError(res, 404, 'not-found');
  });
});

describe('llm.connection.mode "agenta"', () => {
  it('with slug null runs on the server’s own keys', async () => {
    h.model.script({ text: 'from the server keys' });
    const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], referenceTemplate())));
    expect(body.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'from the server keys' });
    expect(h.model.requests).toHaveLength(1);
    expect(platform.requests).toHaveLength(0);
  });

  it('with a slug runs on the project connection of that slug', async () => {
    platform.script({ text: 'from the platform connection' });
    const agent = referenceTemplate({ llm: { provider: 'openai', model: 'fake-model', connection: { mode: 'agenta', slug: 'team-openai' }, extras: {} } });
    const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], agent)));
    expect(body.data.outputs.messages.at(-1)).toMatchObject({ content: 'from the platform connection' });
    expect(platform.requests[0]!.headers.authorization).toBe('Bearer sk-platform-kept');
    expect(h.model.requests).toHaveLength(0);
  });

  it('with a slug the project lacks is a 404 naming it', async () => {
    const agent = referenceTemplate({ llm: { connection: { mode: 'agenta', slug: 'nowhere' } } });
    await expectError(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], agent)), 404, 'not-found', /"nowhere"/);
  });
});

describe('explicit nulls in /api bodies mean absent', () => {
  it('test set and run creation as the SDK sends them; a null inside a row stays data', async () => {
    // Read as it is: the row's own null comes back as data.
    const { testset } = await (
      await api('POST', '/simple/testsets/', {
        testset: {
          slug: null,
          name: 'sdk nulls',
          description: null,
          tags: null,
          meta: null,
          flags: null,
          data: { testcases: [{ data: { messages: [{ role: 'user', content: 'hi' }], expected: null }, tags: null }] },
        },
      })
    ).json();
    expect(testset.data.testcases).toEqual([{ id: expect.any(String), data: { messages: [{ role: 'user', content: 'hi' }], expected: null } }]);
    expect(testset).not.toHaveProperty('description');
    const row = (await h.store.configs.findRevision(h.projectId, 'testset', { id: testset.revision_id }))!.data as { testcases: Array<{ data: unknown }> };
    expect(row.testcases[0]!.data).toEqual({ messages: [{ role: 'user', content: 'hi' }], expected: null });

    h.model.script({ text: 'ran' });
    const { evaluation } = await ok(
      await api('POST', '/simple/evaluations/', {
        evaluation: {
          name: 'sdk run',
          description: null,
          flags: null,
          tags: null,
          meta: null,
          data: {
            status: null,
            query_steps: null,
            testset_steps: { [testset.revision_id]: 'custom' },
            application_steps: { 'agenta:builtin:agent:v0': 'auto' },
            evaluator_steps: null,
            repeats: null,
            concurrency: { batch_size: null, max_retries: null, retry_delay: null },
          },
        },
      }),
    );
    expect(evaluation.data).toMatchObject({ repeats: 1, concurrency: { batch_size: 10, max_retries: 0, retry_delay: 0 } });
    await runEnded(evaluation.id);
  });

  it('an interaction as the reference’s record names it: token, data.request, data.resolution', async () => {
    const { id, outputs } = await pausedApproval();
    const call = outputs.pending_interaction.payload.tool_call_id;
    const record = (await ok(await api('GET', `/sessions/interactions/${id}`))).interaction;
    expect(record).toMatchObject({ token: id, data: { request: { tool: 'write', tool_call_id: call } } });
    await ok(await api('POST', '/sessions/interactions/transition', { token: id, status: 'cancelled', resolution: { reason: 'moved on' } }));
    expect((await ok(await api('GET', `/sessions/interactions/${id}`))).interaction.data.resolution).toEqual({ reason: 'moved on' });
  });

  it('an interaction query and an approval answer with nulls', async () => {
    const { session, id } = await pausedApproval();
    const found = await ok(await api('POST', '/sessions/interactions/query', { query: { session_id: session, turn_id: null, kind: null, status: null }, windowing: null }));
    expect(found.interactions.map((r: { id: string }) => r.id)).toEqual([id]);
    const answered = await ok(await api('POST', `/sessions/interactions/${id}/respond`, { answer: { approved: true, tool_call_id: null, message: null } }));
    expect(answered.status).toBe('responded');
    await continued(session, id);
  });

  it('a null where a value is required still says what is wrong and where', async () => {
    const res = await api('POST', '/simple/testsets/', { testset: { name: 'x', data: null } });
    await expectError(res, 400, 'invalid-request', /testset\.data/);
  });
});

/** A turn paused on a `write` under `ask`, as the reference's QA scripts set one up. */
function pauseForApproval(session = sid('gate'), init: { headers?: Record<string, string> } = {}): Promise<Response> {
  h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'gated.txt', content: 'x' } }] }, { text: 'written' }]);
  const agent = referenceTemplate({ tools: [builtin('write')], runner: { kind: 'sidecar', permissions: { default: 'ask' } } });
  return h.invoke(invokeBody([{ role: 'user', content: 'write it' }], agent, { session_id: session }), init);
}

/** The run once it has ended, read as the SDK reads it. */
async function runEnded(id: string): Promise<{ id: string; status: string }> {
  let run: { id: string; status: string } | undefined;
  await waitFor(async () => {
    run = (await ok(await api('GET', `/evaluations/runs/${id}`))).run;
    return run!.status !== 'running';
  }, 'the run to end');
  return run!;
}

/** Waits for the continuation an answer through the API started, so it calls the model no later. */
async function continued(session: string, id: string): Promise<void> {
  await waitFor(async () => (await h.store.interactions.get(h.projectId, id))?.status === 'resolved', 'the continuation');
  await waitFor(async () => (await h.store.leases.get(h.projectId, session)) === undefined, 'the continuation to end');
}

/** The same pause read as JSON: its session and the interaction it waits on. */
async function pausedApproval(): Promise<{ session: string; id: string; outputs: any }> {
  const session = sid('gate');
  const outputs = (await readJson(await pauseForApproval(session))).data.outputs;
  return { session, id: outputs.pending_interaction.id, outputs };
}

describe('the names the reference’s clients read', () => {
  it('a JSON pause: pending_interaction.payload.toolCallId and payload.toolCall', async () => {
    const { outputs } = await pausedApproval();
    const call = outputs.messages.find((m: { tool_name?: string }) => m.tool_name === 'write');
    expect(outputs.pending_interaction.payload).toMatchObject({
      toolCallId: call.tool_call_id,
      toolName: 'write',
      toolCall: { toolCallId: call.tool_call_id, name: 'write', rawInput: { path: 'gated.txt', content: 'x' } },
    });
  });

  it('the native stream: done.data.stopReason, on a pause and at an end', async () => {
    const paused = (await readFrames(await pauseForApproval(sid('gate'), { headers: { accept: 'text/event-stream' } }))).frames;
    expect(paused.at(-1)).toMatchObject({ type: 'done', data: { stopReason: 'paused', stop_reason: 'paused' } });
    h.model.script({ text: 'plain' });
    const plain = await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], referenceTemplate()), { headers: { accept: 'application/x-ndjson' } });
    expect((await readFrames(plain)).frames.at(-1)).toMatchObject({ type: 'done', data: { stopReason: 'end_turn' } });
  });

  it('the Vercel stream: a pause finishes "other", after tool-approval-request {approvalId, toolCallId}, then [DONE]', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'v.txt', content: 'x' } }] }]);
    const agent = referenceTemplate({ tools: [builtin('write')], runner: { kind: 'sidecar', permissions: { default: 'ask' } } });
    const res = await h.invoke(invokeBody([{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'write it' }] }], agent), {
      headers: { accept: 'text/event-stream', 'x-ag-messages-format': 'vercel' },
    });
    const raw = await res.clone().text();
    expect(raw.trimEnd().endsWith('data: [DONE]')).toBe(true);
    const chunks = await responseChunks(res);
    expect(chunks[0]).toMatchObject({ type: 'start', messageMetadata: { sessionId: res.headers.get('x-ag-session-id'), traceId: res.headers.get('x-ag-trace-id') } });
    const request = chunks.find((c) => c.type === 'tool-approval-request') as { approvalId: string; toolCallId: string };
    expect(request).toMatchObject({ approvalId: expect.any(String), toolCallId: expect.any(String) });
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'other', messageMetadata: { stop_reason: 'paused' } });
  });
});

describe('a client tool settled through /transition, then resumed in band', () => {
  const pickColor = {
    type: 'client',
    name: 'pick_color',
    description: 'Ask the user to pick a color',
    input_schema: { type: 'object', properties: { options: { type: 'array', items: { type: 'string' } } } },
  };

  /** The playground's chat: useChat on the invoke URL, re-posting once the tool has its output. */
  async function pausedChat() {
    const chat = agentdChat({
      api: `${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`,
      apiKey: h.apiKey,
      body: { data: { parameters: { agent: referenceTemplate({ tools: [pickColor] }) } } },
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    });
    await chat.sendMessage({ text: 'pick a color' });
    await chat.untilFinished(1);
    expect(chat.error).toBeUndefined();
    const assistant = chat.messages.at(-1)!;
    const part = assistant.parts.find((p) => p.type === 'tool-pick_color') as { toolCallId: string; state: string };
    expect(part.state).toBe('input-available');
    const token = (assistant.metadata as { pending_interaction: { id: string } }).pending_interaction.id;
    return { chat, assistant, part, token };
  }

  const transition = (session: string, token: string, resolution: unknown) => api('POST', '/sessions/interactions/transition', { session_id: session, token, status: 'responded', resolution });
  const texts = (message: UIMessage | undefined) => (message?.parts ?? []).flatMap((p) => (p.type === 'text' ? [p.text] : []));

  it('the transition answers it as /respond would, and the re-post shows the continuation it started', async () => {
    // The continuation is still at the model when the re-post arrives: the re-post follows it.
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: { options: ['red', 'blue'] } }] }, { text: 'Blue it is.', latencyMs: 300 }]);
    const { chat, assistant, part, token } = await pausedChat();
    const moved = await ok(await transition(chat.id, token, { output: { color: 'blue' } }));
    expect(moved).toMatchObject({ id: token, status: 'responded', answer: { output: { color: 'blue' } } });

    await chat.addToolOutput({ tool: 'pick_color', toolCallId: part.toolCallId, output: { color: 'blue' } });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    const assistants = chat.messages.filter((m) => m.role === 'assistant');
    expect(assistants.map((m) => m.id)).toEqual([assistant.id]);
    expect(texts(assistants[0])).toEqual(['Blue it is.']);
    // One continuation, not two: the model was asked once after the pause.
    expect(h.model.requests).toHaveLength(2);
    expect(JSON.parse(h.model.requests[1]!.messages.at(-1)!.content)).toEqual({ color: 'blue' });
    expect((await h.store.interactions.get(h.projectId, token))?.status).toBe('resolved');
  });

  it('a re-post after the continuation ended gets that turn as it ended', async () => {
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: { options: ['red', 'blue'] } }] }, { text: 'Red, then.' }]);
    const { chat, assistant, part, token } = await pausedChat();
    await ok(await transition(chat.id, token, { color: 'red' }));
    await continued(chat.id, token);

    await chat.addToolOutput({ tool: 'pick_color', toolCallId: part.toolCallId, output: { color: 'red' } });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    const assistants = chat.messages.filter((m) => m.role === 'assistant');
    expect(assistants.map((m) => m.id)).toEqual([assistant.id]);
    expect(texts(assistants[0])).toEqual(['Red, then.']);
    expect(assistants[0]!.metadata).toMatchObject({ stop_reason: 'end_turn' });
    expect(h.model.requests).toHaveLength(2);
    // A resolution that is not `{output}` is the tool's output as it stands.
    expect(JSON.parse(h.model.requests[1]!.messages.at(-1)!.content)).toEqual({ color: 'red' });
  });

  it('a continuation that ends between the re-post\'s look at its answers and its run: the re-post gets that turn', async () => {
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: { options: ['red', 'blue'] } }] }, { text: 'Red, at last.' }]);
    const { chat, assistant, part, token } = await pausedChat();
    // The continuation claims the answer only once the re-post has read it still `responded`; the
    // re-post goes on only once the continuation has ended.
    const { interactions } = h.store;
    const { ofToolCalls, transitionAll } = interactions;
    let read!: () => void;
    const repostRead = new Promise<void>((resolve) => (read = resolve));
    interactions.transitionAll = async (...args) => {
      await repostRead;
      return transitionAll(...args);
    };
    interactions.ofToolCalls = async (...args) => {
      interactions.ofToolCalls = ofToolCalls;
      const records = await ofToolCalls(...args);
      read();
      await continued(chat.id, token);
      return records;
    };
    try {
      await ok(await transition(chat.id, token, { output: { color: 'red' } }));
      await chat.addToolOutput({ tool: 'pick_color', toolCallId: part.toolCallId, output: { color: 'red' } });
      await chat.untilFinished(2);
    } finally {
      Object.assign(interactions, { ofToolCalls, transitionAll });
    }
    expect(chat.error).toBeUndefined();
    const assistants = chat.messages.filter((m) => m.role === 'assistant');
    expect(assistants.map((m) => m.id)).toEqual([assistant.id]);
    expect(texts(assistants[0])).toEqual(['Red, at last.']);
    expect(h.model.requests).toHaveLength(2);
  });

  it('a continuation that takes the session between the re-post\'s look and its run: the re-post follows it, never takes it over', async () => {
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: { options: ['red', 'blue'] } }] }, { text: 'Green it is.', latencyMs: 300 }]);
    const { chat, assistant, part, token } = await pausedChat();
    // Answered, and not yet continued; the continuation starts when the re-post (which forces, as a
    // chat does) asks for the session, and holds it before the re-post's ask goes through.
    const paused = await h.store.interactions.transition(h.projectId, token, { from: ['pending'], to: 'responded', answer: { output: 'green' } });
    const { leases } = h.store;
    const { acquire } = leases;
    leases.acquire = async (...args) => {
      leases.acquire = acquire;
      void continuePausedTurn({ store: h.store, turns: h.app.turns, log: h.app.log }, h.projectId, paused!.turn_id);
      await waitFor(async () => (await h.app.turns.liveTurn(h.projectId, chat.id)) !== undefined, 'the continuation to hold the session');
      return acquire(...args);
    };
    try {
      await chat.addToolOutput({ tool: 'pick_color', toolCallId: part.toolCallId, output: 'green' });
      await chat.untilFinished(2);
    } finally {
      leases.acquire = acquire;
    }
    expect(chat.error).toBeUndefined();
    const assistants = chat.messages.filter((m) => m.role === 'assistant');
    expect(assistants.map((m) => m.id)).toEqual([assistant.id]);
    expect(texts(assistants[0])).toEqual(['Green it is.']);
    expect(h.model.requests).toHaveLength(2);
  });

  it('an answer no process took up yet is taken up by the re-post itself', async () => {
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: { options: ['red', 'blue'] } }] }, { text: 'Green.' }]);
    const { chat, part, token } = await pausedChat();
    // As a server that stopped right after the answer leaves it: responded, its turn not continued.
    await h.store.interactions.transition(h.projectId, token, { from: ['pending'], to: 'responded', answer: { output: 'green' } });
    await chat.addToolOutput({ tool: 'pick_color', toolCallId: part.toolCallId, output: 'green' });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    expect(texts(chat.messages.at(-1))).toEqual(['Green.']);
    expect(await h.store.interactions.get(h.projectId, token)).toMatchObject({ status: 'resolved', resolution: { via: 'out_of_band' } });
    expect(h.model.requests).toHaveLength(2);
  });

  it('an approval resolved as {verdict, tool_call_id} continues like an approval', async () => {
    const { session, id } = await pausedApproval();
    const record = (await h.store.interactions.get(h.projectId, id))!;
    const moved = await ok(await transition(session, id, { verdict: 'approved', tool_call_id: record.tool_call_id }));
    expect(moved).toMatchObject({ status: 'responded', answer: { approved: true } });
    await continued(session, id);
    expect(await readFile(path.join(h.sessionDir(session), 'gated.txt'), 'utf8')).toBe('x');
    await expectError(await transition(session, id, { verdict: 'denied' }), 409, 'interaction-not-pending');
  });

  it('a verdict in a shape no approval takes is a 400 that says so', async () => {
    const { session, id } = await pausedApproval();
    await expectError(await transition(session, id, { verdict: 'maybe' }), 400, 'invalid-request', /user_approval answer/);
    expect((await h.store.interactions.get(h.projectId, id))?.status).toBe('pending');
  });
});

describe('the read routes the SDK calls', () => {
  it('GET /api/evaluations/runs/{id} → {run} with run.status; testsets/query; per-scenario metrics only', async () => {
    const { testset } = await ok(
      await api('POST', '/simple/testsets/', {
        testset: { name: 'sdk reads', tags: { suite: 'smoke' }, data: { testcases: [{ data: { messages: [{ role: 'user', content: 'a' }] } }, { data: { messages: [{ role: 'user', content: 'b' }] } }] } },
      }),
    );
    const byName = await ok(await api('POST', '/simple/testsets/query', { testset: { name: 'sdk reads' } }));
    expect(byName.testsets.map((t: { id: string }) => t.id)).toEqual([testset.id]);
    expect((await ok(await api('POST', '/simple/testsets/query', { testset: { tags: { suite: 'smoke' } }, windowing: { limit: 5 } }))).testsets.map((t: { id: string }) => t.id)).toEqual([testset.id]);
    expect((await ok(await api('POST', '/simple/testsets/query', { testset_refs: [{ id: testset.id }] }))).count).toBe(1);
    expect((await ok(await api('POST', '/simple/testsets/query', { testset: { tags: { suite: 'other' } } }))).count).toBe(0);
    expect((await ok(await api('POST', '/simple/testsets/query', {}))).count).toBeGreaterThanOrEqual(1);

    h.model.script([{ text: 'one' }, { text: 'two' }]);
    const { evaluation } = await ok(
      await api('POST', '/simple/evaluations/', { evaluation: { name: 'sdk', data: { testset_steps: { [testset.revision_id]: 'custom' }, application_steps: { 'agenta:builtin:agent:v0': 'auto' } } } }),
    );
    const run = await runEnded(evaluation.id);
    const results = (await ok(await api('POST', '/evaluations/results/query', { result: { run_id: evaluation.id } }))).results;
    expect(results.map((r: any) => r.error)).toEqual([undefined, undefined]);
    expect(run).toMatchObject({ id: evaluation.id, status: 'success', data: { status: 'success' } });
    await expectError(await api('GET', '/evaluations/runs/no-such-run'), 404, 'not-found');

    const perScenario = await ok(await api('POST', '/evaluations/metrics/query', { metrics: { run_ids: [evaluation.id], scenario_ids: true } }));
    expect(perScenario.count).toBe(2);
    expect(perScenario.metrics.every((m: { scenario_id?: string }) => typeof m.scenario_id === 'string')).toBe(true);
    const whole = await ok(await api('POST', '/evaluations/metrics/query', { metrics: { run_ids: [evaluation.id] } }));
    expect(whole.metrics).toHaveLength(1);
    expect(whole.metrics[0]).not.toHaveProperty('scenario_id');
  });
});

describe('explicit nulls in invoke messages mean absent', () => {
  it('a conversation whose every message carries every field, unset ones as null', async () => {
    h.model.script({ text: 'read you' });
    const nulls = { tool_call_id: null, tool_name: null, is_error: null, approval: null };
    const body = await readJson(
      await h.invoke(invokeBody([{ role: 'user', content: 'hi', ...nulls }, { role: 'assistant', content: 'hello', ...nulls }, { role: 'user', content: 'again', ...nulls }], referenceTemplate())),
    );
    expect(body.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'read you' });
    expect(h.model.requests[0]!.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
  });
});
