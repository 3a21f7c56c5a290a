import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type AgentdClient } from '../../src/client/index.ts';
import type { FakeReply, RecordedRequest } from '../../src/testing/fake-model.ts';
import { browserTestsRun, launchBrowser, openPage, signIn } from '../support/browser.ts';
import { builtin, invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * The console against hostile text, in a real Chromium: what a model, a tool, a user or a stored
 * record writes (HTML, markdown links, URLs, controls, huge and unbroken text) shows as text, runs
 * nothing, adds no element, keeps the page usable, and an id from a link or the store never
 * reaches another resource than the one it names.
 */

/** Markup that would run, or change the page, if it were ever parsed as HTML. */
const html = (tag: string) =>
  `<img src=x onerror="window.__pwned='${tag}';alert('${tag}')"><script>window.__pwned='${tag}'</script>` +
  `<svg onload="window.__pwned='${tag}'"></svg><iframe src="javascript:parent.__pwned='${tag}'"></iframe>` +
  `<a href="javascript:window.__pwned='${tag}'">${tag}</a><style>#root{display:none}</style><b class="injected">${tag}</b>`;
/** The same in the room of a name (256 characters). */
const markup = (tag: string) => `<img src=x onerror="window.__pwned='${tag}';alert(1)"><svg onload="alert('${tag}')"></svg><b class="injected">${tag}</b>`;
/** What a markdown renderer would turn into links and images. */
const MARKDOWN = '[click](javascript:alert(1)) ![i](x" onerror="alert(1)) <javascript:alert(1)> [d](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) https://evil.example/ **bold**';
/** Controls, invisible characters, emoji and combining marks, as a model may write them. */
const ODD = 'zero\u200Bwidth\u200D\uFEFF bell\u0007 esc\u001b[31mred\u001b[0m nul\u0000 del\u007f 🧨👩‍👩‍👧‍👦🏳️‍🌈 e\u0301\u0301\u0301 ﷽ 𝕏';
const UNBROKEN = 'W'.repeat(5000);
const hostile = (tag: string) => `${html(tag)} ${MARKDOWN} ${ODD} ${UNBROKEN}`;
/** A file name a filesystem allows that is markup too (no "/"). */
const HTML_NAME = `<img src=x onerror=alert(1)>.html`;
const MEGABYTE = `${'lorem ipsum '.repeat(87_381)}<img src=x onerror=alert('mb')>`;

const said = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';

function script(req: RecordedRequest): FakeReply {
  const last = req.messages.at(-1);
  if (last?.role === 'tool') return { text: `Tool said: ${last.content.slice(0, 2000)}` };
  const text = said(req);
  if (text === 'hostile text') return { reasoning: hostile('reasoning'), text: hostile('text') };
  if (text === 'hostile tools')
    return {
      toolCalls: [
        { name: '<img src=x onerror=alert(1)>', input: { html: html('unknown-tool') } },
        { name: UNBROKEN, input: {} },
        { name: 'read', input: { path: HTML_NAME } },
        { name: 'read', input: { path: 'big.txt' } },
      ],
    };
  if (text === 'hostile approval') return { toolCalls: [{ name: 'write', input: { path: HTML_NAME, content: html('write') } }] };
  if (text === 'a megabyte') return { text: MEGABYTE };
  if (text.startsWith('[attached file') || text.startsWith('<img')) return { text: `You said: ${text}` };
  if (text === 'a hostile call') return { toolCalls: [{ name: 'write', input: { path: HTML_NAME, content: html('pending') } }] };
  if (text === 'hostile error') return { error: { status: 400, message: html('error') } };
  return { text: `You said: ${text}` };
}

const run = browserTestsRun();

describe.runIf(run)('the console: hostile text', () => {
  let h: Harness;
  let client: AgentdClient;
  let browser: Browser;
  let page: Page;
  let problems: string[];
  const dialogs: string[] = [];
  /** Every request the page made, as method and URL. */
  const requests: string[] = [];

  beforeAll(async () => {
    h = await startHarness({ script });
    client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
    browser = await launchBrowser();
    ({ page, problems } = await openPage(browser, h.url));
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    page.on('request', (request) => requests.push(`${request.method()} ${request.url()}`));
    await signIn(page, h.apiKey);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  /** What hostile text could have done to the page: each finding as a line. */
  const harm = () =>
    page.evaluate(() => {
      const found: string[] = [];
      const pwned = (window as unknown as { __pwned?: string }).__pwned;
      if (pwned !== undefined) found.push(`a script ran: ${pwned}`);
      const injected = document.querySelectorAll(
        'img:not([src^="data:image/"]), script:not([src]), iframe, object, embed, #root style, [onerror], [onload], [onclick], a[href^="javascript:" i], a[href^="data:" i], .injected',
      );
      for (const el of injected) found.push(`an element was added: ${el.outerHTML.slice(0, 120)}`);
      const root = document.getElementById('root')!;
      if (getComputedStyle(root).display === 'none') found.push('the page was hidden');
      const scroller = document.scrollingElement!;
      if (scroller.scrollWidth > window.innerWidth) {
        // The text that reaches past the page's edge says where.
        const texts = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        const range = document.createRange();
        let past = '';
        for (let node = texts.nextNode(); node && !past; node = texts.nextNode()) {
          range.selectNodeContents(node);
          if (range.getBoundingClientRect().right + window.scrollX > window.innerWidth + 1) past = `: ${node.parentElement?.className} "${node.textContent?.slice(0, 40)}"`;
        }
        found.push(`the page is ${scroller.scrollWidth}px wide in ${window.innerWidth}px${past}`);
      }
      return found;
    });
  const expectUnharmed = async (where: string) => {
    expect(await harm(), where).toEqual([]);
    expect(dialogs, where).toEqual([]);
  };
  const conversation = () => page.locator('.conversation');
  const send = async (text: string) => {
    await page.getByLabel('Message').fill(text);
    await page.getByRole('button', { name: 'Send' }).click();
  };

  it('says what is wrong with a key pasted with a stray character, not that the server is out of reach', async () => {
    const other = await openPage(browser, h.url);
    for (const [key, said] of [
      [`${h.apiKey}\u200B`, `401 unauthenticated: the API key holds U+200B at character ${h.apiKey.length + 1}, which no key has`],
      ['agd_…', '401 unauthenticated: the API key holds U+2026 at character 5'],
      [markup('key'), '401 unauthenticated: the API key holds U+0020 at character 5'],
    ] as const) {
      await other.page.getByLabel('API key').fill(key);
      await other.page.getByRole('button', { name: 'Sign in' }).click();
      await expect.poll(() => other.page.getByRole('alert').textContent()).toContain(said);
    }
    expect(other.problems).toEqual([]);
    await other.page.context().close();
  });

  it('shows what a model and its tools write as text, in answers, thoughts, calls, results and approvals', async () => {
    const session = 'hostile-chat';
    await mkdir(h.sessionDir(session), { recursive: true });
    await writeFile(path.join(h.sessionDir(session), HTML_NAME), html('file'));
    await writeFile(path.join(h.sessionDir(session), 'big.txt'), `${html('big')}\n${'B'.repeat(300_000)}\n`);
    // On a phone's width, where unbroken text has the least room.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${h.url}/#/chat/${session}`);

    await send('hostile text');
    await expect.poll(() => conversation().locator('article.message.assistant > .text').last().textContent()).toContain(html('text'));
    const thought = conversation().locator('details.thought').last();
    await thought.locator('summary').click();
    expect(await thought.textContent()).toContain(html('reasoning'));
    expect(await thought.textContent()).toContain(MARKDOWN);
    await expectUnharmed('answer and thought');

    await send('hostile tools');
    await conversation().getByText(/^Tool said:/).waitFor();
    const calls = conversation().locator('.tool-call');
    expect(await calls.locator('.tool-name').allTextContents()).toContain('<img src=x onerror=alert(1)>');
    const cards = (await calls.locator('pre.json').allTextContents()).join('\n');
    expect(cards).toContain(HTML_NAME);
    expect(cards).toContain("<img src=x onerror=\\\"window.__pwned='unknown-tool'");
    expect(cards).toContain("onerror=\"window.__pwned='file'");
    await expectUnharmed('tool calls and results');

    await send('hostile approval');
    const card = conversation().getByRole('group', { name: 'Tool call write' }).last();
    await card.getByRole('button', { name: 'Deny…' }).click();
    await page.getByLabel(/Why deny write/).fill(html('reason'));
    await page.getByRole('button', { name: 'Deny', exact: true }).click();
    await conversation().getByText(/^Tool said:.*reason/).waitFor();
    expect(await card.textContent()).toContain(`Denied: ${html('reason')}`);
    await expectUnharmed('an approval denied with a reason');

    await send('hostile error');
    const alert = conversation().getByRole('alert');
    await expect.poll(() => alert.textContent()).toContain("onerror=\"window.__pwned='error'");
    await expectUnharmed('an error');

    await send('a megabyte');
    await expect.poll(() => conversation().locator('article.message.assistant > .text').last().textContent(), { timeout: 30_000 }).toBe(MEGABYTE);
    await send('still here?');
    await conversation().getByText('You said: still here?').waitFor();
    await expectUnharmed('a megabyte of text');

    await page.reload();
    await conversation().getByText('You said: still here?').waitFor();
    await expectUnharmed('the conversation kept in the browser');
    await page.goto(`${h.url}/#/sessions/${session}`);
    await page.locator('li.turn').first().waitFor();
    for (const summary of await page.locator('li.turn summary').all()) await summary.click();
    expect(await page.locator('main').textContent()).toContain(html('text'));
    await expectUnharmed('the session page');
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it('shows attached files by name, an SVG with a script only as a picture, and what a person writes as text', async () => {
    const svg = `<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned='svg-file'"><script>window.__pwned='svg-script'</script><rect width="10" height="10"/></svg>`;
    const files = [
      { name: `<img src=x onerror="alert('name')">.svg`, mimeType: 'image/svg+xml', buffer: Buffer.from(svg) },
      { name: '../../../etc/passwd', mimeType: 'text/plain', buffer: Buffer.from('root:x:0:0') },
      { name: `${'N'.repeat(240)}.txt`, mimeType: 'text/plain', buffer: Buffer.from('long') },
      { name: 'page.html', mimeType: 'text/html', buffer: Buffer.from(html('html-file')) },
      { name: 'invoice-\u202Efdp.exe', mimeType: 'application/x-msdownload', buffer: Buffer.from('MZ') },
    ];
    await page.goto(`${h.url}/#/chat`);
    await page.getByLabel('Attach files').setInputFiles(files);
    const chosen = page.getByRole('list', { name: 'Files to send' });
    expect(await chosen.getByRole('listitem').count()).toBe(files.length);
    expect(await chosen.textContent()).toContain(files[0]!.name);
    await expectUnharmed('the files chosen');
    await send(html('user'));
    await conversation().getByText(/^You said:/).waitFor();
    const message = conversation().locator('article.message.user');
    const shown = await message.locator('.attached-file').allTextContents();
    expect(shown).toEqual([
      `${files[0]!.name} image/svg+xml`,
      '../../../etc/passwd text/plain',
      `${'N'.repeat(240)}.txt text/plain`,
      'page.html text/html',
      'invoice-U+202Efdp.exe application/x-msdownload',
    ]);
    expect(await message.locator('.text').textContent()).toBe(html('user'));
    // The SVG is a picture (an <img>, where its script cannot run); no file is a link or a frame.
    expect(await message.locator('img').getAttribute('src')).toMatch(/^data:image\/svg\+xml/);
    expect(await message.locator('a, iframe, object, embed').count()).toBe(0);
    await page.waitForTimeout(200);
    await expectUnharmed('the files sent');
    await page.reload();
    await conversation().getByText(/^You said:/).waitFor();
    await expectUnharmed('the files kept in the browser');
  });

  it('shows stored names, rows, outputs, errors and pauses as text on every page', async () => {
    const session = 'hostile-paused';
    const paused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'a hostile call' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: session })));
    expect(paused.data.outputs.stop_reason).toBe('paused');
    const csv = `input,expected,"${markup('column').replaceAll('"', '""')}"\n"${markup('case').replaceAll('"', '""')}","${markup('expected').replaceAll('"', '""')}",x\nhostile error,y,z\n${UNBROKEN},${UNBROKEN},${UNBROKEN}\n`;
    const testset = await client.testsets.import(csv, { format: 'csv', name: markup('testset') });
    const runs: string[] = [];
    for (const which of ['a', 'b']) {
      const created = await client.evaluations.create({
        name: markup(`run-${which}`),
        data: { testset_steps: { [testset.testset.revision_id]: 'auto' }, application_steps: { 'agenta:builtin:agent:v0': 'auto' }, evaluators: [{ kind: 'contains', column: 'expected' }] },
      });
      runs.push(created.evaluation.id);
    }
    for (const id of runs) await expect.poll(async () => (await client.evaluations.get(id)).evaluation.data.status, { timeout: 20_000 }).toMatch(/^(success|failure|errors)$/);
    const workflow = await client.workflows.create({ slug: 'hostile', name: markup('workflow'), data: { parameters: { agent: { instructions: { agents_md: html('first') } } } }, message: markup('first') });
    await client.workflows.commit('hostile', { data: { parameters: { agent: { instructions: { agents_md: html('second') } } } }, message: `${markup('second')} ${'M'.repeat(3900)}` });
    await client.environments.create({ slug: 'hostile-env', name: markup('environment') });

    const views: [view: string, loaded: string, shows: string[]][] = [
      ['#/sessions', 'tbody tr', [session]],
      [`#/sessions/${session}`, '.pending-card', [HTML_NAME, "window.__pwned='pending'"]],
      [`#/chat/${session}`, '.pending-card', [HTML_NAME]],
      ['#/testsets', 'tbody tr', [markup('testset')]],
      [`#/testsets/${testset.testset.id}`, 'tbody tr', [markup('column'), markup('case'), markup('expected')]],
      ['#/evaluations', 'tbody tr', [markup('run-a'), markup('run-b')]],
      [`#/evaluations/${runs[0]}`, 'tbody tr', [markup('run-a'), markup('case'), markup('expected'), `You said: ${markup('case')}`, "window.__pwned='error'"]],
      [`#/evaluations/compare/${runs[0]}/${runs[1]}`, 'tbody tr', [markup('run-a'), markup('run-b'), `You said: ${markup('case')}`]],
      ['#/workflows', 'tbody tr', [markup('workflow'), markup('environment')]],
      [`#/workflows/${workflow.workflow.id}`, 'tbody tr', [markup('workflow'), markup('first'), markup('second')]],
    ];
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: 860 });
      for (const [view, loaded, shows] of views) {
        await page.goto(`${h.url}/${view}`);
        await page.locator(loaded).first().waitFor();
        for (const shown of shows) await expect.poll(() => page.locator('main').textContent(), { message: view }).toContain(shown);
        await expectUnharmed(`${view} at ${width} px`);
      }
    }

    // A case opened to its whole turn; two revisions' configurations side by side.
    await page.goto(`${h.url}/#/evaluations/${runs[0]}`);
    await page.getByRole('button', { name: 'Open case 1' }).click();
    await expect.poll(() => page.getByRole('dialog').textContent()).toContain(`You said: ${markup('case')}`);
    await expectUnharmed('a case opened');
    await page.getByRole('button', { name: 'Close' }).click();
    await page.getByRole('button', { name: 'Open case 3' }).click();
    await expect.poll(() => page.getByRole('dialog').textContent()).toContain(`You said: ${UNBROKEN}`);
    await expectUnharmed('a case of unbroken text opened');
    await page.goto(`${h.url}/#/workflows/${workflow.workflow.id}`);
    await page.locator('tbody tr').first().waitFor();
    await page.locator('input[name="diff-a"]').nth(1).check();
    await page.locator('input[name="diff-b"]').nth(0).check();
    await expect.poll(() => page.locator('.diff').textContent()).toContain(JSON.stringify(html('second')));
    await expectUnharmed('two revisions compared');

    // A pause answered from the session page with a reason that is markup.
    await page.goto(`${h.url}/#/sessions/${session}`);
    const card = page.getByRole('group', { name: 'Waiting for an answer: write' });
    await card.getByRole('button', { name: 'Deny…' }).click();
    await page.getByLabel(/Why deny write/).fill(html('reason'));
    await page.getByRole('button', { name: 'Deny', exact: true }).click();
    await page.getByText('Denied: the agent is told').waitFor();
    await expectUnharmed('a pause denied');

    // A template whose error names what the person typed.
    await page.goto(`${h.url}/#/chat`);
    await page.getByRole('button', { name: /^Agent:/ }).click();
    await page.getByLabel('Run').selectOption('inline');
    const editor = page.getByLabel('Agent template (JSON)');
    await expect.poll(() => editor.inputValue()).toContain('"runner"');
    await editor.fill(JSON.stringify({ [markup('key')]: 1 }));
    await page.getByRole('button', { name: 'Check and use' }).click();
    await expect.poll(() => page.getByRole('alert').first().textContent()).toContain(markup('key'));
    await page.getByLabel('Run').selectOption('workflow');
    await expect.poll(() => page.getByLabel('Workflow').textContent()).toContain(markup('workflow'));
    await expectUnharmed('the agent picker');
  });

  it('sends an id from a link or the store only to what it names: never a step up the path, never another query', async () => {
    // Ids a session may have by the spec's pattern, which every URL reads as steps through its path.
    for (const session of ['.', '..']) await readJson(await h.invoke(invokeBody([{ role: 'user', content: `in ${session}` }], template(), { session_id: session })));
    const routes: [route: string, ids: string[]][] = [
      ['#/sessions/.', ['.']],
      ['#/sessions/..', ['..']],
      ['#/sessions/%2e%2E', ['..']],
      ['#/sessions/a%2F..%2F..%2Fkeys', ['a/../../keys']],
      ['#/sessions/x%3Fproject_id%3Dother%26limit%3D1%23y', ['x?project_id=other&limit=1#y']],
      [`#/sessions/${encodeURIComponent(markup('id'))}`, [markup('id')]],
      [`#/sessions/${'y'.repeat(3000)}`, ['y'.repeat(3000)]],
      ['#/chat/..', ['..']],
      [`#/chat/${'x'.repeat(3000)}`, ['x'.repeat(3000)]],
      ['#/workflows/..', ['..']],
      ['#/testsets/..', ['..']],
      ['#/evaluations/..', ['..']],
      ['#/evaluations/compare/../.', ['..', '.']],
    ];
    /** Reads that name no id: who the key is, and the interactions queried by a session id in the body. */
    const idless = new Set(['/api/keys/self', '/api/sessions/interactions/query']);
    for (const [route, ids] of routes) {
      // Loaded afresh each time: a page that broke the console would hide what the next one does.
      await page.goto('about:blank');
      const from = requests.length;
      await page.goto(`${h.url}/${route}`);
      await page.getByRole('alert').first().waitFor();
      await page.waitForLoadState('networkidle');
      for (const request of requests.slice(from)) {
        const url = new URL(request.slice(request.indexOf(' ') + 1));
        if (!/^\/(api|services)\//.test(url.pathname) || idless.has(url.pathname)) continue;
        const segments = url.pathname.split('/').map(decodeURIComponent);
        expect(ids.some((id) => segments.includes(id)), `${route}: ${request}`).toBe(true);
        expect(url.searchParams.getAll('project_id'), `${route}: ${request}`).toEqual([h.projectId]);
      }
      expect(problems.filter((p) => p.startsWith('page error')), route).toEqual([]);
      // What failed to load is said as that, not as a role the key does not have.
      expect(await page.locator('main').textContent(), route).not.toContain('viewer role');
      await expectUnharmed(route);
    }
    // The console stays usable, and on its own origin whatever the hash holds.
    await page.getByRole('link', { name: 'Sessions', exact: true }).click();
    await page.getByRole('link', { name: '..', exact: true }).waitFor();
    for (const route of ['#//evil.example/', '#/..%2F..%2Fapi', '#/%5C%5Cevil.example']) {
      await page.goto(`${h.url}/${route}`);
      await expect.poll(() => page.url()).toMatch(new RegExp(`^${h.url}/#/chat/chat-`));
    }
  });

  it('shows a page that fails to render in its place, the rest of the console still working', async () => {
    // A reply of another shape than the page reads (a proxy's, an older server's): here a session read answered as a list.
    await page.route(
      (url) => url.pathname === '/api/sessions/odd-reply',
      (route) => route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ sessions: [] }) }),
    );
    await page.goto('about:blank');
    await page.goto(`${h.url}/#/sessions/odd-reply`);
    await expect.poll(() => page.locator('#page-title').textContent()).toBe('This page could not be shown');
    expect(await page.getByRole('alert').first().textContent()).toMatch(/created_at/);
    await page.getByRole('link', { name: 'Sessions', exact: true }).click();
    await expect.poll(() => page.locator('#page-title').textContent()).toBe('Sessions');
    await page.getByRole('button', { name: 'Refresh' }).waitFor();
    await expectUnharmed('a page that failed');
    // React reports the error it caught on the console: the one provoked here, and no other.
    const caught = problems.filter((p) => p.includes("reading 'created_at'"));
    expect(caught).toHaveLength(1);
    problems.splice(problems.indexOf(caught[0]!), 1);
  });

  it('ran without a refused script, style or request', () => {
    // The refusals the tests provoke on purpose: the model's error (502), ids the server refuses, sessions it does not have.
    expect(problems.filter((p) => !/status of (40[04]|502)/.test(p))).toEqual([]);
  });
});
