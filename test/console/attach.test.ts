import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeReply, RecordedRequest } from '../../src/testing/fake-model.ts';
import { accessibilityProblems, browserTestsRun, launchBrowser, openPage, signIn } from '../support/browser.ts';
import { startHarness, type Harness } from '../support/harness.ts';

/**
 * Files attached in the console's chat, in a real Chromium against a real agentd: chosen, listed
 * and removed in the composer, sent through `useChat` into the session folder, shown in the
 * message; a file over AGENTD_MAX_UPLOAD refused and handed back; a conversation too large for
 * local storage still kept; a viewer who cannot attach.
 */

const MAX_UPLOAD = 50_000;
const userTexts = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').map((m) => m.content);
const script = (req: RecordedRequest): FakeReply => ({ text: `You said: ${userTexts(req).at(-1) ?? ''}` });
/** The messages of a request the page posted to invoke, as far as the tests read them. */
type Posted = Array<{ role: string; parts: Array<{ type: string; url?: string }> }>;
const line = (name: string, type: string, bytes: number) => `[attached file: attachments/${name} (${type}, ${bytes.toLocaleString('en-US')} bytes)]`;

// A 1×1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');
const NOTES = Buffer.from('the notes, in full');

const run = browserTestsRun();

describe.runIf(run)('the console: attaching files in the chat', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let problems: string[];

  beforeAll(async () => {
    h = await startHarness({ script, env: { AGENTD_MAX_UPLOAD: String(MAX_UPLOAD) } });
    browser = await launchBrowser();
    ({ page, problems } = await openPage(browser, h.url));
    await signIn(page, h.apiKey);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  const conversation = () => page.locator('.conversation');
  const attach = () => page.getByLabel('Attach files');
  const chosen = () => page.getByRole('list', { name: 'Files to send' });
  const sessionId = () => decodeURIComponent(new URL(page.url()).hash.replace('#/chat/', ''));
  const newChat = async () => {
    await page.goto(`${h.url}/#/chat`);
    await page.getByLabel('Message').waitFor();
  };

  it('sends the chosen files with the message: the agent reads where they are, the folder holds them, the message shows them', async () => {
    await newChat();
    await attach().setInputFiles([
      { name: 'notes.txt', mimeType: 'text/plain', buffer: NOTES },
      { name: 'dot.png', mimeType: 'image/png', buffer: PNG },
    ]);
    expect(await chosen().getByRole('listitem').allTextContents()).toEqual(['notes.txt 18 bytes Remove', `dot.png ${PNG.length} bytes Remove`]);
    // A file input the keyboard reaches from the message box, its label showing the focus.
    await page.getByLabel('Message').focus();
    await page.keyboard.press('Shift+Tab');
    expect(await attach().evaluate((el) => el === document.activeElement)).toBe(true);
    expect(await page.locator('label[for="attach"]').evaluate((el) => getComputedStyle(el).outlineStyle)).toBe('solid');
    await page.getByLabel('Message').fill('read these');
    await page.getByRole('button', { name: 'Send' }).click();
    await conversation().getByText(/^You said: read these/).waitFor();
    expect(await chosen().count()).toBe(0);

    expect(userTexts(h.model.requests.at(-1)!)).toEqual([`read these\n${line('notes.txt', 'text/plain', NOTES.length)}\n${line('dot.png', 'image/png', PNG.length)}`]);
    const folder = path.join(h.sessionDir(sessionId()), 'attachments');
    expect(await readFile(path.join(folder, 'notes.txt'))).toEqual(NOTES);
    expect(await readFile(path.join(folder, 'dot.png'))).toEqual(PNG);

    const message = conversation().locator('article.message.user');
    expect(await message.locator('.attached-file').allTextContents()).toEqual(['notes.txt text/plain', 'dot.png image/png']);
    // The image as a picture of itself; no file as a link or a frame.
    expect(await message.locator('img').getAttribute('src')).toBe(`data:image/png;base64,${PNG.toString('base64')}`);
    expect(await message.locator('a, iframe, object, embed').count()).toBe(0);
    expect(await accessibilityProblems(page)).toEqual([]);
  });

  it('goes on after a message with a file: the agent reads the whole conversation, the file\'s line as before, and the folder keeps one copy', async () => {
    await newChat();
    // The server runs each turn on the conversation its request carries (it keeps no conversation
    // of a session): a later message goes with every one before it, the file's bytes included,
    // which are what the server finds in the folder again and names on the same line.
    const posted: Posted[] = [];
    const record = (request: Request) => {
      if (request.method() === 'POST' && new URL(request.url()).pathname === '/services/agent/v0/invoke') posted.push(request.postDataJSON().messages);
    };
    page.on('request', record);
    try {
      await attach().setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: NOTES });
      await page.getByLabel('Message').fill('keep these');
      await page.getByRole('button', { name: 'Send' }).click();
      await conversation().getByText(/^You said: keep these/).waitFor();
      await page.getByLabel('Message').fill('what did I send?');
      await page.getByRole('button', { name: 'Send' }).click();
      await conversation().getByText('You said: what did I send?').waitFor();
    } finally {
      page.off('request', record);
    }

    const noted = `keep these\n${line('notes.txt', 'text/plain', NOTES.length)}`;
    const seen = h.model.requests.at(-1)!.messages.filter((m) => m.role !== 'system');
    expect(seen.map((m) => [m.role, m.content])).toEqual([
      ['user', noted],
      ['assistant', `You said: ${noted}`],
      ['user', 'what did I send?'],
    ]);
    expect(await readdir(path.join(h.sessionDir(sessionId()), 'attachments'))).toEqual(['notes.txt']);
    expect(posted.map((messages) => messages.map((m) => m.role))).toEqual([['user'], ['user', 'assistant', 'user']]);
    const fileUrl = (messages: Posted) => messages[0]!.parts.find((p) => p.type === 'file')?.url;
    expect(fileUrl(posted[1]!)).toBe(fileUrl(posted[0]!));
  });

  it('removes a chosen file before sending; a message of files alone is sent', async () => {
    await newChat();
    await attach().setInputFiles([
      { name: 'keep.csv', mimeType: 'text/csv', buffer: Buffer.from('a,b\n1,2\n') },
      { name: 'drop.txt', mimeType: 'text/plain', buffer: Buffer.from('not this one') },
    ]);
    await chosen().getByRole('button', { name: 'Remove drop.txt' }).click();
    expect(await chosen().getByRole('listitem').allTextContents()).toEqual(['keep.csv 8 bytes Remove']);
    // No text, one file: Send is there for it.
    await page.getByRole('button', { name: 'Send' }).click();
    await conversation().getByText(/^You said: \[attached file/).waitFor();
    expect(userTexts(h.model.requests.at(-1)!)).toEqual([line('keep.csv', 'text/csv', 8)]);
    expect(await readdir(path.join(h.sessionDir(sessionId()), 'attachments'))).toEqual(['keep.csv']);
    expect(await conversation().locator('article.message.user .text').count()).toBe(0);
  });

  it('says why the server refused a file over AGENTD_MAX_UPLOAD and hands the message back, so the chat goes on without it', async () => {
    await newChat();
    await page.getByLabel('Message').fill('first');
    await page.getByRole('button', { name: 'Send' }).click();
    await conversation().getByText('You said: first').waitFor();
    await attach().setInputFiles([
      { name: 'big.bin', mimeType: 'application/octet-stream', buffer: Buffer.alloc(MAX_UPLOAD + 1) },
      { name: 'small.txt', mimeType: 'text/plain', buffer: Buffer.from('small') },
    ]);
    await page.getByLabel('Message').fill('take both');
    await page.getByRole('button', { name: 'Send' }).click();
    const alert = conversation().getByRole('alert');
    await expect.poll(() => alert.textContent()).toBe(
      `413 payload-too-large: the file at messages[2].parts[0] has ${MAX_UPLOAD + 1} bytes, more than the ${MAX_UPLOAD} a file put into the session folder may have (AGENTD_MAX_UPLOAD)` +
        'The message was not sent: it is back in the message box with its files (the file the server names is big.bin).',
    );
    expect(await page.getByLabel('Message').inputValue()).toBe('take both');
    expect(await chosen().getByRole('listitem').allTextContents()).toEqual(['big.bin 50.0 kB Remove', 'small.txt 5 bytes Remove']);
    await expect.poll(() => conversation().locator('article.message.user').count()).toBe(1);
    await chosen().getByRole('button', { name: 'Remove big.bin' }).click();
    await page.getByRole('button', { name: 'Send' }).click();
    await conversation().getByText(/^You said: take both/).waitFor();
    expect(await alert.count()).toBe(0);
    expect(userTexts(h.model.requests.at(-1)!)).toEqual(['first', `take both\n${line('small.txt', 'text/plain', 5)}`]);
    expect(await readdir(path.join(h.sessionDir(sessionId()), 'attachments'))).toEqual(['small.txt']);
  });

  it('keeps a conversation too large for local storage without its files\' data: a reload shows it, and it goes on', async () => {
    const other = await openPage(browser, h.url);
    await signIn(other.page, h.apiKey);
    await other.page.goto(`${h.url}/#/chat`);
    await other.page.getByLabel('Message').waitFor();
    // The origin's storage filled to about 30,000 characters of room: less than the file's data URL takes.
    await other.page.evaluate(() => {
      localStorage.setItem('room', 'x'.repeat(30_000));
      let n = 0;
      for (let size = 1 << 20; size >= 1024; size >>= 1) {
        try {
          for (;;) localStorage.setItem(`filler-${n++}`, 'x'.repeat(size));
        } catch {
          // Full at this size: on to a smaller one.
        }
      }
      localStorage.removeItem('room');
    });
    const file = { name: 'photo.png', mimeType: 'image/png', buffer: Buffer.concat([PNG, Buffer.alloc(40_000)]) };
    await other.page.getByLabel('Attach files').setInputFiles(file);
    await other.page.getByLabel('Message').fill('a big one');
    await other.page.getByRole('button', { name: 'Send' }).click();
    const chat = other.page.locator('.conversation');
    await chat.getByText(/^You said: a big one/).waitFor();
    await other.page.reload();
    const shown = chat.locator('article.message.user .attached-file');
    await expect.poll(() => shown.textContent()).toBe('photo.png image/png (not kept in this browser)');
    await chat.getByText(/^You said: a big one/).waitFor();
    await other.page.getByLabel('Message').fill('and now?');
    await other.page.getByRole('button', { name: 'Send' }).click();
    await chat.getByText('You said: and now?').waitFor();
    // The message is posted without its file, which the session folder holds already.
    expect(userTexts(h.model.requests.at(-1)!)).toEqual(['a big one', 'and now?']);
    expect(other.problems).toEqual([]);
    await other.page.context().close();
  });

  it('lists a long file name within a phone\'s width', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await newChat();
    await attach().setInputFiles({ name: `${'n'.repeat(200)}.txt`, mimeType: 'text/plain', buffer: Buffer.from('x') });
    await chosen().waitFor();
    expect(await page.evaluate(() => document.scrollingElement!.scrollWidth <= window.innerWidth)).toBe(true);
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it('lets a viewer read but not attach', async () => {
    const viewer = (await h.store.apiKeys.create(h.projectId, 'viewer')).key;
    const other = await openPage(browser, h.url);
    await signIn(other.page, viewer);
    await other.page.goto(`${h.url}/#/chat`);
    expect(await other.page.getByLabel('Attach files').isDisabled()).toBe(true);
    expect(await other.page.getByRole('button', { name: 'Send' }).isDisabled()).toBe(true);
    await other.page.context().close();
  });

  it('ran without a refused script, style or request', () => {
    // The 413 is the refusal a test provoked.
    expect(problems.filter((p) => !/status of 413/.test(p))).toEqual([]);
  });
});
