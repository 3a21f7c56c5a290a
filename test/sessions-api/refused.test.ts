import { createHash } from 'node:crypto';
import { existsSync, realpathSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { harnessStateFolder } from '../../src/sessions/folders.ts';
import { startMcpServer, type TestMcpServer } from '../support/mcp-server.ts';
import { builtin, expectError, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { createWorkflow } from '../configs/client.ts';
import { createTestset, runEnded, runResults, startRun } from '../evaluation/client.ts';
import { okJson, putFile, waitFor } from './client.ts';

/**
 * A request refused before its turn starts leaves nothing behind: no session folder, no files in
 * one, no record, for a session it would have made; and for a session that was there, its folder
 * and its history as they were. Each refusal below comes after the setup had something to write
 * (a skill, an attached file), so a setup that wrote before it was refused shows.
 */

let h: Harness;
let mcp: TestMcpServer;
let closedUrl: string;
beforeAll(async () => {
  h = await startHarness({
    logs: true,
    env: {
      AGENTD_MCP_TIMEOUT_MS: '1500',
      AGENTD_ALLOW_STDIO_MCP: '1',
      // No harness process ever starts here: every harness turn is refused a seat.
      AGENTD_HARNESS_MAX_PROCESSES: '0',
      AGENTD_HARNESSES: 'pi,codex',
      AGENTD_MAX_UPLOAD: '4096',
    },
  });
  mcp = await startMcpServer();
  // A port nothing listens on.
  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  closedUrl = `http://127.0.0.1:${(closed.address() as net.AddressInfo).port}/mcp`;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
});
afterAll(async () => {
  await mcp.close();
  await h.close();
});
beforeEach(() => h.model.reset());

const skill = (name: string) => ({ name, description: `The ${name} skill`, body: `Do ${name}.`, files: [{ path: 'templates/a.md', content: `# ${name}\n` }] });
const fileBlock = (name: string, text: string) => ({ type: 'file', url: `data:text/plain;base64,${Buffer.from(text).toString('base64')}`, filename: name });
const userWithFile = (name: string) => ({ role: 'user', content: [{ type: 'text', text: 'see the file' }, fileBlock(name, `the bytes of ${name}`)] });

const gone = () => ({ name: 'gone', connection: { type: 'http', url: closedUrl } });
const keyed = () => ({ name: 'keyed', connection: { type: 'http', url: mcp.url, headers: { authorization: 'Bearer {{secrets.MCP_TOKEN}}' } } });
const dying = { name: 'dying', connection: { type: 'stdio', command: process.execPath, args: ['-e', 'process.exit(3)'] } };

/** A template of agentd's own loop, or of a harness, with a skill to install. */
const agent = (skillName: string, extra: Record<string, unknown> = {}) => ({ ...template({ tools: [builtin('read')] }), skills: [skill(skillName)], ...extra });

interface Refusal {
  what: string;
  status: number;
  type: string;
  /** The request's body for `session`, with `skillName` for its skill and `fileName` for its file. */
  body: (session: string, skillName: string, fileName: string) => unknown;
}

const invoke = (session: string, messages: unknown[], parameters: unknown) => ({ session_id: session, data: { inputs: { messages }, parameters: { agent: parameters } } });

/** Every way a request is refused before its turn starts, each with something its setup could write. */
const REFUSALS: Refusal[] = [
  { what: 'an MCP server that cannot be reached', status: 424, type: 'mcp-unavailable', body: (s, k, f) => invoke(s, [userWithFile(f)], agent(k, { mcps: [gone()] })) },
  { what: 'an MCP server that names a secret the request lacks', status: 400, type: 'invalid-request', body: (s, k, f) => invoke(s, [userWithFile(f)], agent(k, { mcps: [keyed()] })) },
  { what: 'a stdio MCP server that exits at once', status: 424, type: 'mcp-unavailable', body: (s, k, f) => invoke(s, [userWithFile(f)], agent(k, { mcps: [dying] })) },
  { what: 'a harness with no seat free', status: 503, type: 'unavailable', body: (s, k, f) => invoke(s, [userWithFile(f)], agent(k, { harness: { kind: 'pi' }, tools: [] })) },
  {
    what: "a harness's MCP server that names a secret the request lacks",
    status: 400,
    type: 'invalid-request',
    body: (s, k, f) => invoke(s, [userWithFile(f)], agent(k, { harness: { kind: 'codex' }, tools: [], mcps: [keyed()] })),
  },
  { what: 'a harness this server does not run', status: 424, type: 'harness-unavailable', body: (s, k, f) => invoke(s, [userWithFile(f)], agent(k, { harness: { kind: 'claude' }, tools: [], llm: { provider: 'anthropic', model: 'fake-model' } })) },
  { what: 'a provider whose key the server lacks', status: 424, type: 'upstream-auth', body: (s, k, f) => invoke(s, [userWithFile(f)], agent(k, { llm: { provider: 'anthropic', model: 'fake-model' } })) },
  { what: 'a template that is not valid', status: 400, type: 'unknown-template-key', body: (s, k, f) => invoke(s, [userWithFile(f)], agent(k, { surprise: true })) },
  {
    what: 'an attached file too large',
    status: 413,
    type: 'payload-too-large',
    body: (s, k) => invoke(s, [{ role: 'user', content: [{ type: 'text', text: 'big' }, fileBlock('big.txt', 'x'.repeat(5000))] }], agent(k)),
  },
];

/** Everything under a folder: each file's text, each folder, each link's target; undefined when there is no folder. */
async function snapshot(folder: string): Promise<Record<string, string> | undefined> {
  if (!existsSync(folder)) return undefined;
  const entries: Record<string, string> = {};
  for (const entry of await readdir(folder, { recursive: true, withFileTypes: true })) {
    const at = path.join(entry.parentPath, entry.name);
    entries[path.relative(folder, at)] = entry.isSymbolicLink() ? `-> ${await readlink(at)}` : entry.isDirectory() ? '/' : await readFile(at, 'utf8');
  }
  return entries;
}

/** Every record the store keeps of a session. */
async function records(session: string) {
  const { store, projectId } = h;
  const turns = (await store.turns.listForSession(projectId, session, { limit: 100 })).map((turn) => ({ ...turn }));
  return {
    session: await store.sessions.get(projectId, session),
    turns,
    interactions: (await store.interactions.query(projectId, { session_id: session }, { limit: 100 })).items,
    pausedStates: await Promise.all(turns.map((turn) => store.pausedStates.get(projectId, turn.id))),
    lease: await store.leases.get(projectId, session),
  };
}

const NO_RECORDS = { session: undefined, turns: [], interactions: [], pausedStates: [], lease: undefined };

/** The folder and records of a session, all that a request could have left. */
async function traces(session: string) {
  return {
    folder: await snapshot(h.sessionDir(session)),
    harnessState: existsSync(harnessStateFolder(h.dataDir, h.projectId, session)),
    records: await records(session),
  };
}

/** A session with history and files: a turn that wrote a file, a skill and an attachment it installed, an upload. */
async function establishedSession(): Promise<string> {
  const session = sid('kept');
  h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'work/result.txt', content: 'the agent wrote this' } }] }, { text: 'done' }]);
  const parameters = { ...template({ tools: [builtin('write')] }), skills: [skill('earlier')] };
  expect((await h.invoke(invoke(session, [userWithFile('earlier.txt')], parameters))).status).toBe(200);
  await okJson(await putFile(h, session, 'uploads/data.csv', 'a,b\n1,2\n'), 201);
  return session;
}

