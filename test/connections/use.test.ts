import { randomBytes } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.ts';
import { SECRET_KEY_FILE } from '../../src/store/secret-box.ts';
import { startFakeModel, type FakeModelServer, type RecordedRequest } from '../../src/testing/fake-model.ts';
import { builtin, expectError, invokeBody, readJson, sid, startHarness, until, type Harness } from '../support/harness.ts';
import { adminOf, connectionsApi, okJson, type Caller } from './client.ts';
import { storedContent } from '../support/database.ts';

/**
 * `llm.connection: {mode: "project", slug}` (issue 4): the turn runs on the connection's provider,
 * base URL and key. The key reaches the provider and nothing else: not a reply, the database
 * files, the turn's record or the logs.
 */

const KEY = 'sk-project-stored-key-9f8e7d6c5b4a';
const OLLAMA_KEY = 'ollama-project-key-1a2b3c4d';

let h: Harness;
/** The connection's own endpoint: the server's (h.model) must see none of its turns. */
let upstream: FakeModelServer;
let admin: Caller;
const replies: string[] = [];

beforeAll(async () => {
  h = await startHarness({ logs: true });
  upstream = await startFakeModel();
  admin = await adminOf(h);
  await okJson(await connectionsApi(h, 'POST', '', { as: admin, body: { slug: 'proj', provider: 'openai', base_url: upstream.url, api_key: KEY, model: 'conn-model' } }), 201);
  await okJson(await connectionsApi(h, 'POST', '', { as: admin, body: { slug: 'local', provider: 'ollama', base_url: upstream.url, api_key: OLLAMA_KEY } }), 201);
});
afterAll(async () => {
  await h.close();
  await upstream.close();
});
beforeEach(() => {
  h.model.reset();
  upstream.reset();
});

const agent = (llm: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  instructions: { agents_md: 'You are a test agent.' },
  llm: { connection: { mode: 'project', slug: 'proj' }, ...llm },
  tools: [],
  runner: { permissions: { default: 'allow' } },
  ...extra,
});
const keyOf = (req: RecordedRequest) => req.headers.authorization?.replace(/^Bearer /, '') ?? '';

async function run(template: unknown, extra: Record<string, unknown> = {}, on: Harness = h): Promise<Response> {
  const res = await on.invoke(invokeBody([{ role: 'user', content: 'hi' }], template, extra));
  replies.push(await res.clone().text());
  return res;
}

