/**
 * `npm run bench:memory` (issue 21): what agentd holds in memory idle, per paused session and per
 * live stream. agentd runs as `agentd serve` does (bench/agentd-server.ts) in a child of its own
 * with --expose-gc, so the figures are the server's alone. Each reading is taken twice: after two
 * ordinary forced collections (V8 keeps the pages they freed for what it allocates next) and after
 * the compacting one V8 makes before it gives up on an allocation (the pages go back to the
 * system), each as RSS (what the machine gives the process) and as the V8 heap in use.
 *
 * 1. idle: right after the start, as `agentd serve` starts (turn threads as by default, started
 *    only once the load calls for them) and as measured below, and again after a warm-up of
 *    sequential turns;
 * 2. paused sessions: BENCH_MEMORY_PAUSED (2,000) turns that each end paused on an approval;
 * 3. live streams: BENCH_MEMORY_STREAMS (500) SSE turns held open at once, each read to its first
 *    frames while the model streams its answer a frame every 3 s; over OpenAI's Responses API, and
 *    again over Chat Completions (`openai-compatible`), whose provider's pipeline is another.
 * Each per-item figure is the difference over the step divided by the items. The live streams have
 * two floors for each API (bench/held-streams.ts), each holding as many streams from the same
 * model: the AI SDK's provider alone, and the provider's stream served by a bare Fastify, what any
 * server must hold for a client reading a model's answer as it comes.
 *
 * With BENCH_MEMORY_SNAPSHOTS=<folder>, each live-stream step and each floor also writes a heap
 * snapshot before its streams open and one while they are held (`agentd-responses-before`,
 * `agentd-responses-held`, `served-chat-before`…); `node bench/heap-diff.ts <before> <held>
 * <streams>` says what each held stream added, object by object. Taking a snapshot holds memory
 * of its own outside the heap: the RSS figures of such a run are not the bench's.
 */
import { fork } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { startAgentdProcess, startModelProcess } from './local.ts';
import type { Memory, MemoryReadings } from './shared.ts';

const PAUSED = Number(process.env.BENCH_MEMORY_PAUSED ?? 2000);
const STREAMS = Number(process.env.BENCH_MEMORY_STREAMS ?? 500);
const WARMUP = Number(process.env.BENCH_MEMORY_WARMUP ?? 500);
const PACE_MS = 3000;
const SNAPSHOTS = process.env.BENCH_MEMORY_SNAPSHOTS;

const model = await startModelProcess(0);

// First as `agentd serve` starts (its turn threads as configured by default, ready to start when
// the load calls for them), idle: what a server that has run no turn holds, threads included.
const asServed = await startAgentdProcess(model.url, { AGENTD_SHUTDOWN_GRACE_MS: '100' }, ['--expose-gc']);
await new Promise((resolve) => setTimeout(resolve, 1000));
const servedIdle = await asServed.ask<MemoryReadings>({ type: 'memory' });
await asServed.stop();

// Every turn on the server's thread: a turn thread's heap is its own, and no collection forced
// here would reach it. A turn thread costs some 40 MB of its own once started (BENCHMARKS.md, "An idle server").
const server = await startAgentdProcess(
  model.url,
  { AGENTD_SHUTDOWN_GRACE_MS: '100', AGENTD_TURN_WORKERS: '0', AGENTD_OPENAI_COMPATIBLE: JSON.stringify({ bench: { base_url: model.url } }) },
  ['--expose-gc'],
);
const memory = () => server.ask<MemoryReadings>({ type: 'memory' });

// Enough connections for every stream held open at once, each on its own.
const dispatcher = new Agent({ connections: STREAMS + 10, pipelining: 0 });
const invokeUrl = `${server.url}/services/agent/v0/invoke?project_id=${server.projectId}`;
const headers = { 'content-type': 'application/json', authorization: `ApiKey ${server.apiKey}` };
/** The model as a turn asks for it, over each API the live streams are held on. */
const LLMS = {
  responses: { provider: 'openai', model: 'm' },
  chat: { provider: 'openai-compatible', model: 'm', connection: { mode: 'self_managed', slug: 'bench' } },
} as const;
type Api = keyof typeof LLMS;
const agent = (tools: unknown[], permission: string, api: Api) => ({ llm: LLMS[api], tools, runner: { permissions: { default: permission } } });
const body = (session: string | undefined, tools: unknown[], permission: string, api: Api = 'responses') =>
  JSON.stringify({ ...(session ? { session_id: session } : {}), data: { inputs: { messages: [{ role: 'user', content: 'go' }] }, parameters: { agent: agent(tools, permission, api) } } });

