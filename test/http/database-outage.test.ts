import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { databaseUnavailable } from '../../src/store/unavailable.ts';
import type { FakeScript } from '../../src/testing/fake-model.ts';
import { freshDatabase, TEST_POSTGRES_URL, type TestDatabase } from '../support/database.ts';
import { apiCall, startServe } from '../support/child-server.ts';
import { builtin, expectError, invokeBody, readFrames, readJson, sid, startHarness, template, until, type Harness } from '../support/harness.ts';

/**
 * The database failing under a running server (docs/deployment.md, "When the database fails"):
 * every route answers 503 `unavailable` (507 `insufficient-storage` for a full disk) in the
 * envelope, the process lives on, and it serves again once the database is back, unrestarted.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const hi = (session = sid('outage')) => invokeBody([{ role: 'user', content: 'hi' }], template(), { session_id: session });

/** Every kind of route, as a client or the console would call it. */
function everyRoute(h: Harness): [string, () => Promise<Response>][] {
  const get = (route: string) => () => fetch(`${h.url}${route}${route.includes('?') ? '&' : '?'}project_id=${h.projectId}`, { headers: { authorization: `ApiKey ${h.apiKey}` } });
  const post = (route: string, body: unknown) => () =>
    fetch(`${h.url}${route}?project_id=${h.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${h.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return [
    ['invoke (JSON)', () => h.invoke(hi())],
    ['invoke (stream)', () => h.invoke(hi(), { headers: { accept: 'text/event-stream' } })],
    ['sessions', get('/api/sessions')],
    ['a session', get('/api/sessions/some-session')],
    ['interactions', post('/api/sessions/interactions/query', {})],
    ['an interaction', get('/api/sessions/interactions/some-interaction')],
    ['evaluations', get('/api/simple/evaluations/')],
    ['test sets', get('/api/simple/testsets/')],
    ['connections', get('/api/connections')],
    ['workflows', get('/api/workflows')],
    ['the console’s own key', get('/api/keys/self')],
  ];
}

/**
 * A TCP relay to PostgreSQL that the test can take away (every connection reset, new ones
 * refused: an immediate shutdown) and bring back on the same port, or freeze (connections open
 * and accepted, not a byte forwarded: a stopped server, a path that drops packets), without
 * touching the server other tests share.
 */
async function relayTo(target: URL) {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;
  let frozen = false;
  const open = () =>
    new Promise<void>((resolve) => {
      server = net.createServer((client) => {
        const upstream = net.connect(Number(target.port || 5432), target.hostname);
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('error', () => {});
          socket.on('close', () => sockets.delete(socket));
        }
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
        client.pipe(upstream).pipe(client);
        // After the pipes, which start the sockets flowing.
        if (frozen) for (const socket of [client, upstream]) socket.pause();
      });
      server.listen(port, '127.0.0.1', () => {
        port = (server!.address() as net.AddressInfo).port;
        resolve();
      });
    });
  await open();
  return {
    port: () => port,
    async stop() {
      const closed = new Promise((resolve) => server!.close(resolve));
      for (const socket of sockets) socket.resetAndDestroy();
      await closed;
    },
    start: open,
    freeze() {
      frozen = true;
      for (const socket of sockets) socket.pause();
    },
    /**
     * Connections opened from now on are served; the ones open meanwhile stay silent for good, as
     * after a failover to a standby or a path that came back by another route: only a pool that
     * gave them up serves again.
     */
    thaw() {
      frozen = false;
    },
  };
}

describe.skipIf(!TEST_POSTGRES_URL)('PostgreSQL going away under a running server', () => {
  async function serverBehindRelay(options: { logs?: boolean; env?: Record<string, string> } = {}) {
    const database: TestDatabase = await freshDatabase();
    cleanups.push(() => database.drop());
    const direct = new URL(database.url!);
    const relay = await relayTo(direct);
    cleanups.push(() => relay.stop().catch(() => {}));
    const relayed = new URL(direct);
    relayed.host = `127.0.0.1:${relay.port()}`;
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-outage-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const h = await startHarness({ ...options, dataDir, databaseUrl: relayed.toString(), script: { text: 'fine' } });
    cleanups.push(() => h.close());
    return { h, relay };
  }

  it('answers every route 503 unavailable while it is down, and serves again once it is back, without a restart', async () => {
    const { h, relay } = await serverBehindRelay();
    expect((await h.invoke(hi())).status).toBe(200);

    await relay.stop();
    for (const [name, call] of everyRoute(h)) {
      const body = await expectError(await call(), 503, 'unavailable', /^the database cannot be reached \(ECONNREFUSED\); send the request again once it is back$/);
      // Where the database lives is the operator's to know (the log line), not a client's.
      expect(body.status.message, name).not.toContain(String(relay.port()));
    }
    expect(await (await fetch(`${h.url}/ready`)).json()).toMatchObject({ status: 'not ready' });

    await relay.start();
    expect((await h.invoke(hi())).status).toBe(200);
    const sessions = await fetch(`${h.url}/api/sessions?project_id=${h.projectId}`, { headers: { authorization: `ApiKey ${h.apiKey}` } });
    expect(sessions.status).toBe(200);
  });

  it('logs an outage once per background loop, without a stack, and once more when the database answers again', async () => {
    const { h, relay } = await serverBehindRelay({ logs: true, env: { AGENTD_EVAL_POLL_MS: '20' } });
    const stops = [h.app.turns.sweepExpiredLeases(20), h.app.evaluations.watch()];
    cleanups.push(async () => stops.forEach((stop) => stop()));
    const lines = (text: string) => h.logs.filter((line) => line.includes(text));
    const loops = ['sweep expired session leases', 'look for evaluation runs'];

    await relay.stop();
    await until(async () => loops.every((what) => lines(`could not ${what}`).length > 0), (logged) => logged);
    // Many more attempts fail meanwhile, one every 20 ms.
    await new Promise((resolve) => setTimeout(resolve, 400));
    for (const what of loops) {
      const warnings = lines(`could not ${what}`);
      expect(warnings, what).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toMatchObject({ level: 40, error: { type: 'unavailable', message: expect.stringMatching(/^the database .*; agentd tries again until it answers, and logs once more then$/) } });
      expect(warnings[0], what).not.toContain('stack');
    }

    await relay.start();
    await until(async () => loops.every((what) => lines(`the database answers again: agentd can ${what}`).length === 1), (logged) => logged);
  });

  it('answers 503 unavailable within its bounds when it stops answering without refusing, and gives up the connections that got no answer', async () => {
    // One pooled connection: the one a statement timed out on is the one every later request would get.
    const { h, relay } = await serverBehindRelay({ env: { AGENTD_PG_POOL_SIZE: '1', AGENTD_PG_CONNECT_TIMEOUT_MS: '2000', AGENTD_PG_STATEMENT_TIMEOUT_MS: '2000' } });
    const sessions = () => fetch(`${h.url}/api/sessions?project_id=${h.projectId}`, { headers: { authorization: `ApiKey ${h.apiKey}` } });
    expect((await h.invoke(hi())).status).toBe(200);

    relay.freeze();
    // The first on the pooled connection, which never answers; the next on a new one, which never opens.
    for (const call of [sessions, () => h.invoke(hi())]) {
      const body = await expectError(await call(), 503, 'unavailable', /^the database did not answer in time \((a statement got no answer|no connection to it (came free|opened)) within its time limit\); send the request again once it is back$/);
      expect(body.status.message).not.toContain(String(relay.port()));
    }
    expect(await (await fetch(`${h.url}/ready`)).json()).toMatchObject({ status: 'not ready' });
    // The listening connection (key revocations, attached turns) is bounded the same way.
    const notifications = h.store.notifications!;
    const deaf = await notifications.listen('thawed', () => {}).then(() => undefined, (error: unknown) => error);
    expect(databaseUnavailable(deaf)?.message).toMatch(/^the database did not answer in time/);

    relay.thaw();
    // A request may still meet the end of a connection attempt the freeze caught (the server's own
    // background statements make them); it passes, and from then on every request is served.
    await until(async () => (await sessions()).status, (status) => status === 200);
    expect((await h.invoke(hi())).status).toBe(200);
    expect((await sessions()).status).toBe(200);
    // It was opened anew rather than left deaf on a connection that will never answer.
    const heard: string[] = [];
    await until(() => notifications.listen('thawed', (message) => heard.push(message)).catch(() => undefined), (stop) => stop !== undefined);
    await notifications.send('thawed', 'back');
    await until(async () => heard, (messages) => messages.length > 0);

    // A transaction cut off so is told as that, not by the rollback that could no longer be sent.
    const cut = await h.store.db
      .transaction()
      .execute(async (trx) => {
        await sql`select 1`.execute(trx);
        relay.freeze();
        await sql`select 2`.execute(trx);
      })
      .then(() => undefined, (error: unknown) => error);
    expect(databaseUnavailable(cut)?.message).toMatch(/^the database did not answer in time \(a statement got no answer within its time limit\)/);
    relay.thaw();
    await until(async () => (await sessions()).status, (status) => status === 200);
    // The connections the second freeze caught, the listening one among them, stay silent: taken
    // away, the close need not wait out its bound to cut them.
    await relay.stop();
  });

  it('lets `agentd serve` exit on SIGTERM while the database is frozen, its connections cut rather than left half closed', async () => {
    const database: TestDatabase = await freshDatabase();
    cleanups.push(() => database.drop());
    const relay = await relayTo(new URL(database.url!));
    cleanups.push(() => relay.stop().catch(() => {}));
    const relayed = new URL(database.url!);
    relayed.host = `127.0.0.1:${relay.port()}`;
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentd-outage-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const server = await startServe({ DATABASE_URL: relayed.toString(), AGENTD_DATA_DIR: dataDir, AGENTD_PG_STATEMENT_TIMEOUT_MS: '1000', AGENTD_PG_CONNECT_TIMEOUT_MS: '1000' });
    cleanups.push(async () => void server.child.kill('SIGKILL'));
    expect((await fetch(`${server.url}/ready`)).status).toBe(200);
    relay.freeze();
    server.child.kill('SIGTERM');
    // pg-pool's end resolves once its connections are asked to end; a connection waiting for a
    // goodbye the frozen server never sends kept the process alive, and this timed out.
    expect(await server.exited).toBe(0);
  });

  it('closes when the database is frozen, cutting the connections whose goodbyes it does not answer', async () => {
    const { h, relay } = await serverBehindRelay({ env: { AGENTD_PG_STATEMENT_TIMEOUT_MS: '1000' } });
    expect((await h.invoke(hi())).status).toBe(200);
    await h.store.notifications!.listen('frozen', () => {});
    relay.freeze();
    // Without the cut this never resolves, and the test times out.
    await h.store.close();
    await relay.stop();
  });

  it('survives a connection of its pool cut while lent out (pg_terminate_backend), and the pool recovers', async () => {
    const { h } = await serverBehindRelay();
    // In a transaction the connection is checked out between statements, where pg-pool does not
    // listen for its errors: the termination notice arriving then ended the process.
    const failed = await h.store.db
      .transaction()
      .execute(async (trx) => {
        const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
        const cut = await sql<{ cut: boolean }>`select pg_terminate_backend(${rows[0]!.pid}) as cut`.execute(h.store.db);
        expect(cut.rows[0]!.cut).toBe(true);
        // Its notice reaches the idle, lent connection before anything else is asked of it.
        await new Promise((resolve) => setTimeout(resolve, 200));
        await sql`select 1`.execute(trx);
      })
      .then(() => undefined, (error: unknown) => error);
    expect(databaseUnavailable(failed)?.type).toBe('unavailable');
    expect((await h.invoke(hi())).status).toBe(200);
  });
});

describe.skipIf(TEST_POSTGRES_URL)('SQLite unable to write', () => {
  async function server(script?: FakeScript) {
    const h = await startHarness({ script: script ?? { text: 'fine' } });
    cleanups.push(() => h.close());
    return h;
  }
  const integrity = async (h: Harness) => (await sql<{ integrity_check: string }>`pragma integrity_check`.execute(h.store.db)).rows[0]?.integrity_check;
  /** The database may grow no more, and its free pages are taken: as a full disk looks to SQLite. */
  async function fillDisk(h: Harness) {
    await sql`create table if not exists filler (x blob)`.execute(h.store.db);
    const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(h.store.db);
    await sql.raw(`pragma max_page_count = ${rows[0]!.page_count}`).execute(h.store.db);
    for (;;) {
      const full = await sql`insert into filler values (randomblob(3000))`.execute(h.store.db).then(() => false, () => true);
      if (full) return;
    }
  }
  async function makeRoom(h: Harness) {
    await sql`pragma max_page_count = 1073741823`.execute(h.store.db);
    await sql`delete from filler`.execute(h.store.db);
  }

  it('a read-only database: a turn is 503 unavailable, reads go on, and writes come back with it', async () => {
    const h = await server();
    await sql`pragma query_only = on`.execute(h.store.db);
    await expectError(await h.invoke(hi()), 503, 'unavailable', /read-only/);
    await expectError(await h.invoke(hi(), { headers: { accept: 'text/event-stream' } }), 503, 'unavailable', /read-only/);
    const sessions = await fetch(`${h.url}/api/sessions?project_id=${h.projectId}`, { headers: { authorization: `ApiKey ${h.apiKey}` } });
    expect(sessions.status).toBe(200);

    await sql`pragma query_only = off`.execute(h.store.db);
    expect((await h.invoke(hi())).status).toBe(200);
    expect(await integrity(h)).toBe('ok');
  });

  it('a full disk: a turn whose answer cannot be stored ends 507 insufficient-storage, the database stays whole, and turns run again once there is room', async () => {
    // An answer larger than a page: storing the turn's end needs pages the full database lacks.
    const h = await server({ text: 'fine '.repeat(3000) });
    await fillDisk(h);
    const session = sid('full');
    await expectError(await h.invoke(hi(session)), 507, 'insufficient-storage', /^the turn ran, but its end could not be stored: the database's disk is full \(database or disk is full\); agentd stores it once the database is back, to be read in the session's turns; sending the turn again would run it again$/);
    const res = await h.invoke(hi(sid('full')), { headers: { accept: 'text/event-stream' } });
    const { frames } = await readFrames(res);
    expect(frames.at(-2)).toMatchObject({ type: 'error', data: { code: 507, type: 'insufficient-storage' } });
    expect(frames.at(-1)).toMatchObject({ type: 'done', data: { stop_reason: 'error' } });
    expect(await integrity(h)).toBe('ok');

    await makeRoom(h);
    expect((await h.invoke(hi(session))).status).toBe(200);
    // The turn that ran while the disk was full is stored once there is room, not left running.
    const turns = await until(
      () => h.store.turns.listForSession(h.projectId, session, { limit: 5 }),
      (list) => list.length === 2 && list.every((t) => t.status === 'completed'),
    );
    for (const turn of turns) expect(JSON.stringify(turn.output)).toContain('fine '.repeat(3000));
  });

  it('a disk that fills during a streamed turn ends it with an error frame naming it, not internal; the session goes on after', async () => {
    let fill = true;
    const h = await server(async () => {
      // The model answers with a call that needs approval: pausing writes the paused turn.
      if (fill) await fillDisk(h);
      return { toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] };
    });
    const session = sid('fills');
    const body = invokeBody([{ role: 'user', content: 'write it '.repeat(3000) }], template({ tools: [builtin('write', 'ask')] }), { session_id: session });
    const res = await h.invoke(body, { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    const { frames } = await readFrames(res);
    expect(frames.find((f) => f.type === 'error')?.data).toMatchObject({ code: 507, type: 'insufficient-storage' });
    expect(frames.at(-1)?.type).toBe('done');

    fill = false;
    await makeRoom(h);
    const again = await readJson(await h.invoke(body));
    expect(again.data.outputs.stop_reason).toBe('paused');
    expect(await integrity(h)).toBe('ok');
  });

  it('an evaluation run waits while the database cannot be written and finishes once it can, not left running', async () => {
    let calls = 0;
    let h: Harness | undefined;
    // The third case's answer comes as the database turns read-only: its end, its outcome and the
    // next claim cannot be written.
    h = await startHarness({
      logs: true,
      env: { AGENTD_LEASE_TTL_MS: '600', AGENTD_EVAL_POLL_MS: '50' },
      script: async (req) => {
        if (++calls === 3) await sql`pragma query_only = on`.execute(h!.store.db);
        return { text: `done ${req.messages.at(-1)?.content}` };
      },
    });
    cleanups.push(() => h!.close());
    const auth = { projectId: h.projectId, key: h.apiKey };
    const agent = { ...template(), runner: { permissions: { default: 'allow' } } };
    const workflow = await apiCall(h.url, auth, 'POST', '/workflows', { slug: 'outage-target', data: { parameters: { agent } } });
    const texts = Array.from({ length: 5 }, (_, i) => `case ${i}`);
    const testset = await apiCall(h.url, auth, 'POST', '/simple/testsets/', { testset: { data: { testcases: texts.map((t) => ({ data: { messages: [{ role: 'user', content: t }] } })) } } });
    const { evaluation } = await apiCall(h.url, auth, 'POST', '/simple/evaluations/', {
      evaluation: { data: { testset_steps: [testset.testset.revision_id], application_steps: [workflow.revision.id], concurrency: { batch_size: 1 } } },
    });

    await until(async () => h!.logs.some((line) => line.includes('an evaluation run waits for the database')), (waiting) => waiting);
    await sql`pragma query_only = off`.execute(h.store.db);
    const read = () => apiCall(h!.url, auth, 'GET', `/simple/evaluations/${evaluation.id}`);
    const after = await until(read, (r) => !['pending', 'running'].includes(r.evaluation.data.status));
    expect(after.evaluation.data).toMatchObject({ status: 'success', progress: { total: 5, success: 5 } });
  });
});