describe('a turn on a project connection', () => {
  it("reaches the connection's base URL with its key and default model", async () => {
    upstream.script({ text: 'from the project connection' });
    const body = await readJson(await run(agent({})));
    expect(body.data.outputs.messages.at(-1).content).toBe('from the project connection');
    expect(upstream.requests).toHaveLength(1);
    expect(upstream.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(upstream.requests[0]!.protocol).toBe('responses');
    expect(upstream.requests[0]!.model).toBe('conn-model');
    expect(h.model.requests).toHaveLength(0);
  });

  it('takes the model from the template over the connection’s, and a matching provider', async () => {
    upstream.script({ text: 'ok' });
    await readJson(await run(agent({ provider: 'openai', model: 'template-model' })));
    expect(upstream.requests[0]!.model).toBe('template-model');
  });

  it('uses the connection’s key even when the request carries secrets', async () => {
    upstream.script({ text: 'ok' });
    await readJson(await run(agent({}), { secrets: { OPENAI_API_KEY: 'sk-request-secret-000' } }));
    expect(keyOf(upstream.requests[0]!)).toBe(KEY);
  });

  it('speaks the connection’s provider protocol (ollama: chat completions)', async () => {
    upstream.script({ text: 'ok' });
    await readJson(await run(agent({ model: 'llama-x' }, { llm: { connection: { mode: 'project', slug: 'local' }, model: 'llama-x' } })));
    expect(upstream.requests[0]).toMatchObject({ protocol: 'chat', model: 'llama-x', headers: { authorization: `Bearer ${OLLAMA_KEY}` } });
  });

  it('masks the key when the model echoes it, in the reply and the turn record', async () => {
    const session = sid('echo');
    upstream.script((req) => ({ text: `My key is ${keyOf(req)}.` }));
    const body = await readJson(await run(agent({}), { session_id: session }));
    expect(body.data.outputs.messages.at(-1).content).toBe('My key is [redacted].');
    const [turn] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(JSON.stringify(turn)).not.toContain(KEY);
  });

  it('masks the key in a provider error that repeats it', async () => {
    upstream.script({ error: { status: 500, message: `Incorrect API key provided: ${KEY}` } });
    const body = await expectError(await run(agent({})), 502, 'upstream-error', /Incorrect API key provided: \[redacted\]/);
    expect(JSON.stringify(body)).not.toContain(KEY);
  });

  it("masks the key in an evaluation case's stored failure when the provider repeats it", async () => {
    upstream.script({ error: { status: 400, message: `Incorrect API key provided: ${KEY}` } });
    const api = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${h.url}/api${route}?project_id=${h.projectId}`, {
        method,
        headers: { authorization: `ApiKey ${admin.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      replies.push(text);
      return JSON.parse(text);
    };
    const app = await api('POST', '/workflows', { slug: 'on-proj', family: 'application', data: { parameters: { agent: agent({}) } } });
    const set = await api('POST', '/simple/testsets/', { testset: { slug: 'on-proj-set', data: { testcases: [{ data: { messages: [{ role: 'user', content: 'hi' }] } }] } } });
    const run = (await api('POST', '/simple/evaluations/', { evaluation: { data: { testset_steps: [set.revision_id], application_steps: [app.revision.id] } } })).evaluation.id;
    await until(
      async () => (await api('GET', `/simple/evaluations/${run}`)).evaluation.data.status,
      (status) => status !== 'running',
    );
    const [result] = (await api('POST', '/evaluations/results/query', { result: { run_id: run } })).results;
    expect(result.error).toMatchObject({ type: 'upstream-rejected', message: expect.stringContaining('Incorrect API key provided: [redacted]') });
    for (const { source, text } of await storedContent(h)) expect(text.includes(KEY), source).toBe(false);
  });

  it('continues a paused turn on the same connection after an out-of-band answer', async () => {
    const session = sid('pause');
    upstream.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] }, { text: 'written' }]);
    const paused = await readJson(await run(agent({}, { tools: [builtin('write')], runner: { permissions: { default: 'ask' } } }), { session_id: session }));
    expect(paused.data.outputs.stop_reason).toBe('paused');
    const id = paused.data.outputs.pending_interaction.id;
    const res = await fetch(`${h.url}/api/sessions/interactions/${id}/respond?project_id=${h.projectId}`, {
      method: 'POST',
      headers: { authorization: `ApiKey ${h.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ answer: { approved: true } }),
    });
    expect(res.status).toBe(200);
    let turns = await h.store.turns.listForSession(h.projectId, session, { limit: 10 });
    for (let i = 0; i < 400 && !(turns.length >= 2 && turns[0]!.status !== 'running'); i++) {
      await new Promise((r) => setTimeout(r, 25));
      turns = await h.store.turns.listForSession(h.projectId, session, { limit: 10 });
    }
    expect(turns[0]!.status).toBe('completed');
    expect(upstream.requests.map(keyOf)).toEqual([KEY, KEY]);
    expect(h.model.requests).toHaveLength(0);
    const records = await h.store.interactions.query(h.projectId, { session_id: session }, { limit: 10 });
    expect(JSON.stringify(records)).not.toContain(KEY);
  });
});

describe('refusals', () => {
  it('a slug the project does not have → 404 naming it and how to create it', async () => {
    await expectError(await run(agent({}, { llm: { connection: { mode: 'project', slug: 'missing' } } })), 404, 'not-found', /no connection "missing".*POST \/api\/connections/);
    expect(upstream.requests).toHaveLength(0);
  });

  it("another project's connection is unusable: 404", async () => {
    const stranger = await h.store.projects.ensure('stranger');
    const strangerAdmin = await adminOf(h, stranger.id);
    await okJson(await connectionsApi(h, 'POST', '', { as: strangerAdmin, body: { slug: 'theirs', provider: 'openai', base_url: upstream.url, api_key: 'sk-their-key-123456' } }), 201);
    await expectError(await run(agent({}, { llm: { connection: { mode: 'project', slug: 'theirs' }, model: 'm' } })), 404, 'not-found', /"theirs"/);
    expect(upstream.requests).toHaveLength(0);
  });

  it('mode "project" without a slug → 400', async () => {
    await expectError(await run(agent({}, { llm: { connection: { mode: 'project' } } })), 400, 'invalid-request', /connection\.slug/);
  });

  it('a provider other than the connection’s → 400', async () => {
    await expectError(await run(agent({ provider: 'anthropic' })), 400, 'invalid-request', /"anthropic".*"openai" connection/);
    await expectError(await run(agent({ model: 'anthropic/claude-x' })), 400, 'invalid-request', /"openai" connection/);
    expect(upstream.requests).toHaveLength(0);
  });

  it('no model in the template or the connection → 400', async () => {
    await expectError(await run(agent({}, { llm: { connection: { mode: 'project', slug: 'local' } } })), 400, 'invalid-request', /no default model.*llm\.model/);
  });

  it('a key stored before keys were held to what a header can carry is a 424 naming the connection, not a 502 blaming the provider', async () => {
    // Written to the store as the API took it before: it refuses such a key now.
    await h.store.connections.create(h.projectId, { slug: 'copied', provider: 'openai', base_url: upstream.url, api_key: 'sk-…', model: 'm' });
    await expectError(
      await run(agent({}, { llm: { connection: { mode: 'project', slug: 'copied' } } })),
      424,
      'upstream-auth',
      'connection "copied" holds an api_key no HTTP header can carry (a space or a character outside printable ASCII): delete it and create it again with the key itself',
    );
    expect(upstream.requests).toHaveLength(0);
  });

  it('a deleted connection stops working', async () => {
    await okJson(await connectionsApi(h, 'POST', '', { as: admin, body: { slug: 'temp', provider: 'openai', base_url: upstream.url, api_key: 'sk-temp-key-123456', model: 'm' } }), 201);
    upstream.script({ text: 'ok' });
    await readJson(await run(agent({}, { llm: { connection: { mode: 'project', slug: 'temp' } } })));
    expect((await connectionsApi(h, 'DELETE', '/temp', { as: admin })).status).toBe(204);
    await expectError(await run(agent({}, { llm: { connection: { mode: 'project', slug: 'temp' } } })), 404, 'not-found');
  });
});

describe('the key at rest', () => {
  it('is in no database file (nor the WAL) or row in plaintext', async () => {
    const row = await h.store.db.selectFrom('connections').selectAll().where('slug', '=', 'proj').executeTakeFirstOrThrow();
    // Sealed as base64 of iv (12) | tag (16) | ciphertext.
    expect(Buffer.from(row.api_key_ciphertext, 'base64').length).toBe(12 + 16 + Buffer.byteLength(KEY));
    for (const { source, text } of await storedContent(h)) {
      expect(text.includes(KEY), source).toBe(false);
      expect(text.includes(OLLAMA_KEY), source).toBe(false);
    }
  });

  it('is sealed with a secret.key generated into the data folder (0600), which a later start reads back', async () => {
    const file = path.join(h.dataDir, SECRET_KEY_FILE);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const before = await readFile(file, 'utf8');
    const again = await openStore({ dataDir: h.dataDir, databaseUrl: h.databaseUrl });
    try {
      expect(await again.connections.open(h.projectId, 'proj')).toMatchObject({ provider: 'openai', api_key: KEY, model: 'conn-model' });
    } finally {
      await again.close();
    }
    expect(await readFile(file, 'utf8')).toBe(before);
  });

  it('under another AGENTD_SECRET_KEY cannot be read: the turn fails with 424 saying so', async () => {
    const other = await startHarness({ dataDir: h.dataDir, databaseUrl: h.databaseUrl, logs: true, env: { AGENTD_SECRET_KEY: randomBytes(32).toString('base64') } });
    try {
      const res = await run(agent({}), {}, other);
      const body = await expectError(res, 424, 'upstream-auth', /connection "proj" cannot be decrypted with this server's AGENTD_SECRET_KEY/);
      expect(JSON.stringify(body)).not.toContain(KEY);
      expect(upstream.requests).toHaveLength(0);
      expect(other.logs.join('')).not.toContain(KEY);
      // The listing needs no key: it still works.
      const { body: list } = await okJson(await connectionsApi(other, 'GET', '', { as: admin }));
      expect(list.connections.map((c: any) => c.slug)).toContain('proj');
    } finally {
      await other.close();
    }
  });

  it('never reaches a reply or a log line', () => {
    expect(replies.length).toBeGreaterThan(10);
    for (const text of replies) {
      expect(text).not.toContain(KEY);
      expect(text).not.toContain(OLLAMA_KEY);
    }
    const logs = h.logs.join('');
    expect(logs).toContain('"reqId"');
    expect(logs).not.toContain(KEY);
    expect(logs).not.toContain(OLLAMA_KEY);
  });
});
