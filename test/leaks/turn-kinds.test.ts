import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/testing/fake-model.ts';
import { configsApi, createWorkflow } from '../configs/client.ts';
import { createTestset, runEnded, startRun } from '../evaluation/client.ts';
import { builtin, invokeBody, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { startMcpServer, startRawMcpServer, type TestMcpServer } from '../support/mcp-server.ts';

/**
 * A server runs for weeks: no kind of turn, however it ends, may leave something behind. Each kind
 * runs N times as a warm-up (pools fill, modules load, caches settle), then N times more; what is
 * held after the second N must be no more than after the first: file descriptors, child processes,
 * handles, live-turn bookkeeping, lease rows and files in the data folder. A leak of one thing per
 * turn shows as N more.
 */

const N = 8;
/** Kept-alive connections and fs requests in flight come and go with their timers: a few either way is not a leak. */
const SLACK = { sockets: 4, otherFds: 2, handles: 2 };

let h: Harness;
let mcp: TestMcpServer;
let dying: { url: string; close(): Promise<void> };
let appRevision: string;
let slowCases: string;
const warnings: string[] = [];
const onWarning = (warning: Error) => void warnings.push(`${warning.name}: ${warning.message}`);

const userText = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
function script(req: RecordedRequest) {
  const text = userText(req);
  if (req.messages.at(-1)?.role === 'tool') return { text: 'done' };
  if (text === 'e500') return { error: { status: 500, message: 'down' } };
  if (text === 'e429') return { error: { status: 429, message: 'slow down' } };
  if (text === 'hang') return { text: 'never', hang: true };
  if (text === 'bash') return { toolCalls: [{ name: 'bash', input: { command: 'sleep 30' } }] };
  if (text === 'write') return { toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] };
  if (text === 'add') return { toolCalls: [{ name: 'calc__add', input: { a: 1, b: 2 } }] };
  return { text: `answer to ${text}` };
}

/** Processes under this one (the server runs in it), at any depth. */
function descendants(): number {
  const parent = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  let count = 0;
  for (const pid of parent.keys()) {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) {
      if (p === process.pid) {
        count++;
        break;
      }
    }
  }
  return count;
}

/** Files and folders under `dir`, each counted. */
function entries(dir: string): number {
  let count = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) count += 1 + (entry.isDirectory() ? entries(path.join(dir, entry.name)) : 0);
  return count;
}

interface Held {
  sockets: number;
  otherFds: number;
  children: number;
  handles: number;
  turns: { live: number; bySession: number; starting: number; leased: number };
  leases: number;
  dataEntries: number;
}

async function held(): Promise<Held> {
  const turns = (h.app as any).turns;
  const bookkeeping = () => ({ live: turns.live.size, bySession: turns.bySession.size, starting: turns.starting.size, leased: turns.leases.held.size });
  // A turn's last steps (its lease, its MCP servers' close, a killed command's exit) trail its reply.
  await expect.poll(() => ({ turns: bookkeeping(), children: descendants() }), { timeout: 10_000 }).toEqual({ turns: { live: 0, bySession: 0, starting: 0, leased: 0 }, children: 0 });
  await new Promise((resolve) => setTimeout(resolve, 300));
  let sockets = 0;
  let otherFds = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:')) sockets++;
      else otherFds++;
    } catch {
      // The directory's own descriptor, closed by now.
    }
  }
  const { n } = (await h.store.db.selectFrom('session_leases').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()) as { n: number | string };
  return {
    sockets,
    otherFds,
    children: descendants(),
    handles: process.getActiveResourcesInfo().filter((kind) => kind !== 'TCPSocketWrap').length,
    turns: bookkeeping(),
    leases: Number(n),
    dataEntries: entries(h.dataDir),
  };
}

const stop = (session: string) => fetch(`${h.url}/api/sessions/${session}/stop?project_id=${h.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${h.apiKey}` } }).then((r) => r.text());
const text = (res: Response | Promise<Response>) => Promise.resolve(res).then((r) => r.text());
const stream = { headers: { accept: 'text/event-stream' } };

/**
 * Each kind of turn, run once. The ones that make a session folder by design (a session's folder
 * lives as long as the session) say how many entries each adds to the data folder.
 */
