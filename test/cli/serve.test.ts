import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.ts';
import { startFakeModel, type FakeModelServer } from '../../src/testing/fake-model.ts';
import { firstStartCredentials, runAgentd, startServe } from '../support/child-server.ts';
import { startSilentMcpServer } from '../support/mcp-server.ts';
import { agentdInTerminal, hasTmux } from '../support/terminal.ts';

let model: FakeModelServer;
let dataDir: string;
let env: Record<string, string>;

beforeAll(async () => {
  model = await startFakeModel();
});
afterAll(async () => model.close());

async function freshEnv(extra: Record<string, string> = {}) {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-serve-'));
  env = { AGENTD_DATA_DIR: dataDir, OPENAI_API_KEY: 'sk-serve-test-key', OPENAI_BASE_URL: model.url, AGENTD_DEFAULT_MODEL: 'fake', ...extra };
}
afterEach(async () => rm(dataDir, { recursive: true, force: true }));

const agent = { llm: { provider: 'openai', model: 'fake' }, tools: [] };

function invoke(url: string, projectId: string, key: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${url}/services/agent/v0/invoke?project_id=${projectId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `ApiKey ${key}`, ...headers },
    body: JSON.stringify(body),
  });
}

describe('agentd serve', () => {
  it('creates the default project on first start, prints its key once, and the key works; a restart finishes cut-off deletions', async () => {
    await freshEnv();
    const server = await startServe(env);
    try {
      const out = server.output();
      const { projectId, key } = firstStartCredentials(out);
      expect(out).toContain('keys create --project');
      expect(out).toContain(`console ${server.url}/ · API reference ${server.url}/docs`);
      expect(out).toContain(`export AGENTD_URL=${server.url} AGENTD_PROJECT_ID=${projectId} AGENTD_API_KEY=${key}`);
      model.script({ text: 'hello from serve' });
      const res = await invoke(server.url, projectId, key, { data: { inputs: { messages: [{ role: 'user', content: 'hi' }] }, parameters: { agent } } });
      expect(res.status).toBe(200);
      expect((await res.json()).data.outputs.messages.at(-1).content).toBe('hello from serve');
      // The only key there is manages the others: it is the project's admin key.
      const keys = await fetch(`${server.url}/api/keys`, { headers: { authorization: `ApiKey ${key}` } });
      expect(keys.status).toBe(200);
      expect((await keys.json()).keys).toEqual([expect.objectContaining({ role: 'admin' })]);
    } finally {
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    }
    // What a deletion cut off by a killed server moved aside; the start removes it.
    const aside = [path.join(dataDir, 'sessions', `.deleted-${crypto.randomUUID()}`), path.join(dataDir, 'harness-state', `.deleted-${crypto.randomUUID()}`)];
    for (const folder of aside) await mkdir(path.join(folder, 'kept'), { recursive: true });
    const again = await startServe(env);
    again.child.kill('SIGTERM');
    await again.exited;
    for (const folder of aside) expect(existsSync(folder), folder).toBe(false);
    expect(again.output()).not.toContain('API key:');
    expect(again.output()).toContain('make another with: npm run agentd -- keys create');
  });

  it('keys create --json prints a working key for a new project', async () => {
    await freshEnv();
    const keys = runAgentd(['keys', 'create', '--project', 'scripts', '--json'], env);
    expect(await keys.exited).toBe(0);
    const created = JSON.parse(keys.output().trim().split('\n').at(-1)!);
    expect(Object.keys(created).sort()).toEqual(['api_key', 'project_id']);
    const store = await openStore({ dataDir });
    try {
      expect(await store.apiKeys.verify(created.api_key)).toMatchObject({ project_id: created.project_id, role: 'editor' });
    } finally {
      await store.close();
    }
  });

  it('prints help and refuses unknown commands with a hint', async () => {
    await freshEnv();
    const help = runAgentd(['--help'], env);
    expect(await help.exited).toBe(0);
    expect(help.output()).toContain('serve');
    const bad = runAgentd(['frobnicate'], env);
    expect(await bad.exited).toBe(2);
    expect(bad.output()).toContain('unknown command');
  });

  it('prints its version for --version, -V and version', async () => {
    await freshEnv();
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V', 'version']) {
      const run = runAgentd([flag], env);
      expect(await run.exited).toBe(0);
      expect(run.output().trim()).toBe(`agentd ${version}`);
    }
  });

  it('on SIGTERM lets a live turn finish within the grace period', async () => {
    await freshEnv({ AGENTD_SHUTDOWN_GRACE_MS: '10000' });
    const server = await startServe(env);
    const { projectId, key } = firstStartCredentials(server.output());
    model.script({ text: 'slow but complete', latencyMs: 800 });
    const pending = invoke(server.url, projectId, key, { data: { inputs: { messages: [{ role: 'user', content: 'hi' }] }, parameters: { agent } } });
    await new Promise((r) => setTimeout(r, 300));
    server.child.kill('SIGTERM');
    const res = await pending;
    expect(res.status).toBe(200);
    expect((await res.json()).data.outputs.messages.at(-1).content).toBe('slow but complete');
    expect(await server.exited).toBe(0);
  });

  it('on SIGTERM aborts turns still running after the grace period and records them interrupted', async () => {
    await freshEnv({ AGENTD_SHUTDOWN_GRACE_MS: '200' });
    const server = await startServe(env);
    const { projectId, key } = firstStartCredentials(server.output());
    model.script({ hang: true });
    const pending = invoke(server.url, projectId, key, { session_id: 'long', data: { inputs: { messages: [{ role: 'user', content: 'hi' }] }, parameters: { agent } } });
    await new Promise((r) => setTimeout(r, 300));
    server.child.kill('SIGTERM');
    const res = await pending;
    expect(res.status).toBe(503);
    expect((await res.json()).status.type).toBe('unavailable');
    expect(await server.exited).toBe(0);
    const store = await openStore({ dataDir });
    try {
      const [turn] = await store.turns.listForSession(projectId, 'long', { limit: 5 });
      expect(turn?.status).toBe('interrupted');
    } finally {
      await store.close();
    }
  });

  it('on SIGTERM interrupts a turn whose MCP servers are still connecting, after the grace period', async () => {
    await freshEnv({ AGENTD_SHUTDOWN_GRACE_MS: '200', AGENTD_MCP_TIMEOUT_MS: '20000' });
    const silent = await startSilentMcpServer();
    const server = await startServe(env);
    try {
      const { projectId, key } = firstStartCredentials(server.output());
      const mcps = [{ name: 'mute', connection: { type: 'http', url: silent.url } }];
      const pending = invoke(server.url, projectId, key, { session_id: 'connecting', data: { inputs: { messages: [{ role: 'user', content: 'hi' }] }, parameters: { agent: { ...agent, mcps } } } });
      await silent.asked;
      server.child.kill('SIGTERM');
      const res = await pending;
      expect(res.status).toBe(503);
      expect((await res.json()).status.type).toBe('unavailable');
      expect(await server.exited).toBe(0);
      await silent.closed;
      const store = await openStore({ dataDir });
      try {
        const [turn] = await store.turns.listForSession(projectId, 'connecting', { limit: 5 });
        expect(turn?.status).toBe('interrupted');
      } finally {
        await store.close();
      }
    } finally {
      await silent.close();
    }
  });

  it('has written every request\'s log line when it exits, though it does not wait on each write', async () => {
    await freshEnv();
    const server = await startServe(env);
    const { projectId, key } = firstStartCredentials(server.output());
    const requests = 300;
    const statuses = await Promise.all(
      Array.from({ length: requests }, (_, i) =>
        fetch(`${server.url}/api/sessions?project_id=${projectId}&id_prefix=n${i}`, { headers: { authorization: `ApiKey ${key}`, 'x-request-id': `logged-${i}` } }).then((res) => res.status),
      ),
    );
    expect(new Set(statuses)).toEqual(new Set([200]));
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    const completed = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line))
      .filter((line) => line.msg === 'request completed' && String(line.reqId).startsWith('logged-'));
    expect(new Set(completed.map((line) => line.reqId)).size).toBe(requests);
  });

  it('writes a quiet server\'s log line soon, though lines wait to be written together', async () => {
    await freshEnv();
    const server = await startServe(env);
    const { projectId, key } = firstStartCredentials(server.output());
    const res = await fetch(`${server.url}/api/sessions?project_id=${projectId}`, { headers: { authorization: `ApiKey ${key}`, 'x-request-id': 'the-only-one' } });
    expect(res.status).toBe(200);
    // Far less than the 4 KB that is written at once: only the timer can send it.
    for (let i = 0; i < 200 && !server.output().includes('"reqId":"the-only-one"'); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(server.output()).toContain('"reqId":"the-only-one"');
    expect(server.child.exitCode).toBeNull();
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  });

  it('starts no turn thread while idle: its own start is not load', async () => {
    // The line `agentd serve` has unless told otherwise (the suite sets one of its own).
    await freshEnv({ AGENTD_TURN_WORKERS: '1', AGENTD_TURN_WORKERS_LOAD: '0.9', AGENTD_METRICS_TOKEN: 'metrics-token-of-the-test' });
    // As a first start with no provider configured runs: on the demo model, whose start is work too.
    const server = await startServe({ ...env, OPENAI_API_KEY: undefined, OPENAI_BASE_URL: undefined, AGENTD_DEFAULT_MODEL: undefined });
    try {
      // The load is read every 100 ms once it is read at all: ten readings' worth of idling.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: 'Bearer metrics-token-of-the-test' } })).text();
      expect(metrics).toMatch(/^agentd_turn_threads\{[^}]*\} 0$/m);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });

  it('loads nothing of PostgreSQL, span export, harnesses, MCP, the `ai` package or ajv until they are used', async () => {
    await freshEnv();
    const list = path.join(dataDir, 'loaded-modules.txt');
    const server = await startServe({ ...env, LOADED_MODULES_FILE: list }, ['--import', path.join(import.meta.dirname, '../support/loaded-modules.mjs')]);
    try {
      const { projectId, key } = firstStartCredentials(server.output());
      expect((await fetch(`${server.url}/ready`)).status).toBe(200);
      // Turns of the built-in loop, answered as JSON and as the Vercel stream, need none of them either.
      const body = { data: { inputs: { messages: [{ role: 'user', content: 'hi' }] }, parameters: { agent } } };
      model.script({ text: 'as JSON' });
      expect((await invoke(server.url, projectId, key, body)).status).toBe(200);
      model.script({ text: 'as a stream' });
      const streamed = await invoke(server.url, projectId, key, body, { accept: 'text/event-stream', 'x-ag-messages-format': 'vercel' });
      expect(await streamed.text()).toContain('"finishReason":"stop"');
    } finally {
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    }
    const loaded = (await readFile(list, 'utf8')).split('\n');
    expect(loaded).toContainEqual(expect.stringContaining('/node_modules/kysely/'));
    expect(loaded).toContainEqual(expect.stringContaining('/node_modules/@ai-sdk/openai/'));
    const unused = loaded.filter((url) => /\/node_modules\/(pg|pino-pretty|@opentelemetry\/sdk-trace|@opentelemetry\/exporter-[^/]+|@agentclientprotocol\/sdk|@ai-sdk\/mcp|ai|@ai-sdk\/gateway|ajv|@fastify\/ajv-compiler)\//.test(url));
    expect(unused).toEqual([]);
    // undici's Agent and request, not its index that loads all of it.
    expect(loaded).toContainEqual(expect.stringContaining('/node_modules/undici/lib/api/api-request.js'));
    expect(loaded).not.toContainEqual(expect.stringContaining('/node_modules/undici/index.js'));
  });

  it('never writes API keys or request secrets to its logs', async () => {
    await freshEnv({ AGENTD_LOG_LEVEL: 'trace' });
    const server = await startServe(env);
    const { projectId, key } = firstStartCredentials(server.output());
    const logsBefore = server.output().length;
    model.script({ error: { status: 500, body: { error: { message: 'boom sk-secret-in-request-1234' } } } });
    const res = await invoke(server.url, projectId, key, {
      secrets: { OPENAI_API_KEY: 'sk-secret-in-request-1234' },
      credentials: 'cred-secret-abcdef',
      data: { inputs: { messages: [{ role: 'user', content: 'hi' }] }, parameters: { agent } },
    });
    const text = await res.text();
    expect(text).not.toContain('sk-secret-in-request-1234');
    server.child.kill('SIGTERM');
    await server.exited;
    const logs = server.output().slice(logsBefore);
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).not.toContain(key);
    expect(logs).not.toContain('sk-secret-in-request-1234');
    expect(logs).not.toContain('cred-secret-abcdef');
    expect(logs).not.toContain('sk-serve-test-key');
  });
});

describe.runIf(hasTmux())('agentd serve at a terminal', () => {
  it('logs readable lines, not JSON, with credentials still redacted', async () => {
    await freshEnv();
    const term = await agentdInTerminal(['serve', '--port', '0'], { ...env, AGENTD_LOG_LEVEL: 'info' }, 160);
    try {
      const screen = await term.waitFor(/agentd is listening\n/);
      const url = /console (http:\/\/\S+)\//.exec(screen)![1]!;
      await fetch(`${url}/api/sessions`, { headers: { authorization: 'ApiKey agd_not-a-real-key-but-secret' } });
      const after = await term.waitFor(/INFO.*request completed/);
      expect(after).toMatch(/INFO.*agentd is listening/);
      expect(after).not.toMatch(/^\{"level"/m);
      expect(after).not.toContain('not-a-real-key-but-secret');
    } finally {
      await term.close();
    }
  });
});
