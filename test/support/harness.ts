import { mkdtemp, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { loadConfig, type Config } from '../../src/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { assertConformance, eventMismatch, watchConformance } from './conformance.ts';
import { openStore, type Store } from '../../src/store/db.ts';
import { startFakeModel, type FakeModelServer, type FakeProtocol, type FakeScript } from '../../src/testing/fake-model.ts';
import { freshDatabase } from './database.ts';

export interface Harness {
  url: string;
  model: FakeModelServer;
  store: Store;
  app: FastifyInstance;
  config: Config;
  dataDir: string;
  /** The PostgreSQL database (a schema of its own) when tests run on PostgreSQL; undefined on SQLite. */
  databaseUrl: string | undefined;
  /** Behind PgBouncer: the direct URL of the LISTEN connection. */
  listenUrl: string | undefined;
  projectId: string;
  apiKey: string;
  /** Every log line the server wrote, when started with `logs: true`. */
  logs: string[];
  /** POST to invoke with auth and project id filled in. */
  invoke(body: unknown, init?: { headers?: Record<string, string>; query?: string; signal?: AbortSignal }): Promise<Response>;
  /** Answers an interaction through the API (`/respond`), as another tab or a back office would. */
  respond(interactionId: string, answer: Record<string, unknown>): Promise<Response>;
  /** The session's working folder on the host. */
  sessionDir(sessionId: string): string;
  close(): Promise<void>;
}

export interface HarnessOptions {
  /** Settings from the environment; a function gets the fake model's URL, for settings that name it. */
  env?: Record<string, string> | ((modelUrl: string) => Record<string, string>);
  script?: FakeScript;
  /** The protocols the fake model serves (default all). */
  protocols?: FakeProtocol[];
  /** What the fake model answers on a path it does not serve (default 404). */
  unroutedStatus?: number;
  /** The fake model answers every POST as Chat Completions, whatever its path. */
  chatEverywhere?: boolean;
  /** Capture the server's log lines in `logs` (at AGENTD_LOG_LEVEL, default `trace`). */
  logs?: boolean;
  /** Share another harness's data folder (and so its database): a second agentd process, in effect. */
  dataDir?: string;
  /** With dataDir: the other harness's database (`h.databaseUrl`), when it is PostgreSQL. */
  databaseUrl?: string | undefined;
  /** With databaseUrl: the other harness's `listenUrl` (behind PgBouncer). */
  listenUrl?: string | undefined;
}

/** A real agentd on a loopback port, a real fake-model server, a fresh data dir and an editor key. */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const model = await startFakeModel({ ...(options.script ? { script: options.script } : {}), ...(options.protocols ? { protocols: options.protocols } : {}), ...(options.unroutedStatus ? { unroutedStatus: options.unroutedStatus } : {}), ...(options.chatEverywhere ? { chatEverywhere: true } : {}) });
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), 'agentd-test-')));
  const config = loadConfig({
    AGENTD_DATA_DIR: dataDir,
    AGENTD_LOG_LEVEL: options.logs ? 'trace' : 'silent',
    OPENAI_API_KEY: 'sk-test-openai-key',
    OPENAI_BASE_URL: model.url,
    OLLAMA_BASE_URL: model.url,
    AGENTD_DEFAULT_PROVIDER: 'openai',
    AGENTD_DEFAULT_MODEL: 'fake-model',
    // Pinned by the test run (vitest.config.ts), so where a turn runs never depends on the load.
    ...(process.env.AGENTD_TURN_WORKERS_LOAD ? { AGENTD_TURN_WORKERS_LOAD: process.env.AGENTD_TURN_WORKERS_LOAD } : {}),
    ...(typeof options.env === 'function' ? options.env(model.url) : options.env),
  });
  const database = options.dataDir ? { url: options.databaseUrl, listenUrl: options.listenUrl, drop: async () => {} } : await freshDatabase();
  const store = await openStore({ dataDir, databaseUrl: database.url, listenUrl: database.listenUrl, poolSize: config.pgPoolSize, bounds: config.pgBounds, secretKey: config.secretKey });
  const project = await store.projects.ensure('test');
  const key = await store.apiKeys.create(project.id, 'editor');
  const logs: string[] = [];
  const app = await buildApp({ config, store, ...(options.logs ? { logStream: { write: (line: string) => void logs.push(line) } } : {}) });
  const conformance = await watchConformance(app);
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
    databaseUrl: database.url,
    listenUrl: database.listenUrl,
    projectId: project.id,
    apiKey: key.key,
    logs,
    invoke: (body, init = {}) =>
      fetch(`${url}/services/agent/v0/invoke?${init.query ?? `project_id=${project.id}`}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `ApiKey ${key.key}`, ...init.headers },
        body: typeof body === 'string' || body instanceof Uint8Array ? (body as BodyInit) : JSON.stringify(body),
        ...(init.signal ? { signal: init.signal } : {}),
      }),
    respond: (interactionId, answer) =>
      fetch(`${url}/api/sessions/interactions/${encodeURIComponent(interactionId)}/respond?project_id=${project.id}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `ApiKey ${key.key}` },
        body: JSON.stringify({ answer }),
      }),
    sessionDir: (sessionId) => path.join(dataDir, 'sessions', project.id, sessionId),
    async close() {
      // The test's fetch client may hold a connection that never carried a request; Node does not
      // count it idle, so close() would wait for its timeout.
      const closing = app.close();
      app.server.closeAllConnections();
      await closing;
      await model.close();
      await store.close();
      await database.drop();
      if (!options.dataDir) await rm(dataDir, { recursive: true, force: true });
      assertConformance(conformance);
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

/** An invoke body: the conversation, the template and any top-level fields. */
export function invokeBody(messages: unknown[], agent: unknown, extra: Record<string, unknown> = {}) {
  return { ...extra, data: { inputs: { messages }, parameters: { agent } } };
}

export const builtin = (name: string, permission?: string) => ({ type: 'builtin', name, ...(permission ? { permission } : {}) });

/** The JSON path of the first `null` in a value, or undefined: replies omit null fields (spec §2.6). */
export function findNull(value: unknown, at = '$'): string | undefined {
  if (value === null) return at;
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) {
      const found = findNull(v, `${at}[${i}]`);
      if (found) return found;
    }
  } else if (typeof value === 'object' && value !== undefined) {
    for (const [k, v] of Object.entries(value)) {
      const found = findNull(v, `${at}.${k}`);
      if (found) return found;
    }
  }
  return undefined;
}

