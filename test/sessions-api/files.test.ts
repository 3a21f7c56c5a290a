import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FileListing, FileUploaded } from '../../src/contract/sessions.ts';
import { builtin, expectError, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { getFiles, okJson, otherProject, putFile, rawGet, viewerOf, type Caller } from './client.ts';

/** GET/PUT /api/sessions/{session_id}/files: the session folder, confined like the agent's tools. */

const MAX_UPLOAD = 64 * 1024;

let h: Harness;
let stranger: Caller;
let outside: string;
beforeAll(async () => {
  h = await startHarness({ env: { AGENTD_MAX_UPLOAD: String(MAX_UPLOAD) } });
  stranger = await otherProject(h);
  outside = await mkdtemp(path.join(os.tmpdir(), 'agentd-outside-'));
});
afterAll(async () => {
  await h.close();
  await rm(outside, { recursive: true, force: true });
});
beforeEach(() => h.model.reset());

const agent = template({ tools: [builtin('write'), builtin('read')], mode: 'allow' });
const write = (p: string, content: string) => ({ toolCalls: [{ name: 'write', input: { path: p, content } }] });
const TEXT = 'line one\nünïcødé ✓ — tabs\tand\r\nCRLF\n\n';

/** A session whose agent wrote `notes/a.txt` (TEXT) and `top.md` with the write tool. */
async function agentSession(): Promise<string> {
  const session = sid('files');
  h.model.script([write('notes/a.txt', TEXT), write('top.md', '# top'), { text: 'done' }]);
  const reply = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write' }], agent, { session_id: session })));
  expect(reply.data.outputs.stop_reason).toBe('end_turn');
  return session;
}

async function listing(res: Response): Promise<FileListing> {
  const body = await okJson(res);
  expect(FileListing.parse(body)).toEqual(body);
  return body;
}

async function bytesOf(res: Response): Promise<Buffer> {
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/octet-stream');
  return Buffer.from(await res.arrayBuffer());
}

describe('listing and downloading', () => {
  it('lists the folder root and a subfolder', async () => {
    const session = await agentSession();
    expect(await listing(await getFiles(h, session))).toEqual({
      path: '.',
      entries: [
        { name: 'notes', type: 'directory' },
        { name: 'top.md', type: 'file', size: 5 },
      ],
    });
    expect(await listing(await getFiles(h, session, '.'))).toEqual(await listing(await getFiles(h, session, '')));
    expect(await listing(await getFiles(h, session, 'notes'))).toEqual({
      path: 'notes',
      entries: [{ name: 'a.txt', type: 'file', size: Buffer.byteLength(TEXT) }],
    });
    expect((await listing(await getFiles(h, session, './notes/../notes/'))).path).toBe('notes');
  });

  it('downloads a file the agent wrote, byte for byte, as an attachment', async () => {
    const session = await agentSession();
    const res = await getFiles(h, session, 'notes/a.txt');
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="a.txt"; filename*=UTF-8''a.txt`);
    expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(TEXT)));
    const bytes = await bytesOf(res);
    expect(bytes.equals(Buffer.from(TEXT, 'utf8'))).toBe(true);
    expect(bytes.equals(await readFile(path.join(h.sessionDir(session), 'notes/a.txt')))).toBe(true);
  });

  it('is a 404 for a missing path, a session without a folder, and another project’s session', async () => {
    const session = await agentSession();
    await expectError(await getFiles(h, session, 'notes/missing.txt'), 404, 'not-found', /notes\/missing\.txt/);
    await expectError(await getFiles(h, session, 'nowhere/deeper'), 404, 'not-found');
    await expectError(await getFiles(h, sid('never')), 404, 'not-found', /does not exist in this project/);
    const foreign = await expectError(await getFiles(h, session, 'top.md', { as: stranger }), 404, 'not-found');
    expect(foreign.status.message).toBe(`session "${session}" does not exist in this project`);
    await expectError(await getFiles(h, session, '.', { as: stranger }), 404, 'not-found');
  });

  it('makes the folder only when a tool first runs; a session without one lists as empty', async () => {
    const session = sid('no-tools-yet');
    h.model.script({ text: 'hello' });
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], agent, { session_id: session })));
    expect(existsSync(h.sessionDir(session))).toBe(false);
    expect(FileListing.parse(await okJson(await getFiles(h, session)))).toEqual({ path: '.', entries: [] });
    await expectError(await getFiles(h, session, 'a.txt'), 404, 'not-found', /a\.txt/);

    const other = sid('read-first');
    h.model.script([{ toolCalls: [{ name: 'read', input: { path: 'nothing.txt' } }] }, write('w.txt', 'w'), { text: 'done' }]);
    const reply = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: other })));
    expect(reply.data.outputs.messages).toContainEqual(expect.objectContaining({ role: 'tool', content: 'path "nothing.txt" does not exist', is_error: true }));
    expect(await readFile(`${h.sessionDir(other)}/w.txt`, 'utf8')).toBe('w');
  });

  it('keeps a session id made of dots inside the project’s sessions', async () => {
    // Unescaped, the session ".." would be the folder holding every session of the project.
    const session = await agentSession();
    const res = await rawGet(h, `/api/sessions/%2E%2E/files?project_id=${h.projectId}&path=${session}`, { key: h.apiKey, projectId: h.projectId });
    expect(res.status).toBe(404);
    expect(res.body).not.toContain('top.md');
  });
});

describe('uploading', () => {
  it('writes the bytes, creating parent folders, and answers 201 with the path and size', async () => {
    const session = await agentSession();
    const bytes = randomBytes(MAX_UPLOAD);
    const res = await putFile(h, session, 'in/deep/er/blob.bin', bytes);
    const body = await okJson(res, 201);
    expect(FileUploaded.parse(body)).toEqual(body);
    expect(body).toEqual({ path: 'in/deep/er/blob.bin', size: MAX_UPLOAD });
    expect((await readFile(path.join(h.sessionDir(session), 'in/deep/er/blob.bin'))).equals(bytes)).toBe(true);
    // And back out, unchanged.
    expect((await bytesOf(await getFiles(h, session, 'in/deep/er/blob.bin'))).equals(bytes)).toBe(true);
    // Overwriting replaces the whole file.
    expect(await okJson(await putFile(h, session, 'in/deep/er/blob.bin', 'short'), 201)).toEqual({ path: 'in/deep/er/blob.bin', size: 5 });
    expect(await readFile(path.join(h.sessionDir(session), 'in/deep/er/blob.bin'), 'utf8')).toBe('short');
  });

  it('names a file with any characters in the download header', async () => {
    const session = await agentSession();
    await okJson(await putFile(h, session, 'dir/ünï "q" 100%.txt', 'x'), 201);
    const res = await getFiles(h, session, 'dir/ünï "q" 100%.txt');
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="_n_ _q_ 100_.txt"; filename*=UTF-8''%C3%BCn%C3%AF%20%22q%22%20100%25.txt`);
    expect((await bytesOf(res)).toString()).toBe('x');
  });

  it('puts a file the agent can read in its next turn', async () => {
    const session = await agentSession();
    await okJson(await putFile(h, session, 'input/data.txt', 'the uploaded facts\nsecond line\n'), 201);
    h.model.reset();
    h.model.script([{ toolCalls: [{ id: 'call_read', name: 'read', input: { path: 'input/data.txt' } }] }, { text: 'read it' }]);
    const reply = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'read input/data.txt' }], agent, { session_id: session })));
    expect(reply.data.outputs.stop_reason).toBe('end_turn');
    const result = h.model.requests[1]!.messages.find((m) => m.role === 'tool' && m.tool_call_id === 'call_read');
    expect(result?.content).toContain('the uploaded facts\nsecond line');
    expect(result?.is_error).not.toBe(true);
  });

  it('creates the session and its folder when they do not exist yet', async () => {
    const session = sid('fresh');
    expect(await okJson(await putFile(h, session, 'first.txt', 'hello'), 201)).toEqual({ path: 'first.txt', size: 5 });
    expect(await h.store.sessions.get(h.projectId, session)).toMatchObject({ id: session, project_id: h.projectId });
    expect(await readFile(path.join(h.sessionDir(session), 'first.txt'), 'utf8')).toBe('hello');
    expect(await listing(await getFiles(h, session))).toEqual({ path: '.', entries: [{ name: 'first.txt', type: 'file', size: 5 }] });
    // An empty file is a file too.
    expect(await okJson(await putFile(h, session, 'empty', new Uint8Array()), 201)).toEqual({ path: 'empty', size: 0 });
    const empty = await getFiles(h, session, 'empty');
    expect(empty.headers.get('content-length')).toBe('0');
    expect((await bytesOf(empty)).length).toBe(0);
  });

  it('refuses a body over AGENTD_MAX_UPLOAD with 413 and writes nothing', async () => {
    const session = await agentSession();
    await expectError(await putFile(h, session, 'big.bin', randomBytes(MAX_UPLOAD + 1)), 413, 'payload-too-large', /AGENTD_MAX_UPLOAD/);
    expect(existsSync(path.join(h.sessionDir(session), 'big.bin'))).toBe(false);
  });

  it('takes only raw bytes, and needs a path that names a file', async () => {
    const session = await agentSession();
    await expectError(await putFile(h, session, 'x.json', '{"a":1}', { headers: { 'content-type': 'application/json' } }), 415, 'unsupported-media-type', /application\/octet-stream/);
    await expectError(await putFile(h, session, 'x.txt', 'a=1', { headers: { 'content-type': 'text/plain' } }), 415, 'unsupported-media-type');
    await expectError(await putFile(h, session, 'x.gz.txt', gzipSync('text'), { headers: { 'content-encoding': 'gzip' } }), 415, 'unsupported-media-type', /Content-Encoding/);
    await expectError(await putFile(h, session, '', 'x'), 400, 'invalid-request', /path is required/);
    await expectError(await putFile(h, session, 'notes', 'x'), 400, 'invalid-request', /directory/);
    await expectError(await putFile(h, session, 'top.md/inner.txt', 'x'), 400, 'invalid-request', /through a file/);
    expect(await readdir(h.sessionDir(session))).toEqual(['notes', 'top.md']);
  });

  it('lands in the caller’s project only', async () => {
    const session = await agentSession();
    expect(await okJson(await putFile(h, session, 'top.md', 'theirs', { as: stranger }), 201)).toEqual({ path: 'top.md', size: 6 });
    expect(await readFile(path.join(h.sessionDir(session), 'top.md'), 'utf8')).toBe('# top');
    expect(await readFile(path.join(h.dataDir, 'sessions', stranger.projectId, session, 'top.md'), 'utf8')).toBe('theirs');
  });

  it('needs an editor key: a viewer may list and download but not upload', async () => {
    const session = await agentSession();
    const viewer = await viewerOf(h);
    expect((await listing(await getFiles(h, session, '.', { as: viewer }))).entries).toHaveLength(2);
    expect((await bytesOf(await getFiles(h, session, 'top.md', { as: viewer }))).toString()).toBe('# top');
    await expectError(await putFile(h, session, 'viewer.txt', 'x', { as: viewer }), 403, 'forbidden', /editor/);
    // Refused before the body is read, so even an oversized body gets the 403.
    await expectError(await putFile(h, session, 'viewer.txt', randomBytes(MAX_UPLOAD * 2), { as: viewer }), 403, 'forbidden');
    expect(existsSync(path.join(h.sessionDir(session), 'viewer.txt'))).toBe(false);
  });
});

