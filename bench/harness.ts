/**
 * `npm run bench:harness`: Claude Code, Codex and Pi as the agent of a turn (issue 20), against
 * the fake model. BENCH_HARNESSES (default "claude,codex,pi") chooses which.
 *
 * For a tool turn (Write, then an answer), interleaved round by round:
 * - floor: the ACP client library alone driving the harness, spawned under the same bubblewrap
 *   invocation agentd uses: spawn, initialize, session/new, prompt, exit;
 * - agentd: the same turn through POST /invoke (JSON), a fresh session each time;
 * - agentd's own time: the difference of the medians;
 * - the built-in agent's same turn, for scale;
 * - peak RSS of the harness's process tree during a turn, and turns per second with N sessions at
 *   once (BENCH_HARNESS_CONCURRENCY, the cap set to match).
 *
 * BENCH_HARNESS_ROUNDS (default 5) sets the rounds. A cold turn starts a harness process; a warm
 * turn is the session's next, on the process parked for it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { loadConfig } from '../src/config.ts';
import { buildApp } from '../src/http/app.ts';
import { openStore } from '../src/store/db.ts';
import { procRssMb } from './shared.ts';
import { startFakeModel } from '../src/testing/fake-model.ts';
import type { FakeReply, FakeToolCall } from '../src/testing/fake-model.ts';
import type { ModelEndpoint } from '../src/agent/model.ts';
import { HARNESSES, harnessProcess, type HarnessKind } from '../src/harnesses/harness-turn.ts';
import { HarnessRelay } from '../src/harnesses/relay.ts';

const rounds = Number(process.env.BENCH_HARNESS_ROUNDS ?? 5);
const concurrency = Number(process.env.BENCH_HARNESS_CONCURRENCY ?? 4);

const model = await startFakeModel();
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'agentd-bench-harness-'));
const config = loadConfig({
  AGENTD_DATA_DIR: dataDir,
  AGENTD_LOG_LEVEL: 'warn',
  ANTHROPIC_BASE_URL: model.url,
  ANTHROPIC_API_KEY: 'sk-bench',
  OPENAI_API_KEY: 'sk-bench',
  OPENAI_BASE_URL: model.url,
  AGENTD_HARNESS_MAX_PROCESSES: String(concurrency),
  AGENTD_TURN_WORKERS_LOAD: '1',
});
const store = await openStore({ dataDir, secretKey: config.secretKey });
const project = await store.projects.ensure('bench');
const { key } = await store.apiKeys.create(project.id, 'editor');
const app = await buildApp({ config, store });
await app.listen({ port: 0, host: '127.0.0.1' });
const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;

/** Each harness's model, and the call with which the fake model has it write a file. */
const PROFILES: Record<HarnessKind, { endpoint: ModelEndpoint; write(file: string): FakeToolCall }> = {
  claude: {
    endpoint: { provider: 'anthropic', baseUrl: model.url.replace(/\/v1$/, ''), apiKey: 'sk-bench', model: 'fake-model' },
    write: (file) => ({ name: 'Write', input: { file_path: file, content: 'x' } }),
  },
  codex: {
    endpoint: { provider: 'openai', baseUrl: model.url, apiKey: 'sk-bench', model: 'fake-model' },
    write: (file) => ({ name: 'exec_command', input: { cmd: `printf x > '${file}'` } }),
  },
  pi: {
    endpoint: { provider: 'openai', baseUrl: model.url, apiKey: 'sk-bench', model: 'fake-model' },
    write: (file) => ({ name: 'write', input: { path: file, content: 'x' } }),
  },
};
const kinds = (process.env.BENCH_HARNESSES ?? 'claude,codex,pi').split(',') as HarnessKind[];

const writeTurn = (kind: HarnessKind, folder: string): FakeReply[] => [{ toolCalls: [PROFILES[kind].write(path.join(folder, 'out.txt'))] }, { text: 'done' }];
const sessionDir = (session: string) => path.join(dataDir, 'sessions', project.id, session);

