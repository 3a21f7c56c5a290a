import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import { AgentdError } from '../../src/client/errors.ts';
import { KeyCreated, KeyList, KeySelf } from '../../src/contract/keys.ts';
import { expectError, startHarness, type Harness } from '../support/harness.ts';
import { okJson, otherProject } from '../sessions-api/client.ts';

/** API keys over HTTP: who a key is, and an admin's create, list and revoke. */

let h: Harness;
let admin: string;
beforeAll(async () => {
  h = await startHarness();
  admin = (await h.store.apiKeys.create(h.projectId, 'admin')).key;
});
afterAll(async () => h.close());

const call = (method: string, path: string, key: string, body?: unknown) =>
  fetch(`${h.url}${path}${path.includes('?') ? '&' : '?'}project_id=${h.projectId}`, {
    method,
    headers: { authorization: `ApiKey ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

describe('the keys API', () => {
  it('tells any key who it is and which project it belongs to, never its secret', async () => {
    const viewer = (await h.store.apiKeys.create(h.projectId, 'viewer')).key;
    const res = await fetch(`${h.url}/api/keys/self`, { headers: { authorization: `ApiKey ${viewer}` } });
    const body = await okJson(res);
    expect(KeySelf.parse(body)).toEqual(body);
    expect(body).toMatchObject({ project: { id: h.projectId, name: 'test' }, key: { role: 'viewer', prefix: viewer.slice(0, 12) } });
    expect(JSON.stringify(body)).not.toContain(viewer.slice(12));
    // Seen just now: the verification that let this request in wrote it.
    expect(Date.parse(body.key.last_used_at)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('lets an admin create a key shown once, list keys without secrets, and revoke one so it stops working', async () => {
    const created = await okJson(await call('POST', '/api/keys', admin, { role: 'viewer' }), 201);
    expect(KeyCreated.parse(created)).toEqual(created);
    expect(created.key).toMatch(/^agd_/);
    expect(created.role).toBe('viewer');
    expect((await okJson(await call('GET', '/api/keys/self', created.key))).key.id).toBe(created.id);

    const listed = await okJson(await call('GET', '/api/keys', admin));
    expect(KeyList.parse(listed)).toEqual(listed);
    expect(listed.keys.map((k: { id: string }) => k.id)).toContain(created.id);
    expect(JSON.stringify(listed)).not.toContain(created.key);

    expect((await call('DELETE', `/api/keys/${created.id}`, admin)).status).toBe(204);
    await expectError(await call('GET', '/api/keys/self', created.key), 401, 'unauthenticated');
    const after = await okJson(await call('GET', '/api/keys', admin));
    expect(after.keys.find((k: { id: string }) => k.id === created.id).revoked_at).toEqual(expect.any(String));
  });

  it('defaults a new key to editor and refuses roles it does not know', async () => {
    const created = await okJson(await call('POST', '/api/keys', admin), 201);
    expect(created.role).toBe('editor');
    await expectError(await call('POST', '/api/keys', admin, { role: 'owner' }), 400, 'invalid-request', /role/);
    await expectError(await call('POST', '/api/keys', admin, { role: 'viewer', extra: 1 }), 400, 'invalid-request', /extra/);
  });

  it('keeps key management to admins of the project', async () => {
    await expectError(await call('GET', '/api/keys', h.apiKey), 403, 'forbidden', /admin/);
    await expectError(await call('POST', '/api/keys', h.apiKey, {}), 403, 'forbidden');
    const stranger = await otherProject(h, 'keys-other');
    const strangerAdmin = (await h.store.apiKeys.create(stranger.projectId, 'admin')).key;
    const mine = (await h.store.apiKeys.create(h.projectId, 'viewer')).id;
    const res = await fetch(`${h.url}/api/keys/${mine}?project_id=${stranger.projectId}`, { method: 'DELETE', headers: { authorization: `ApiKey ${strangerAdmin}` } });
    await expectError(res, 404, 'not-found');
    await expectError(await call('DELETE', '/api/keys/not%20an%20id', admin), 400, 'invalid-request');
  });

  it('is in the client', async () => {
    const client = createClient({ baseUrl: h.url, apiKey: admin, projectId: h.projectId });
    expect((await client.keys.self()).key.role).toBe('admin');
    const made = await client.keys.create({ role: 'editor' });
    await client.keys.revoke(made.id);
    await expect(createClient({ baseUrl: h.url, apiKey: made.key, projectId: h.projectId }).keys.self()).rejects.toBeInstanceOf(AgentdError);
  });
});
