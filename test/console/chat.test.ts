import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeReply, RecordedRequest } from '../../src/testing/fake-model.ts';
import { accessibilityProblems, browserTestsRun, launchBrowser, openPage, screenshot, signIn } from '../support/browser.ts';
import { builtin, invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * The console's chat and session pages in a real Chromium, against a real agentd and the loopback
 * fake model: `useChat` on the invoke endpoint's Vercel stream, approvals both ways, a reload in
 * the middle of a turn, a viewer, and a model that writes HTML.
 */

const userTexts = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').map((m) => m.content);
const userText = (req: RecordedRequest) => userTexts(req).at(-1) ?? '';

function script(req: RecordedRequest): FakeReply {
  const last = req.messages.at(-1);
  const said = userText(req);
  if (last?.role === 'tool') return { text: `Tool said: ${last.content}` };
  if (said.startsWith('name ')) return { toolCalls: [{ name: 'write', input: { path: said.slice('name '.length), content: 'looks like a text file' } }] };
  if (said.startsWith('write ')) return { toolCalls: [{ name: 'write', input: { path: 'note.txt', content: said.slice('write '.length) } }] };
  if (said === 'slow') return { text: 'first words, then more words, then the last words', chunkDelayMs: 600 };
  if (said === 'html') return { text: '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"><b>bold?</b>' };
  if (said === 'think') return { reasoning: 'Let me think about that.', text: 'Thought it through.' };
  if (said === 'sleep') return { toolCalls: [{ name: 'bash', input: { command: 'sleep 20; echo slept' } }] };
  return { text: `You said: ${said}` };
}

/** The numbers the browser draws before the items of the page's numbered lists, as a screen reader is told them. */
async function listNumbers(page: Page): Promise<string[]> {
  const cdp = await page.context().newCDPSession(page);
  const { nodes } = await cdp.send('Accessibility.getFullAXTree');
  await cdp.detach();
  return nodes.filter((n) => n.role?.value === 'ListMarker').map((n) => String(n.name?.value ?? '').trim());
}

const run = browserTestsRun();

describe.runIf(run)('the console: chat and sessions', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let problems: string[];

  beforeAll(async () => {
    h = await startHarness({ script });
    browser = await launchBrowser();
    ({ page, problems } = await openPage(browser, h.url));
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  const conversation = () => page.locator('.conversation');
  const send = async (text: string) => {
    await page.getByLabel('Message').fill(text);
    await page.getByRole('button', { name: 'Send' }).click();
  };
  const sessionId = () => decodeURIComponent(new URL(page.url()).hash.replace('#/chat/', ''));

  it('signs in with a key, which stays in the tab, never in the URL', async () => {
    await screenshot(page, 'sign-in');
    await page.getByLabel('API key').fill('agd_wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/401 unauthenticated/);
    await signIn(page, h.apiKey);
    await expect.poll(() => page.getByRole('navigation', { name: 'Main' }).textContent()).toContain('test');
    expect(page.url()).not.toContain(h.apiKey);
    expect(await page.evaluate(() => JSON.stringify(window.sessionStorage))).toContain('agd_');
    expect(await page.evaluate(() => document.cookie)).toBe('');
  });

  it('streams a chat turn in through useChat', async () => {
    await page.getByRole('link', { name: 'Chat', exact: true }).click();
    await send('hello there');
    await conversation().getByText('You said: hello there').waitFor();
    const request = h.model.requests.at(-1)!;
    expect(request.stream).toBe(true);
    expect(sessionId()).toMatch(/^chat-/);
  });

  it('opens a new chat without a request the server refuses', async () => {
    const other = await openPage(browser, h.url);
    const failed: string[] = [];
    other.page.on('response', (response) => {
      if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`);
    });
    await signIn(other.page, h.apiKey);
    await other.page.getByRole('link', { name: 'Chat', exact: true }).click();
    await other.page.getByLabel('Message').fill('first words here');
    await other.page.getByRole('button', { name: 'Send' }).click();
    await other.page.locator('.conversation').getByText('You said: first words here').waitFor();
    await other.page.waitForLoadState('networkidle');
    expect(failed).toEqual([]);
    expect(other.problems).toEqual([]);
    await other.page.context().close();
  });

  it('folds a thought away', async () => {
    await send('think');
    await conversation().getByText('Thought it through.').waitFor();
    const thought = conversation().locator('details.thought').last();
    expect(await thought.getAttribute('open')).toBeNull();
    expect(await thought.textContent()).toContain('Let me think about that.');
  });

  it('pauses a gated tool call for approval, and approving it runs the tool and finishes the turn', async () => {
    await send('write approved words');
    const approve = conversation().getByRole('button', { name: 'Approve' });
    await approve.waitFor();
    await screenshot(page, 'chat-approval');
    await approve.click();
    await conversation().getByText('Tool said: wrote').waitFor();
    // The answer goes back with the conversation it belongs to: the model goes on knowing what was said before.
    expect(userTexts(h.model.requests.at(-1)!)).toEqual(['hello there', 'think', 'write approved words']);
    const file = path.join(h.sessionDir(sessionId()), 'note.txt');
    expect(await readFile(file, 'utf8')).toBe('approved words');
    await screenshot(page, 'chat');
  });

  it('denies a gated call with a reason the model is told', async () => {
    await send('write denied words');
    await conversation().getByRole('button', { name: 'Deny…' }).click();
    await page.getByLabel(/Why deny write/).fill('not today');
    await page.getByRole('button', { name: 'Deny', exact: true }).click();
    await conversation().getByText(/Tool said:.*not today/).waitFor();
    expect(userTexts(h.model.requests.at(-1)!)).toEqual(['hello there', 'think', 'write approved words', 'write denied words']);
    expect(await readFile(path.join(h.sessionDir(sessionId()), 'note.txt'), 'utf8')).toBe('approved words');
  });

  it('shows what a model writes as text: no markup, no script', async () => {
    await send('html');
    await conversation().getByText('<script>window.__pwned = 1</script>', { exact: false }).waitFor();
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await conversation().locator('b, img, script').count()).toBe(0);
  });

  it('resumes a turn after a reload in the middle of it, with one answer, not two', async () => {
    await send('slow');
    await conversation().getByText(/first words/).waitFor();
    await page.reload();
    await conversation().getByText('first words, then more words, then the last words').waitFor({ timeout: 20_000 });
    const answers = await conversation().locator('article.message.assistant').filter({ hasText: 'first words' }).count();
    expect(answers).toBe(1);
    // The conversation before the reload is still there.
    await conversation().getByText('You said: hello there').waitFor();
  });

  it('stops a running turn, here and on the server', async () => {
    await send('slow');
    await conversation().getByText(/first words/).last().waitFor();
    const id = sessionId();
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.getByRole('button', { name: 'Send' }).waitFor();
    await expect.poll(async () => (await h.store.turns.listForSession(h.projectId, id, { limit: 1 }))[0]?.status).toBe('cancelled');
    await conversation().getByText('Stopped: the turn was cancelled').waitFor();
  });

  it('says a turn stopped while its approved call ran, and still does after a reload', async () => {
    await page.getByRole('link', { name: 'New chat' }).click();
    await send('sleep');
    await conversation().getByRole('button', { name: 'Approve' }).click();
    const id = sessionId();
    // The continuation runs the call on the server (sleeping) when Stop is pressed.
    await expect.poll(async () => (await h.store.turns.listForSession(h.projectId, id, { limit: 2 })).map((t) => t.status)).toEqual(['running', 'paused']);
    await page.getByRole('button', { name: 'Stop' }).click();
    const answer = conversation().locator('article.message.assistant');
    for (const reloaded of [false, true]) {
      if (reloaded) await page.reload();
      await answer.getByText('Stopped: the turn was cancelled before it finished.').waitFor();
      // Neither the pause it continued nor a call still in flight.
      const badges = await answer.locator('.badge').allTextContents();
      expect(badges, reloaded ? 'after a reload' : 'after Stop').toContain('cancelled');
      expect(badges).not.toContain('paused');
      expect(badges).not.toContain('answered');
    }
  });

  it('answers a pending approval from the session page; the turn goes on by itself', async () => {
    const session = 'console-paused';
    const paused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write from the api' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: session })));
    expect(paused.data.outputs.stop_reason).toBe('paused');
    await page.goto(`${h.url}/#/sessions`);
    await page.getByRole('link', { name: session }).click();
    const card = page.getByRole('group', { name: 'Waiting for an answer: write' });
    await card.waitFor();
    await screenshot(page, 'session');
    await card.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('Approved: the turn goes on by itself.').waitFor();
    await expect.poll(() => existsSync(path.join(h.sessionDir(session), 'note.txt'))).toBe(true);
    await expect.poll(async () => (await h.store.turns.listForSession(h.projectId, session, { limit: 1 }))[0]?.status).toBe('completed');
    // The paused turn and its continuation, numbered as they ran; the answered call no longer waits.
    await page.getByRole('button', { name: 'Refresh' }).click();
    await expect.poll(() => listNumbers(page)).toEqual(['2.', '1.']);
    const call = page.locator('li.turn').nth(1).getByRole('group', { name: 'Tool call write' });
    await expect.poll(() => call.locator('.badge').textContent()).toBe('approved');
    expect(await page.getByText('awaiting approval').count()).toBe(0);
  });

  it('shows in the chat an approval answered on the session page, and what the turn did after it', async () => {
    await page.goto(`${h.url}/#/chat`);
    await send('write answered elsewhere');
    await conversation().getByRole('button', { name: 'Approve' }).waitFor();
    const id = sessionId();
    await page.getByRole('link', { name: 'Session', exact: true }).click();
    await page.getByRole('group', { name: 'Waiting for an answer: write' }).getByRole('button', { name: 'Approve' }).click();
    await expect.poll(async () => (await h.store.turns.listForSession(h.projectId, id, { limit: 1 }))[0]?.status).toBe('completed');
    await page.getByRole('link', { name: 'Open in chat' }).click();
    for (const reloaded of [false, true]) {
      if (reloaded) await page.reload();
      await conversation().getByText('Tool said: wrote 18 bytes to note.txt').waitFor();
      const call = conversation().getByRole('group', { name: 'Tool call write' });
      expect(await call.locator('.badge').allTextContents(), reloaded ? 'after a reload' : 'back in the chat').toEqual(['done']);
      expect(await conversation().getByRole('button', { name: 'Approve' }).count()).toBe(0);
    }
  });

  it('says the server cannot be reached in the words every page uses', async () => {
    const other = await openPage(browser, h.url);
    await signIn(other.page, h.apiKey);
    await other.page.goto(`${h.url}/#/chat`);
    await other.page.route((url) => url.pathname === '/services/agent/v0/invoke', (route) => route.abort('connectionrefused'));
    await other.page.getByLabel('Message').fill('anyone there?');
    await other.page.getByRole('button', { name: 'Send' }).click();
    const alert = other.page.locator('.conversation').getByRole('alert');
    await expect.poll(() => alert.textContent()).toMatch(/^network: could not reach http:\/\/127\.0\.0\.1:\d+: .+; is agentd running there\?$/);
    await other.page.context().close();
  });

  it('reopens a paused session in the chat with its pending approval, answerable there', async () => {
    const session = 'console-reopened';
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write reopened' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: session })));
    await page.goto(`${h.url}/#/chat/${session}`);
    const card = page.getByRole('group', { name: 'Waiting for an answer: write' });
    await conversation().getByLabel('Earlier turns kept by the server').getByText('awaiting approval').waitFor();
    await card.getByRole('button', { name: 'Approve' }).click();
    await conversation().getByText('Tool said: wrote 8 bytes to note.txt').waitFor();
    expect(await readFile(path.join(h.sessionDir(session), 'note.txt'), 'utf8')).toBe('reopened');
  });

  /** A new chat's template editor, open and filled with the defaults inspect reports. */
  async function templateEditor() {
    await page.goto(`${h.url}/#/chat`);
    await page.getByRole('button', { name: /^Agent:/ }).click();
    await page.getByLabel('Run').selectOption('inline');
    const editor = page.getByLabel('Agent template (JSON)');
    await expect.poll(() => editor.inputValue()).toContain('"runner"');
    return editor;
  }

  it('runs a template edited in the page, checked by the server first', async () => {
    const editor = await templateEditor();
    await editor.fill('{"runner": {"permissions": {"default": "sometimes"}}}');
    await page.getByRole('button', { name: 'Check and use' }).click();
    await expect.poll(() => page.getByRole('alert').first().textContent()).toMatch(/400 .*permissions\.default/);
    await editor.fill('{not json');
    await page.getByRole('button', { name: 'Check and use' }).click();
    await expect.poll(() => page.getByRole('alert').first().textContent()).toMatch(/not JSON/);
    await editor.fill(JSON.stringify({ instructions: { agents_md: 'You are the edited agent.' }, llm: { provider: 'openai', model: 'fake-model' }, tools: [] }));
    await page.getByRole('button', { name: 'Check and use' }).click();
    await page.getByText('Template accepted.').waitFor();
    await send('who are you');
    await conversation().getByText('You said: who are you').waitFor();
    const request = h.model.requests.at(-1)!;
    expect(JSON.stringify(request.body)).toContain('You are the edited agent.');
    expect(request.tools).toEqual([]);
  });

  it('runs what the template editor holds even when Check was not pressed', async () => {
    const editor = await templateEditor();
    await editor.fill(JSON.stringify({ instructions: { agents_md: 'You are the unchecked agent.' }, llm: { provider: 'openai', model: 'fake-model' }, tools: [] }));
    await send('and now who are you');
    await conversation().getByText('You said: and now who are you').waitFor();
    expect(JSON.stringify(h.model.requests.at(-1)!.body)).toContain('You are the unchecked agent.');
  });

  it('lists sessions, searchable by id, and shows a session\'s files', async () => {
    await page.goto(`${h.url}/#/sessions`);
    await page.getByLabel('Session id starts with').fill('console-');
    await expect.poll(() => page.locator('tbody tr').count()).toBe(2);
    await screenshot(page, 'sessions');
    await page.getByRole('link', { name: 'console-paused' }).click();
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Download note.txt' }).click();
    expect(await readFile((await (await download).path())!, 'utf8')).toBe('from the api');
    await page.getByLabel('Upload a file into this folder').setInputFiles({ name: 'data.csv', mimeType: 'text/csv', buffer: Buffer.from('a,b\n1,2\n') });
    await page.getByText('Uploaded data.csv (8 bytes).').waitFor();
    expect(await readFile(path.join(h.sessionDir('console-paused'), 'data.csv'), 'utf8')).toBe('a,b\n1,2\n');
  });

  it('shows the bidi controls in a file name rather than letting them reorder it, in the files and in the tool card', async () => {
    // A right-to-left override makes "invoice-\u202Efdp.exe" look like "invoice-exe.pdf".
    const name = 'invoice-\u202Efdp.exe';
    const session = 'console-bidi';
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: `name ${name}` }], template({ tools: [builtin('write')] }), { session_id: session })));
    const shown = 'invoice-U+202Efdp.exe';
    await page.goto(`${h.url}/#/sessions/${session}`);
    const file = page.locator('ul.files button');
    await file.waitFor();
    expect(await file.textContent()).toBe(shown);
    expect(await file.getAttribute('aria-label')).toBe(`Download ${shown}`);
    await page.locator('li.turn summary').first().click();
    const input = page.getByRole('group', { name: 'Tool call write' }).getByLabel('Input of write');
    expect(await input.textContent()).toContain(`"path": "${shown}"`);
    await page.goto(`${h.url}/#/chat/${session}`);
    const card = conversation().getByRole('group', { name: 'Tool call write' }).getByLabel('Input of write');
    await card.waitFor();
    expect(await card.textContent()).toContain(`"path": "${shown}"`);
    // The call's result names the file too.
    const data = (await conversation().locator('pre.json').allTextContents()).join('\n');
    expect(data).toContain(`to ${shown}`);
    expect(data).not.toContain('\u202E');
    // So does the model's prose: an override reorders a whole run of it.
    const prose = (await conversation().locator('.message .text').allTextContents()).join('\n');
    expect(prose).toContain(`to ${shown}`);
    expect(prose).not.toContain('\u202E');
  });

  it('leaves the marks of right-to-left prose as written', async () => {
    // U+200F places punctuation in Hebrew text; it reorders nothing beyond it, and is no trick.
    const text = 'שלום\u200F! hello';
    const session = 'console-rtl-marks';
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: text }], template(), { session_id: session })));
    await page.goto(`${h.url}/#/chat/${session}`);
    await conversation().getByText('You said:').waitFor();
    const prose = (await conversation().locator('.message .text').allTextContents()).join('\n');
    expect(prose).toContain(text);
    expect(prose).not.toContain('U+200F');
  });

  it('opens a session whose id holds a colon, from the list and in the chat', async () => {
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hello colon' }], template(), { session_id: 'team:42' })));
    await page.goto(`${h.url}/#/sessions`);
    await page.getByLabel('Session id starts with').fill('team');
    await page.getByRole('link', { name: 'team:42' }).click();
    await expect.poll(() => page.locator('#page-title').textContent()).toMatch(/team:42/);
    await page.locator('li.turn').first().waitFor();
    await page.goto(`${h.url}/#/chat/${encodeURIComponent('team:42')}`);
    await conversation().getByText('You said: hello colon').waitFor();
  });

  it('takes away the buttons of an approval the server cancelled when a new message went instead', async () => {
    await page.goto(`${h.url}/#/chat`);
    await send('write never approved');
    await conversation().getByRole('button', { name: 'Approve' }).waitFor();
    await send('never mind');
    await conversation().getByText('You said: never mind').waitFor();
    await conversation().getByText('approval cancelled').waitFor();
    expect(await conversation().getByRole('button', { name: 'Approve' }).count()).toBe(0);
  });

  it('skips to the content without leaving the page', async () => {
    await page.goto(`${h.url}/#/sessions`);
    await page.locator('#page-title').waitFor();
    await page.getByRole('link', { name: 'Skip to content' }).focus();
    await page.keyboard.press('Enter');
    expect(new URL(page.url()).hash).toBe('#/sessions');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('main');
  });

  it('lets a viewer read but not act', async () => {
    const viewer = (await h.store.apiKeys.create(h.projectId, 'viewer')).key;
    const session = 'console-viewer';
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write for the viewer' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: session })));
    const other = await openPage(browser, h.url);
    await signIn(other.page, viewer);
    await other.page.goto(`${h.url}/#/sessions/${session}`);
    const card = other.page.getByRole('group', { name: 'Waiting for an answer: write' });
    await card.waitFor();
    expect(await card.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    expect(await card.textContent()).toContain('viewer role');
    await other.page.goto(`${h.url}/#/chat/${session}`);
    expect(await other.page.getByLabel('Message').isDisabled()).toBe(true);
    await other.page.context().close();
  });

  it('works from the keyboard: sign in, send, approve', async () => {
    const other = await openPage(browser, h.url);
    const keys = other.page.keyboard;
    // The key field has the focus when the page opens.
    const field = other.page.getByLabel('API key');
    await expect.poll(() => field.evaluate((el) => el === document.activeElement)).toBe(true);
    await keys.type(h.apiKey);
    await keys.press('Enter');
    await other.page.getByRole('navigation', { name: 'Main' }).waitFor();
    await other.page.goto(`${h.url}/#/chat`);
    await other.page.getByLabel('Message').focus();
    await keys.type('write by keyboard');
    await keys.press('Enter');
    const approve = other.page.getByRole('button', { name: 'Approve' });
    await approve.waitFor();
    // From the message box, back through the page to the approval.
    for (let i = 0; i < 10 && !(await approve.evaluate((el) => el === document.activeElement)); i++) await keys.press('Shift+Tab');
    expect(await approve.evaluate((el) => el === document.activeElement)).toBe(true);
    await keys.press('Enter');
    await other.page.locator('.conversation').getByText('Tool said: wrote').waitFor();
    await other.page.context().close();
  });

  it('passes the WCAG A and AA checks on every page it showed', async () => {
    for (const view of ['#/chat', '#/sessions', '#/sessions/console-paused', '#/testsets', '#/evaluations', '#/workflows']) {
      await page.goto(`${h.url}/${view}`);
      await page.locator('#page-title').waitFor();
      await page.waitForLoadState('networkidle');
      expect(await accessibilityProblems(page), view).toEqual([]);
    }
    await page.getByRole('button', { name: 'Sign out' }).click();
    expect(await accessibilityProblems(page), 'sign in').toEqual([]);
  });

  it('ran without a refused script, style or request', () => {
    // The 4xx replies the tests provoke on purpose (a wrong key, a bad template, a finished turn) are logged too.
    expect(problems.filter((p) => !/status of 40[0149]/.test(p))).toEqual([]);
  });
});
