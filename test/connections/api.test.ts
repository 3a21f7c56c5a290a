import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startHarness, type Harness } from '../support/harness.ts';
import { adminOf, connectionsApi, okJson, type Caller } from './client.ts';

/** POST/GET/DELETE /api/connections (issue 4): admins store provider keys; nobody reads them back. */

const KEY = 'sk-proj-connection-key-0123456789-WXYZ';

let h: Harness;
let admin: Caller;
let editor: Caller;
let viewer: Caller;
let strangerAdmin: Caller;
/** Every reply body of this file, to prove no key ever came back. */
const replies: string[] = [];

beforeAll(async () => {
  h = await startHarness({ logs: true });
  admin = await adminOf(h);
  editor = { key: h.apiKey, projectId: h.projectId };
  viewer = { key: (await h.store.apiKeys.create(h.projectId, 'viewer')).key, projectId: h.projectId };
  strangerAdmin = await adminOf(h, (await h.store.projects.ensure('stranger')).id);
});
afterAll(async () => h.close());

async function call(method: string, rest: string, as: Caller, body?: unknown): Promise<Response> {
  const res = await connectionsApi(h, method, rest, { as, ...(body === undefined ? {} : { body }) });
  replies.push(await res.clone().text());
  return res;
}

const create = (body: Record<string, unknown>, as = admin) => call('POST', '', as, body);

describe('connections API', () => {
  it('creates a connection (201) and returns it without the key', async () => {
    const { body } = await okJson(await create({ slug: 'main', provider: 'openai', base_url: 'https://llm.example.com/v1', api_key: KEY, model: 'gpt-x' }), 201);
    expect(body).toEqual({
      id: expect.any(String),
      project_id: h.projectId,
      slug: 'main',
      provider: 'openai',
      base_url: 'https://llm.example.com/v1',
      model: 'gpt-x',
      key_hint: '…WXYZ',
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
  });

  it('leaves out what was not given', async () => {
    const { body } = await okJson(await create({ slug: 'bare', provider: 'anthropic', api_key: 'short' }), 201);
    expect(Object.keys(body).sort()).toEqual(['created_at', 'id', 'key_hint', 'project_id', 'provider', 'slug', 'updated_at']);
    // A short key shows less of itself.
    expect(body.key_hint).toBe('…t');
  });

  it('lists (by slug) and reads connections for a viewer', async () => {
    const { body: list } = await okJson(await call('GET', '', viewer));
    expect(list.count).toBe(list.connections.length);
    expect(list.connections.map((c: any) => c.slug)).toEqual(['bare', 'main']);
    const { body: one } = await okJson(await call('GET', '/main', viewer));
    expect(one).toMatchObject({ slug: 'main', provider: 'openai', key_hint: '…WXYZ' });
    expect(one).not.toHaveProperty('api_key');
    await expectError(await call('GET', '/nope', viewer), 404, 'not-found', /no connection "nope"/);
  });

  it('refuses a slug the project already has with 409 conflict', async () => {
    await expectError(await create({ slug: 'main', provider: 'ollama', api_key: 'other-key-123456' }), 409, 'conflict', /already has a connection "main"/);
    const { body } = await okJson(await call('GET', '/main', viewer));
    expect(body.provider).toBe('openai');
  });

  it('needs admin to create or delete; editors and viewers get 403', async () => {
    for (const as of [editor, viewer]) {
      await expectError(await create({ slug: 'mine', provider: 'openai', api_key: KEY }, as), 403, 'forbidden', /"admin" role/);
      await expectError(await call('DELETE', '/main', as), 403, 'forbidden');
    }
    await expectError(await call('GET', '/mine', viewer), 404, 'not-found');
    await expectError(await connectionsApi(h, 'GET', '', { as: { key: 'agd_nope', projectId: h.projectId } }), 401, 'unauthenticated');
  });

  it('validates the body and never repeats the key in the error', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ slug: 'Bad Slug', provider: 'openai', api_key: KEY }, /slug/],
      [{ slug: 'ok', provider: 'gemini', api_key: KEY }, /provider/],
      [{ slug: 'ok', provider: 'openai-compatible', api_key: KEY }, /base_url/],
      [{ slug: 'ok', provider: 'openai', base_url: 'ftp://x', api_key: KEY }, /base_url/],
      [{ slug: 'ok', provider: 'openai', base_url: 'https://me:pw@llm.example.com/v1', api_key: KEY }, /base_url must not carry a user name or password/],
      [{ slug: 'ok', provider: 'openai', api_key: '' }, /api_key/],
      [{ slug: 'ok', provider: 'openai', api_key: 'x'.repeat(4097) }, /api_key/],
      [{ slug: 'ok', provider: 'openai', api_key: 'sk-…' }, /^api_key must be the key itself, printable ASCII without spaces .* at api_key$/],
      [{ slug: 'ok', provider: 'openai', api_key: `${KEY} ` }, /api_key must be the key itself/],
      [{ slug: 'ok', provider: 'openai', api_key: KEY, extra: true }, /unknown key "extra"/],
      [{ slug: 'ok', provider: 'openai' }, /api_key/],
    ];
    for (const [body, mentions] of cases) await expectError(await create(body), 400, 'invalid-request', mentions);
    await expectError(await call('GET', '/Not_A_Slug!', viewer), 400, 'invalid-request', /slug/);
  });

  it('keeps projects apart: another project sees, reads and deletes nothing', async () => {
    const { body } = await okJson(await call('GET', '', strangerAdmin));
    expect(body).toEqual({ count: 0, connections: [] });
    await expectError(await call('GET', '/main', strangerAdmin), 404, 'not-found');
    await expectError(await call('DELETE', '/main', strangerAdmin), 404, 'not-found');
    // The same slug is free in another project.
    await okJson(await create({ slug: 'main', provider: 'ollama', api_key: 'stranger-key-0001' }, strangerAdmin), 201);
    const { body: ours } = await okJson(await call('GET', '/main', viewer));
    expect(ours.provider).toBe('openai');
  });

  it('deletes (204), after which the slug is gone and free again', async () => {
    const res = await call('DELETE', '/bare', admin);
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
    await expectError(await call('GET', '/bare', viewer), 404, 'not-found');
    await expectError(await call('DELETE', '/bare', admin), 404, 'not-found');
    await okJson(await create({ slug: 'bare', provider: 'openai', api_key: 'again-key-123456' }), 201);
  });

  it('never returns or logs a key', () => {
    expect(replies.length).toBeGreaterThan(10);
    for (const text of replies) {
      expect(text).not.toContain(KEY);
      expect(text).not.toContain('api_key":');
    }
    const logs = h.logs.join('');
    expect(logs).toContain('"reqId"');
    expect(logs).not.toContain(KEY);
    expect(logs).not.toContain(admin.key);
  });
});
