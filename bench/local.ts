/**
 * What the smaller benches share: the fake model in its own process (bench/model-server.ts), and
 * an agentd in the bench's own process on a fresh data folder with one editor key, or in a child
 * process of its own (bench/agentd-server.ts).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, type ModelMessage } from 'ai';
import { loadConfig } from '../src/config.ts';
import { keepAliveFetch } from '../src/keep-alive-fetch.ts';
import { buildApp } from '../src/http/app.ts';
import { openStore } from '../src/store/db.ts';
import type { Ready } from './shared.ts';

export interface ModelProcess {
  url: string;
  ask<T>(msg: object): Promise<T>;
  stop(): void;
}

export async function startModelProcess(latencyMs: number): Promise<ModelProcess> {
  const child = fork(path.join(import.meta.dirname, 'model-server.ts'), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const ready = await new Promise<Ready>((resolve) => child.once('message', (msg: Ready) => resolve(msg)));
  const ask = <T>(msg: object) =>
    new Promise<T>((resolve) => {
      child.once('message', (reply: T) => resolve(reply));
      child.send(msg);
    });
  await ask({ type: 'latency', ms: latencyMs });
  return { url: ready.url, ask, stop: () => child.send({ type: 'stop' }) };
}

/**
 * N plain model calls, `concurrency` at a time: the floor a run of N turns cannot beat. They are
 * the calls a turn nobody streams makes (one JSON answer each), over the cheapest client there is,
 * node:http with kept-alive connections (keepAliveFetch is exactly that).
 */
export function modelFloor(modelUrl: string, calls: number, concurrency: number): Promise<number> {
  const body = JSON.stringify({ model: 'm', input: [{ role: 'user', content: 'q' }], stream: false });
  return timeCalls(calls, concurrency, async () => {
    const res = await keepAliveFetch(`${modelUrl}/responses`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' }, body });
    await res.text();
  });
}

/** One model answer through the AI SDK's `generateText`, as a turn nobody streams gets it. */
export function sdkAnswerer(modelUrl: string): (messages: ModelMessage[]) => Promise<string> {
  const model = createOpenAI({ fetch: keepAliveFetch, apiKey: 'sk-bench', baseURL: modelUrl }).responses('m');
  return async (messages) => (await generateText({ model, messages, providerOptions: { openai: { store: false } } })).text;
}

/**
 * The same N calls through the AI SDK, and nothing else: between the floor and agentd, what the
 * SDK itself costs.
 */
export function sdkCalls(modelUrl: string, calls: number, concurrency: number): Promise<number> {
  const answer = sdkAnswerer(modelUrl);
  return timeCalls(calls, concurrency, () => answer([{ role: 'user', content: 'q' }]));
}

/** Wall time of `calls` calls of `call`, `concurrency` at a time. */
async function timeCalls(calls: number, concurrency: number, call: () => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < calls) {
        next++;
        await call();
      }
    }),
  );
  return performance.now() - started;
}

export interface LocalAgentd {
  url: string;
  key: string;
  projectId: string;
  /** The turn worker threads it runs turns on (0: its own thread). */
  turnWorkers: number;
  close(): Promise<void>;
}

export async function startLocalAgentd(modelUrl: string, env: Record<string, string> = {}): Promise<LocalAgentd> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-'));
  // Where turns run, from the bench's environment, so every way of running them can be measured.
  const workers = Object.fromEntries(['AGENTD_TURN_WORKERS', 'AGENTD_TURN_WORKERS_LOAD'].flatMap((name) => (process.env[name] ? [[name, process.env[name]]] : [])));
  const config = loadConfig({ AGENTD_DATA_DIR: dataDir, AGENTD_LOG_LEVEL: 'warn', OPENAI_API_KEY: 'sk-bench', OPENAI_BASE_URL: modelUrl, ...workers, ...env });
  const store = await openStore({ dataDir });
  const project = await store.projects.ensure('bench');
  const key = (await store.apiKeys.create(project.id, 'editor')).key;
  const app = await buildApp({ config, store });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`,
    key,
    projectId: project.id,
    turnWorkers: config.turnWorkers,
    close: async () => {
      await app.close();
      await store.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export interface AgentdProcess extends Ready {
  child: ChildProcess;
  /** Sends `msg` over IPC and resolves with the child's next message. */
  ask<T>(msg: object): Promise<T>;
  /** Stops it as `agentd serve` stops, its data folder removed. */
  stop(): Promise<void>;
}

/**
 * agentd as `agentd serve` runs it (bench/agentd-server.ts), in a child of its own on a fresh data
 * folder, pointed at the fake model: what it costs is then its process's alone.
 */
export async function startAgentdProcess(modelUrl: string, env: Record<string, string> = {}, execArgv: string[] = []): Promise<AgentdProcess> {
  const child = fork(path.join(import.meta.dirname, 'agentd-server.ts'), [], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    env: { ...process.env, OPENAI_BASE_URL: modelUrl, OPENAI_API_KEY: 'sk-bench', AGENTD_LOG_LEVEL: 'warn', AGENTD_DATA_DIR: '', ...env },
    execArgv,
  });
  const ready = await new Promise<Ready>((resolve) => child.once('message', (msg: Ready) => resolve(msg)));
  const ask = <T>(msg: object) =>
    new Promise<T>((resolve) => {
      child.once('message', (reply: T) => resolve(reply));
      child.send(msg);
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.send({ type: 'stop' });
    });
  return { ...ready, child, ask, stop };
}
