import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { authorize } from '../../src/http/auth.ts';
import { documented } from '../../src/http/route-doc.ts';
import { openStore, type Store } from '../../src/store/db.ts';

/**
 * A route is its own documentation (design.md §3): a route of the API registered without a doc
 * must fail the server's start, and the role its doc names is the role it is authorized with.
 */

let dir: string;
let store: Store;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-route-docs-'));
  store = await openStore({ dataDir: ':memory:' });
});
afterAll(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const app = () => buildApp({ config: loadConfig({ AGENTD_DATA_DIR: dir, AGENTD_LOG_LEVEL: 'silent' }), store, consoleDir: dir });

it.each([
  ['POST', '/api/undocumented'],
  ['GET', '/services/agent/v0/undocumented'],
])('a route of the API registered without a doc (%s %s) fails the start, naming the route', async (method, url) => {
  const server = await app();
  // Registered as the app's route modules are; the plugin loads, and fails, as the server starts.
  void server.register(async (routes) => {
    routes.route({ method, url, handler: async () => ({}) });
  });
  await expect(server.ready()).rejects.toThrow(`${method} ${url} is a route of the API without a doc`);
  await server.close();
});

it('a route outside the API needs no doc', async () => {
  const server = await app();
  await server.register(async (routes) => {
    routes.get('/undocumented', async () => ({ ok: true }));
  });
  expect((await server.inject({ url: '/undocumented' })).json()).toEqual({ ok: true });
  await server.close();
});

it("a route is authorized with the role its doc names, and a key below it is told which", async () => {
  const project = await store.projects.ensure('route-docs');
  const editor = await store.apiKeys.create(project.id, 'editor');
  const admin = await store.apiKeys.create(project.id, 'admin');
  const server = await app();
  await server.register(async (routes) => {
    routes.get('/api/admins-only', documented({ summary: 'A probe', role: 'admin', ok: { status: 200, description: 'The caller' } }), async (request) => authorize(store, request));
  });
  const call = (key: string) => server.inject({ url: '/api/admins-only', headers: { authorization: `ApiKey ${key}` } });
  const refused = await call(editor.key);
  expect(refused.statusCode).toBe(403);
  expect(refused.json().status.message).toContain('this API key\'s role "editor" may not do this; it needs the "admin" role or higher');
  const allowed = await call(admin.key);
  expect(allowed.statusCode).toBe(200);
  expect(allowed.json()).toMatchObject({ projectId: project.id, role: 'admin' });
  await server.close();
});
