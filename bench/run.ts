/**
 * `npm run bench`: agentd against its floor, with the fake model answering instantly.
 *
 * Processes. On a 2-core machine the model, the server under test and the load generator all want
 * CPU; sharing one event loop would let one's work show up as another's latency. So the fake model
 * runs in one child, the server under test in another, and autocannon here in the parent, and the
 * floor gets exactly the same arrangement (same model child, its own server child, same parent).
 * Servers are loaded one at a time; an idle child costs nothing.
 *
 * What is measured (see BENCHMARKS.md):
 * 1. tool:   a JSON turn with one `ls` tool call (two model calls) vs /floor/tool;
 * 2. stream: a streamed text turn (SSE) vs /floor/stream, which relays the model's SSE;
 * 3. first byte: sequential, time from request start to the first frame carrying text, for the
 *    model itself, the floor and agentd, with the model waiting BENCH_MODEL_LATENCY_MS first.
 *
 * Env: BENCH_DURATION (s, 10), BENCH_WARMUP (s, 3), BENCH_CONNECTIONS (50), BENCH_ROUNDS (1),
 * BENCH_FIRST_BYTE_REQUESTS (200), BENCH_MODEL_LATENCY_MS (20), BENCH_LOG_LEVELS ("info,warn":
 * one agentd per level), BENCH_SCENARIOS ("tool,stream,first-byte"), BENCH_PROFILE (1: run the
 * agentd children with --cpu-prof into bench/results/profiles/).
 */
import autocannon from 'autocannon';
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, closeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import type { CapturedRequest, FloorTemplates, ModelControl, Ready } from './shared.ts';
import { STREAM_TEXT, TOOL_ANSWER } from './shared.ts';

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
  firstByteRequests: num('BENCH_FIRST_BYTE_REQUESTS', 200),
  modelLatencyMs: num('BENCH_MODEL_LATENCY_MS', 20),
  logLevels: (process.env.BENCH_LOG_LEVELS ?? 'info,warn').split(',').filter(Boolean),
  scenarios: (process.env.BENCH_SCENARIOS ?? 'tool,stream,first-byte').split(',').filter(Boolean),
  profile: ['1', 'true', 'yes'].includes(process.env.BENCH_PROFILE ?? ''),
};

const TARGETS = { p50: 5, p99: 20, ratio: 0.7, firstByte: 5 };

// ---------------------------------------------------------------------------------------------
// Children

const workDir = mkdtempSync(path.join(os.tmpdir(), 'agentd-bench-run-'));
const children: ChildProcess[] = [];

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
  const proc = fork(path.join(here, script), [], { stdio: ['ignore', fd, 'inherit', 'ipc'], env, execArgv });
  closeSync(fd);
  children.push(proc);
  const ready = await new Promise<Ready>((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`${name} exited with ${code} before it was ready; see ${log}`)));
    proc.once('message', (msg: Ready & { type: string }) => resolve(msg));
  });
  return { ...ready, proc, pid: proc.pid!, log };
}

function ask<T>(child: Child, msg: ModelControl): Promise<T> {
  return new Promise((resolve) => {
    child.proc.once('message', (reply: T) => resolve(reply));
    child.proc.send(msg);
  });
}

async function stopAll(): Promise<void> {
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
  delete env.DATABASE_URL;
  return env;
}

// ---------------------------------------------------------------------------------------------
// CPU accounting: which process spends what per request says more than latency alone.

const CLK_TCK = 100; // USER_HZ: /proc reports ticks of 1/100 s on Linux whatever the kernel HZ.

function procCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is parenthesised and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
  } catch {
    return undefined;
  }
}

