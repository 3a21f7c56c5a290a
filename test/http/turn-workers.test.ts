import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ServerLoad, utilizationSampler } from '../../src/agent/server-load.ts';
import { loadConfig } from '../../src/config.ts';
import { TurnPool } from '../../src/agent/turn-pool.ts';
import type { PooledTurnInput, WorkerSettings } from '../../src/agent/turn-wire.ts';
import type { AgentEvent } from '../../src/contract/events.ts';
import { AppError } from '../../src/errors.ts';
import { builtin, expectError, invokeBody, readFrames, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * AGENTD_TURN_WORKERS: turns on worker threads give what turns on the server's thread give. Each
 * case runs on both, one server of each kind (the pooled one sends every turn to its threads,
 * AGENTD_TURN_WORKERS_LOAD=0), and compares.
 */

let inline: Harness;
let pooled: Harness;
beforeAll(async () => {
  [inline, pooled] = await Promise.all([
    startHarness({ env: { AGENTD_TURN_WORKERS: '0' } }),
    startHarness({ env: { AGENTD_TURN_WORKERS: '2', AGENTD_TURN_WORKERS_LOAD: '0' } }),
  ]);
});
afterAll(async () => {
  // Every turn of the pooled server ran on a thread, every turn of the other on its own.
  expect(pooled.app.turns.placement.server).toBe(0);
  expect(pooled.app.turns.placement.threads).toBeGreaterThan(0);
  expect(inline.app.turns.placement.threads).toBe(0);
  expect(pooled.app.turns.threadsRunning).toBe(2);
  expect(inline.app.turns.threadsRunning).toBe(0);
  await Promise.all([inline.close(), pooled.close()]);
});

const both = () => [inline, pooled] as const;
/** Ids that differ between runs (turn, call and message ids) left out. */
const shape = (messages: Array<Record<string, unknown>>) => messages.map(({ tool_call_id: _c, id: _i, ...rest }) => rest);
const waitFor = async (check: () => boolean) => {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(check()).toBe(true);
};

describe('turns on worker threads', () => {
  it('run tools in the session folder and answer with the same messages', async () => {
    const agent = template({ tools: [builtin('write'), builtin('ls')], mode: 'allow' });
    const outputs = [];
    for (const h of both()) {
      const session = sid('pool-tools');
      h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'from the turn' } }] }, { toolCalls: [{ name: 'ls', input: {} }] }, { text: 'done' }]);
      const json = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: session })));
      expect(await readFile(`${h.sessionDir(session)}/a.txt`, 'utf8')).toBe('from the turn');
      outputs.push({ stop_reason: json.data.outputs.stop_reason, messages: shape(json.data.outputs.messages), usage: json.data.outputs.usage });
    }
    expect(outputs[1]).toEqual(outputs[0]);
    expect(outputs[0]!.messages.at(-1)).toEqual({ role: 'assistant', content: 'done' });
  });

  it('find a message\'s attachment in the session folder, written before the turn crossed to its thread', async () => {
    const agent = template({ tools: [builtin('read')], mode: 'allow' });
    const message = { role: 'user', content: [{ type: 'text', text: 'read it' }, { type: 'file', url: 'data:text/plain,from%20the%20caller', filename: 'in.txt' }] };
    for (const h of both()) {
      h.model.script([{ toolCalls: [{ name: 'read', input: { path: 'attachments/in.txt' } }] }, { text: 'read' }]);
      await readJson(await h.invoke(invokeBody([message], agent, { session_id: sid('pool-attach') })));
      const [, after] = h.model.requests.slice(-2);
      expect(after!.messages.find((m) => m.role === 'user')!.content).toBe('read it\n[attached file: attachments/in.txt (text/plain, 15 bytes)]');
      expect(after!.messages.at(-1)).toMatchObject({ role: 'tool', content: expect.stringContaining('from the caller') });
    }
  });

  it('send the model the same conversation, whatever keys its messages have', async () => {
    // Messages of different shapes, so the history crosses to the thread with keys some lack.
    const history = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'list ' }, { type: 'text', text: 'it' }], id: 'u1', note: 'kept' },
      { role: 'tool', content: '', tool_call_id: 'c1', tool_name: 'ls', input: { path: '.', depth: [1, { deep: null }] } },
      { role: 'tool', content: 'a.txt', tool_call_id: 'c1', is_error: false },
      { role: 'assistant', content: 'one file', id: 'a1' },
      { role: 'user', content: 'and now?' },
    ];
    const bodies = [];
    for (const h of both()) {
      h.model.reset();
      h.model.script({ text: 'nothing more' });
      await readJson(await h.invoke(invokeBody(history, template({ tools: [builtin('ls')], mode: 'allow' }))));
      // The first input is the instructions, which name the server's own data folder.
      const { input, ...rest } = h.model.requests[0]!.body;
      bodies.push({ ...rest, input: input.slice(1) });
    }
    expect(bodies[1]).toEqual(bodies[0]);
    expect(JSON.stringify(bodies[0])).toContain('list it');
  });

  it('stream the same frames', async () => {
    const agent = template({ tools: [builtin('ls')], mode: 'allow' });
    const streams = [];
    for (const h of both()) {
      h.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }, { text: 'one two three' }]);
      const res = await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent), { headers: { accept: 'text/event-stream' } });
      const { frames } = await readFrames(res);
      streams.push(frames.map((f) => ({ type: f.type, ...(f.type === 'message_delta' ? { delta: (f.data as { delta: string }).delta } : {}) })));
    }
    expect(streams[1]).toEqual(streams[0]);
    expect(streams[0]!.filter((f) => f.type === 'message_delta').length).toBeGreaterThan(1);
  });

  it("stream each piece of the answer when it comes, not at the answer's end", async () => {
    for (const h of both()) {
      // A frame every 100 ms: the answer takes over a second to send.
      h.model.script({ text: 'one two three', chunkDelayMs: 100 });
      const res = await h.invoke(invokeBody([{ role: 'user', content: 'go' }], template({ mode: 'allow' })), { headers: { accept: 'text/event-stream' } });
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let seen = '';
      while (!seen.includes('message_delta')) {
        const { done, value } = await reader.read();
        if (done) break;
        seen += value;
      }
      expect(seen).toContain('"delta":"one');
      // The first words reached the client while the model was still sending the rest.
      expect(h.model.inFlight).toBe(1);
      while (!(await reader.read()).done);
    }
  });

  it("send a streamed turn's events from one pass of the thread's event loop together", async () => {
    const batches: number[] = [];
    const original = Worker.prototype.emit;
    const emit = vi.spyOn(Worker.prototype, 'emit').mockImplementation(function (this: Worker, name: string | symbol, ...args: unknown[]) {
      if (name === 'message' && Array.isArray(args[0])) batches.push(args[0].filter((message: { type: string }) => message.type === 'event').length);
      return original.call(this, name, ...args);
    });
    try {
      pooled.model.script({ text: 'one two three four five six' });
      const res = await pooled.invoke(invokeBody([{ role: 'user', content: 'go' }], template({ mode: 'allow' })), { headers: { accept: 'text/event-stream' } });
      const { frames } = await readFrames(res);
      expect(frames.filter((f) => f.type === 'message_delta').length).toBeGreaterThan(1);
    } finally {
      emit.mockRestore();
    }
    const events = batches.reduce((sum, n) => sum + n, 0);
    expect(events).toBeGreaterThan(5);
    // One message per event would cost both threads a copy and a wake-up each.
    expect(batches.length).toBeLessThan(events / 2);
  });

  it('pause for approval, and the continuation runs the approved tool', async () => {
    const agent = template({ tools: [builtin('write')], mode: 'ask' });
    const first = [{ role: 'user', content: 'write it' }];
    const h = pooled;
    const session = sid('pool-approval');
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'b.txt', content: 'approved' } }] }, { text: 'written' }]);
    const pausedTurn = await readJson(await h.invoke(invokeBody(first, agent, { session_id: session })));
    expect(pausedTurn.data.outputs.stop_reason).toBe('paused');
    expect(await h.store.interactions.get(h.projectId, pausedTurn.data.outputs.pending_interaction.id)).toMatchObject({ status: 'pending' });
    const decided = pausedTurn.data.outputs.messages.map((m: Record<string, any>) => (m.approval ? { ...m, approval: { ...m.approval, approved: true } } : m));
    const json = await readJson(await h.invoke(invokeBody([...first, ...decided], agent, { session_id: session })));
    expect(json.data.outputs.messages.at(-1)).toEqual({ role: 'assistant', content: 'written' });
    expect(await readFile(`${h.sessionDir(session)}/b.txt`, 'utf8')).toBe('approved');
  });

  it('pass a provider failure on with its status, type and headers', async () => {
    for (const h of both()) {
      h.model.script({ error: { status: 429, headers: { 'retry-after': '7' } } });
      const res = await h.invoke(invokeBody([{ role: 'user', content: 'go' }], template()));
      await expectError(res, 429, 'upstream-rate-limited', /7/);
      expect(res.headers.get('retry-after')).toBe('7');
    }
  });

  it('stop the model call when the turn is taken over', async () => {
    const h = pooled;
    const session = sid('pool-force');
    h.model.script([{ hang: true }, { text: 'the new turn' }]);
    const old = h.invoke(invokeBody([{ role: 'user', content: 'hang' }], template(), { session_id: session }));
    await waitFor(() => h.model.inFlight === 1);
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'again' }], template(), { session_id: session }), { headers: { 'x-ag-session-control': 'force' } });
    expect((await readJson(res)).data.outputs.messages.at(-1).content).toBe('the new turn');
    await expectError(await old, 409, 'turn-cancelled');
    await waitFor(() => h.model.inFlight === 0);
  });
});

