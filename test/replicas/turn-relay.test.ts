import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { doneEvent, type AgentEvent } from '../../src/contract/events.ts';
import type { LiveTurn } from '../../src/sessions/live-turn.ts';
import { followRemoteTurn } from '../../src/sessions/turn-relay.ts';
import { openStore, type Store } from '../../src/store/db.ts';
import { freshDatabase, TEST_POSTGRES_URL, type TestDatabase } from '../support/database.ts';

/**
 * The follower's side of the relay against a hand-driven sender on a real PostgreSQL server: what
 * it does when the running process misbehaves or disappears — answers never, loses messages, ends
 * without its last events. The happy path runs between real replicas in attach.test.ts.
 * PostgreSQL only: SQLite has one process and no relay.
 */

const TTL_MS = 900;
let database: TestDatabase;
let follower: Store;
let sender: Store;
let dataDir: string;
let project: string;
let seq = 0;

/** A lease as a running turn elsewhere holds it, and a sender that hears the follow request. */
async function runningElsewhere(): Promise<{ sessionId: string; turnId: string; reply: Promise<(message: object) => Promise<void>> }> {
  const sessionId = `relay-${++seq}`;
  const turnId = `turn-${seq}-${Date.now()}`;
  await sender.leases.acquire({ projectId: project, sessionId, turnId, holder: 'elsewhere', ttlMs: 60_000 });
  await sender.sessions.touch(project, sessionId);
  await sender.turns.create({ id: turnId, project_id: project, session_id: sessionId, trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16), request: {} });
  let answer!: (send: (message: object) => Promise<void>) => void;
  const reply = new Promise<(message: object) => Promise<void>>((resolve) => (answer = resolve));
  // Listening before the follower can ask: a follow request sent before the LISTEN is lost.
  await sender.notifications!.listen('follow', (raw) => {
    const request = JSON.parse(raw) as { turn_id: string; reply: string };
    if (request.turn_id === turnId) answer((message) => sender.notifications!.send(request.reply, JSON.stringify(message)));
  });
  return { sessionId, turnId, reply };
}

async function follow(sessionId: string, turnId: string): Promise<LiveTurn> {
  const turn = await followRemoteTurn(follower.notifications!, { projectId: project, sessionId, turnId, leases: follower.leases, turns: follower.turns, leaseTtlMs: TTL_MS });
  if (!turn) throw new Error(`turn ${turnId} is not followable`);
  return turn;
}

/** A follower that got its answer: the relayed turn, and the sender's side of the channel. */
async function followed(): Promise<{ sessionId: string; turnId: string; send: (message: object) => Promise<void>; turn: LiveTurn }> {
  const { sessionId, turnId, reply } = await runningElsewhere();
  const following = follow(sessionId, turnId);
  const send = await reply;
  await send({ t: 'hello', trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) });
  return { sessionId, turnId, send, turn: await following };
}

