import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import type { FakeReply, RecordedRequest } from '../../src/testing/fake-model.ts';
import { browserTestsRun, launchBrowser, openPage, signIn } from '../support/browser.ts';
import { invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * The console's pages hold names people chose, as long as the server allows (256 characters for a
 * name, 128 for an id or a slug) and unbroken: on a phone and on a desktop, they wrap and wide
 * tables scroll in a box of their own; the page itself never scrolls sideways.
 */

const said = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
const script = (req: RecordedRequest): FakeReply => ({ text: said(req) === 'what is 2+2' ? '4' : 'I do not know' });

const SESSION = `s-${'z'.repeat(126)}`;
const TESTSET = `Testset-${'y'.repeat(248)}`;
const RUN = (which: string) => `Run-${which}-${'x'.repeat(250)}`;
const WORKFLOW = `w-${'w'.repeat(126)}`;
const VARIANT = `v-${'v'.repeat(126)}`;

const run = browserTestsRun();

describe.runIf(run)('the console: long names on narrow and wide screens', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let problems: string[];
  /** Each page with what shows once it has loaded. */
  let views: [view: string, loaded: string][];

  beforeAll(async () => {
    h = await startHarness({ script });
    const client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hello' }], template(), { session_id: SESSION })));
    // A file name as long as a filesystem allows, unbroken, in that session's folder.
    await mkdir(h.sessionDir(SESSION), { recursive: true });
    await writeFile(path.join(h.sessionDir(SESSION), `f${'n'.repeat(246)}.txt`), 'x');
    const testset = await client.testsets.import('input,expected\nwhat is 2+2,4\ncapital of France,Paris\n', { format: 'csv', name: TESTSET });
    const runs = [];
    for (const which of ['A', 'B']) {
      const created = await client.evaluations.create({
        name: RUN(which),
        data: { testset_steps: { [testset.testset.revision_id]: 'auto' }, application_steps: { 'agenta:builtin:agent:v0': 'auto' }, evaluators: [{ kind: 'exact_match', column: 'expected' }] },
      });
      runs.push(created.evaluation.id);
    }
    for (const id of runs) {
      while ((await client.evaluations.get(id)).evaluation.data.status !== 'success') await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const workflow = await client.workflows.create({ slug: WORKFLOW, name: `Workflow-${'q'.repeat(247)}`, variant: VARIANT, data: { parameters: { agent: {} } }, message: 'first' });
    await client.workflows.commit(WORKFLOW, { variant: VARIANT, data: { parameters: { agent: { instructions: { agents_md: 'Be brief.' } } } }, message: 'second' });
    views = [
      ['#/sessions', 'tbody tr'],
      [`#/sessions/${SESSION}`, 'li.turn'],
      [`#/chat/${SESSION}`, '.kept-turn'],
      ['#/testsets', 'tbody tr'],
      [`#/testsets/${testset.testset.id}`, 'tbody tr'],
      ['#/evaluations', 'tbody tr'],
      [`#/evaluations/${runs[0]}`, 'section[aria-labelledby="metrics-title"] table'],
      [`#/evaluations/compare/${runs[0]}/${runs[1]}`, 'tbody tr'],
      ['#/workflows', 'tbody tr'],
      [`#/workflows/${workflow.workflow.id}`, 'tbody tr'],
    ];
    browser = await launchBrowser();
    ({ page, problems } = await openPage(browser, h.url));
    await signIn(page, h.apiKey);
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  /** How far past the viewport the page reaches, and each box that scrolls sideways, as one line each. */
  const overflows = () =>
    page.evaluate(() => {
      const page = document.scrollingElement!;
      const found = page.scrollWidth > window.innerWidth ? [`the page is ${page.scrollWidth}px wide in ${window.innerWidth}px`] : [];
      for (const box of document.querySelectorAll<HTMLElement>('.table-wrap')) {
        if (box.scrollWidth > box.clientWidth) found.push(`a table ${box.scrollWidth}px wide scrolls in ${box.clientWidth}px`);
      }
      return found;
    });

  async function open(view: string, loaded: string) {
    await page.goto(`${h.url}/${view}`);
    await page.locator(loaded).first().waitFor();
    await page.waitForLoadState('networkidle');
  }

  it('keeps every page within a phone\'s width: wide tables scroll in their own box', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    const found = [];
    for (const [view, loaded] of views) {
      await open(view, loaded);
      // At this width a table may scroll, inside its box; the page may not.
      found.push(...(await overflows()).filter((line) => line.startsWith('the page')).map((line) => `${view}: ${line}`));
    }
    expect(found).toEqual([]);
  });

  it('wraps long names on a desktop, in titles, tables, links and choices', async () => {
    await page.setViewportSize({ width: 1280, height: 860 });
    const found = [];
    for (const [view, loaded] of views) {
      await open(view, loaded);
      found.push(...(await overflows()).map((line) => `${view}: ${line}`));
    }
    expect(found).toEqual([]);
    await open('#/evaluations', 'tbody tr');
    const select = page.getByLabel('Test set');
    await select.selectOption({ label: `${TESTSET} (v1, 2 rows)` });
    const [width, room] = await select.evaluate((el) => [el.getBoundingClientRect().right, el.closest('form')!.getBoundingClientRect().right]);
    expect(width).toBeLessThanOrEqual(room!);
    const title = page.locator('#page-title');
    await page.getByRole('link', { name: RUN('A') }).click();
    await expect.poll(() => title.textContent()).toBe(RUN('A'));
    expect(await title.evaluate((el) => el.getBoundingClientRect().right <= el.closest('main')!.getBoundingClientRect().right)).toBe(true);
  });

  it('ran without a refused script, style or request', () => {
    // The new chat signing in opens asks for its session, which the server does not have yet (404).
    expect(problems.filter((p) => !/status of 404/.test(p))).toEqual([]);
  });
});
