import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deliverAttachments, fileName } from '../../src/sessions/attachments.ts';
import { builtin, expectError, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * Files attached to user messages (`useChat`'s `sendMessage({text, files})`, or a native file
 * block) reach the agent through the session folder: written under `attachments/`, and named in
 * their message by a line the model reads.
 */

const MAX_UPLOAD = 4096;
const MAX_ATTACHMENTS = 8;
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ env: { AGENTD_MAX_UPLOAD: String(MAX_UPLOAD), AGENTD_MAX_ATTACHMENTS: String(MAX_ATTACHMENTS) } });
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

const VERCEL_JSON = { accept: 'application/json', 'x-ag-messages-format': 'vercel' };
const agent = template();

/** A file part as the AI SDK makes one of a `File` (convertFileListToFileUIParts: FileReader.readAsDataURL). */
function filePart(filename: string, mediaType: string, bytes: Buffer) {
  return { type: 'file', mediaType, filename, url: `data:${mediaType || 'application/octet-stream'};base64,${bytes.toString('base64')}` };
}

/** A user message as `sendMessage({text, files})` builds it: the files first, then the text. */
function userWith(id: string, text: string, ...files: object[]) {
  return { id, role: 'user', parts: [...files, { type: 'text', text }] };
}

const line = (at: string, mediaType: string, size: number) => `[attached file: ${at} (${mediaType}, ${size.toLocaleString('en-US')} bytes)]`;

async function invokeVercel(session: string, messages: unknown[]) {
  return h.invoke({ session_id: session, data: { inputs: { messages }, parameters: { agent } } }, { headers: VERCEL_JSON });
}

/** The user messages' text of the model's last request. */
function userTexts(): string[] {
  return h.model.requests.at(-1)!.messages.filter((m) => m.role === 'user').map((m) => m.content);
}

async function attachmentsOf(session: string): Promise<string[]> {
  return (await readdir(path.join(h.sessionDir(session), 'attachments'))).sort();
}

const sha8 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex').slice(0, 8);

