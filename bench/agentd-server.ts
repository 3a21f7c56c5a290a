/**
 * agentd as `agentd serve` runs it (same config loading, store, first-run bootstrap, app), on a
 * fresh temporary data dir and an ephemeral port, for bench/run.ts. Prints
 * `{"url","apiKey","projectId"}` on one stdout line when it listens (and sends it over IPC when
 * forked); request logs go to stdout as usual, at AGENTD_LOG_LEVEL (default info).
 *
 * Point it at a model with OPENAI_BASE_URL; the template's provider is "openai".
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { buildApp } from '../src/http/app.ts';
import { bootstrapFirstRun } from '../src/store/bootstrap.ts';
import { openStore } from '../src/store/db.ts';
import { heapSnapshot, memoryReadings, serveLoopStats, type Ready } from './shared.ts';

// Without it the turns would go to the real OpenAI API.
if (!process.env.OPENAI_BASE_URL) throw new Error('set OPENAI_BASE_URL to the fake model, e.g. http://127.0.0.1:PORT/v1');

const ownDir = process.env.AGENTD_DATA_DIR ? undefined : await mkdtemp(path.join(os.tmpdir(), 'agentd-bench-'));
const config = loadConfig({ OPENAI_API_KEY: 'sk-bench', ...process.env, ...(ownDir ? { AGENTD_DATA_DIR: ownDir } : {}) });
const store = await openStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
await store.turns.markRunningAsInterrupted();
const first = await bootstrapFirstRun(store);
if (!first) throw new Error(`the data dir ${config.dataDir} is not fresh; the bench needs the first-run key`);
const app = await buildApp({ config, store });
await app.listen({ port: 0, host: '127.0.0.1' });
const { port } = app.server.address() as { port: number };

await serveLoopStats(() => app.turns.placement);
const ready: Ready = { url: `http://127.0.0.1:${port}`, apiKey: first.apiKey.key, projectId: first.project.id };
process.stdout.write(`${JSON.stringify(ready)}\n`);
process.send?.({ type: 'ready', ...ready });

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  const closing = app.close();
  await app.turns.shutdown(config.shutdownGraceMs);
  await closing;
  await store.close();
  if (ownDir) await rm(ownDir, { recursive: true, force: true });
  // Exiting normally (not by the signal) is what lets `--cpu-prof` write its profile.
  process.exit(0);
}
process.on('message', (msg: { type?: string; file?: string }) => {
  if (msg.type === 'stop') void stop();
  else if (msg.type === 'memory') process.send?.({ type: 'memory', ...memoryReadings() });
  else if (msg.type === 'snapshot') process.send?.(heapSnapshot(msg.file!));
});

process.once('SIGTERM', () => void stop());
// The parent (bench/run.ts) went away without saying stop.
process.once('disconnect', () => void stop());
process.once('SIGINT', () => void stop());
