import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { openStore, type Store } from '../../src/store/db.ts';

/**
 * agentd gives Fastify no schema compilers (it reads requests with zod), so that ajv is never
 * loaded; a route that asks for JSON-schema validation or serialization must fail at start rather
 * than run unchecked.
 */

let dir: string;
let store: Store;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-route-schemas-'));
  store = await openStore({ dataDir: ':memory:' });
});
afterAll(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

it.each([
  ['validates a body', { body: { type: 'object' } }],
  ['serializes a reply', { response: { 200: { type: 'object' } } }],
])('a route that %s by a JSON schema fails at start', async (_, schema) => {
  const app = await buildApp({ config: loadConfig({ AGENTD_DATA_DIR: dir, AGENTD_LOG_LEVEL: 'silent' }), store, consoleDir: dir });
  app.post('/schema-route', { schema }, async () => ({}));
  await expect(app.ready()).rejects.toThrow(/agentd reads requests with zod/);
  await app.close();
});