describe('attachments', () => {
  it('a useChat file part lands in the session folder, and the model reads a line naming it; a re-post changes neither', async () => {
    const session = sid('attach');
    const pdf = Buffer.from('%PDF-1.4 not really a PDF, but bytes all the same\n\u0000\u00ff');
    h.model.script([{ text: 'A PDF.' }, { text: 'Still one file.' }]);
    const first = userWith('u1', 'What is this?', filePart('report.pdf', 'application/pdf', pdf));
    const res = await invokeVercel(session, [first]);
    const body = await readJson(res);
    expect(res.status).toBe(200);

    expect(await readFile(path.join(h.sessionDir(session), 'attachments', 'report.pdf'))).toEqual(pdf);
    const download = await fetch(`${h.url}/api/sessions/${session}/files?project_id=${h.projectId}&path=attachments/report.pdf`, {
      headers: { authorization: `ApiKey ${h.apiKey}` },
    });
    expect(Buffer.from(await download.arrayBuffer())).toEqual(pdf);
    const seen = `What is this?\n${line('attachments/report.pdf', 'application/pdf', pdf.length)}`;
    expect(userTexts()).toEqual([seen]);

    // useChat posts the whole conversation again with the next message.
    const res2 = await invokeVercel(session, [first, body.data.outputs.messages[0], userWith('u2', 'And now?')]);
    expect(res2.status).toBe(200);
    expect(await attachmentsOf(session)).toEqual(['report.pdf']);
    expect(userTexts()).toEqual([seen, 'And now?']);
  });

  it('another file under a name already taken gets the name with its hash; every re-post finds both where they were', async () => {
    const session = sid('attach-same-name');
    const [v1, v2] = [Buffer.from('first draft'), Buffer.from('second draft, longer')];
    h.model.script([{ text: 'one' }, { text: 'two' }, { text: 'three' }]);
    const first = userWith('u1', 'read this', filePart('notes.txt', 'text/plain', v1));
    const second = userWith('u2', 'and this', filePart('notes.txt', 'text/plain', v2));
    const a1 = { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'one' }] };
    const a2 = { id: 'a2', role: 'assistant', parts: [{ type: 'text', text: 'two' }] };
    await readJson(await invokeVercel(session, [first]));
    await readJson(await invokeVercel(session, [first, a1, second]));
    const hashed = `notes-${sha8(v2)}.txt`;
    expect(await attachmentsOf(session)).toEqual([hashed, 'notes.txt']);
    const seen = userTexts();
    expect(seen).toEqual([`read this\n${line('attachments/notes.txt', 'text/plain', v1.length)}`, `and this\n${line(`attachments/${hashed}`, 'text/plain', v2.length)}`]);

    await readJson(await invokeVercel(session, [first, a1, second, a2, userWith('u3', 'well?')]));
    expect(await attachmentsOf(session)).toEqual([hashed, 'notes.txt']);
    expect(userTexts()).toEqual([...seen, 'well?']);
    expect(await readFile(path.join(h.sessionDir(session), 'attachments', hashed))).toEqual(v2);
  });

  it('a file already there is never written over: the next name is taken, and a refused turn leaves the folder as it was', async () => {
    const session = sid('attach-taken');
    const dir = path.join(h.sessionDir(session), 'attachments');
    const bytes = Buffer.from('the attachment');
    const hashed = `notes-${sha8(bytes)}.txt`;
    // The agent's edits of the file, under its plain name and under the name with its hash.
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'notes.txt'), 'edited by the agent');
    await writeFile(path.join(dir, hashed), 'edited too');
    h.model.script([{ text: 'ok' }, { text: 'ok again' }]);
    const first = userWith('u1', 'read this', filePart('notes.txt', 'text/plain', bytes));
    await readJson(await invokeVercel(session, [first]));
    const third = `notes-${sha8(bytes)}-2.txt`;
    expect(await attachmentsOf(session)).toEqual([third, hashed, 'notes.txt']);
    expect(await readFile(path.join(dir, hashed), 'utf8')).toBe('edited too');
    expect(await readFile(path.join(dir, third))).toEqual(bytes);
    expect(userTexts()).toEqual([`read this\n${line(`attachments/${third}`, 'text/plain', bytes.length)}`]);
    // The same bytes find the same place on a re-post.
    await readJson(await invokeVercel(session, [first, { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'ok' }] }, userWith('u2', 'well?')]));
    expect(await attachmentsOf(session)).toEqual([third, hashed, 'notes.txt']);

    // Every name taken by another file: a 409 naming the part; nothing is written or removed.
    const full = sid('attach-full');
    const fullDir = path.join(h.sessionDir(full), 'attachments');
    await mkdir(fullDir, { recursive: true });
    const taken = ['notes.txt', hashed, ...Array.from({ length: 9 }, (_, i) => `notes-${sha8(bytes)}-${i + 2}.txt`)];
    for (const name of taken) await writeFile(path.join(fullDir, name), 'not it');
    const requests = h.model.requests.length;
    await expectError(await invokeVercel(full, [first]), 409, 'conflict', /^the file at data\.inputs\.messages\[0\]\.parts\[0\] cannot be put into the session folder: other files hold attachments\/notes\.txt and the 10 names/);
    expect(await readdir(fullDir)).toEqual(taken.sort());
    for (const name of taken) expect(await readFile(path.join(fullDir, name), 'utf8')).toBe('not it');
    expect(h.model.requests).toHaveLength(requests);
  });

  it('a name is made one safe path component inside attachments/; a file without one is named for its type', async () => {
    const session = sid('attach-names');
    h.model.script([{ text: 'ok' }]);
    const files = [
      filePart('../../etc/passwd', 'text/plain', Buffer.from('p')),
      filePart('a/b', 'text/plain', Buffer.from('b')),
      filePart('C:\\Users\\me\\win.txt', 'text/plain', Buffer.from('w')),
      filePart('..', 'application/json', Buffer.from('{}')),
      filePart('.env', 'text/plain', Buffer.from('e')),
      { type: 'file', mediaType: 'image/png', url: `data:image/png;base64,${Buffer.from('png').toString('base64')}` },
    ];
    await readJson(await invokeVercel(session, [userWith('u1', 'names', ...files)]));
    expect(await attachmentsOf(session)).toEqual(['attachment.json', 'attachment.png', 'b', 'env', 'passwd', 'win.txt']);
    expect(await readdir(h.sessionDir(session))).toEqual(['attachments']);
    expect(existsSync(path.join(h.sessionDir(session), '..', '..', 'etc'))).toBe(false);
    expect(userTexts()[0]!.split('\n').slice(1)).toEqual([
      line('attachments/passwd', 'text/plain', 1),
      line('attachments/b', 'text/plain', 1),
      line('attachments/win.txt', 'text/plain', 1),
      line('attachments/attachment.json', 'application/json', 2),
      line('attachments/env', 'text/plain', 1),
      line('attachments/attachment.png', 'image/png', 3),
    ]);
  });

  it('a URL to fetch, a bad data: URL or a file over AGENTD_MAX_UPLOAD is refused before anything runs, naming the part', async () => {
    const session = sid('attach-refused');
    const withFile = (file: object) => invokeVercel(session, [{ id: 'u0', role: 'user', parts: [{ type: 'text', text: 'earlier' }] }, userWith('u1', 'see', file)]);
    await expectError(
      await withFile({ type: 'file', mediaType: 'image/png', filename: 'cat.png', url: 'http://169.254.169.254/latest/meta-data/' }),
      400,
      'invalid-messages',
      /^the file at data\.inputs\.messages\[1\]\.parts\[0\]\.url is a http: URL, and agentd does not fetch URLs: send the file inline as a data: URL .*PUT \/api\/sessions\/\{session_id\}\/files/,
    );
    await expectError(await withFile({ type: 'file', mediaType: 'text/plain', url: 'data:text/plain;base64,#!' }), 400, 'invalid-messages', / at data\.inputs\.messages\[1\]\.parts\[0\]\.url$/);
    await expectError(
      await withFile(filePart('big.bin', 'application/octet-stream', Buffer.alloc(MAX_UPLOAD + 1))),
      413,
      'payload-too-large',
      `the file at data.inputs.messages[1].parts[0] has ${MAX_UPLOAD + 1} bytes, more than the ${MAX_UPLOAD} a file put into the session folder may have (AGENTD_MAX_UPLOAD)`,
    );
    expect(h.model.requests).toHaveLength(0);
    expect(existsSync(h.sessionDir(session))).toBe(false);
  });

  it('the folder\'s path checks hold: an attachments/ that links out of the session folder is refused, nothing written there', async () => {
    const session = sid('attach-link');
    const outside = await mkdtemp(path.join(os.tmpdir(), 'agentd-outside-'));
    await mkdir(h.sessionDir(session), { recursive: true });
    await symlink(outside, path.join(h.sessionDir(session), 'attachments'));
    await expectError(
      await invokeVercel(session, [userWith('u1', 'see', filePart('x.txt', 'text/plain', Buffer.from('x')))]),
      400,
      'invalid-request',
      /^the file at data\.inputs\.messages\[0\]\.parts\[0\] cannot be put into the session folder: path "attachments\/x\.txt" goes through a symbolic link to a location outside the session folder/,
    );
    expect(await readdir(outside)).toEqual([]);
    expect(h.model.requests).toHaveLength(0);
    await rm(outside, { recursive: true });
  });

  it('names that look alike are one name, names that hide their end are shown, and no name is the folder itself', async () => {
    const session = sid('attach-hostile-names');
    h.model.script([{ text: 'ok' }]);
    const a = Buffer.from('a');
    const files = [
      // The same name, composed (Windows, Linux) and decomposed (macOS): one file.
      filePart('caf\u00e9.txt', 'text/plain', a),
      filePart('cafe\u0301.txt', 'text/plain', a),
      // Reads as "invoiceexe.txt" with the override, and is invoice…exe.
      filePart('invoice\u202etxt.exe', 'application/octet-stream', a),
      // `attachments/.` would be the folder itself, `attachments/..` the session folder.
      filePart('. .', 'text/plain', a),
      filePart('. ..', 'text/plain', a),
    ];
    await readJson(await invokeVercel(session, [userWith('u1', 'names', ...files)]));
    expect(await attachmentsOf(session)).toEqual(['attachment.txt', 'caf\u00e9.txt', 'invoicetxt.exe']);
    expect(userTexts()[0]!.split('\n').slice(1)).toEqual([
      line('attachments/caf\u00e9.txt', 'text/plain', 1),
      line('attachments/caf\u00e9.txt', 'text/plain', 1),
      line('attachments/invoicetxt.exe', 'application/octet-stream', 1),
      line('attachments/attachment.txt', 'text/plain', 1),
      line('attachments/attachment.txt', 'text/plain', 1),
    ]);
  });

  it(`more than AGENTD_MAX_ATTACHMENTS files in one request is a 413 naming the first one over, before anything is written`, async () => {
    const session = sid('attach-many');
    const files = (n: number) => Array.from({ length: n }, (_, i) => filePart(`f${i}.txt`, 'text/plain', Buffer.from(String(i))));
    // Counted over the request: useChat re-posts every earlier message's files.
    const earlier = userWith('u1', 'first', ...files(4));
    await expectError(
      await invokeVercel(session, [earlier, { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'ok' }] }, userWith('u2', 'more', ...files(5))]),
      413,
      'payload-too-large',
      /^the file at data\.inputs\.messages\[2\]\.parts\[4\] is one more than the 8 files a request may attach \(AGENTD_MAX_ATTACHMENTS\); a conversation that carries more can go on in a new session/,
    );
    expect(h.model.requests).toHaveLength(0);
    expect(existsSync(h.sessionDir(session))).toBe(false);
    h.model.script([{ text: 'five' }]);
    expect((await invokeVercel(session, [userWith('u1', 'five', ...files(MAX_ATTACHMENTS))])).status).toBe(200);
    expect(await attachmentsOf(session)).toHaveLength(MAX_ATTACHMENTS);
  });

  it('a request refused once its files are written takes them back: one that cannot be written, an MCP server that cannot be reached', async () => {
    const session = sid('attach-undo');
    const outside = await mkdtemp(path.join(os.tmpdir(), 'agentd-outside-'));
    await mkdir(path.join(h.sessionDir(session), 'attachments'), { recursive: true });
    await writeFile(path.join(h.sessionDir(session), 'attachments', 'kept.txt'), 'kept');
    await symlink(path.join(outside, 'c.txt'), path.join(h.sessionDir(session), 'attachments', 'c.txt'));
    const three = userWith('u1', 'see', filePart('a.txt', 'text/plain', Buffer.from('a')), filePart('b.txt', 'text/plain', Buffer.from('b')), filePart('c.txt', 'text/plain', Buffer.from('c')));
    await expectError(await invokeVercel(session, [three]), 400, 'invalid-request', /^the file at data\.inputs\.messages\[0\]\.parts\[2\] cannot be put into the session folder/);
    expect(await attachmentsOf(session)).toEqual(['c.txt', 'kept.txt']);
    expect(await readdir(outside)).toEqual([]);
    await rm(outside, { recursive: true });

    // Refused after they were written: the folder is as it was, with no attachments/ of its own.
    const other = sid('attach-undo-mcp');
    await mkdir(h.sessionDir(other), { recursive: true });
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as net.AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const withMcp = { ...agent, mcps: [{ name: 'gone', connection: { type: 'http', url: `http://127.0.0.1:${port}/mcp` } }] };
    const res = await h.invoke({ session_id: other, data: { inputs: { messages: [userWith('u1', 'see', filePart('a.txt', 'text/plain', Buffer.from('a')))] }, parameters: { agent: withMcp } } }, { headers: VERCEL_JSON });
    await expectError(res, 424, 'mcp-unavailable');
    expect(await readdir(h.sessionDir(other))).toEqual([]);
  });

  it("a refused turn's undo removes the files it wrote, never one a link in their place points to", async () => {
    const folder = await mkdtemp(path.join(os.tmpdir(), 'agentd-undo-'));
    await writeFile(path.join(folder, 'kept.txt'), 'kept');
    const file = { message: 0, at: 'data.inputs.messages[0].content[1]', mediaType: 'text/plain', filename: 'a.txt', bytes: Buffer.from('a') };
    const delivered = await deliverAttachments(folder, [{ role: 'user', content: 'see' }], [file, { ...file, filename: 'b.txt' }], { maxUploadBytes: MAX_UPLOAD, maxAttachments: MAX_ATTACHMENTS });
    // Between the write and the undo, a.txt became a link to a file that was there before.
    await rm(path.join(folder, 'attachments', 'a.txt'));
    await symlink(path.join(folder, 'kept.txt'), path.join(folder, 'attachments', 'a.txt'));
    await delivered.undo();
    expect(await readFile(path.join(folder, 'kept.txt'), 'utf8')).toBe('kept');
    expect(await readdir(path.join(folder, 'attachments'))).toEqual(['a.txt']);
    await rm(folder, { recursive: true });
  });

  it('a long name is cut to 200 bytes, its extension kept', () => {
    const long = `${'é'.repeat(150)}.tar.gz`;
    const name = fileName(long, 'application/gzip');
    expect(Buffer.byteLength(name)).toBeLessThanOrEqual(200);
    expect(name).toBe(`${'é'.repeat(98)}.gz`);
    expect(fileName(' \u0000\n ', 'application/octet-stream')).toBe('attachment');
    expect(fileName('.\u202e. ..', 'text/plain')).toBe('attachment.txt');
    expect(fileName(undefined, 'image/bmp')).toBe('attachment.bmp');
  });

  it('a native user message takes the same part as a content block', async () => {
    const session = sid('attach-native');
    const csv = Buffer.from('a,b\n1,2\n');
    h.model.script([{ text: 'summed' }]);
    const message = { role: 'user', content: [{ type: 'text', text: 'sum the columns' }, { type: 'file', url: `data:text/csv;base64,${csv.toString('base64')}`, filename: 'data.csv' }] };
    const body = await readJson(await h.invoke({ session_id: session, data: { inputs: { messages: [message] }, parameters: { agent } } }));
    expect(body.data.outputs.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'summed' });
    expect(await readFile(path.join(h.sessionDir(session), 'attachments', 'data.csv'))).toEqual(csv);
    expect(userTexts()).toEqual([`sum the columns\n${line('attachments/data.csv', 'text/csv', csv.length)}`]);
  });

  it('what a pause keeps holds the line, not the file', async () => {
    const session = sid('attach-paused');
    const bytes = Buffer.from('x'.repeat(600));
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'copy.txt', content: 'x' } }] }]);
    const res = await h.invoke(
      { session_id: session, data: { inputs: { messages: [userWith('u1', 'copy it', filePart('big.txt', 'text/plain', bytes))] }, parameters: { agent: template({ tools: [builtin('write')], mode: 'ask' }) } } },
      { headers: VERCEL_JSON },
    );
    const body = await readJson(res);
    expect(body.data.outputs.stop_reason).toBe('paused');
    const stored = JSON.stringify(await h.store.pausedStates.get(h.projectId, body.turn_id));
    expect(stored).toContain(JSON.stringify(`copy it\n${line('attachments/big.txt', 'text/plain', 600)}`));
    expect(stored).not.toContain(bytes.toString('base64'));
    expect(JSON.stringify(await h.store.turns.get(h.projectId, body.turn_id))).not.toContain(bytes.toString('base64'));
  });
});