async function turn(payload: string): Promise<unknown> {
  const res = await request(invokeUrl, { method: 'POST', headers, body: payload, dispatcher });
  const json = (await res.body.json()) as { data?: { outputs?: unknown } };
  if (res.statusCode !== 200) throw new Error(`turn answered ${res.statusCode}: ${JSON.stringify(json).slice(0, 300)}`);
  return json.data?.outputs;
}

/**
 * A request held open: read until its stream has said `until` (the turn is live), then left
 * connected without reading on, which would end the loop and close the stream.
 */
async function held(url: string, requestHeaders: Record<string, string>, payload: string, until: string) {
  const res = await request(url, { method: 'POST', headers: requestHeaders, body: payload, dispatcher });
  const frames = res.body[Symbol.asyncIterator]();
  for (let seen = ''; !seen.includes(until); ) {
    const next = await frames.next();
    if (next.done) throw new Error(`the stream ended before its first frame: ${seen.slice(0, 300)}`);
    seen += String(next.value);
  }
  return res;
}

/** A floor of bench/held-streams.ts: its readings before and after STREAMS streams are held. */
async function floor(kind: 'provider' | 'served', api: Api, what: string): Promise<{ before: MemoryReadings; after: MemoryReadings }> {
  progress(what);
  const child = fork(path.join(import.meta.dirname, 'held-streams.ts'), [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, MODEL_URL: model.url, STREAMS: String(STREAMS), FLOOR: kind, API: api },
    execArgv: ['--expose-gc'],
  });
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`bench/held-streams.ts exited with ${code} before answering`))));
  const answer = <T>() => Promise.race([new Promise<T>((resolve) => child.once('message', (msg) => resolve(msg as T))), exited]);
  const ask = <T>(type: string, file?: string) => {
    const answered = answer<T>();
    child.send({ type, file });
    return answered;
  };
  const snapshot = (step: string) => (SNAPSHOTS ? ask(`snapshot`, path.join(SNAPSHOTS, `${kind}-${api}-${step}.heapsnapshot`)) : undefined);
  const { url } = await answer<{ url?: string }>();
  const serve = () => held(url ?? '', { 'content-type': 'application/json', accept: 'text/event-stream' }, '{}', 'data:');
  // The served floor's warm-up, as the server's turns were agentd's (the provider's does its own).
  if (url) for (let i = 0; i < 20; i++) (await serve()).body.destroy();
  const before = await ask<MemoryReadings>('memory');
  await snapshot('before');
  const open = url ? await Promise.all(Array.from({ length: STREAMS }, serve)) : await ask('open');
  const after = await ask<MemoryReadings>('memory');
  await snapshot('held');
  if (Array.isArray(open)) for (const res of open) res.body.destroy();
  child.kill();
  process.stderr.write('done\n');
  return { before, after };
}

const mb = (bytes: number) => `${(bytes / 1048576).toFixed(0)} MB`;
const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;
const progress = (what: string) => process.stderr.write(`${what} … `);

const idle = await memory();
progress(`warm-up: ${WARMUP} turns`);
for (let i = 0; i < WARMUP; i++) await turn(body(undefined, [], 'allow'));
const warm = await memory();
process.stderr.write('done\n');

progress(`${PAUSED} paused sessions`);
for (let i = 0; i < PAUSED; i++) {
  const outputs = (await turn(body(`paused-${i}`, [{ type: 'builtin', name: 'write' }], 'ask'))) as { stop_reason?: string };
  if (outputs.stop_reason !== 'paused') throw new Error(`expected a paused turn, got ${JSON.stringify(outputs).slice(0, 300)}`);
}
const paused = await memory();
process.stderr.write('done\n');