/**
 * The floor: the ACP client library alone, the harness under the same sandbox. Cold: start the
 * process, open a session, prompt. Warm: in that process, prompt the same session again (what a
 * parked process does for its session's next turn).
 */
async function floorTurn(kind: HarnessKind, n: number): Promise<{ cold: number; warm: number }> {
  const folder = mkdtempSync(path.join(os.tmpdir(), 'agentd-bench-floor-'));
  const home = mkdtempSync(path.join(os.tmpdir(), 'agentd-bench-home-'));
  model.script(writeTurn(kind, folder));
  const started = performance.now();
  const setup = { endpoint: PROFILES[kind].endpoint, folder, stateDir: home, extras: {}, gateAll: false, gateAny: false };
  const command = await harnessProcess(HARNESSES[kind], setup, { mcps: [], network: 'off', unsafeHost: false, modelTimeoutMs: 120_000, secrets: [] });
  const child = spawn(command.file, command.args, { env: command.env, stdio: ['pipe', 'pipe', 'ignore', ...(command.fds ?? [])], detached: true });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>);
  const connection = acp
    .client({ name: `floor-${n}` })
    .onRequest('session/request_permission', async ({ params }) => ({ outcome: { outcome: 'selected', optionId: params.options.find((o) => o.kind === 'allow_once')!.optionId } }))
    .connect(stream);
  const agent = connection.agent;
  await agent.request('initialize', { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const { sessionId } = await agent.request('session/new', { cwd: folder, mcpServers: [] });
  await agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'write out.txt' }] });
  const cold = performance.now() - started;
  model.script(writeTurn(kind, folder));
  const warmStart = performance.now();
  await agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'write it again' }] });
  const warm = performance.now() - warmStart;
  connection.close();
  process.kill(-child.pid!, 'SIGKILL');
  await new Promise((resolve) => child.once('close', resolve));
  command.release?.();
  // The sandboxed processes end just after bwrap: give them a moment to let go of the folders.
  for (const dir of [folder, home]) rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
  return { cold, warm };
}