describe('confinement', () => {
  it('refuses paths that leave the folder, for reading and writing, and writes nothing outside', async () => {
    const session = await agentSession();
    const dir = h.sessionDir(session);
    const secret = path.join(outside, 'secret.txt');
    await writeFile(secret, 'outside the folder');
    const projectDir = path.join(h.dataDir, 'sessions', h.projectId);
    const before = (await readdir(projectDir)).sort();

    const escapes = ['../x', `../${session}-sibling/x.txt`, 'notes/../../x', secret, path.join(outside, 'new.txt'), '/etc/passwd'];
    for (const p of escapes) {
      await expectError(await getFiles(h, session, p), 400, 'invalid-request', /outside the session folder/);
      await expectError(await putFile(h, session, p, 'pwned'), 400, 'invalid-request', /outside the session folder/);
    }
    expect(await readFile(secret, 'utf8')).toBe('outside the folder');
    expect(existsSync(path.join(outside, 'new.txt'))).toBe(false);
    expect(existsSync(path.join(projectDir, 'x'))).toBe(false);
    expect((await readdir(projectDir)).sort()).toEqual(before);
    expect(existsSync(path.join(h.dataDir, 'sessions', 'x'))).toBe(false);
    expect(await readdir(dir)).toEqual(['notes', 'top.md']);

    // A refused upload into a session that did not exist leaves no session behind.
    const fresh = sid('refused');
    await expectError(await putFile(h, fresh, '../x', 'pwned'), 400, 'invalid-request');
    expect(existsSync(h.sessionDir(fresh))).toBe(false);
    expect(await h.store.sessions.get(h.projectId, fresh)).toBeUndefined();
  });

  it('refuses a name or path too long for the file system with a 400 that does not show where the folder is', async () => {
    const session = await agentSession();
    const longName = 'n'.repeat(300);
    const longPath = `${'d/'.repeat(2100)}f`;
    for (const p of [longName, `notes/${longName}`, longPath]) {
      for (const res of [await getFiles(h, session, p), await putFile(h, session, p, 'x')]) {
        const body = await expectError(res, 400, 'invalid-request', /too long/);
        expect(JSON.stringify(body)).not.toContain(h.dataDir);
      }
    }
    expect(await readdir(h.sessionDir(session))).toEqual(['notes', 'top.md']);
  });

  it('refuses to follow a symlink out of the folder, and leaves it out of listings', async () => {
    const session = await agentSession();
    const dir = h.sessionDir(session);
    await symlink('/etc', path.join(dir, 'etc-link'));
    await writeFile(path.join(outside, 'target.txt'), 'outside');
    await symlink(path.join(outside, 'target.txt'), path.join(dir, 'file-link'));
    await symlink(outside, path.join(dir, 'out-dir'));
    await mkdir(path.join(dir, 'sub'));
    await symlink('../notes', path.join(dir, 'sub', 'inside-link'));

    for (const p of ['etc-link', 'etc-link/passwd', 'etc-link/hostname', 'file-link', 'out-dir', 'out-dir/target.txt']) {
      await expectError(await getFiles(h, session, p), 400, 'invalid-request', /symbolic link/);
    }
    for (const p of ['etc-link/agentd-pwned.txt', 'file-link', 'out-dir/target.txt', 'out-dir/new/deeper.txt']) {
      await expectError(await putFile(h, session, p, 'pwned'), 400, 'invalid-request', /symbolic link/);
    }
    expect(existsSync('/etc/agentd-pwned.txt')).toBe(false);
    expect(await readFile(path.join(outside, 'target.txt'), 'utf8')).toBe('outside');
    expect(existsSync(path.join(outside, 'new'))).toBe(false);

    // A link that stays inside is followed, and listed as what it points to.
    expect((await listing(await getFiles(h, session, 'sub/inside-link'))).entries).toEqual([{ name: 'a.txt', type: 'file', size: Buffer.byteLength(TEXT) }]);
    expect((await listing(await getFiles(h, session, 'sub'))).entries).toEqual([{ name: 'inside-link', type: 'directory' }]);
    expect((await listing(await getFiles(h, session))).entries.map((e) => e.name)).toEqual(['notes', 'sub', 'top.md']);
  });
});