describe('a refused request', () => {
  it.each(REFUSALS)('leaves nothing of a session it would have made: $what', async ({ body, status, type }) => {
    const session = sid('new');
    await expectError(await h.invoke(body(session, 'notes', 'hi.txt')), status, type);
    expect(await traces(session)).toEqual({ folder: undefined, harnessState: false, records: NO_RECORDS });
    expect(h.model.requests).toHaveLength(0);
  });

  it.each(REFUSALS)("leaves an existing session's folder and history as they were: $what", async ({ body, status, type }) => {
    const session = await establishedSession();
    const before = await traces(session);
    expect(before.folder).toMatchObject({ 'work/result.txt': 'the agent wrote this', 'uploads/data.csv': 'a,b\n1,2\n', 'attachments/earlier.txt': 'the bytes of earlier.txt' });
    expect(before.records.turns).toHaveLength(1);
    h.model.reset();
    await expectError(await h.invoke(body(session, 'notes', 'new.txt')), status, type);
    expect(await traces(session)).toEqual(before);
    expect(h.model.requests).toHaveLength(0);
  });

  it('of a session whose turns never made its folder leaves no folder, and the turns as they were', async () => {
    const session = sid('folderless');
    h.model.script({ text: 'hello' });
    expect((await h.invoke(invoke(session, [{ role: 'user', content: 'hi' }], template()))).status).toBe(200);
    const before = await traces(session);
    expect(before.folder).toBeUndefined();
    for (const { body, status, type } of REFUSALS) await expectError(await h.invoke(body(session, 'notes', 'hi.txt')), status, type);
    expect(await traces(session)).toEqual(before);
  });

  it('refused by what is in the folder (a link out, every name taken) removes nothing that was there', async () => {
    const session = sid('crowded');
    const folder = h.sessionDir(session);
    await mkdir(path.join(folder, 'attachments'), { recursive: true });
    const outside = await mkdtemp(path.join(os.tmpdir(), 'agentd-outside-'));
    await symlink(outside, path.join(folder, '.agents'));
    await writeFile(path.join(folder, 'attachments', 'kept.txt'), 'kept');
    const before = await traces(session);
    await expectError(await h.invoke(invoke(session, [userWithFile('a.txt')], agent('notes'))), 400, 'invalid-request', /outside the session folder/);
    expect(await traces(session)).toEqual(before);
    expect(await readdir(outside)).toEqual([]);
    await rm(outside, { recursive: true });

    // Every name the file could take holds another file: a 409, and the skill the turn would install is not left there.
    const taken = sid('taken');
    const dir = path.join(h.sessionDir(taken), 'attachments');
    await mkdir(dir, { recursive: true });
    const hash = createHash('sha256').update('the bytes of a.txt').digest('hex').slice(0, 8);
    const names = ['a.txt', `a-${hash}.txt`, ...Array.from({ length: 9 }, (_, i) => `a-${hash}-${i + 2}.txt`)];
    for (const name of names) await writeFile(path.join(dir, name), 'not it');
    const crowded = await traces(taken);
    await expectError(await h.invoke(invoke(taken, [userWithFile('a.txt')], { ...template(), skills: [skill('notes')] })), 409, 'conflict');
    expect(await traces(taken)).toEqual(crowded);
    expect(h.model.requests).toHaveLength(0);
  });

  it('keeps what something else put into a folder it made, and takes back only its own files', async () => {
    const session = sid('shared');
    // A stdio MCP server runs in the folder made for it, writes there, and exits before it answers.
    const writing = { name: 'writing', connection: { type: 'stdio', command: process.execPath, args: ['-e', "require('fs').writeFileSync('server-notes.txt', 'mine'); process.exit(3)"] } };
    await expectError(await h.invoke(invoke(session, [userWithFile('a.txt')], agent('notes', { mcps: [writing] }))), 424, 'mcp-unavailable');
    expect((await traces(session)).folder).toEqual({ 'server-notes.txt': 'mine' });
    expect((await traces(session)).records).toEqual(NO_RECORDS);
  });

  it('for a session busy with a turn adds nothing to it', async () => {
    const session = await establishedSession();
    const before = await traces(session);
    h.model.reset();
    h.model.script({ text: 'slow', latencyMs: 1_000 });
    const live = h.invoke(invoke(session, [{ role: 'user', content: 'take your time' }], template()));
    await waitFor(async () => h.model.requests.length > 0, 'the live turn to reach the model');
    await expectError(await h.invoke(invoke(session, [userWithFile('new.txt')], agent('notes'))), 409, 'session-busy');
    expect((await live).status).toBe(200);
    const after = await traces(session);
    expect(after.folder).toEqual(before.folder);
    expect(after.records.turns).toHaveLength(2);
    expect(after.records.turns.slice(1)).toEqual(before.records.turns);
  });

  it("answering a pause: a refused continuation, or a refused second answer, leaves the session's folder and history as they were", async () => {
    const session = sid('paused');
    const server = await startMcpServer();
    const parameters = { ...template({ tools: [builtin('write')], mode: 'ask' }), skills: [skill('notes')], mcps: [{ name: 'calc', connection: { type: 'http', url: server.url } }] };
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'a' } }] }, { text: 'written' }]);
    const messages = [{ role: 'user', content: 'write it' }];
    const paused = await readJson(await h.invoke(invoke(session, messages, parameters)));
    expect(paused.data.outputs.stop_reason).toBe('paused');
    await server.close();
    const before = await traces(session);

    // The continuation an answer through the API starts cannot reach the MCP server: it is refused, in
    // the background, and told as a failed turn (tried again meanwhile: failed-continuation.test.ts).
    await okJson(await h.respond(paused.data.outputs.pending_interaction.id, { approved: true }));
    await waitFor(async () => (await traces(session)).records.turns.length > before.records.turns.length, 'the continuation to be refused');
    const after = await traces(session);
    expect(after.folder).toEqual(before.folder);
    expect(after.records.turns.slice(1)).toEqual(before.records.turns);
    expect(after.records.turns[0]).toMatchObject({ status: 'failed', error: { type: 'mcp-unavailable' } });
    expect(after.records.pausedStates).toEqual([undefined, ...before.records.pausedStates]);
    expect(after.records.interactions.map((i) => i.status)).toEqual(['responded']);

    // In band, another decision than the one given: a 409, and nothing changes.
    const denied = paused.data.outputs.messages.map((m: { approval?: object }) => (m.approval ? { ...m, approval: { ...m.approval, approved: false } } : m));
    await expectError(await h.invoke(invoke(session, [...messages, ...denied], parameters)), 409, 'interaction-not-pending');
    expect(await traces(session)).toEqual(after);
    expect(h.model.requests).toHaveLength(1);
  });

  it('an evaluation case refused before its turn starts leaves no session folder behind, whatever its attempts', async () => {
    const slug = `refused-cases-${sid('w')}`;
    const appRevision = (await createWorkflow(h, slug, { agent: agent('notes', { mcps: [gone()] }) })).revision.id;
    const rows = [{ data: { messages: [userWithFile('case.txt')] } }];
    const testset = (await createTestset(h, { name: slug, data: { testcases: rows } })).revision_id;
    const run = await runEnded(h, (await startRun(h, testset, appRevision, { concurrency: { batch_size: 1, max_retries: 1, retry_delay: 0 } })).id);
    expect(run.data.progress).toMatchObject({ total: 1, failure: 1 });
    const [result] = await runResults(h, run.id);
    expect(result.attempts).toHaveLength(2);
    expect(result.attempts[0]).toMatchObject({ status: 'failure', error: { code: 424, type: 'mcp-unavailable' } });
    const folders = await readdir(path.join(h.dataDir, 'sessions', h.projectId)).catch(() => []);
    expect(folders.filter((name) => name.startsWith('eval:'))).toEqual([]);
    expect(h.model.requests).toHaveLength(0);
  });
});

describe('a turn that starts', () => {
  it('makes the folder for a stdio MCP server, which runs in it, and none for an HTTP one', async () => {
    const session = sid('stdio');
    const local = { name: 'local', connection: { type: 'stdio', command: process.execPath, args: [path.resolve('test/support/mcp-stdio-server.ts')] } };
    h.model.script([{ toolCalls: [{ name: 'local__where', input: { env: 'HOME' } }] }, { text: 'there' }]);
    const body = await readJson(await h.invoke(invoke(session, [{ role: 'user', content: 'where are you?' }], { ...template({ mode: 'allow' }), mcps: [local] })));
    expect(JSON.parse(body.data.outputs.messages[1].content).cwd).toBe(realpathSync(h.sessionDir(session)));

    const http = sid('http');
    h.model.script({ text: 'no tools needed' });
    expect((await h.invoke(invoke(http, [{ role: 'user', content: 'hi' }], { ...template(), mcps: [{ name: 'calc', connection: { type: 'http', url: mcp.url } }] }))).status).toBe(200);
    expect(existsSync(h.sessionDir(http))).toBe(false);
  });
});