async function agentdTurn(session: string, harness: HarnessKind | 'agentd', text = 'write out.txt'): Promise<number> {
  const agent =
    harness === 'agentd'
      ? { llm: { provider: 'openai', model: 'fake-model' }, tools: [{ type: 'builtin', name: 'write' }], runner: { permissions: { default: 'allow' } } }
      : { llm: { provider: PROFILES[harness].endpoint.provider, model: 'fake-model' }, harness: { kind: harness }, runner: { permissions: { default: 'allow' } } };
  const started = performance.now();
  const res = await fetch(`${url}/services/agent/v0/invoke?project_id=${project.id}`, {
    method: 'POST',
    headers: { authorization: `ApiKey ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ session_id: session, data: { inputs: { messages: [{ role: 'user', content: text }] }, parameters: { agent } } }),
  });
  const body = (await res.json()) as { status: { code: number; message: string } };
  if (res.status !== 200) throw new Error(`turn failed: ${body.status.message}`);
  return performance.now() - started;
}

/** The processes whose command line names `marker`, and every process they started. */
function treeOf(marker: string): string[] {
  const roots = spawnSync('pgrep', ['-f', marker], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
  const parents = new Map<string, string>();
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      parents.set(pid, readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]!);
    } catch {
      // Gone meanwhile.
    }
  }
  const tree = new Set(roots);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, parent] of parents) if (tree.has(parent) && !tree.has(pid)) (tree.add(pid), (grew = true));
  }
  return [...tree];
}

/** Peak RSS (MB) of the process tree of `marker`, sampled while `work` runs. */
async function peakRss<T>(marker: string, work: Promise<T>): Promise<number> {
  let peak = 0;
  let done = false;
  void work.finally(() => (done = true));
  while (!done) {
    const pids = treeOf(marker);
    // A process that ended between the listing and the read counts for nothing.
    const total = pids.reduce((sum, pid) => sum + (procRssMb(pid) ?? 0), 0);
    peak = Math.max(peak, total);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await work;
  return peak;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const builtin: number[] = [];
for (let round = 0; round < rounds; round++) {
  model.script([{ toolCalls: [{ name: 'write', input: { path: 'out.txt', content: 'x' } }] }, { text: 'done' }]);
  builtin.push(await agentdTurn(`builtin-${round}`, 'agentd'));
}
const lines = [`built-in agent, same tool turn, median of ${rounds} (ms): ${median(builtin).toFixed(1)}`];

for (const kind of kinds) {
  const floor: number[] = [];
  const floorWarm: number[] = [];
  const viaAgentd: number[] = [];
  const viaAgentdWarm: number[] = [];
  let rss = 0;
  for (let round = 0; round < rounds; round++) {
    const floorTimes = await floorTurn(kind, round);
    floor.push(floorTimes.cold);
    floorWarm.push(floorTimes.warm);
    const session = `${kind}-${round}`;
    model.script(writeTurn(kind, sessionDir(session)));
    const turn = agentdTurn(session, kind);
    rss = Math.max(rss, await peakRss(sessionDir(session), turn));
    viaAgentd.push(await turn);
    model.script(writeTurn(kind, sessionDir(session)));
    viaAgentdWarm.push(await agentdTurn(session, kind, 'write it again'));
    process.stderr.write(
      `${kind} round ${round + 1}/${rounds}: cold floor ${floor.at(-1)!.toFixed(0)} / agentd ${viaAgentd.at(-1)!.toFixed(0)} ms; warm floor ${floorWarm.at(-1)!.toFixed(0)} / agentd ${viaAgentdWarm.at(-1)!.toFixed(0)} ms\n`,
    );
  }
  model.script(() => ({ text: 'done' }));
  const started = performance.now();
  for (const wave of [0, 1]) await Promise.all(Array.from({ length: concurrency }, (_, i) => agentdTurn(`${kind}-full-${wave}-${i}`, kind)));
  const perSecond = (concurrency * 2) / ((performance.now() - started) / 1000);
  lines.push(
    `${kind} cold tool turn, median of ${rounds} (ms): floor (ACP client alone) ${median(floor).toFixed(0)}, through agentd ${median(viaAgentd).toFixed(0)}, agentd's own ${(median(viaAgentd) - median(floor)).toFixed(0)}`,
    `${kind} warm tool turn (a parked process), median (ms): floor ${median(floorWarm).toFixed(0)}, through agentd ${median(viaAgentdWarm).toFixed(0)}, agentd's own ${(median(viaAgentdWarm) - median(floorWarm)).toFixed(0)}`,
    `${kind} peak RSS of one harness's process tree: ${rss.toFixed(0)} MB`,
    `${kind} turns per second with ${concurrency} harnesses at once (text turns, cold): ${perSecond.toFixed(2)}`,
  );
}
/**
 * What the relay (relay.ts) adds to one model request: the same streaming request straight to the
 * fake model and through a relay, interleaved.
 */
async function relayCost(requests: number): Promise<{ direct: number; relayed: number }> {
  const relay = await HarnessRelay.open([{ url: model.url, headers: { authorization: 'Bearer sk-bench' } }], 'on', 120_000);
  model.script(() => ({ text: 'relayed' }));
  const body = JSON.stringify({ model: 'fake-model', stream: true, input: 'hi' });
  const once = async (base: string, key: string) => {
    const started = performance.now();
    const res = await fetch(`${base}/responses`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
    await res.text();
    return performance.now() - started;
  };
  const direct: number[] = [];
  const relayed: number[] = [];
  for (let i = 0; i < requests; i++) {
    direct.push(await once(model.url, 'sk-bench'));
    relayed.push(await once(relay.urls[0]!, relay.token));
  }
  relay.close();
  return { direct: median(direct), relayed: median(relayed) };
}
const relayed = await relayCost(200);
lines.push(`model request through the relay, median of 200 (ms): direct ${relayed.direct.toFixed(2)}, relayed ${relayed.relayed.toFixed(2)}, the relay's own ${(relayed.relayed - relayed.direct).toFixed(2)}`);

for (const line of lines) console.log(line);

await app.close();
await store.close();
await model.close();
rmSync(dataDir, { recursive: true, force: true });
