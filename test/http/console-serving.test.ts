import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { openStore, type Store } from '../../src/store/db.ts';
import type { FastifyInstance } from 'fastify';

/** The console is a static bundle at `/`: served with a strict CSP, and a clear page when it is not built. */

let dir: string;
let store: Store;
const apps: FastifyInstance[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-console-'));
  store = await openStore({ dataDir: ':memory:' });
  await mkdir(path.join(dir, 'built', 'assets'), { recursive: true });
  await writeFile(path.join(dir, 'built', 'index.html'), '<!doctype html><title>console</title><script type="module" src="/assets/app-1.js"></script>');
  await writeFile(path.join(dir, 'built', 'assets', 'app-1.js'), 'console.log(1)');
});
afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

async function serve(consoleDir: string): Promise<FastifyInstance> {
  const app = await buildApp({ config: loadConfig({ AGENTD_DATA_DIR: dir, AGENTD_LOG_LEVEL: 'silent' }), store, consoleDir });
  apps.push(app);
  return app;
}

describe('the console at /', () => {
  it('serves the page under a strict CSP, never cached, and its hashed assets for good', async () => {
    const app = await serve(path.join(dir, 'built'));
    const page = await app.inject({ url: '/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['content-security-policy']).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    );
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['cache-control']).toBe('no-cache');
    const asset = await app.inject({ url: '/assets/app-1.js' });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['cache-control']).toContain('immutable');
  });

  it('answers a path that is no file of it, or of the API, with the API\'s own 404', async () => {
    const app = await serve(path.join(dir, 'built'));
    const res = await app.inject({ url: '/assets/nope.js' });
    expect(res.statusCode).toBe(404);
    expect(res.json().status.type).toBe('not-found');
    const escape = await app.inject({ url: '/..%2f..%2fpackage.json' });
    expect(escape.statusCode).toBe(404);
  });

  it('says how to build it when it is not built, and the API still works', async () => {
    const app = await serve(path.join(dir, 'missing'));
    const res = await app.inject({ url: '/' });
    expect(res.statusCode).toBe(503);
    expect(res.body).toContain('npm run build');
    expect(res.body).not.toContain('<script');
    const api = await app.inject({ url: '/api/sessions' });
    expect(api.statusCode).toBe(401);
    expect(api.json().status.type).toBe('unauthenticated');
  });
});