describe('what threads learn about a model server', () => {
  const ask = (h: Harness, content: string, llm = { provider: 'openai', model: 'gpt-x' }) => h.invoke(invokeBody([{ role: 'user', content }], { ...template(), llm }));
  /** One turn on each of the two threads: the first is still at the model when the second is placed. */
  async function onBothThreads(h: Harness, llm?: { provider: string; model: string }): Promise<void> {
    const first = ask(h, 'slow', llm);
    await waitFor(() => h.model.inFlight === 1);
    expect((await ask(h, 'quick', llm)).status).toBe(200);
    expect((await first).status).toBe(200);
  }

  it('a thread that finds out which way in a server answers tells the threads already running', async () => {
    const h = await startHarness({
      protocols: ['chat', 'anthropic'],
      env: (url) => ({ AGENTD_TURN_WORKERS: '2', AGENTD_TURN_WORKERS_LOAD: '0', ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: 'sk-ant-test' }),
    });
    try {
      // Both threads start on Anthropic turns, which have nothing to find out.
      h.model.script([{ text: 'a', latencyMs: 300 }, { text: 'b' }, { text: 'found' }, { text: 'c', latencyMs: 300 }, { text: 'd' }]);
      await onBothThreads(h, { provider: 'anthropic', model: 'claude-x' });
      expect(h.model.unrouted).toEqual([]);
      // The first thread finds that only Chat Completions answers; then both threads ask that way.
      expect((await readJson(await ask(h, 'find out'))).data.outputs.messages.at(-1).content).toBe('found');
      expect(h.model.unrouted).toEqual(['POST /v1/responses']);
      await onBothThreads(h);
      expect(h.model.unrouted).toEqual(['POST /v1/responses']);
      expect(h.app.turns.placement).toEqual({ server: 0, threads: 5 });
    } finally {
      await h.close();
    }
  });

  it('a thread that starts later is told at its start', async () => {
    const h = await startHarness({ protocols: ['chat'], env: { AGENTD_TURN_WORKERS: '2', AGENTD_TURN_WORKERS_LOAD: '0' } });
    try {
      h.model.script([{ text: 'found' }, { text: 'c', latencyMs: 300 }, { text: 'd' }]);
      await readJson(await ask(h, 'find out'));
      await onBothThreads(h);
      expect(h.model.unrouted).toEqual(['POST /v1/responses']);
    } finally {
      await h.close();
    }
  });
});

