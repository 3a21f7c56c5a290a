import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { loadConfig, type Config } from '../../src/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { openStore, type Store } from '../../src/store/db.ts';
import { startFakeModel, type FakeModelServer, type FakeScript } from '../../src/testing/fake-model.ts';

export interface Harness {
  url: string;
  model: FakeModelServer;
  store: Store;
  app: FastifyInstance;
  config: Config;
  dataDir: string;
  projectId: string;
  apiKey: string;
  /** POST to invoke with auth and project id filled in. */
  invoke(body: unknown, init?: { headers?: Record<string, string>; query?: string }): Promise<Response>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  env?: Record<string, string>;
  script?: FakeScript;
}

/** A real agentd on a loopback port, a real fake-model server, a fresh data dir and an editor key. */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const model = await startFakeModel(options.script ? { script: options.script } : {});
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-test-'));
  const config = loadConfig({
    AGENTD_DATA_DIR: dataDir,
    AGENTD_LOG_LEVEL: 'silent',
    OPENAI_API_KEY: 'sk-test-openai-key',
    OPENAI_BASE_URL: model.url,
    OLLAMA_BASE_URL: model.url,
    AGENTD_DEFAULT_PROVIDER: 'openai',
    AGENTD_DEFAULT_MODEL: 'fake-model',
    ...options.env,
  });
  const store = await openStore({ dataDir, databaseUrl: undefined });
  const project = await store.projects.ensure('test');
  const key = await store.apiKeys.create(project.id, 'editor');
  const app = await buildApp({ config, store });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address() as { port: number };
  const url = `http://127.0.0.1:${address.port}`;

  return {
    url,
    model,
    store,
    app,
    config,
    dataDir,
    projectId: project.id,
    apiKey: key.key,
    invoke: (body, init = {}) =>
      fetch(`${url}/services/agent/v0/invoke?${init.query ?? `project_id=${project.id}`}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `ApiKey ${key.key}`, ...init.headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    async close() {
      await app.close();
      await model.close();
      await store.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** A template that runs on the fake model with the given tools and permission mode. */
export function template(options: { tools?: unknown[]; mode?: string; provider?: string } = {}) {
  return {
    instructions: { agents_md: 'You are a test agent.' },
    llm: { provider: options.provider ?? 'openai', model: 'fake-model' },
    tools: options.tools ?? [],
    runner: { permissions: { default: options.mode ?? 'allow' } },
  };
}

export function userTurn(text: string, extra: Record<string, unknown> = {}) {
  return { data: { inputs: { messages: [{ role: 'user', content: text }] }, ...extra } };
}
