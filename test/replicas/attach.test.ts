import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModel, type FakeModelServer, type FakeReply, type RecordedRequest } from '../../src/testing/fake-model.ts';
import { firstStartCredentials, postJson, startServe } from '../support/child-server.ts';
import { freshDatabase, TEST_POSTGRES_URL, type TestDatabase } from '../support/database.ts';
import { readFrames, sid, type Frame } from '../support/harness.ts';
import { readFinal, responseChunks } from '../support/sdk-client.ts';

/**
 * Attach (force, no input) to a turn that runs on another replica (issue 7): the replica asked
 * relays the turn from the one running it over PostgreSQL's LISTEN/NOTIFY — the replay from the
 * turn's start, then its live events, then its end — so the reader cannot tell it from a local
 * attach. Two `agentd serve` processes on one database. Runs only in the `postgres` project:
 * SQLite serves one process, which attaches to its own turns (test/http/live-turns.test.ts).
 */

/** Over 8000 bytes as JSON and full of multi-byte characters: a tool call no single NOTIFY can carry. */
const BIG = 'é😀 relayed across replicas — '.repeat(700);

const replies = new Map<string, FakeReply[]>();
let model: FakeModelServer;
let database: TestDatabase;
let dataDir: string;
let a: Awaited<ReturnType<typeof startServe>>;
let b: Awaited<ReturnType<typeof startServe>>;
let auth: { projectId: string; key: string };

const agent = { llm: { provider: 'openai', model: 'fake-model' }, tools: [{ type: 'builtin', name: 'write' }], runner: { permissions: { default: 'allow' } } };
const turnOn = (session: string, text: string) => ({ session_id: session, data: { inputs: { messages: [{ role: 'user', content: text }] }, parameters: { agent } } });
const attach = (url: string, session: string, accept = 'text/event-stream') =>
  fetch(`${url}/services/agent/v0/invoke?project_id=${auth.projectId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `ApiKey ${auth.key}`, 'x-ag-session-control': 'force', accept },
    body: JSON.stringify({ session_id: session }),
  });
const stream = (url: string, body: unknown) =>
  fetch(`${url}/services/agent/v0/invoke?project_id=${auth.projectId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `ApiKey ${auth.key}`, accept: 'text/event-stream' },
    body: JSON.stringify(body),
  });