describe('where a turn runs', () => {
  it('with AGENTD_TURN_WORKERS_LOAD=1 the server thread is never busy enough: every turn stays on it', async () => {
    const h = await startHarness({ env: { AGENTD_TURN_WORKERS: '1', AGENTD_TURN_WORKERS_LOAD: '1' } });
    try {
      h.model.script({ text: 'ok' });
      expect((await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], template())))).data.outputs.stop_reason).toBe('end_turn');
      expect(h.app.turns.placement).toEqual({ server: 1, threads: 0 });
    } finally {
      await h.close();
    }
  });

  it('the load gauge: a share of the turns goes, growing above the line, shrinking well under it; 0 means all', () => {
    const readings: number[] = [];
    let rose = 0;
    const load = new ServerLoad(0.9, { sample: () => readings.shift()!, start: false, rising: () => rose++ });
    const after = (...values: number[]) => {
      for (const value of values) {
        readings.push(value);
        load.update();
      }
      return load.share;
    };
    /** How many of the next `n` turns go to a thread. */
    const sent = (n: number) => Array.from({ length: n }, () => load.sendsTurn()).filter(Boolean).length;
    expect(load.share).toBe(0);
    expect(after(0.4)).toBe(0);
    expect(sent(10)).toBe(0);
    expect(rose).toBe(0);
    // Past about half the line the turn threads are started (once), ahead of need; no turn goes yet.
    expect(after(0.6)).toBe(0);
    expect(rose).toBe(1);
    // Over the line the share grows a tenth a reading, and that share of the turns goes, spread evenly.
    expect(after(0.95, 0.97, 0.99)).toBe(0.3);
    expect(sent(10)).toBe(3);
    expect(Array.from({ length: 10 }, () => load.sendsTurn())).toEqual([false, false, false, true, false, false, true, false, false, true]);
    // Under the line and not far under, it holds; further under, it shrinks.
    expect(after(0.85, 0.75)).toBe(0.3);
    expect(after(0.6)).toBe(0.2);
    expect(after(...Array(12).fill(1))).toBe(1);
    expect(sent(10)).toBe(10);
    expect(after(...Array(12).fill(0.1))).toBe(0);
    expect(sent(10)).toBe(0);
    expect(rose).toBe(1);
    const always = new ServerLoad(0, { sample: () => 0, start: false });
    always.update();
    expect(always.share).toBe(1);
    expect(Array.from({ length: 5 }, () => always.sendsTurn())).toEqual([true, true, true, true, true]);
  });

  it('reads the load from the first turn on: work before it (the server starting) starts no thread', async () => {
    let rose = 0;
    const load = new ServerLoad(0.9, { rising: () => rose++ });
    const busy = (ms: number) => {
      for (const until = performance.now() + ms; performance.now() < until; );
    };
    const idle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    try {
      busy(300);
      await idle(350);
      expect(rose).toBe(0);
      expect(load.sendsTurn()).toBe(false);
      // From the first turn on, a busy window is read as load.
      busy(300);
      await idle(250);
      expect(rose).toBe(1);
    } finally {
      load.stop();
    }
  });

  it('AGENTD_TURN_WORKERS_LOAD is a share from 0 to 1, 0.9 unless set; anything else stops the start, saying so', () => {
    expect(loadConfig({}).turnWorkersLoad).toBe(0.9);
    expect(loadConfig({ AGENTD_TURN_WORKERS_LOAD: '0' }).turnWorkersLoad).toBe(0);
    for (const bad of ['1.5', '-0.1', 'busy']) {
      expect(() => loadConfig({ AGENTD_TURN_WORKERS_LOAD: bad })).toThrow(`AGENTD_TURN_WORKERS_LOAD must be a number from 0 to 1, got "${bad}"`);
    }
  });

  it("the load it reads is the server thread's event-loop utilization", () => {
    const read = utilizationSampler();
    const until = performance.now() + 30;
    while (performance.now() < until);
    // Never back in the event loop since the last reading: all of the window was work.
    expect(read()).toBeGreaterThan(0.9);
  });
});