/** Reads a JSON reply and checks what every JSON reply promises: a JSON type, the version header, no nulls. */
export async function readJson(res: Response): Promise<any> {
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.headers.get('x-ag-version')).toBe('2025.07.14');
  const body = await res.json();
  expect(findNull(body)).toBeUndefined();
  expect(body.version).toBe('2025.07.14');
  expect(body.status.code).toBe(res.status);
  return body;
}

/** A successful JSON reply of the /api surface: its status, JSON, the version header, no nulls. Returns the text too, to search it. */
export async function okJsonText(res: Response, status = 200): Promise<{ body: any; text: string }> {
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status });
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.headers.get('x-ag-version')).toBe('2025.07.14');
  const body = JSON.parse(text);
  expect(findNull(body)).toBeUndefined();
  return { body, text };
}

/** Asserts an error envelope (spec §7) and returns it; `mentions` must appear in the message. */
export async function expectError(res: Response, status: number, type?: string, mentions?: string | RegExp): Promise<any> {
  const body = await readJson(res);
  expect({ http: res.status, code: body.status.code, type: body.status.type, message: body.status.message }).toMatchObject({
    http: status,
    code: status,
    ...(type ? { type } : {}),
  });
  expect(typeof body.status.message).toBe('string');
  expect(body.status.message.length).toBeGreaterThan(0);
  expect(body.data).toBeUndefined();
  if (mentions !== undefined) expect(body.status.message).toMatch(mentions);
  return body;
}

export interface Frame {
  type: string;
  data: any;
}

/** Reads a whole native stream (SSE or NDJSON, by its content type) into its frames. */
export async function readFrames(res: Response): Promise<{ frames: Frame[]; raw: string }> {
  const raw = await res.text();
  const type = res.headers.get('content-type') ?? '';
  let payloads: string[];
  if (type.startsWith('text/event-stream')) {
    payloads = [];
    for (const block of raw.split('\n\n')) {
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''));
      if (data.length) payloads.push(data.join('\n'));
    }
  } else if (type.startsWith('application/x-ndjson') || type.startsWith('application/jsonl')) {
    payloads = raw.split('\n').filter((line) => line !== '');
  } else {
    throw new Error(`not a stream: ${type}\n${raw}`);
  }
  const frames = payloads.map((p) => JSON.parse(p) as Frame);
  // Native events are what /openapi.json documents as AgentEvent; each one read is checked.
  if (!res.headers.has('x-vercel-ai-ui-message-stream')) {
    for (const frame of frames) {
      const mismatch = eventMismatch(frame);
      if (mismatch) throw new Error(`a ${frame.type} event does not match AgentEvent in /openapi.json: ${mismatch}\n${JSON.stringify(frame)}`);
    }
  }
  return { frames, raw };
}

/** A POST through node:http, for what fetch always adds (fetch sends `Accept: *\/*` when none is given). */
export function rawPost(url: string, body: string, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers: { 'content-length': Buffer.byteLength(body).toString(), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

let seq = 0;
/** A session id unique within the run, so tests sharing a harness never share a session. */
export function sid(prefix = 's'): string {
  return `${prefix}-${process.pid}-${++seq}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Reads until `ok` holds for what was read (every 25 ms, for 10 s at most), and returns it. */
export async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('condition not reached in time');
}