// Each answer's frames come seconds apart: its first text arrives (and with it the stream's
// first frames) while the rest is still to come.
await model.ask({ type: 'pace', ms: PACE_MS });
/** STREAMS live SSE turns over `api` held at once: the readings with them open (before: `paused`, or the last such step's). */
async function liveStreams(api: Api): Promise<MemoryReadings> {
  progress(`${STREAMS} live streams over ${API_NAMES[api]}`);
  const snapshot = (step: string) => (SNAPSHOTS ? server.ask({ type: 'snapshot', file: path.join(SNAPSHOTS, `agentd-${api}-${step}.heapsnapshot`) }) : undefined);
  await snapshot('before');
  const open = await Promise.all(Array.from({ length: STREAMS }, () => held(invokeUrl, { ...headers, accept: 'text/event-stream' }, body(undefined, [], 'allow', api), 'turn_start')));
  const readings = await memory();
  await snapshot('held');
  process.stderr.write('done\n');
  for (const res of open) res.body.destroy();
  return readings;
}
const API_NAMES: Record<Api, string> = { responses: 'Responses', chat: 'Chat Completions' };
const streaming = await liveStreams('responses');
const provider = await floor('provider', 'responses', `${STREAMS} streams held by the AI SDK's provider alone (Responses)`);
const served = await floor('served', 'responses', `${STREAMS} streams of the provider served by a bare Fastify (Responses)`);
// The Responses streams, cut, end at the short grace; their turns' memory is gone by the next reading.
await new Promise((resolve) => setTimeout(resolve, 1000));
const beforeChat = await memory();
const chatStreaming = await liveStreams('chat');
const chatProvider = await floor('provider', 'chat', `${STREAMS} streams held by the AI SDK's provider alone (Chat Completions)`);
const chatServed = await floor('served', 'chat', `${STREAMS} streams of the provider served by a bare Fastify (Chat Completions)`);

const row = (what: string, before: Memory, after: Memory, items: number) =>
  `| ${what} | ${kb((after.rssAnon - before.rssAnon) / items)} | ${kb((after.rss - before.rss) / items)} | ${kb((after.heapUsed - before.heapUsed) / items)} | ${kb((after.heapTotal - before.heapTotal) / items)} | ${kb((after.external - before.external) / items)} |`;
const whole = (what: string, m: Memory) => `| ${what} | ${mb(m.rssAnon)} | ${mb(m.rss)} | ${mb(m.heapUsed)} | ${mb(m.heapTotal)} | ${mb(m.external)} |`;
const columns = '| RSS without file pages | RSS | V8 heap in use | V8 heap reserved | outside the heap |\n|---|---|---|---|---|---|';
const tables = (reading: keyof MemoryReadings, title: string) => [
  `| agentd, ${title} ${columns}`,
  whole('idle, just started as `agentd serve` starts', servedIdle[reading]),
  whole('idle, just started, every turn on the server thread', idle[reading]),
  whole(`idle, after ${WARMUP} turns`, warm[reading]),
  '',
  `| each one held, ${title} ${columns}`,
  row(`paused session (${PAUSED})`, warm[reading], paused[reading], PAUSED),
  row(`live SSE stream, its model answering over Responses (${STREAMS})`, paused[reading], streaming[reading], STREAMS),
  row(`floor: the provider's stream alone, Responses (${STREAMS})`, provider.before[reading], provider.after[reading], STREAMS),
  row(`floor: the provider's stream served by a bare Fastify, Responses (${STREAMS})`, served.before[reading], served.after[reading], STREAMS),
  row(`live SSE stream, its model answering over Chat Completions (${STREAMS})`, beforeChat[reading], chatStreaming[reading], STREAMS),
  row(`floor: the provider's stream alone, Chat Completions (${STREAMS})`, chatProvider.before[reading], chatProvider.after[reading], STREAMS),
  row(`floor: the provider's stream served by a bare Fastify, Chat Completions (${STREAMS})`, chatServed.before[reading], chatServed.after[reading], STREAMS),
  '',
];
process.stdout.write(
  [
    `machine: ${os.cpus().length} cores, Node ${process.version}`,
    '',
    ...tables('collected', 'after two forced collections'),
    ...tables('compacted', 'after a compacting collection'),
  ].join('\n'),
);

// Stopped, not killed: it removes its data folder (the streams' turns are cut at the short grace).
await server.stop();
model.stop();
await dispatcher.close().catch(() => {});
process.exit(0);