const kinds: Record<string, { run: () => Promise<unknown>; entries?: number }> = {
  'a normal turn, JSON and streamed': {
    run: async () => {
      await text(h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template())));
      await text(h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template()), stream));
    },
  },
  'a model that fails with 500 or 429': {
    run: async () => {
      await text(h.invoke(invokeBody([{ role: 'user', content: 'e500' }], template())));
      await text(h.invoke(invokeBody([{ role: 'user', content: 'e429' }], template()), stream));
    },
  },
  'a model that never answers (AGENTD_MODEL_TIMEOUT_MS)': { run: () => text(h.invoke(invokeBody([{ role: 'user', content: 'hang' }], template()))) },
  'a client that goes away mid-stream': {
    run: async () => {
      const gone = new AbortController();
      const res = await h.invoke(invokeBody([{ role: 'user', content: 'hang' }], template()), { ...stream, signal: gone.signal });
      const reader = res.body!.getReader();
      await reader.read();
      gone.abort();
      await reader.read().catch(() => undefined);
    },
  },
  'a turn stopped on request': {
    run: async () => {
      const session = sid('stop');
      const reader = (await h.invoke(invokeBody([{ role: 'user', content: 'hang' }], template(), { session_id: session }), stream)).body!.getReader();
      await reader.read();
      await stop(session);
      while (!(await reader.read()).done);
    },
  },
  'a turn taken over (force)': {
    run: async () => {
      const session = sid('force');
      const first = h.invoke(invokeBody([{ role: 'user', content: 'hang' }], template(), { session_id: session }), stream);
      const reader = (await first).body!.getReader();
      await reader.read();
      await text(h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template(), { session_id: session }), { headers: { 'x-ag-session-control': 'force' } }));
      while (!(await reader.read()).done);
    },
  },
  'a pause answered through the API': {
    entries: 2,
    run: async () => {
      const session = sid('answered');
      const agent = template({ tools: [builtin('write')], mode: 'ask' });
      const paused = await (await h.invoke(invokeBody([{ role: 'user', content: 'write' }], agent, { session_id: session }))).json();
      await text(h.respond(paused.data.outputs.pending_interaction.id, { approved: true }));
      await expect.poll(async () => (await h.store.turns.listForSession(h.projectId, session, { limit: 5 })).map((t) => t.status).sort(), { timeout: 10_000 }).toEqual(['completed', 'paused']);
    },
  },
  'a pause abandoned': { run: () => text(h.invoke(invokeBody([{ role: 'user', content: 'write' }], template({ tools: [builtin('write')], mode: 'ask' })))) },
  'an MCP server that answers': { run: () => text(h.invoke(invokeBody([{ role: 'user', content: 'add' }], { ...template(), mcps: [{ name: 'calc', connection: { type: 'http', url: mcp.url } }] }))) },
  'an MCP server that cannot be reached': { run: () => text(h.invoke(invokeBody([{ role: 'user', content: 'hi' }], { ...template(), mcps: [{ name: 'gone', connection: { type: 'http', url: 'http://127.0.0.1:9/mcp' } }] }))) },
  'an MCP server that dies during a call': { run: () => text(h.invoke(invokeBody([{ role: 'user', content: 'add' }], { ...template(), mcps: [{ name: 'calc', connection: { type: 'http', url: dying.url } }] }))) },
  'a stdio MCP server of a turn stopped while it connects': {
    run: async () => {
      const session = sid('stdio');
      const mcps = [{ name: 'quiet', connection: { type: 'stdio', command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] } }];
      const caller = h.invoke(invokeBody([{ role: 'user', content: 'hi' }], { ...template(), mcps }, { session_id: session }));
      await expect.poll(descendants, { timeout: 10_000 }).toBeGreaterThan(0);
      await stop(session);
      await text(caller);
    },
  },
  'a bash command killed by its time limit': { entries: 1, run: () => text(h.invoke(invokeBody([{ role: 'user', content: 'bash' }], template({ tools: [builtin('bash')] }), { session_id: sid('bash') }))) },
  'an evaluation run stopped midway': {
    run: async () => {
      const run = await startRun(h, slowCases, appRevision, { concurrency: { batch_size: 2 } });
      await expect.poll(async () => (await (await configsApi(h, 'GET', `/simple/evaluations/${run.id}`)).json()).evaluation.data.progress.running, { timeout: 10_000, interval: 20 }).toBe(2);
      await text(configsApi(h, 'POST', `/simple/evaluations/${run.id}/stop`));
      await runEnded(h, run.id);
    },
  },
};

beforeAll(async () => {
  process.on('warning', onWarning);
  mcp = await startMcpServer();
  // Lists one tool, then drops the connection of every call to it.
  dying = await startRawMcpServer((request, res) => {
    if (request.method === 'tools/list') return { result: { tools: [{ name: 'add', inputSchema: { type: 'object', properties: {} }, annotations: { readOnlyHint: true } }] } };
    if (request.method === 'tools/call') return void res.socket?.destroy();
    return { result: {} };
  });
  h = await startHarness({
    script,
    env: { AGENTD_MODEL_TIMEOUT_MS: '300', AGENTD_MODEL_MAX_RETRIES: '0', AGENTD_BASH_TIMEOUT_MS: '300', AGENTD_ALLOW_STDIO_MCP: '1' },
  });
  appRevision = (await createWorkflow(h, 'leaks', { agent: template() })).revision.id;
  const row = (content: string) => ({ data: { messages: [{ role: 'user', content }] } });
  slowCases = (await createTestset(h, { name: 'slow', data: { testcases: [row('hang'), row('hang'), row('hang'), row('hang')] } })).revision_id;
});
afterAll(async () => {
  process.off('warning', onWarning);
  await h?.close();
  await mcp?.close();
  await dying?.close();
});

describe('what a turn leaves behind', () => {
  for (const [name, { run, entries: added = 0 }] of Object.entries(kinds)) {
    it(`${name}: nothing more after ${2 * N} turns than after ${N}`, async () => {
      for (let i = 0; i < N; i++) await run();
      const warm = await held();
      for (let i = 0; i < N; i++) await run();
      const after = await held();
      // Within its slack (fewer is fine too), a count that comes and goes reads as the warm one.
      const capped = (key: keyof typeof SLACK) => (after[key] <= warm[key] + SLACK[key] ? warm[key] : after[key]);
      expect({ ...after, sockets: capped('sockets'), otherFds: capped('otherFds'), handles: capped('handles') }).toEqual({ ...warm, dataEntries: warm.dataEntries + added * N });
      expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
    }, 120_000);
  }
});