function cpuSnapshot(server: Child, model: Child): { server?: number; model?: number; client: number } {
  const self = process.cpuUsage();
  return { server: procCpuMs(server.pid), model: procCpuMs(model.pid), client: (self.user + self.system) / 1000 };
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
  /** CPU milliseconds per successful request, by process; `serverCore` is the server's share of one core. */
  cpu: { serverMsPerReq?: number; modelMsPerReq?: number; clientMsPerReq: number; serverCore?: number };
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

  await ask(model, { type: 'reset' });
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
  const after = cpuSnapshot(server, model);
  const { peakInFlight } = await ask<{ peakInFlight: number }>(model, { type: 'peak' });

  times.sort((a, b) => a - b);
  const ok = times.length;
  const per = (a?: number, b?: number) => (a === undefined || b === undefined || ok === 0 ? undefined : (b - a) / ok);
  const serverMs = after.server !== undefined && before.server !== undefined ? after.server - before.server : undefined;
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
    cpu: {
      serverMsPerReq: per(before.server, after.server),
      modelMsPerReq: per(before.model, after.model),
      clientMsPerReq: per(before.client, after.client)!,
      serverCore: serverMs === undefined ? undefined : serverMs / 1000 / elapsedS,
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
  for await (const chunk of res.body) {
    if (at !== undefined) continue; // drain, so the connection is reused
    seen += decoder.decode(chunk, { stream: true });
    if (seen.includes(marker)) at = performance.now() - t0;
  }
  if (at === undefined) throw new Error(`${req.url} never sent "${marker}": ${seen.slice(0, 500)}`);
  return at;
}

// ---------------------------------------------------------------------------------------------

function agentTemplate(tools: unknown[]) {
  return {
    instructions: { agents_md: 'You are a benchmark agent.' },
    llm: { provider: 'openai', model: 'fake-model' },
    tools,
    runner: { permissions: { default: 'allow' } },
  };
}

// No session id: the server mints one per turn, so every request is a new session and turn row.
const TOOL_BODY = JSON.stringify({
  data: { inputs: { messages: [{ role: 'user', content: 'List the folder.' }] }, parameters: { agent: agentTemplate([{ type: 'builtin', name: 'ls' }]) } },
});
const STREAM_BODY = JSON.stringify({
  data: { inputs: { messages: [{ role: 'user', content: 'Say hello.' }] }, parameters: { agent: agentTemplate([]) } },
});

interface Server extends Child {
  name: string;
  tool: Request;
  stream: Request;
  /** What the first frame with text contains, in this server's stream. */
  textMarker: string;
}

function agentdRequests(c: Child): Pick<Server, 'tool' | 'stream' | 'textMarker'> {
  const url = `${c.url}/services/agent/v0/invoke?project_id=${c.projectId}`;
  const headers = { 'content-type': 'application/json', authorization: `ApiKey ${c.apiKey}` };
  return {
    tool: { url, headers, body: TOOL_BODY },
    stream: { url, headers: { ...headers, accept: 'text/event-stream' }, body: STREAM_BODY },
    textMarker: '"type":"message_delta"',
  };
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

async function main(): Promise<void> {
  const model = await start('model', 'model-server.ts', childEnv({}));
  const agentds: Server[] = [];
  for (const level of settings.logLevels) {
    const execArgv = settings.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(here, 'results', 'profiles')}`, `--cpu-prof-name=agentd-${level}-${Date.now()}.cpuprofile`] : [];
    const c = await start(`agentd-${level}`, 'agentd-server.ts', childEnv({ OPENAI_BASE_URL: model.url!, AGENTD_LOG_LEVEL: level, AGENTD_DEFAULT_MODEL: 'fake-model' }), execArgv);
    agentds.push({ ...c, name: `agentd (log ${level})`, ...agentdRequests(c) });
  }

  // One real turn of each kind, captured at the model, gives the floor agentd's exact bodies.
  const probe = agentds[0]!;
  await ask(model, { type: 'capture', on: true });
  await check(probe.tool, TOOL_ANSWER, 'agentd tool turn');
  await check(probe.stream, '"type":"message_delta"', 'agentd streamed turn');
  const { requests } = await ask<{ requests: CapturedRequest[] }>(model, { type: 'captured' });
  await ask(model, { type: 'capture', on: false });
  if (requests.length !== 3) throw new Error(`expected 3 model calls from the probe turns, saw ${requests.length}`);
  const templates: FloorTemplates = { tool: [requests[0]!.body, requests[1]!.body], stream: requests[2]!.body };
  const templatesFile = path.join(workDir, 'floor-templates.json');
  writeFileSync(templatesFile, JSON.stringify(templates));
  const bodyBytes = requests.map((r) => Buffer.byteLength(JSON.stringify(r.body)));

  const f = await start('floor', 'floor-server.ts', childEnv({ MODEL_URL: model.url!, FLOOR_TEMPLATES: templatesFile }));
  const json = { 'content-type': 'application/json' };
  const floor: Server = {
    ...f,
    name: 'floor',
    tool: { url: `${f.url}/floor/tool`, headers: json, body: TOOL_BODY },
    stream: { url: `${f.url}/floor/stream`, headers: { ...json, accept: 'text/event-stream' }, body: STREAM_BODY },
    textMarker: 'response.output_text.delta',
  };
  await check(floor.tool, TOOL_ANSWER, 'floor tool route');
  await check(floor.stream, 'response.output_text.delta', 'floor stream route');

  const servers = [floor, ...agentds];
  const scenarios = (['tool', 'stream'] as const).filter((s) => settings.scenarios.includes(s));
  const runs: Record<string, Record<string, LoadResult[]>> = {};
  for (let round = 1; round <= settings.rounds; round++) {
    for (const scenario of scenarios) {
      for (const server of servers) {
        process.stderr.write(`round ${round}/${settings.rounds} ${scenario} ${server.name} … `);
        const r = await load(server[scenario], server, model);
        ((runs[scenario] ??= {})[server.name] ??= []).push(r);
        process.stderr.write(`p50 ${fmt(r.p50)} ms, p99 ${fmt(r.p99)} ms, ${fmt(r.rps, 0)} req/s, server ${fmt((r.cpu.serverCore ?? NaN) * 100, 0)}% of a core\n`);
        if (r.errors || r.timeouts || r.non2xx) process.stderr.write(`  !! ${r.errors} errors, ${r.timeouts} timeouts, ${r.non2xx} non-2xx\n`);
      }
    }
  }

  let firstByte: Record<string, { p50: number; p90: number; p99: number; n: number }> | undefined;
  if (settings.scenarios.includes('first-byte') && settings.firstByteRequests > 0) {
    await ask(model, { type: 'latency', ms: settings.modelLatencyMs });
    const direct: Request = { url: `${model.url}/responses`, headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' }, body: JSON.stringify(templates.stream) };
    const targets = [{ name: 'model', req: direct, marker: 'response.output_text.delta' }, ...[floor, ...agentds].map((s) => ({ name: s.name, req: s.stream, marker: s.textMarker }))];
    const times = new Map<string, number[]>(targets.map((t) => [t.name, []]));
    const warm = Math.min(20, settings.firstByteRequests);
    process.stderr.write(`first byte: ${settings.firstByteRequests} sequential requests per target, model waits ${settings.modelLatencyMs} ms … `);
    // Interleaved, so drift on the machine hits every target alike.
    for (let i = 0; i < warm + settings.firstByteRequests; i++) {
      for (const t of targets) {
        const ms = await timeToText(t.req, t.marker);
        if (i >= warm) times.get(t.name)!.push(ms);
      }
    }
    await ask(model, { type: 'latency', ms: 0 });
    firstByte = {};
    for (const [name, xs] of times) {
      xs.sort((a, b) => a - b);
      firstByte[name] = { p50: percentile(xs, 50), p90: percentile(xs, 90), p99: percentile(xs, 99), n: xs.length };
    }
    process.stderr.write('done\n');
  }

  await stopAll();

  // ---- report
  const machine = { nproc: os.availableParallelism(), cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version, platform: `${os.type()} ${os.release()}` };
  const pick = (rs: LoadResult[], k: 'p50' | 'p99' | 'rps') => median(rs.map((r) => r[k]));
  const rows: string[][] = [['scenario', 'floor p50 / p99 ms', 'floor req/s', 'agentd', 'agentd p50 / p99 ms', 'agentd req/s', 'added p50 / p99 ms', 'throughput ratio', 'target met']];
  const comparisons: unknown[] = [];
  const label = { tool: 'JSON turn, 1 tool call', stream: 'streamed turn (SSE)' } as const;
  for (const scenario of scenarios) {
    const fl = runs[scenario]!.floor!;
    for (const a of agentds) {
      const ag = runs[scenario]![a.name]!;
      const added50 = pick(ag, 'p50') - pick(fl, 'p50');
      const added99 = pick(ag, 'p99') - pick(fl, 'p99');
      const ratio = pick(ag, 'rps') / pick(fl, 'rps');
      const met = { p50: added50 <= TARGETS.p50, p99: added99 <= TARGETS.p99, throughput: ratio >= TARGETS.ratio };
      const missed = Object.entries(met).filter(([, v]) => !v).map(([k]) => k);
      comparisons.push({ scenario, agentd: a.name, addedP50Ms: added50, addedP99Ms: added99, throughputRatio: ratio, met });
      rows.push([
        label[scenario],
        `${fmt(pick(fl, 'p50'))} / ${fmt(pick(fl, 'p99'))}`,
        fmt(pick(fl, 'rps'), 0),
        a.name.replace('agentd ', ''),
        `${fmt(pick(ag, 'p50'))} / ${fmt(pick(ag, 'p99'))}`,
        fmt(pick(ag, 'rps'), 0),
        `${fmt(added50)} / ${fmt(added99)}`,
        `${fmt(ratio * 100, 0)}%`,
        missed.length ? `no (${missed.join(', ')})` : 'yes',
      ]);
    }
  }

  const cpuRows: string[][] = [['scenario', 'server', 'server CPU ms/req', 'server % of a core', 'model CPU ms/req', 'load gen CPU ms/req', 'model peak in flight']];
  for (const scenario of scenarios) {
    for (const s of servers) {
      const rs = runs[scenario]![s.name]!;
      const m = (f: (r: LoadResult) => number | undefined) => median(rs.map((r) => f(r) ?? NaN));
      cpuRows.push([label[scenario], s.name, fmt(m((r) => r.cpu.serverMsPerReq), 2), fmt(m((r) => r.cpu.serverCore) * 100, 0), fmt(m((r) => r.cpu.modelMsPerReq), 2), fmt(m((r) => r.cpu.clientMsPerReq), 2), fmt(m((r) => r.modelPeakInFlight), 0)]);
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
        isModel || name === 'floor' ? '–' : after50 <= TARGETS.firstByte ? 'yes' : 'no',
      ]);
    }
  }

  const out = [
    '',
    `machine: ${machine.nproc} cores (${machine.cpu}), Node ${machine.node}, ${machine.platform}`,
    `load: ${settings.connections} connections, ${settings.warmupS} s warm-up + ${settings.durationS} s measured per run, ${settings.rounds} round(s) (medians)`,
    `model call bodies (bytes): tool ${bodyBytes[0]} + ${bodyBytes[1]}, stream ${bodyBytes[2]}`,
    '',
    table(rows),
    '',
    table(cpuRows),
    ...(fbRows ? ['', `first byte: ${settings.firstByteRequests} sequential requests each, the model waits ${settings.modelLatencyMs} ms before its first frame`, '', table(fbRows)] : []),
    '',
  ].join('\n');
  process.stdout.write(out);

  const resultsDir = path.join(here, 'results');
  mkdirSync(resultsDir, { recursive: true });
  const file = path.join(resultsDir, `${new Date().toISOString().replaceAll(':', '-')}.json`);
  writeFileSync(file, JSON.stringify({ machine, settings, targets: TARGETS, modelBodyBytes: bodyBytes, runs, comparisons, firstByte, firstByteComparisons: fbComparisons, table: out }, null, 2));
  process.stdout.write(`raw results: ${path.relative(process.cwd(), file)}\n`);
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
