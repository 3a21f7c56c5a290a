import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, readJson, startHarness, template, userTurn, type Harness } from '../support/harness.ts';

/** Spec §5 and design.md §4 "Auth": 401 for who you are, 403 for what you may do, 400 for a missing project. */

let h: Harness;
let otherProject: { id: string };
let otherKey: string;
beforeAll(async () => {
  h = await startHarness({ script: { text: 'hello' } });
  otherProject = await h.store.projects.ensure('other');
  otherKey = (await h.store.apiKeys.create(otherProject.id, 'editor')).key;
});
afterAll(async () => h.close());

const body = () => userTurn('hi', { parameters: { agent: template() } });

function post(headers: Record<string, string>, query = `project_id=${h.projectId}`) {
  return fetch(`${h.url}/services/agent/v0/invoke?${query}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body()),
  });
}

describe('authentication', () => {
  it('no Authorization header → 401', async () => {
    await expectError(await post({}), 401, 'unauthenticated', /ApiKey/);
  });

  it('an unknown key → 401', async () => {
    await expectError(await post({ authorization: 'ApiKey agentd_not_a_real_key' }), 401, 'unauthenticated');
  });

  it('a scheme other than ApiKey or Bearer → 401 naming the expected form', async () => {
    await expectError(await post({ authorization: `Basic ${h.apiKey}` }), 401, 'unauthenticated', /ApiKey <key>/);
  });

  it('the bare key without a scheme → 401', async () => {
    await expectError(await post({ authorization: h.apiKey }), 401, 'unauthenticated');
  });

  it('a revoked key → 401', async () => {
    const created = await h.store.apiKeys.create(h.projectId, 'editor');
    expect((await post({ authorization: `ApiKey ${created.key}` })).status).toBe(200);
    await h.store.apiKeys.revoke(created.id, h.projectId);
    await expectError(await post({ authorization: `ApiKey ${created.key}` }), 401, 'unauthenticated');
  });

  it('the key is not logged in the reply of a failed check', async () => {
    const res = await post({ authorization: 'ApiKey agentd_secretish_value_123' });
    expect(await res.text()).not.toContain('agentd_secretish_value_123');
  });

  // src/http/auth.ts accepts "Bearer" as an alias of "ApiKey" (case-insensitively), so clients
  // built for bearer tokens work unchanged.
  it('Authorization: Bearer <valid key> is accepted like ApiKey', async () => {
    const res = await post({ authorization: `Bearer ${h.apiKey}` });
    expect(res.status).toBe(200);
    await readJson(res);
  });

  it('the scheme is case-insensitive', async () => {
    expect((await post({ authorization: `apikey ${h.apiKey}` })).status).toBe(200);
  });
});

describe('authorization', () => {
  it('missing project_id → 400 missing-project-id', async () => {
    await expectError(await post({ authorization: `ApiKey ${h.apiKey}` }, ''), 400, 'missing-project-id', 'project_id');
  });

  it('an empty project_id → 400 missing-project-id', async () => {
    await expectError(await post({ authorization: `ApiKey ${h.apiKey}` }, 'project_id='), 400, 'missing-project-id');
  });

  it('project_id given twice → 400 saying so, not that it is missing', async () => {
    await expectError(await post({ authorization: `ApiKey ${h.apiKey}` }, `project_id=${h.projectId}&project_id=${h.projectId}`), 400, 'invalid-request', /project_id.*more than once/);
  });

  it('the project is never read from the body', async () => {
    const res = await fetch(`${h.url}/services/agent/v0/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${h.apiKey}` },
      body: JSON.stringify({ ...body(), project_id: h.projectId }),
    });
    await expectError(res, 400, 'missing-project-id');
  });

  it('a key of project A used on project B → 403', async () => {
    await expectError(await post({ authorization: `ApiKey ${otherKey}` }), 403, 'forbidden', h.projectId);
    await expectError(await post({ authorization: `ApiKey ${h.apiKey}` }, `project_id=${otherProject.id}`), 403, 'forbidden');
  });

  it('a project that does not exist gets the same 403 as someone else’s', async () => {
    await expectError(await post({ authorization: `ApiKey ${h.apiKey}` }, 'project_id=no-such-project'), 403, 'forbidden');
  });

  it('a viewer key may not run → 403 naming the role', async () => {
    const viewer = await h.store.apiKeys.create(h.projectId, 'viewer');
    await expectError(await post({ authorization: `ApiKey ${viewer.key}` }), 403, 'forbidden', /viewer/);
  });

  it('an admin key may run', async () => {
    const admin = await h.store.apiKeys.create(h.projectId, 'admin');
    expect((await post({ authorization: `ApiKey ${admin.key}` })).status).toBe(200);
  });

  it('credentials are checked before the body: a bad body with no key is a 401', async () => {
    const res = await fetch(`${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: 'a b' }),
    });
    await expectError(res, 401, 'unauthenticated');
  });

  it.each([
    ['/services/agent/v0/invoke', 'application/json', '{bad'],
    ['/services/agent/v0/invoke', 'text/plain', 'hello'],
    ['/services/agent/v0/invoke', 'application/json', '{"__proto__": {}}'],
    ['/api/sessions/interactions/query', 'application/json', '{bad'],
    ['/api/simple/testsets/import', 'text/csv', 'a,b\n"unclosed'],
  ])('a body that cannot even be read, with no key, is a 401 too (%s, %s)', async (route, type, raw) => {
    const res = await fetch(`${h.url}${route}?project_id=${h.projectId}`, { method: 'POST', headers: { 'content-type': type }, body: raw });
    await expectError(res, 401, 'unauthenticated');
  });

  it('a refused request runs nothing', async () => {
    h.model.reset();
    await post({});
    await post({ authorization: `ApiKey ${otherKey}` });
    expect(h.model.requests).toHaveLength(0);
  });
});