async function collect(events: AsyncIterable<AgentEvent>): Promise<AgentEvent[]> {
  const all: AgentEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

const start = (turnId: string, sessionId: string): AgentEvent => ({ type: 'turn_start', data: { turn_id: turnId, session_id: sessionId, trace_id: 'a'.repeat(32) } });
const delta = (text: string): AgentEvent => ({ type: 'message_delta', data: { id: 'm1', delta: text } });

describe.runIf(TEST_POSTGRES_URL)('following a turn relayed from another process', () => {
  beforeAll(async () => {
    database = await freshDatabase();
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-relay-'));
    follower = await openStore({ dataDir, databaseUrl: database.url, listenUrl: database.listenUrl });
    sender = await openStore({ dataDir, databaseUrl: database.url, listenUrl: database.listenUrl });
    project = (await follower.projects.ensure('relay')).id;
  });
  afterAll(async () => {
    await follower.close();
    await sender.close();
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('rebuilds the turn from hello, event batches and the end, failure included', async () => {
    const { sessionId, turnId, send, turn } = await followed();
    expect(turn.traceId).toBe('a'.repeat(32));
    await send({ t: 'events', from: 0, events: [start(turnId, sessionId), { type: 'message_start', data: { id: 'm1' } }] });
    await send({ t: 'events', from: 2, events: [delta('partial'), { type: 'error', data: { code: 429, type: 'rate-limited', message: 'slow down' } }, doneEvent('error')] });
    await send({ t: 'end', events: 5, failure: { type: 'rate-limited', status: 429, message: 'slow down', headers: { 'retry-after': '3' } } });
    const events = await collect(turn.follow());
    expect(events.map((e) => e.type)).toEqual(['turn_start', 'message_start', 'message_delta', 'error', 'done']);
    expect(turn.failure).toMatchObject({ type: 'rate-limited', status: 429, headers: { 'retry-after': '3' } });
    expect((await turn.done).stop_reason).toBe('error');
  });

  it('ends with an error when a batch of events went missing, rather than stream a turn with a hole', async () => {
    const { sessionId, turnId, send, turn } = await followed();
    await send({ t: 'events', from: 0, events: [start(turnId, sessionId)] });
    await send({ t: 'events', from: 3, events: [delta('after the hole')] });
    const events = await collect(turn.follow());
    expect(events.at(-2)).toMatchObject({ type: 'error', data: { code: 503, type: 'unavailable' } });
    expect((events.at(-2)!.data as { message: string }).message).toContain('lost');
    expect(events.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'interrupted' } });
    expect(events.some((e) => e.type === 'message_delta')).toBe(false);
    expect(turn.failure?.status).toBe(503);
  });

  it('ends with an error when the end arrives without the events before it', async () => {
    const { sessionId, turnId, send, turn } = await followed();
    await send({ t: 'events', from: 0, events: [start(turnId, sessionId)] });
    await send({ t: 'end', events: 4 });
    const events = await collect(turn.follow());
    expect(events.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'interrupted' } });
    expect(turn.failure?.type).toBe('unavailable');
  });

  it('ends the turn once its lease is gone and no end came', async () => {
    const { sessionId, turnId, send, turn } = await followed();
    await send({ t: 'events', from: 0, events: [start(turnId, sessionId)] });
    await sender.leases.release(project, sessionId, turnId);
    const events = await collect(turn.follow());
    expect(events.map((e) => e.type)).toEqual(['turn_start', 'error', 'done']);
    expect((events[1]!.data as { message: string }).message).toContain('stopped before the turn ended');
  });

  it('starts at once from the turn’s record, before the running process answers', async () => {
    const { sessionId, turnId, reply } = await runningElsewhere();
    const turn = await follow(sessionId, turnId);
    expect(turn).toMatchObject({ id: turnId, traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), isFinished: false });
    const send = await reply;
    await send({ t: 'hello', trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) });
    await send({ t: 'events', from: 0, events: [start(turnId, sessionId), delta('hi'), doneEvent('end_turn')] });
    await send({ t: 'end', events: 3 });
    expect((await collect(turn.follow())).map((e) => e.type)).toEqual(['turn_start', 'message_delta', 'done']);
  });

  it('ends with an error and interrupted when the process holding the lease never answers', async () => {
    const { sessionId, turnId } = await runningElsewhere();
    const events = await collect((await follow(sessionId, turnId)).follow());
    expect(events.map((e) => e.type)).toEqual(['error', 'done']);
    expect(events[0]!.data).toMatchObject({ code: 503, type: 'unavailable', message: expect.stringContaining('did not answer') });
    expect(events[1]!.data).toMatchObject({ stop_reason: 'interrupted' });
  });

  it('tells a turn that ended before its process answered from its record', async () => {
    const { sessionId, turnId } = await runningElsewhere();
    const turn = await follow(sessionId, turnId);
    await sender.turns.finish(turnId, { status: 'completed', stop_reason: 'end_turn', output: { messages: [{ role: 'assistant', content: 'finished elsewhere' }] } });
    await sender.leases.release(project, sessionId, turnId);
    const events = await collect(turn.follow());
    expect(JSON.stringify(events)).toContain('finished elsewhere');
    expect(events.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'end_turn' } });
    expect(turn.failure).toBeUndefined();
  });

  it('is nothing to follow when the record says the turn has ended, or there is none', async () => {
    const { sessionId, turnId } = await runningElsewhere();
    await sender.turns.finish(turnId, { status: 'completed', stop_reason: 'end_turn' });
    expect(await followRemoteTurn(follower.notifications!, { projectId: project, sessionId, turnId, leases: follower.leases, turns: follower.turns, leaseTtlMs: TTL_MS })).toBeUndefined();
    expect(await followRemoteTurn(follower.notifications!, { projectId: project, sessionId, turnId: 'delete-x', leases: follower.leases, turns: follower.turns, leaseTtlMs: TTL_MS })).toBeUndefined();
  });
});