/** A counter's value on one replica's /metrics. */
async function counter(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  if (!line) throw new Error(`${name} is not on ${url}/metrics`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** An SSE reply read as it comes: `then` runs once `marker` has arrived, and the whole reply's frames are returned. */
async function readAcross(res: Response, marker: string, then: () => Promise<void>): Promise<Frame[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let raw = '';
  let fired = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    raw += decoder.decode(value, { stream: true });
    if (!fired && raw.includes(marker)) {
      fired = true;
      await then();
    }
  }
  return (await readFrames(new Response(raw, { headers: { 'content-type': 'text/event-stream' } }))).frames;
}

async function modelCalledWith(text: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!model.requests.some((r) => r.messages.some((m) => m.role === 'user' && m.content === text))) {
    if (Date.now() > deadline) throw new Error(`the model never saw "${text}"`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Waits until the model has had `count` calls whose last user message is `text`. */
async function waitForCalls(count: number, text: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  const calls = () => model.requests.filter((r) => r.messages.filter((m) => m.role === 'user').at(-1)?.content === text).length;
  while (calls() < count) {
    if (Date.now() > deadline) throw new Error(`the model had ${calls()} of ${count} calls for "${text}"`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.runIf(TEST_POSTGRES_URL)('attach to a turn running on another replica', () => {
  beforeAll(async () => {
    model = await startFakeModel({
      script: (req: RecordedRequest) => {
        const text = req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
        return replies.get(text)?.shift() ?? { text: 'unscripted' };
      },
    });
    database = await freshDatabase();
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-attach-'));
    const env = {
      DATABASE_URL: database.url!,
      ...(database.listenUrl ? { AGENTD_DATABASE_LISTEN_URL: database.listenUrl } : {}),
      AGENTD_DATA_DIR: dataDir,
      AGENTD_LOG_LEVEL: 'info',
      AGENTD_LEASE_TTL_MS: '1500',
      AGENTD_METRICS: 'open',
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: model.url,
      AGENTD_DEFAULT_PROVIDER: 'openai',
      AGENTD_DEFAULT_MODEL: 'fake-model',
    };
    a = await startServe(env);
    auth = firstStartCredentials(a.output());
    b = await startServe(env);
  }, 60_000);
  afterAll(async () => {
    for (const replica of [a, b]) if (replica && replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGTERM');
    await Promise.all([a?.exited, b?.exited]);
    await model.close();
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  }, 30_000);

  it('streams the turn from its start, then live, exactly as its own caller sees it', async () => {
    const session = sid('relay');
    replies.set('relay me', [
      { toolCalls: [{ name: 'write', input: { path: 'big.txt', content: BIG } }], latencyMs: 200 },
      { text: 'the slow part of the answer', chunkDelayMs: 60 },
    ]);
    const [sentBefore, receivedBefore] = [await counter(a.url, 'agentd_notifications_sent_total'), await counter(b.url, 'agentd_notifications_received_total')];
    const owner = stream(a.url, turnOn(session, 'relay me'));
    await modelCalledWith('relay me');
    const attached = await attach(b.url, session);
    expect(attached.status).toBe(200);
    const [mine, relayed] = await Promise.all([owner.then(readFrames), readFrames(attached)]);
    // At most one NOTIFY per relayed event, plus the hello and the end (the events that piled up
    // while one was sent go out together), plus one per 2,600 characters of a long one; every one
    // of them reaches B.
    const sent = (await counter(a.url, 'agentd_notifications_sent_total')) - sentBefore;
    expect(sent).toBeGreaterThan(2);
    expect(sent).toBeLessThanOrEqual(relayed.frames.length + 2 + Math.ceil(JSON.stringify(relayed.frames).length / 2600));
    expect((await counter(b.url, 'agentd_notifications_received_total')) - receivedBefore).toBeGreaterThanOrEqual(sent);

    expect(relayed.frames).toEqual(mine.frames);
    expect(relayed.frames[0]).toMatchObject({ type: 'turn_start', data: { session_id: session } });
    expect(relayed.frames.find((f) => f.type === 'tool_call')).toMatchObject({ data: { name: 'write', input: { content: BIG } } });
    expect(relayed.frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'end_turn' } });
    expect(attached.headers.get('x-ag-trace-id')).toBe((mine.frames[0]!.data as { trace_id: string }).trace_id);
  });

  it('as JSON waits for the turn on the other replica and returns its output', async () => {
    const session = sid('relay-json');
    replies.set('wait for me', [{ text: 'answered on A', latencyMs: 600 }]);
    const owner = postJson(a.url, '/services/agent/v0/invoke', auth, turnOn(session, 'wait for me'));
    await modelCalledWith('wait for me');
    const res = await attach(b.url, session, 'application/json');
    expect(res.status).toBe(200);
    const [ownerBody, body] = await Promise.all([owner.then((r) => r.json()), res.json()]);
    expect(body.turn_id).toBe(ownerBody.turn_id);
    expect(body.data.outputs).toEqual(ownerBody.data.outputs);
    expect(body.data.outputs.messages.at(-1).content).toBe('answered on A');
  });

  it("resumes a chat's continuation through the other replica with the continued message rebuilt first", async () => {
    const session = sid('resume-continued');
    replies.set('resume on B', [{ toolCalls: [{ name: 'write', input: { path: 'r.txt', content: 'resumed' } }] }, { text: 'written on A', latencyMs: 600 }]);
    const asking = { ...agent, runner: { permissions: { default: 'ask' } } };
    const vercel = { 'x-ag-messages-format': 'vercel' };
    const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'resume on B' }] };
    const paused = await postJson(a.url, '/services/agent/v0/invoke', auth, { session_id: session, data: { inputs: { messages: [user] }, parameters: { agent: asking } } }, vercel);
    const assistant = (await paused.json()).data.outputs.messages.at(-1);
    const part = assistant.parts.find((p: { type: string }) => p.type === 'tool-write');
    expect(part.state).toBe('approval-requested');
    const answered = { ...assistant, parts: assistant.parts.map((p: { type: string }) => (p === part ? { ...part, state: 'approval-responded', approval: { ...part.approval, approved: true } } : p)) };

    const continuing = postJson(a.url, '/services/agent/v0/invoke', auth, { session_id: session, data: { inputs: { messages: [user, answered] }, parameters: { agent: asking } } }, { ...vercel, accept: 'text/event-stream' });
    await waitForCalls(2, 'resume on B');
    const resumed = await fetch(`${b.url}/services/agent/v0/invoke/${session}/stream?project_id=${auth.projectId}`, { headers: { authorization: `ApiKey ${auth.key}` } });
    expect(resumed.status).toBe(200);
    const { message, errors } = await readFinal(await responseChunks(resumed));
    expect(errors).toEqual([]);
    expect(message?.id).toBe(assistant.id);
    expect(message?.parts.find((p) => p.type === 'tool-write')).toMatchObject({ state: 'output-available', approval: { id: part.approval.id, approved: true } });
    expect(message?.parts.flatMap((p) => (p.type === 'text' ? [p.text] : []))).toEqual(['written on A']);
    await (await continuing).text();
  });

  it('is a 404 once the turn has ended, on either replica', async () => {
    const session = sid('ended');
    replies.set('quick', [{ text: 'done already' }]);
    expect((await postJson(a.url, '/services/agent/v0/invoke', auth, turnOn(session, 'quick'))).status).toBe(200);
    for (const url of [a.url, b.url]) {
      const res = await attach(url, session, 'application/json');
      expect(res.status).toBe(404);
      expect((await res.json()).status.message).toContain('no live turn');
    }
  });

  it('starts the stream at once and ends it with an error and interrupted when the replica running the turn cannot answer', async () => {
    const session = sid('frozen');
    replies.set('frozen owner', [{ hang: true }]);
    const owner = stream(a.url, turnOn(session, 'frozen owner'));
    await modelCalledWith('frozen owner');
    // A stopped process holds its lease until the lease runs out, and answers nobody meanwhile.
    a.child.kill('SIGSTOP');
    try {
      const attached = await attach(b.url, session);
      expect(attached.status).toBe(200);
      expect(attached.headers.get('content-type')).toContain('text/event-stream');
      const { frames } = await readFrames(attached);
      expect(frames.map((f) => f.type)).toEqual(['error', 'done']);
      expect(frames[0]).toMatchObject({ data: { code: 503, type: 'unavailable', message: expect.stringContaining('did not answer') } });
      expect(frames[1]).toMatchObject({ data: { stop_reason: 'interrupted' } });
    } finally {
      a.child.kill('SIGCONT');
    }
    void owner.catch(() => undefined);
  }, 20_000);

  it('ends with an error frame, not a hang, when the replica running the turn dies', async () => {
    const session = sid('orphan');
    // A first step, so the attached reply has begun (headers sent) before the second one hangs.
    replies.set('never finishes', [{ toolCalls: [{ name: 'write', input: { path: 'first.txt', content: 'step one' } }] }, { hang: true }]);
    const owner = stream(a.url, turnOn(session, 'never finishes'));
    await modelCalledWith('never finishes');
    const attached = await attach(b.url, session);
    expect(attached.status).toBe(200);
    // Killed once the first step's result has reached B, so the relayed stream is cut mid-turn.
    const frames = await readAcross(attached, '"type":"tool_result"', async () => {
      a.child.kill('SIGKILL');
      await a.exited;
    });
    await owner.catch(() => undefined);
    expect(frames[0]).toMatchObject({ type: 'turn_start' });
    expect(frames.find((f) => f.type === 'tool_result')).toBeDefined();
    expect(frames.at(-2)).toMatchObject({ type: 'error', data: { code: 503, type: 'unavailable' } });
    expect(frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'interrupted' } });
  }, 20_000);
});
