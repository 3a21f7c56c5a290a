/**
 * `npm run bench`: agentd against its floor, with the fake model answering instantly.
 *
 * Processes. On a 2-core machine the model, the server under test and the load generator all want
 * CPU; sharing one event loop would let one's work show up as another's latency. So the fake model
 * runs in one child, the server under test in another, and autocannon here in the parent, and the
 * floor gets exactly the same arrangement (same model child, its own server child, same parent).
 * Servers are loaded one at a time; an idle child costs nothing.
 *
 * What is measured (see BENCHMARKS.md), each against the floor's route of the same name:
 * 1. echo:   a text answer as one JSON reply;
 * 2. tool:   a JSON turn with one `write` tool call (two model calls);
 * 3. stream: a streamed text turn (SSE) vs /floor/stream, which relays the model's SSE;
 * 4. vercel: the streamed echo as the AI SDK's UI message stream, asked as `useChat` asks;
 * 5. stream-tool: the tool turn, streamed;
 * 6. first byte: sequential, time from request start to the first frame carrying text, for the
 *    model itself, the floor and agentd, with the model waiting BENCH_MODEL_LATENCY_MS first;
 * 7. unloaded: the tool turn again, one request at a time, so the time is the path and not a queue.
 *
 * Settings come from the environment; BENCHMARKS.md lists them (BENCH_DURATION, BENCH_ROUNDS, …).
 */
import autocannon from 'autocannon';
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import pg from 'pg';
import { closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CapturedRequest, FloorTemplates, LoopStats, ModelControl, Ready } from './shared.ts';
import { CLK_TCK, procCpuMs, procRssMb, settled, TOOL_ANSWER } from './shared.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

function num(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number, got "${raw}"`);
  return value;
}

const settings = {
  durationS: num('BENCH_DURATION', 10),
  warmupS: num('BENCH_WARMUP', 3),
  connections: num('BENCH_CONNECTIONS', 50),
  rounds: Math.max(1, num('BENCH_ROUNDS', 1)),
  sequentialRequests: num('BENCH_SEQUENTIAL_REQUESTS', 200),
  modelLatencyMs: num('BENCH_MODEL_LATENCY_MS', 20),
  logLevels: (process.env.BENCH_LOG_LEVELS ?? 'info,warn').split(',').filter(Boolean),
  scenarios: (process.env.BENCH_SCENARIOS ?? 'echo,tool,stream,vercel,stream-tool,first-byte,unloaded').split(',').filter(Boolean),
  profile: ['1', 'true', 'yes'].includes(process.env.BENCH_PROFILE ?? ''),
  maxOtherCores: num('BENCH_MAX_OTHER', 0.15),
  noiseRetries: num('BENCH_NOISE_RETRIES', 2),
  quietWaitS: num('BENCH_QUIET_WAIT', 60),
  /** Mastra beside agentd, installed by the bench into this folder (not a dependency of agentd); `0` leaves it out. */
  mastra: process.env.BENCH_MASTRA === '0' ? undefined : (process.env.BENCH_MASTRA_DIR ?? path.join(os.homedir(), '.cache', 'agentd', 'bench-mastra')),
  /** The provider reference (bench/floor-server.ts, `/provider/*`) beside the others; `0` leaves it out. */
  provider: !['0', 'false', 'no'].includes(process.env.BENCH_PROVIDER ?? ''),
  /** One more agentd whose turns call the model over Chat Completions (`openai-compatible`), not Responses. */
  chat: !['0', 'false', 'no'].includes(process.env.BENCH_CHAT ?? ''),
  /** One more agentd, on this PostgreSQL server (a fresh schema), beside the SQLite ones. */
  postgresUrl: process.env.BENCH_DATABASE_URL || undefined,
  /**
   * One more agentd from each of these other checkouts of the repository (e.g. `git worktree add`
   * of the commit before), loaded in the same interleaved rounds, so the machine's drift hits
   * both sides of an A/B alike.
   */
  checkouts: (process.env.BENCH_CHECKOUTS ?? '').split(',').filter(Boolean),
  /**
   * One more agentd of this checkout for each of these settings (`;` between variants, spaces
   * between a variant's NAME=value pairs), in the same rounds: an A/B of a setting, such as
   * `AGENTD_TURN_WORKERS=0`, that the machine's drift hits alike.
   */
  variants: (process.env.BENCH_VARIANTS ?? '').split(';').map((v) => v.trim()).filter(Boolean).map(variant),
};

function variant(text: string): { label: string; env: Record<string, string> } {
  const env: Record<string, string> = {};
  for (const pair of text.split(/\s+/)) {
    const at = pair.indexOf('=');
    if (at < 1) throw new Error(`BENCH_VARIANTS: "${pair}" in "${text}" is not NAME=value`);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return { label: text, env };
}

const TARGETS = { p50: 5, p99: 20, ratio: 0.7, firstByte: 5 };

// ---------------------------------------------------------------------------------------------
// Children

const workDir = mkdtempSync(path.join(os.tmpdir(), 'agentd-bench-run-'));
const children: ChildProcess[] = [];
let stopping = false;

interface Child extends Ready {
  proc: ChildProcess;
  pid: number;
  /** Where its stdout (request logs included) goes. */
  log: string;
}

/**
 * Stdout goes to a file, not a pipe to this process: a pipe the busy load generator drains late
 * would make the child's synchronous log writes wait on the parent, which is not agentd's cost.
 */
async function start(name: string, script: string, env: NodeJS.ProcessEnv, execArgv: string[] = []): Promise<Child> {
  const log = path.join(workDir, `${name}.log`);
  const fd = openSync(log, 'w');
  const proc = fork(path.resolve(here, script), [], { stdio: ['ignore', fd, 'inherit', 'ipc'], env, execArgv });
  closeSync(fd);
  children.push(proc);
  const ready = await new Promise<Ready>((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`${name} exited with ${code} before it was ready; see ${log}`)));
    proc.once('message', (msg: Ready & { type: string }) => resolve(msg));
  });
  // A child dying mid-run would leave the bench waiting on it forever; the others stop with us.
  proc.once('exit', (code, signal) => {
    if (stopping) return;
    process.stderr.write(`\nbench failed: ${name} exited (${signal ?? code}) during the run\n`);
    process.exit(1);
  });
  return { ...ready, proc, pid: proc.pid!, log };
}

