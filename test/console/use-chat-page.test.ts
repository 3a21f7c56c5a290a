import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { UIMessage } from 'ai';
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeReply, RecordedRequest } from '../../src/testing/fake-model.ts';
import { browserTestsRun, launchBrowser } from '../support/browser.ts';
import { createWorkflow } from '../configs/client.ts';
import { builtin, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * A front end of the user's own, not the console: `@ai-sdk/react`'s `useChat` with
 * `DefaultChatTransport` (use-chat-page/page.ts, bundled here by esbuild), served from another
 * origin than agentd's, so every request is a real cross-origin one under AGENTD_CORS_ORIGINS, in
 * a real Chromium. What docs/api.md promises such a page, checked the way its user would see it.
 */

const userText = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
let takes = 0;
/** "fail once" fails the first time only, so a retry answers. */
let failures = 0;

function script(req: RecordedRequest): FakeReply {
  const last = req.messages.at(-1);
  const said = userText(req);
  if (last?.role === 'tool' && said === 'write then fail') return { error: { status: 400, message: 'the model refused this one' } };
  if (last?.role === 'tool') return { text: `Tool said: ${last.content}` };
  if (said === 'write' || said === 'write then fail') return { toolCalls: [{ name: 'write', input: { path: 'note.txt', content: 'from the page' } }] };
  if (said === 'color') return { toolCalls: [{ name: 'pick_color', input: { options: ['red', 'blue'] } }] };
  if (said === 'slow') return { text: 'first words, then more words, then the last words', chunkDelayMs: 400 };
  if (said === 'ponder') return { text: 'Pondered.', latencyMs: 2500 };
  if (said === 'again') return { text: `Take ${++takes}` };
  if (said === 'fail once' && failures++ === 0) return { error: { status: 400, message: 'the model refused this one' } };
  return { text: `You said: ${said}` };
}

const agent = template({
  tools: [
    builtin('write', 'ask'),
    { type: 'client', name: 'pick_color', description: 'Ask the user to pick a color', input_schema: { type: 'object', properties: { options: { type: 'array', items: { type: 'string' } } } } },
  ],
});

interface Seen {
  status: string;
  error: string | undefined;
  messages: UIMessage[];
}

type ToolPart = Extract<UIMessage['parts'][number], { toolCallId: string }>;
const toolPart = (message: UIMessage | undefined, type: string) => message?.parts.find((p): p is ToolPart => p.type === type);
const textOf = (message: UIMessage | undefined) => (message?.parts ?? []).flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');

/** Serves the page: its HTML (with where agentd is and the key) and its bundle, built from page.ts. */
async function servePage(): Promise<{ server: Server; origin: string; configure(config: object): void }> {
  const bundle = await build({
    entryPoints: [path.join(import.meta.dirname, 'use-chat-page/page.ts')],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'silent',
  });
  const js = bundle.outputFiles[0]!.text;
  let config = {};
  const server = createServer((req, res) => {
    if (req.url?.startsWith('/page.js')) {
      res.writeHead(200, { 'content-type': 'text/javascript' }).end(js);
      return;
    }
    res
      .writeHead(200, { 'content-type': 'text/html' })
      .end(`<!doctype html><html lang="en"><title>useChat</title><div id="root"></div><script>window.AGENTD = ${JSON.stringify(config)}</script><script type="module" src="/page.js"></script></html>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, configure: (c) => (config = c) };
}

const run = browserTestsRun({ console: false });

describe.runIf(run)('a useChat page on another origin', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let pageServer: Server;
  let origin: string;
  const problems: string[] = [];

  beforeAll(async () => {
    const served = await servePage();
    pageServer = served.server;
    origin = served.origin;
    h = await startHarness({ script, env: { AGENTD_CORS_ORIGINS: origin, AGENTD_STREAM_HOLD_MS: '1000' } });
    served.configure({ agentd: h.url, projectId: h.projectId, key: h.apiKey, agent });
    browser = await launchBrowser({ console: false });
    page = await (await browser.newContext()).newPage();
    page.on('console', (m) => void (m.type() === 'error' && problems.push(m.text())));
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
    pageServer?.close();
  });

  const open = async (chat: string) => {
    await page.goto(`${origin}/?chat=${chat}`);
    await page.waitForFunction(() => window.chat !== undefined);
  };
  const seen = (): Promise<Seen> => page.evaluate(() => ({ status: window.chat.status, error: window.chat.error?.message, messages: window.chat.messages }));
  /** Waits until the chat has settled with `count` messages, and returns what it shows. */
  async function settled(count: number): Promise<Seen> {
    await expect.poll(async () => {
      const s = await seen();
      return { status: s.status, count: s.messages.length };
    }, { timeout: 15_000 }).toEqual({ status: 'ready', count });
    return seen();
  }
  const send = (text: string) => page.evaluate((t) => void window.chat.sendMessage({ text: t }), text);

  it('streams an answer, with its metadata, across origins', async () => {
    await open('page-stream');
    await send('slow');
    // Part of the answer shows before the rest has been written.
    await expect.poll(async () => textOf((await seen()).messages[1]), { timeout: 10_000 }).toMatch(/^first words/);
    expect((await seen()).status).toBe('streaming');
    const { messages, error } = await settled(2);
    expect(error).toBeUndefined();
    expect(textOf(messages[1])).toBe('first words, then more words, then the last words');
    expect(await page.locator('article.assistant').textContent()).toBe('first words, then more words, then the last words');
    const turn = (await h.store.turns.listForSession(h.projectId, 'page-stream', { limit: 1 }))[0]!;
    expect(messages[1]).toMatchObject({ id: `msg-${turn.id}`, metadata: { session_id: 'page-stream', trace_id: turn.trace_id, stop_reason: 'end_turn' } });
    expect(problems).toEqual([]);
  });

  it('follows a turn slow to say anything: the stream opens once the hold is up, the answer comes later', async () => {
    await open('page-ponder');
    await send('ponder');
    await expect.poll(async () => (await seen()).messages[1]?.metadata, { timeout: 10_000 }).toMatchObject({ session_id: 'page-ponder' });
    expect(textOf((await seen()).messages[1])).toBe('');
    const { messages, error } = await settled(2);
    expect(error).toBeUndefined();
    expect(textOf(messages[1])).toBe('Pondered.');
    expect(problems).toEqual([]);
  });

  it('approves a gated call, and the chat goes on by itself', async () => {
    await open('page-approve');
    await send('write');
    let { messages } = await settled(2);
    const part = toolPart(messages[1], 'tool-write');
    expect(part).toMatchObject({ state: 'approval-requested', input: { path: 'note.txt', content: 'from the page' } });
    await page.evaluate(async (id) => void (await window.chat.addToolApprovalResponse({ id, approved: true })), (part as { approval: { id: string } }).approval.id);
    await expect.poll(async () => textOf((await seen()).messages[1]), { timeout: 15_000 }).toMatch(/^Tool said:/);
    ({ messages } = await settled(2));
    expect(toolPart(messages[1], 'tool-write')).toMatchObject({ state: 'output-available' });
    expect(await readFile(path.join(h.sessionDir('page-approve'), 'note.txt'), 'utf8')).toBe('from the page');
    expect(problems).toEqual([]);
  });

  it('denies a gated call with a reason the model hears', async () => {
    await open('page-deny');
    await send('write');
    let { messages } = await settled(2);
    const id = (toolPart(messages[1], 'tool-write') as { approval: { id: string } }).approval.id;
    await page.evaluate(async (i) => void (await window.chat.addToolApprovalResponse({ id: i, approved: false, reason: 'not from a page' })), id);
    await expect.poll(async () => textOf((await seen()).messages[1]), { timeout: 15_000 }).toMatch(/not from a page/);
    ({ messages } = await settled(2));
    expect(toolPart(messages[1], 'tool-write')).toMatchObject({ state: 'output-denied', approval: { id, approved: false, reason: 'not from a page' } });
    expect(problems).toEqual([]);
  });

  it('answers a client tool with addToolOutput', async () => {
    await open('page-client-tool');
    await send('color');
    let { messages } = await settled(2);
    const part = toolPart(messages[1], 'tool-pick_color');
    expect(part).toMatchObject({ state: 'input-available', input: { options: ['red', 'blue'] } });
    await page.evaluate(async (toolCallId) => void (await window.chat.addToolOutput({ tool: 'pick_color', toolCallId, output: 'blue' })), part!.toolCallId);
    await expect.poll(async () => textOf((await seen()).messages[1]), { timeout: 15_000 }).toBe('Tool said: blue');
    ({ messages } = await settled(2));
    expect(toolPart(messages[1], 'tool-pick_color')).toMatchObject({ state: 'output-available', output: 'blue' });
    expect(problems).toEqual([]);
  });

  it('stops mid-answer, then a new message is answered', async () => {
    await open('page-stop');
    await send('slow');
    await expect.poll(async () => textOf((await seen()).messages[1]), { timeout: 10_000 }).toMatch(/^first words/);
    await page.evaluate(() => window.chat.stop());
    await settled(2);
    await send('after the stop');
    const { messages, error } = await settled(4);
    expect(error).toBeUndefined();
    expect(textOf(messages[3])).toBe('You said: after the stop');
    const turns = await h.store.turns.listForSession(h.projectId, 'page-stop', { limit: 2 });
    expect(turns.map((t) => t.status)).toEqual(['completed', 'cancelled']);
    expect(problems).toEqual([]);
  });

  it('regenerates the last answer in place', async () => {
    await open('page-regenerate');
    await send('again');
    expect(textOf((await settled(2)).messages[1])).toMatch(/^Take \d+$/);
    const first = textOf((await seen()).messages[1]);
    await page.evaluate(() => window.chat.regenerate());
    const { messages } = await settled(2);
    expect(textOf(messages[1])).not.toBe(first);
    expect(textOf(messages[1])).toMatch(/^Take \d+$/);
    expect(problems).toEqual([]);
  });

  it('after a reload, the conversation goes on', async () => {
    await open('page-reload');
    await send('remember me');
    await settled(2);
    await page.reload();
    await page.waitForFunction(() => window.chat !== undefined);
    expect((await settled(2)).messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    await send('and now?');
    const { messages } = await settled(4);
    expect(textOf(messages[3])).toBe('You said: and now?');
    // The model heard the whole conversation.
    expect(h.model.requests.at(-1)!.messages.map((m) => m.content)).toEqual(expect.arrayContaining(['remember me', 'You said: remember me', 'and now?']));
    expect(problems).toEqual([]);
  });

  it('resumes a turn interrupted by a reload', async () => {
    await open('page-resume');
    await send('slow');
    await expect.poll(async () => textOf((await seen()).messages[1]), { timeout: 10_000 }).toMatch(/^first words/);
    const resumed = page.waitForResponse((r) => r.url().includes('/invoke/page-resume/stream?'));
    await page.reload();
    await page.waitForFunction(() => window.chat !== undefined);
    expect((await resumed).status()).toBe(200);
    await expect.poll(async () => textOf((await seen()).messages.at(-1)), { timeout: 15_000 }).toBe('first words, then more words, then the last words');
    const { messages } = await settled(2);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages[1]!.metadata).toMatchObject({ session_id: 'page-resume', stop_reason: 'end_turn' });
    expect(problems).toEqual([]);
  });

  it('stop() only stops reading; the session\'s stop route ends the turn, and a reload then resumes nothing', async () => {
    await open('page-stop-server');
    await send('slow');
    await expect.poll(async () => textOf((await seen()).messages[1]), { timeout: 10_000 }).toMatch(/^first words/);
    await page.evaluate(() => window.chat.stop());
    // As docs/api.md tells a page to: the turn goes on without a reader until the server is told.
    const stopped = await page.evaluate(async ({ agentd, projectId, key }) => {
      const res = await fetch(`${agentd}/api/sessions/page-stop-server/stop?project_id=${projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${key}` } });
      return res.status;
    }, { agentd: h.url, projectId: h.projectId, key: h.apiKey });
    expect(stopped).toBe(200);
    expect((await h.store.turns.listForSession(h.projectId, 'page-stop-server', { limit: 1 }))[0]!.status).toBe('cancelled');
    const resumed = page.waitForResponse((r) => r.url().includes('/invoke/page-stop-server/stream?'));
    await page.reload();
    await page.waitForFunction(() => window.chat !== undefined);
    expect((await resumed).status()).toBe(204);
    const { messages } = await settled(2);
    expect(textOf(messages[1])).not.toBe('first words, then more words, then the last words');
    expect(problems).toEqual([]);
  });

  it('says which stored revision ran, in the message metadata', async () => {
    const { revision } = await createWorkflow(h, 'page-bot', { agent });
    await page.goto(`${origin}/?chat=page-revision&ref=page-bot`);
    await page.waitForFunction(() => window.chat !== undefined);
    await send('which one?');
    const { messages } = await settled(2);
    expect(textOf(messages[1])).toBe('You said: which one?');
    expect(messages[1]!.metadata).toMatchObject({ session_id: 'page-revision', revision: { id: revision.id, workflow: 'page-bot', version: revision.version } });
    expect(problems).toEqual([]);
  });

  it('shows a turn that fails before its stream in the error state: the envelope as the message, the status on the error; a retry answers', async () => {
    await open('page-error');
    await send('fail once');
    await expect.poll(async () => (await seen()).status, { timeout: 15_000 }).toBe('error');
    const error = await page.evaluate(() => {
      const e = window.chat.error as Error & { statusCode?: number };
      return { message: e.message, statusCode: e.statusCode };
    });
    expect(error.statusCode).toBe(502);
    expect(JSON.parse(error.message)).toMatchObject({ status: { code: 502, type: 'upstream-rejected', message: expect.stringContaining('the model refused this one') }, session_id: 'page-error' });
    expect(await page.getByRole('alert').textContent()).toBe(error.message);
    // The browser reports the 502 itself; nothing else went wrong.
    expect(problems.splice(0).filter((p) => !/status of 502/.test(p))).toEqual([]);

    await page.evaluate(() => window.chat.regenerate());
    const { messages, error: after } = await settled(2);
    expect(after).toBeUndefined();
    expect(textOf(messages[1])).toBe('You said: fail once');
  });

  it('shows a turn that fails once its stream has begun in the error state, with the plain message', async () => {
    await open('page-late-error');
    await send('write then fail');
    const { messages } = await settled(2);
    const id = (toolPart(messages[1], 'tool-write') as { approval: { id: string } }).approval.id;
    await page.evaluate(async (i) => void (await window.chat.addToolApprovalResponse({ id: i, approved: true })), id);
    await expect.poll(async () => (await seen()).status, { timeout: 15_000 }).toBe('error');
    const seenNow = await seen();
    expect(seenNow.error).toMatch(/^the model provider at .* refused the request \(HTTP 400\): the model refused this one$/);
    // What the turn did before it failed stays on the message.
    expect(toolPart(seenNow.messages[1], 'tool-write')).toMatchObject({ state: 'output-available' });
    expect(problems).toEqual([]);
  });
});
