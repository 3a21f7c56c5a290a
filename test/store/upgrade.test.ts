import { cp, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.ts';
import { parseSecretKey } from '../../src/store/secret-box.ts';
import { startFakeModel, type FakeModelServer } from '../../src/testing/fake-model.ts';
import { startServe } from '../support/child-server.ts';
import { restoredDatabase, TEST_POSTGRES_URL, type TestDatabase } from '../support/database.ts';
import { tempDir } from './helpers.ts';

/**
 * A data folder an old agentd (1d56837, migrations 0001–0007) wrote through its API, opened by
 * this one: everything it stored must still read and work. On SQLite it is the fixture's
 * agentd.db; on PostgreSQL the same data the old version wrote there, restored from a dump into a
 * schema of the test's own. How both were made, and what fixture.json and postgres.json hold, is
 * in test/fixtures/upgrade-from-0007/README.md.
 */
const FIXTURE = path.resolve(import.meta.dirname, '../fixtures/upgrade-from-0007');
const fixture = (await import(path.join(FIXTURE, TEST_POSTGRES_URL ? 'postgres.json' : 'fixture.json'), { with: { type: 'json' } })).default;
/** The schema postgres.sql was dumped from (make-postgres.ts). */
const DUMP_SCHEMA = 'agentd_upgrade_from_0007';
const auth = (key: string) => ({ projectId: fixture.project_id as string, key });
const admin = auth(fixture.keys.admin);

describe('a data folder written by an older agentd', () => {
  let model: FakeModelServer;
  let dataDir: string;
  let database: TestDatabase;
  let server: Awaited<ReturnType<typeof startServe>>;

  async function call(method: string, route: string, body?: unknown, who = admin): Promise<{ status: number; body: any; text: string }> {
    const res = await fetch(`${server.url}${route}${route.includes('?') ? '&' : '?'}project_id=${who.projectId}`, {
      method,
      headers: { authorization: `ApiKey ${who.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed, text };
  }
  const file = (session: string, at: string) => call('GET', `/api/sessions/${session}/files?path=${at}`);
  async function until<T>(read: () => Promise<T | undefined>): Promise<T> {
    for (;;) {
      const value = await read();
      if (value !== undefined) return value;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  beforeAll(async () => {
    model = await startFakeModel();
    dataDir = path.join(await tempDir('upgrade'), 'data');
    if (TEST_POSTGRES_URL) {
      await cp(path.join(FIXTURE, 'sessions'), path.join(dataDir, 'sessions'), { recursive: true });
      database = await restoredDatabase(await readFile(path.join(FIXTURE, 'postgres.sql'), 'utf8'), DUMP_SCHEMA);
    } else {
      await cp(FIXTURE, dataDir, { recursive: true });
      database = { url: undefined, drop: async () => {} };
    }
    server = await startServe({
      AGENTD_DATA_DIR: dataDir,
      DATABASE_URL: database.url,
      AGENTD_SECRET_KEY: fixture.secret_key,
      OPENAI_API_KEY: 'sk-server',
      OPENAI_BASE_URL: model.url,
    });
  });
  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    await model?.close();
    await database?.drop();
  });

  it('keeps its projects and API keys: each still signs in, a revoked one stays revoked', async () => {
    for (const key of [fixture.keys.admin, fixture.keys.first_start, fixture.keys.viewer]) expect((await call('GET', '/api/keys/self', undefined, auth(key))).status).toBe(200);
    expect((await call('GET', '/api/keys/self', undefined, auth(fixture.keys.revoked))).status).toBe(401);
    const other = await call('GET', '/api/keys/self', undefined, { projectId: fixture.other_project.project_id, key: fixture.other_project.key });
    expect(other.body.project.name).toBe('other');
    const keys = (await call('GET', '/api/keys')).body.keys;
    expect(keys.map((k: any) => ({ id: k.id, role: k.role, revoked: Boolean(k.revoked_at) }))).toEqual(fixture.key_ids);
  });

  it('lists and inspects its sessions, turns and files', async () => {
    const ids = (await call('GET', '/api/sessions?limit=50')).body.sessions.map((s: any) => s.id);
    expect(ids).toEqual(expect.arrayContaining(['s-conn', 's-files', 's-chat', 's-inband', 's-oob', 's-client']));
    const chat = (await call('GET', '/api/sessions/s-chat')).body;
    expect(chat.turns.map((t: any) => [t.status, t.outputs.messages.at(-1).content])).toEqual([
      ['completed', 'You said: hello two'],
      ['completed', 'You said: hello one'],
    ]);
    expect((await file('s-files', 'in/data.csv')).text).toBe('a,b\n1,2\n');
    expect((await file('s-files', 'out/w.txt')).text).toBe('written by old');
  });

  it('keeps its workflows, revisions, environments and test sets, and runs the deployed revision', async () => {
    expect((await call('GET', '/api/workflows/wf/revisions')).body.count).toBe(2);
    const env = (await call('GET', '/api/environments/prod')).body;
    expect(JSON.stringify(env)).toContain(fixture.workflow_revision_deployed);
    const run = await call('POST', '/services/agent/v0/invoke', { references: { application: { slug: 'wf' }, environment: { slug: 'prod' } }, data: { inputs: { messages: [{ role: 'user', content: 'by env' }] } } });
    expect(run.status).toBe(200);
    expect(model.requests.at(-1)!.messages[0]!.content).toContain('v2');
    expect((await call('POST', '/api/workflows/wf/revisions', { data: { parameters: {} } })).body.version).toBe(3);
    expect((await call('GET', `/api/simple/testsets/${fixture.testset_revision}`)).text).toContain('You said: one');
  });

  it('reads a finished evaluation run as it was, and finishes the one its stop cut off', async () => {
    const finished = (await call('GET', `/api/simple/evaluations/${fixture.finished_run.id}`)).body;
    expect(finished.evaluation).toEqual(fixture.finished_run);
    const results = (await call('POST', '/api/evaluations/results/query', { result: { run_id: fixture.finished_run.id }, windowing: { limit: 50 } })).body.results;
    expect(results).toMatchObject(fixture.finished_results);
    const ended = await until(async () => {
      const data = (await call('GET', `/api/simple/evaluations/${fixture.running_run}`)).body.data;
      return data.status === 'running' ? undefined : data;
    });
    expect(ended).toMatchObject({ status: 'success', progress: { total: 3, success: 3, running: 0, pending: 0 } });
  });

  it('goes on with turns paused before the upgrade: answered in band, through /respond, and a client tool', async () => {
    const pending = (await call('POST', '/api/sessions/interactions/query', { status: 'pending' })).body.interactions.map((i: any) => i.id);
    expect(pending.sort()).toEqual(fixture.pending_interactions);

    const paused = fixture.paused_in_band;
    const gated = paused.outputs.messages.find((m: any) => m.approval);
    const inBand = await call('POST', '/services/agent/v0/invoke', {
      session_id: 's-inband',
      data: {
        inputs: { messages: [...paused.messages, { ...gated, approval: { id: gated.approval.id, approved: true } }] },
        parameters: { agent: { tools: [{ type: 'builtin', name: 'write', permission: 'ask' }, { type: 'builtin', name: 'read' }], runner: { kind: 'local', permissions: { default: 'allow_reads' } } } },
      },
    });
    expect(inBand.body.data.outputs.stop_reason).toBe('end_turn');
    expect((await file('s-inband', 's-inband.txt')).text).toBe('approved s-inband');

    expect((await call('POST', `/api/sessions/interactions/${fixture.paused_out_of_band}/respond`, { answer: { approved: true } })).status).toBe(200);
    await until(async () => ((await call('GET', `/api/sessions/interactions/${fixture.paused_out_of_band}`)).body.status === 'resolved' ? true : undefined));
    expect((await file('s-oob', 's-oob.txt')).text).toBe('approved s-oob');

    expect((await call('POST', `/api/sessions/interactions/${fixture.paused_client_tool}/respond`, { answer: { output: 'blue' } })).status).toBe(200);
    const continued = await until(async () => {
      const [latest] = (await call('GET', '/api/sessions/s-client')).body.turns;
      return latest.status === 'paused' || latest.status === 'running' ? undefined : latest;
    });
    expect(continued.status).toBe('completed');
    expect(JSON.stringify(continued.outputs)).toContain('blue');
  });

  it('opens its connections with the same secret key', async () => {
    // Through the store: the connection's base_url is the old run's model server, gone now.
    const store = await openStore({ dataDir: path.join(dataDir, 'check'), databaseUrl: database.url ?? `sqlite:${path.join(dataDir, 'agentd.db')}`, secretKey: parseSecretKey(fixture.secret_key, 'the fixture') });
    try {
      const connection = await store.connections.open(fixture.project_id, 'team');
      expect(connection?.api_key).toBe(fixture.connection_key);
    } finally {
      await store.close();
    }
  });
});