function ask<T>(child: Child, msg: ModelControl | { type: 'loop' | 'loop-reset' | 'thread-cpu' }): Promise<T> {
  return new Promise((resolve) => {
    child.proc.once('message', (reply: T) => resolve(reply));
    child.proc.send(msg);
  });
}

async function stopAll(): Promise<void> {
  stopping = true;
  await Promise.all(
    children.map(
      (proc) =>
        new Promise<void>((resolve) => {
          if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
          const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
          proc.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          proc.send({ type: 'stop' });
        }),
    ),
  );
}

/** The environment of a child, without anything from ours that would point it at real data. */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  if (!('AGENTD_DATA_DIR' in extra)) delete env.AGENTD_DATA_DIR;
  if (!('DATABASE_URL' in extra)) delete env.DATABASE_URL;
  return env;
}

/** A schema of its own on the bench's PostgreSQL server, as a connection URL; dropped at exit. */
async function postgresSchema(base: string): Promise<string> {
  const schema = `bench_${process.pid}_${Date.now().toString(36)}`;
  const run = async (query: string) => {
    const client = new pg.Client({ connectionString: base });
    await client.connect();
    await client.query(query);
    await client.end();
  };
  await run(`CREATE SCHEMA ${schema}`);
  process.once('beforeExit', () => void run(`DROP SCHEMA ${schema} CASCADE`).catch(() => undefined));
  const url = new URL(base);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

// ---------------------------------------------------------------------------------------------
// CPU accounting: which process spends what per request says more than latency alone.

/** CPU time the whole machine spent busy; what our processes did not spend was someone else's. */
function machineCpuMs(): number | undefined {
  try {
    const [, user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).map(Number);
    return ((user! + nice! + system! + irq! + softirq! + steal!) * 1000) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/**
 * On a shared machine other work comes and goes; a run that overlaps it measures the neighbour.
 * Before each run, wait (up to BENCH_QUIET_WAIT s) until the machine is about idle.
 */
async function waitForQuiet(): Promise<void> {
  const deadline = Date.now() + settings.quietWaitS * 1000;
  for (;;) {
    const before = machineCpuMs();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const after = machineCpuMs();
    if (before === undefined || after === undefined) return;
    if ((after - before) / 1000 <= settings.maxOtherCores || Date.now() > deadline) return;
  }
}

function cpuSnapshot(server: Child, model: Child): { server?: number; model?: number; client: number; machine?: number } {
  const self = process.cpuUsage();
  return { server: procCpuMs(server.pid), model: procCpuMs(model.pid), client: (self.user + self.system) / 1000, machine: machineCpuMs() };
}

// ---------------------------------------------------------------------------------------------
// Load

interface LoadResult {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
  /** Successful responses per second over the measured run. */
  rps: number;
  ok: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  modelPeakInFlight: number;
  /** The server's resident memory at the end of the run, in MB. */
  rssMb?: number;
  /** The server's event-loop delay during the run. */
  loop: LoopStats;
  /**
   * CPU milliseconds per request sent, by process, each counted until the turns it started had
   * ended (`mainThreadMsPerReq`: the server's main thread alone, without its turn threads, libuv's
   * pool and the collector's helpers); `serverCore` is the server's share of one core during the
   * run; `otherCores` is what the rest of the machine used meanwhile (noise from other work).
   */
  cpu: { serverMsPerReq?: number; mainThreadMsPerReq?: number; modelMsPerReq?: number; clientMsPerReq: number; serverCore?: number; otherCores?: number };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

interface Request {
  url: string;
  headers: Record<string, string>;
  body: string;
}

async function load(req: Request, server: Child, model: Child): Promise<LoadResult> {
  const opts = { url: req.url, method: 'POST', headers: req.headers, body: req.body, connections: settings.connections };
  if (settings.warmupS > 0) await autocannon({ ...opts, duration: settings.warmupS });
  await settled(server.pid);

  await ask(model, { type: 'reset' });
  await ask(server, { type: 'loop-reset' });
  // autocannon's own histogram has 1 ms resolution; the margins here are a few ms, so keep the raw times.
  const times: number[] = [];
  const before = cpuSnapshot(server, model);
  const t0 = performance.now();
  const instance = autocannon({ ...opts, duration: settings.durationS });
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status >= 200 && status < 300) times.push(ms);
  });
  const result = await instance;
  const elapsedS = (performance.now() - t0) / 1000;
  const end = cpuSnapshot(server, model);
  const rssMb = procRssMb(server.pid);
  const { peakInFlight } = await ask<{ peakInFlight: number }>(model, { type: 'peak' });
  const { p50: loopP50, p99: loopP99, max: loopMax, turnsOnThreads } = await ask<LoopStats>(server, { type: 'loop' });
  // CPU per turn counts every turn the run started, to its end: the server's and the model's CPU
  // once the server is idle again, over the requests sent.
  await settled(server.pid);
  const after = { ...cpuSnapshot(server, model), client: end.client };
  // A checkout from before this reading existed never answers it.
  const mainThreadMs = (await Promise.race([ask<{ ms: number }>(server, { type: 'thread-cpu' }), sleep(2000, undefined)]))?.ms;
  const started = result.requests.sent;

  times.sort((a, b) => a - b);
  const ok = times.length;
  const per = (a?: number, b?: number) => (a === undefined || b === undefined || started === 0 ? undefined : (b - a) / started);
  const serverMs = end.server !== undefined && before.server !== undefined ? end.server - before.server : undefined;
  const other = (b: typeof before, a: typeof after) =>
    a.machine === undefined || b.machine === undefined
      ? NaN
      : a.machine - b.machine - (a.server! - b.server!) - (a.model! - b.model!) - (a.client - b.client);
  return {
    p50: percentile(times, 50),
    p90: percentile(times, 90),
    p99: percentile(times, 99),
    max: times.at(-1) ?? NaN,
    mean: ok ? times.reduce((s, t) => s + t, 0) / ok : NaN,
    rps: ok / elapsedS,
    ok,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    modelPeakInFlight: peakInFlight,
    ...(rssMb !== undefined ? { rssMb } : {}),
    loop: { p50: loopP50, p99: loopP99, max: loopMax, ...(turnsOnThreads !== undefined ? { turnsOnThreads } : {}) },
    cpu: {
      serverMsPerReq: per(before.server, after.server),
      mainThreadMsPerReq: per(0, mainThreadMs),
      modelMsPerReq: per(before.model, after.model),
      clientMsPerReq: per(before.client, after.client)!,
      serverCore: serverMs === undefined ? undefined : serverMs / 1000 / elapsedS,
      otherCores: other(before, end) / 1000 / elapsedS,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// First byte: sequential, so it measures the path and not the queue.

async function timeToText(req: Request, marker: string): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(req.url, { method: 'POST', headers: req.headers, body: req.body });
  if (!res.ok || !res.body) throw new Error(`${req.url} answered ${res.status}: ${await res.text()}`);
  const decoder = new TextDecoder();
  let seen = '';
  let at: number | undefined;
  const reader = res.body.getReader();
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    if (at !== undefined) continue; // drain, so the connection is reused
    seen += decoder.decode(next.value, { stream: true });
    if (seen.includes(marker)) at = performance.now() - t0;
  }
  if (at === undefined) throw new Error(`${req.url} never sent "${marker}": ${seen.slice(0, 500)}`);
  return at;
}

// ---------------------------------------------------------------------------------------------

/** The model as each agentd asks for it: OpenAI's Responses API, or any server's Chat Completions. */
const LLMS = {
  responses: { provider: 'openai', model: 'fake-model' },
  chat: { provider: 'openai-compatible', model: 'fake-model', connection: { mode: 'self_managed', slug: 'bench' } },
} as const;
type Protocol = keyof typeof LLMS;

function agentTemplate(llm: object, tools: unknown[]) {
  return {
    instructions: { agents_md: 'You are a benchmark agent.' },
    llm,
    tools,
    runner: { permissions: { default: 'allow' } },
  };
}

// No session id: the server mints one per turn, so every request is a new session and turn row.
const toolBody = (llm: object) =>
  JSON.stringify({ data: { inputs: { messages: [{ role: 'user', content: 'Write the note.' }] }, parameters: { agent: agentTemplate(llm, [{ type: 'builtin', name: 'write' }]) } } });
const streamBody = (llm: object) => JSON.stringify({ data: { inputs: { messages: [{ role: 'user', content: 'Say hello.' }] }, parameters: { agent: agentTemplate(llm, []) } } });
/** The echo as a `useChat` front end sends it: the conversation as UI messages. */
const vercelBody = (llm: object) =>
  JSON.stringify({ data: { inputs: { messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Say hello.' }] }] }, parameters: { agent: agentTemplate(llm, []) } } });
const TOOL_BODY = toolBody(LLMS.responses);
const STREAM_BODY = streamBody(LLMS.responses);

/** The load runs, each a workload every server answers. */
const LOADS = ['echo', 'tool', 'stream', 'vercel', 'stream-tool'] as const;
type Load = (typeof LOADS)[number];
const LABEL: Record<Load, string> = { echo: 'JSON echo', tool: 'JSON turn, 1 tool call', stream: 'streamed echo (SSE)', vercel: 'Vercel stream echo', 'stream-tool': 'streamed tool turn' };
/** Issue 21: CPU per turn at most this many times the floor's, for each workload; p99 at most twice. */
const CPU_RATIO_TARGET: Record<Load, number> = { echo: 2, tool: 2, stream: 3, vercel: 3, 'stream-tool': 3 };
const P99_RATIO_TARGET = 2;

interface Server extends Child, Record<Load, Request> {
  name: string;
  /** What the first frame with text contains, in this server's stream. */
  textMarker: string;
}

function agentdRequests(c: Child, protocol: Protocol = 'responses'): Pick<Server, Load | 'textMarker'> {
  const url = `${c.url}/services/agent/v0/invoke?project_id=${c.projectId}`;
  const headers = { 'content-type': 'application/json', authorization: `ApiKey ${c.apiKey}` };
  return {
    echo: { url, headers, body: streamBody(LLMS[protocol]) },
    tool: { url, headers, body: toolBody(LLMS[protocol]) },
    stream: { url, headers: { ...headers, accept: 'text/event-stream' }, body: streamBody(LLMS[protocol]) },
    vercel: { url, headers: { ...headers, accept: 'text/event-stream', 'x-ag-messages-format': 'vercel' }, body: vercelBody(LLMS[protocol]) },
    'stream-tool': { url, headers: { ...headers, accept: 'text/event-stream' }, body: toolBody(LLMS[protocol]) },
    textMarker: '"type":"message_delta"',
  };
}

/**
 * Mastra, installed into `dir` once (again when the pins change), with agentd's own versions of
 * the AI SDK, its OpenAI provider and zod, so the comparison is of the agent layers alone. Returns
 * the server script, copied there so that its imports resolve from that folder.
 */
function installMastra(dir: string): string {
  const own = (name: string) => (JSON.parse(readFileSync(path.join(here, '..', 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  const packages = ['@mastra/core@1.71.0', '@mastra/ai-sdk@1.10.4', ...['ai', '@ai-sdk/openai', 'zod'].map((name) => `${name}@${own(name)}`)];
  const stamp = path.join(dir, 'installed.json');
  if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== JSON.stringify(packages)) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'agentd-bench-mastra', private: true, type: 'module' }));
    process.stderr.write(`installing ${packages.join(', ')} into ${dir} (once) … `);
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...packages], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    writeFileSync(stamp, JSON.stringify(packages));
    process.stderr.write('done\n');
  }
  const script = path.join(dir, 'mastra-server.mjs');
  copyFileSync(path.join(here, 'mastra-server.mjs'), script);
  return script;
}

async function check(req: Request, expect: string, what: string): Promise<void> {
  const res = await fetch(req.url, { method: 'POST', headers: req.headers, body: req.body });
  const text = await res.text();
  if (res.status !== 200 || !text.includes(expect)) throw new Error(`${what}: expected 200 with "${expect}", got ${res.status}: ${text.slice(0, 800)}`);
}

const fmt = (n: number | undefined, digits = 1) => (n === undefined || Number.isNaN(n) ? '–' : n.toFixed(digits));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(rows[0]!), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n');
}

/** Which code was measured: the commit, and whether the tree had changes on top of it. */
function gitState(dir = here): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: path.resolve(dir, '..'), encoding: 'utf8' }).trim() !== '';
    return dirty ? `${head} + uncommitted changes in src/` : head;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

const stamp = new Date().toISOString().replaceAll(':', '-');

function profileArgs(name: string): string[] {
  if (!settings.profile) return [];
  const interval = process.env.BENCH_PROFILE_INTERVAL_US ? [`--cpu-prof-interval=${Number(process.env.BENCH_PROFILE_INTERVAL_US)}`] : [];
  // A folder per server, with Node's own file names: they carry the thread id (agentd's turn
  // threads each write one; the server's thread is 0), where a fixed name had every thread
  // overwrite the same file.
  return ['--cpu-prof', ...interval, `--cpu-prof-dir=${path.join(here, 'results', 'profiles', `${stamp}-${name}`)}`];
}

async function main(): Promise<void> {
  const model = await start('model', 'model-server.ts', childEnv({}));
  const agentds: Server[] = [];
  const modelEnv = { OPENAI_BASE_URL: model.url!, OPENAI_API_KEY: 'sk-bench', AGENTD_OPENAI_COMPATIBLE: JSON.stringify({ bench: { base_url: model.url! } }) };
  for (const level of settings.logLevels) {
    const env = childEnv({ ...modelEnv, AGENTD_LOG_LEVEL: level });
    const c = await start(`agentd-${level}`, 'agentd-server.ts', env, profileArgs(`agentd-${level}`));
    agentds.push({ ...c, name: `agentd (log ${level})`, ...agentdRequests(c) });
  }
  if (settings.chat) {
    const c = await start('agentd-chat', 'agentd-server.ts', childEnv({ ...modelEnv, AGENTD_LOG_LEVEL: settings.logLevels[0] ?? 'info' }), profileArgs('agentd-chat'));
    agentds.push({ ...c, name: `agentd over Chat Completions (log ${settings.logLevels[0] ?? 'info'})`, ...agentdRequests(c, 'chat') });
  }
  for (const [i, { label, env }] of settings.variants.entries()) {
    const level = settings.logLevels[0] ?? 'info';
    const name = `agentd-variant-${i + 1}`;
    const c = await start(name, 'agentd-server.ts', childEnv({ ...modelEnv, AGENTD_LOG_LEVEL: level, ...env }), profileArgs(name));
    agentds.push({ ...c, name: `agentd with ${label} (log ${level})`, ...agentdRequests(c) });
  }
  for (const checkout of settings.checkouts) {
    const level = settings.logLevels[0] ?? 'info';
    const name = `agentd-${path.basename(checkout)}`;
    const c = await start(name, path.resolve(checkout, 'bench', 'agentd-server.ts'), childEnv({ ...modelEnv, AGENTD_LOG_LEVEL: level }), profileArgs(name));
    agentds.push({ ...c, name: `agentd at ${gitState(path.resolve(checkout, 'bench'))} (log ${level})`, ...agentdRequests(c) });
  }
  if (settings.postgresUrl) {
    // The other checkouts too, each on a schema of its own, so an A/B covers PostgreSQL.
    for (const checkout of ['', ...settings.checkouts]) {
      const env = childEnv({ ...modelEnv, AGENTD_LOG_LEVEL: 'warn', DATABASE_URL: await postgresSchema(settings.postgresUrl) });
      const name = checkout ? `agentd-${path.basename(checkout)}-postgres` : 'agentd-postgres';
      const c = await start(name, checkout ? path.resolve(checkout, 'bench', 'agentd-server.ts') : 'agentd-server.ts', env, profileArgs(name));
      const at = checkout ? ` at ${gitState(path.resolve(checkout, 'bench'))}` : '';
      agentds.push({ ...c, name: `agentd${at} on PostgreSQL (log warn)`, ...agentdRequests(c) });
    }
  }

  // One real turn of each kind, captured at the model, gives the floor agentd's exact bodies.
  const probe = agentds[0]!;
  await ask(model, { type: 'capture', on: true });
  await check(probe.tool, TOOL_ANSWER, 'agentd tool turn');
  await check(probe.stream, '"type":"message_delta"', 'agentd streamed turn');
  await check(probe['stream-tool'], '"type":"tool_result"', 'agentd streamed tool turn');
  const { requests } = await ask<{ requests: CapturedRequest[] }>(model, { type: 'captured' });
  await ask(model, { type: 'capture', on: false });
  if (requests.length !== 5) throw new Error(`expected 5 model calls from the probe turns, saw ${requests.length}`);
  const templates: FloorTemplates = { tool: [requests[0]!.body, requests[1]!.body], stream: requests[2]!.body, streamTool: [requests[3]!.body, requests[4]!.body] };
  const templatesFile = path.join(workDir, 'floor-templates.json');
  writeFileSync(templatesFile, JSON.stringify(templates));
  const bodyBytes = requests.map((r) => Buffer.byteLength(JSON.stringify(r.body)));

  const f = await start('floor', 'floor-server.ts', childEnv({ MODEL_URL: model.url!, FLOOR_TEMPLATES: templatesFile }), profileArgs('floor'));
  const json = { 'content-type': 'application/json' };
  const sse = { ...json, accept: 'text/event-stream' };
  const routesUnder = (prefix: string) => ({
    echo: { url: `${f.url}/${prefix}/echo`, headers: json, body: STREAM_BODY },
    tool: { url: `${f.url}/${prefix}/tool`, headers: json, body: TOOL_BODY },
    stream: { url: `${f.url}/${prefix}/stream`, headers: sse, body: STREAM_BODY },
    vercel: { url: `${f.url}/${prefix}/vercel`, headers: sse, body: STREAM_BODY },
    'stream-tool': { url: `${f.url}/${prefix}/stream-tool`, headers: sse, body: TOOL_BODY },
  });
  const floor: Server = { ...f, name: 'floor', ...routesUnder('floor'), textMarker: 'response.output_text.delta' };
  await check(floor.tool, TOOL_ANSWER, 'floor tool route');
  await check(floor.stream, 'response.output_text.delta', 'floor stream route');
  await check(floor.echo, '"text"', 'floor echo route');
  await check(floor.vercel, '"type":"text-delta"', 'floor Vercel route');
  await check(floor['stream-tool'], 'response.output_text.delta', 'floor streamed tool route');
  // Same process as the floor, loaded separately: see floor-server.ts for what it is for.
  const sdk: Server = { ...f, name: 'sdk (reference)', ...routesUnder('sdk'), textMarker: '"type":"text"' };
  await check(sdk.tool, TOOL_ANSWER, 'sdk tool route');
  await check(sdk.stream, '"type":"text"', 'sdk stream route');
  await check(sdk.echo, '"text"', 'sdk echo route');
  await check(sdk.vercel, '"type":"text-delta"', 'sdk Vercel route');
  await check(sdk['stream-tool'], '"type":"tool-result"', 'sdk streamed tool route');
  let provider: Server | undefined;
  if (settings.provider) {
    const route = (name: string, accept?: string): Request => ({ url: `${f.url}/provider/${name}`, headers: { ...json, ...(accept ? { accept } : {}) }, body: STREAM_BODY });
    provider = { ...f, name: 'provider (reference)', echo: route('echo'), tool: route('tool'), stream: route('stream', 'text/event-stream'), vercel: route('vercel', 'text/event-stream'), 'stream-tool': route('stream-tool', 'text/event-stream'), textMarker: '"type":"text"' };
    await check(provider.tool, TOOL_ANSWER, 'provider tool route');
    await check(provider.stream, '"type":"text"', 'provider stream route');
    await check(provider.echo, '"text"', 'provider echo route');
    await check(provider.vercel, '"type":"text-delta"', 'provider Vercel route');
    await check(provider['stream-tool'], '"type":"tool-result"', 'provider streamed tool route');
  }
  for (const a of agentds) {
    await check(a.echo, '"stop_reason":"end_turn"', `${a.name} echo`);
    await check(a.vercel, '"type":"text-delta"', `${a.name} Vercel stream`);
  }

  let mastra: Server | undefined;
  if (settings.mastra) {
    const script = installMastra(settings.mastra);
    const m = await start('mastra', script, childEnv({ MODEL_URL: model.url!, FLOOR_TEMPLATES: templatesFile, BENCH_SHARED: pathToFileURL(path.join(here, 'shared.ts')).href }), profileArgs('mastra'));
    const route = (name: string, accept?: string): Request => ({ url: `${m.url}/mastra/${name}`, headers: { ...json, ...(accept ? { accept } : {}) }, body: '{}' });
    mastra = { ...m, name: 'Mastra', echo: route('echo'), tool: route('tool'), stream: route('stream', 'text/event-stream'), vercel: route('vercel', 'text/event-stream'), 'stream-tool': route('stream-tool', 'text/event-stream'), textMarker: '"type":"text"' };
    await check(mastra.echo, '"text"', 'Mastra echo route');
    await check(mastra.tool, TOOL_ANSWER, 'Mastra tool route');
    await check(mastra.vercel, '"type":"text-delta"', 'Mastra Vercel route');
  }

  const references = [floor, sdk, ...(provider ? [provider] : []), ...(mastra ? [mastra] : [])];
  const servers = [...references, ...agentds];
  /** Every server the tables set beside the floor. */
  const compared = servers.filter((s) => s !== floor);
  const scenarios = LOADS.filter((s) => settings.scenarios.includes(s));
  const runs: Record<string, Record<string, LoadResult[]>> = {};
  for (let round = 1; round <= settings.rounds; round++) {
    // The agentds take turns at going first. In a fixed order the second of two ran the SSE echo
    // 5–8% cheaper in each of three rounds, though their difference was on the server's thread,
    // whose CPU per turn came out equal.
    const shift = (round - 1) % agentds.length;
    const order = [...references, ...agentds.slice(shift), ...agentds.slice(0, shift)];
    for (const scenario of scenarios) {
      for (const server of order) {
        // A run disturbed by other work on the machine is repeated (the same rule for every
        // server); if every attempt was disturbed, the least disturbed one is kept and flagged.
        let kept: LoadResult | undefined;
        for (let attempt = 0; attempt <= settings.noiseRetries; attempt++) {
          await waitForQuiet();
          process.stderr.write(`round ${round}/${settings.rounds} ${scenario} ${server.name} … `);
          const r = await load(server[scenario], server, model);
          const other = r.cpu.otherCores ?? 0;
          process.stderr.write(
            `p50 ${fmt(r.p50)} ms, p99 ${fmt(r.p99)} ms, ${fmt(r.rps, 0)} req/s, server ${fmt((r.cpu.serverCore ?? NaN) * 100, 0)}% of a core, ` +
              `CPU ${fmt(r.cpu.serverMsPerReq ?? NaN, 2)} ms/req (main thread ${fmt(r.cpu.mainThreadMsPerReq ?? NaN, 2)}), ` +
              `other processes ${fmt(other * 100, 0)}%${other > settings.maxOtherCores ? ' (disturbed)' : ''}` +
              `${r.loop.turnsOnThreads !== undefined ? `, turns on threads ${fmt(r.loop.turnsOnThreads * 100, 0)}%` : ''}\n`,
          );
          if (r.errors || r.timeouts || r.non2xx) process.stderr.write(`  !! ${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx\n`);
          if (!kept || other < (kept.cpu.otherCores ?? 0)) kept = r;
          if (other <= settings.maxOtherCores) break;
        }
        ((runs[scenario] ??= {})[server.name] ??= []).push(kept!);
      }
    }
  }

  type Spread = { p50: number; p90: number; p99: number; n: number };
  const spread = (xs: number[]): Spread => {
    xs.sort((a, b) => a - b);
    return { p50: percentile(xs, 50), p90: percentile(xs, 90), p99: percentile(xs, 99), n: xs.length };
  };
  /** Runs each target's request in turn, round-robin, so drift on the machine hits every target alike. */
  async function sequential(targets: Array<{ name: string; time: () => Promise<number> }>): Promise<Record<string, Spread>> {
    const times = new Map<string, number[]>(targets.map((t) => [t.name, []]));
    const warm = Math.min(20, settings.sequentialRequests);
    for (let i = 0; i < warm + settings.sequentialRequests; i++) {
      for (const t of targets) {
        const ms = await t.time();
        if (i >= warm) times.get(t.name)!.push(ms);
      }
    }
    return Object.fromEntries([...times].map(([name, xs]) => [name, spread(xs)]));
  }

  let firstByte: Record<string, Spread> | undefined;
  if (settings.scenarios.includes('first-byte') && settings.sequentialRequests > 0) {
    await waitForQuiet();
    process.stderr.write(`first byte: ${settings.sequentialRequests} sequential requests per target, model waits ${settings.modelLatencyMs} ms … `);
    await ask(model, { type: 'latency', ms: settings.modelLatencyMs });
    const direct: Request = { url: `${model.url}/responses`, headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' }, body: JSON.stringify(templates.stream) };
    firstByte = await sequential([
      { name: 'model', time: () => timeToText(direct, 'response.output_text.delta') },
      ...servers.map((s) => ({ name: s.name, time: () => timeToText(s.stream, s.textMarker) })),
    ]);
    await ask(model, { type: 'latency', ms: 0 });
    process.stderr.write('done\n');
  }

  let unloaded: Record<string, Spread> | undefined;
  if (settings.scenarios.includes('unloaded') && settings.sequentialRequests > 0) {
    await waitForQuiet();
    process.stderr.write(`unloaded tool turn: ${settings.sequentialRequests} sequential requests per target … `);
    unloaded = await sequential(
      servers.map((s) => ({
        name: s.name,
        time: async () => {
          const t0 = performance.now();
          const res = await fetch(s.tool.url, { method: 'POST', headers: s.tool.headers, body: s.tool.body });
          const text = await res.text();
          if (res.status !== 200) throw new Error(`${s.name} answered ${res.status}: ${text.slice(0, 500)}`);
          return performance.now() - t0;
        },
      })),
    );
    process.stderr.write('done\n');
  }

  await stopAll();
  // Request logs are part of what is measured; their size shows they were really written.
  const logBytes = Object.fromEntries(agentds.map((a) => [a.name, statSync(a.log).size]));

  // ---- report
  const machine = { nproc: os.availableParallelism(), cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version, platform: `${os.type()} ${os.release()}` };
  const source = gitState();
  const pick = (rs: LoadResult[], k: 'p50' | 'p99' | 'rps') => median(rs.map((r) => r[k]));
  const rows: string[][] = [['scenario', 'floor p50 / p99 ms', 'floor req/s', 'vs', 'p50 / p99 ms', 'req/s', 'added p50 / p99 ms', 'throughput ratio', 'target met']];
  const comparisons: unknown[] = [];
  const label = LABEL;
  for (const scenario of scenarios) {
    const fl = runs[scenario]!.floor!;
    for (const a of compared) {
      const ag = runs[scenario]![a.name]!;
      const isAgentd = agentds.includes(a);
      const added50 = pick(ag, 'p50') - pick(fl, 'p50');
      const added99 = pick(ag, 'p99') - pick(fl, 'p99');
      const ratio = pick(ag, 'rps') / pick(fl, 'rps');
      const met = { p50: added50 <= TARGETS.p50, p99: added99 <= TARGETS.p99, throughput: ratio >= TARGETS.ratio };
      const missed = Object.entries(met).filter(([, v]) => !v).map(([k]) => k);
      comparisons.push({ scenario, server: a.name, addedP50Ms: added50, addedP99Ms: added99, throughputRatio: ratio, ...(isAgentd ? { met } : {}) });
      rows.push([
        label[scenario],
        `${fmt(pick(fl, 'p50'))} / ${fmt(pick(fl, 'p99'))}`,
        fmt(pick(fl, 'rps'), 0),
        a.name,
        `${fmt(pick(ag, 'p50'))} / ${fmt(pick(ag, 'p99'))}`,
        fmt(pick(ag, 'rps'), 0),
        `${fmt(added50)} / ${fmt(added99)}`,
        `${fmt(ratio * 100, 0)}%`,
        !isAgentd ? '–' : missed.length ? `no (${missed.join(', ')})` : 'yes',
      ]);
    }
  }

  const otherCell = (cores: number) => `${fmt(cores * 100, 0)}${cores > settings.maxOtherCores ? ' (disturbed)' : ''}`;
  const cpuRows: string[][] = [['scenario', 'server', 'server CPU ms/req', 'main thread CPU ms/req', 'server % of a core', 'server RSS MB', 'model CPU ms/req', 'load gen CPU ms/req', 'other processes % of a core', 'event-loop delay p99 / max ms']];
  for (const scenario of scenarios) {
    for (const s of servers) {
      const rs = runs[scenario]![s.name]!;
      const m = (f: (r: LoadResult) => number | undefined) => median(rs.map((r) => f(r) ?? NaN));
      cpuRows.push([label[scenario], s.name, fmt(m((r) => r.cpu.serverMsPerReq), 2), fmt(m((r) => r.cpu.mainThreadMsPerReq), 2), fmt(m((r) => r.cpu.serverCore) * 100, 0), fmt(m((r) => r.rssMb), 0), fmt(m((r) => r.cpu.modelMsPerReq), 2), fmt(m((r) => r.cpu.clientMsPerReq), 2), otherCell(m((r) => r.cpu.otherCores)), `${fmt(m((r) => r.loop.p99))} / ${fmt(m((r) => r.loop.max))}`]);
    }
  }

  // Issue 21's targets: CPU per turn and p99 as multiples of the floor's in the same run, and
  // Chat Completions against Responses.
  const ratioRows: string[][] = [['workload', 'server', 'CPU ms/turn', '× floor (rounds)', '× provider', 'p99 ms', '× floor p99', 'Mastra ÷ this', 'target met']];
  const ratios: unknown[] = [];
  const chatName = agentds.find((a) => a.name.includes('Chat Completions'))?.name;
  const responsesName = agentds[0]?.name;
  for (const scenario of scenarios) {
    const cpuOf = (name: string) => median(runs[scenario]![name]!.map((r) => r.cpu.serverMsPerReq ?? NaN));
    const p99Of = (name: string) => pick(runs[scenario]![name]!, 'p99');
    // Each round's ratio to that round's floor: with more than one round, how far the machine's
    // drift moves the figure a target is judged on.
    const cpuXByRound = (name: string) => runs[scenario]![name]!.map((r, i) => (r.cpu.serverMsPerReq ?? NaN) / (runs[scenario]!.floor![i]?.cpu.serverMsPerReq ?? NaN));
    for (const s of compared) {
      const cpu = cpuOf(s.name);
      const cpuX = cpu / cpuOf('floor');
      const rounds = cpuXByRound(s.name);
      const p99X = p99Of(s.name) / p99Of('floor');
      const isAgentd = agentds.includes(s);
      const chatX = s.name === chatName && responsesName ? cpu / cpuOf(responsesName) : undefined;
      const underMastra = mastra && isAgentd ? cpuOf(mastra.name) / cpu : undefined;
      // What agentd adds to the provider it drives: the part of its cost that is its own.
      const overProvider = provider && isAgentd ? cpu / cpuOf(provider.name) : undefined;
      const met = {
        cpu: cpuX <= CPU_RATIO_TARGET[scenario],
        p99: p99X <= P99_RATIO_TARGET,
        ...(chatX !== undefined ? { chat: chatX <= 1.1 } : {}),
        ...(underMastra !== undefined ? { mastra: underMastra >= 3 } : {}),
      };
      const missed = Object.entries(met).filter(([, v]) => !v).map(([k]) => k);
      ratios.push({ scenario, server: s.name, cpuMsPerTurn: cpu, cpuRatio: cpuX, cpuRatioByRound: rounds, ...(overProvider !== undefined ? { providerRatio: overProvider } : {}), p99Ratio: p99X, ...(chatX !== undefined ? { chatToResponses: chatX } : {}), ...(underMastra !== undefined ? { mastraToThis: underMastra } : {}), ...(isAgentd ? { met } : {}) });
      ratioRows.push([
        label[scenario],
        s.name + (chatX !== undefined ? ` (${fmt(chatX, 2)}× Responses)` : ''),
        fmt(cpu, 2),
        fmt(cpuX, 2) + (rounds.length > 1 ? ` (${fmt(Math.min(...rounds), 2)}–${fmt(Math.max(...rounds), 2)})` : ''),
        overProvider !== undefined ? fmt(overProvider, 2) : '–',
        fmt(p99Of(s.name)),
        fmt(p99X, 2),
        underMastra !== undefined ? fmt(underMastra, 2) : '–',
        !isAgentd ? '–' : missed.length ? `no (${missed.join(', ')})` : 'yes',
      ]);
    }
  }

  let fbRows: string[][] | undefined;
  const fbComparisons: unknown[] = [];
  if (firstByte) {
    const m = firstByte.model!;
    fbRows = [['first text frame', 'p50 ms', 'p99 ms', 'after the model p50 / p99 ms', 'target met (p50 ≤ 5 ms)']];
    for (const [name, r] of Object.entries(firstByte)) {
      const after50 = r.p50 - m.p50;
      const after99 = r.p99 - m.p99;
      const isModel = name === 'model';
      if (!isModel) fbComparisons.push({ server: name, afterModelP50Ms: after50, afterModelP99Ms: after99, met: after50 <= TARGETS.firstByte });
      fbRows.push([
        isModel ? 'model direct' : name,
        fmt(r.p50, 2),
        fmt(r.p99, 2),
        isModel ? '–' : `${fmt(after50, 2)} / ${fmt(after99, 2)}`,
        !name.startsWith('agentd') ? '–' : after50 <= TARGETS.firstByte ? 'yes' : 'no',
      ]);
    }
  }

  let unRows: string[][] | undefined;
  if (unloaded) {
    const fl = unloaded.floor!;
    unRows = [['JSON tool turn, one at a time', 'p50 ms', 'p99 ms', 'added p50 / p99 ms']];
    for (const [name, r] of Object.entries(unloaded)) {
      unRows.push([name, fmt(r.p50, 2), fmt(r.p99, 2), name === 'floor' ? '–' : `${fmt(r.p50 - fl.p50, 2)} / ${fmt(r.p99 - fl.p99, 2)}`]);
    }
  }

  const out = [
    '',
    `machine: ${machine.nproc} cores (${machine.cpu}), Node ${machine.node}, ${machine.platform}; agentd at ${source}`,
    `agentd turn worker threads: ${process.env.AGENTD_TURN_WORKERS ?? 'the default (cores - 1, at most 4)'}`,
    `load: ${settings.connections} connections, ${settings.warmupS} s warm-up + ${settings.durationS} s measured per run, ${settings.rounds} round(s) (medians)`,
    `model call bodies (bytes): tool ${bodyBytes[0]} + ${bodyBytes[1]}, stream ${bodyBytes[2]}, streamed tool ${bodyBytes[3]} + ${bodyBytes[4]}`,
    '',
    ...(scenarios.length ? [table(rows), '', table(cpuRows)] : []),
    ...(scenarios.length
      ? ['', `against the floor (issue 21): CPU ≤ ${CPU_RATIO_TARGET.echo}× for JSON, ≤ ${CPU_RATIO_TARGET.stream}× for streams; p99 ≤ ${P99_RATIO_TARGET}×; Chat Completions ≤ 1.1× Responses; Mastra's CPU ≥ 3× agentd's`, '', table(ratioRows)]
      : []),
    ...(fbRows ? ['', `first byte: ${settings.sequentialRequests} sequential requests each, the model waits ${settings.modelLatencyMs} ms before its first frame`, '', table(fbRows)] : []),
    ...(unRows ? ['', `unloaded: the JSON tool turn, ${settings.sequentialRequests} sequential requests each (no queueing; the targets above are for 50 clients)`, '', table(unRows)] : []),
    '',
  ].join('\n');
  process.stdout.write(out);

  const resultsDir = path.join(here, 'results');
  mkdirSync(resultsDir, { recursive: true });
  const file = path.join(resultsDir, `${stamp}.json`);
  writeFileSync(file, JSON.stringify({ machine, source, settings, targets: TARGETS, modelBodyBytes: bodyBytes, runs, comparisons, ratios, firstByte, firstByteComparisons: fbComparisons, unloaded, agentdLogBytes: logBytes, table: out }, null, 2));
  process.stdout.write(`\nraw results: ${path.relative(process.cwd(), file)}\n`);
}

try {
  await main();
} catch (error) {
  process.stderr.write(`\nbench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
  await stopAll();
} finally {
  rmSync(workDir, { recursive: true, force: true });
}