describe('the pool', () => {
  const settings: WorkerSettings = { env: {}, openaiCompatible: {}, connections: { allowedHosts: undefined }, prices: {}, maxSteps: 5, modelTimeoutMs: 1000, modelMaxRetries: 0, bash: { timeoutMs: 1000, maxOutputBytes: 1024, unsafeHost: false, limits: { processes: 256, memoryBytes: 1 << 30 } } };
  const input = (turnId: string) => ({ turnId, sessionId: 's', traceId: 't', history: [] }) as unknown as PooledTurnInput;

  it('fails the turns of a thread that dies, and starts a new thread for the next turn', async () => {
    const pool = new TurnPool(1, settings, new URL('../support/crashing-turn-worker.ts', import.meta.url));
    for (const turnId of ['first', 'second']) {
      const seen: AgentEvent[] = [];
      const failure = await (async () => {
        for await (const event of pool.run(input(turnId), new AbortController().signal)) seen.push(event);
      })().catch((error: unknown) => error);
      expect(seen).toEqual([{ type: 'turn_start', data: { turn_id: turnId, session_id: 's', trace_id: 't' } }]);
      expect(failure).toBeInstanceOf(AppError);
      expect(failure).toMatchObject({ type: 'unavailable', status: 503, message: expect.stringMatching(/exit code 3.*send the turn again/) });
    }
    pool.close();
  });

  it('sends the turns started in one pass of the event loop to the thread in one message', async () => {
    const pool = new TurnPool(1, settings, new URL('../support/crashing-turn-worker.ts', import.meta.url));
    const posted: unknown[] = [];
    const original = Worker.prototype.postMessage;
    const post = vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (this: Worker, message: unknown) {
      posted.push(message);
      return original.call(this, message);
    });
    try {
      const turns = ['a', 'b', 'c', 'd'].map((turnId) => pool.run(input(turnId), new AbortController().signal));
      const firsts = await Promise.all(turns.map((turn) => turn.next()));
      // Each turn reached the thread: its first event came back.
      expect(firsts.map((first) => (first.value as AgentEvent).data)).toEqual(['a', 'b', 'c', 'd'].map((turnId) => expect.objectContaining({ turn_id: turnId })));
      await Promise.all(turns.map((turn) => turn.next().catch(() => undefined)));
    } finally {
      post.mockRestore();
      pool.close();
    }
    expect(posted).toEqual([['a', 'b', 'c', 'd'].map((turnId) => expect.objectContaining({ type: 'run', input: expect.objectContaining({ turnId }) }))]);
  });

  it('takes no turns once closed', async () => {
    const pool = new TurnPool(1, settings);
    pool.close();
    await expect(pool.run(input('late'), new AbortController().signal).next()).rejects.toMatchObject({ type: 'unavailable' });
  });
});
