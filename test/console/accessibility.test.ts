import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import type { FakeReply, RecordedRequest } from '../../src/testing/fake-model.ts';
import { accessibilityProblems, browserTestsRun, launchBrowser, openPage, signIn } from '../support/browser.ts';
import { builtin, invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * The console for people who use a screen reader or the keyboard alone, in a real Chromium, on a
 * phone's width (390 px) and a desktop's (1280 px): axe-core's checks on every page and its states
 * (a pending approval, the reason to deny, the agent picker, an open case, a diff), every control
 * reached by Tab with its focus shown, an approval answered from the keyboard, and a streamed
 * answer announced once rather than token by token.
 */

const said = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';

function script(req: RecordedRequest): FakeReply {
  if (req.messages.at(-1)?.role === 'tool') return { text: `Tool said: ${req.messages.at(-1)!.content}` };
  const text = said(req);
  if (text.startsWith('write ')) return { toolCalls: [{ name: 'write', input: { path: 'note.txt', content: text.slice('write '.length) } }] };
  if (text === 'slow') return { text: 'first words, then more words, then the last words', chunkDelayMs: 150 };
  if (text === 'what is 2+2') return { text: '4' };
  return { text: `You said: ${text}` };
}

const WIDTHS = [390, 1280] as const;
const run = browserTestsRun();

describe.runIf(run)('the console: accessibility', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  /** Each page's address, with what shows once it has loaded. */
  let pages: [view: string, loaded: string][];
  let firstRun: string;
  let workflowId: string;

  beforeAll(async () => {
    h = await startHarness({ script });
    const client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
    // Two ended turns, their summaries folded one above the other: targets close together.
    for (const content of ['hello', 'hello again']) await readJson(await h.invoke(invokeBody([{ role: 'user', content }], template(), { session_id: 'paused' })));
    await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write from the api' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: 'paused' })));
    const testset = await client.testsets.import('input,expected\nwhat is 2+2,4\ncapital of France,Paris\n', { format: 'csv', name: 'math' });
    const runs: string[] = [];
    for (const name of ['run A', 'run B']) {
      const created = await client.evaluations.create({
        name,
        data: { testset_steps: { [testset.testset.revision_id]: 'auto' }, application_steps: { 'agenta:builtin:agent:v0': 'auto' }, evaluators: [{ kind: 'exact_match', column: 'expected' }] },
      });
      runs.push(created.evaluation.id);
    }
    for (const id of runs) {
      while ((await client.evaluations.get(id)).evaluation.data.status !== 'success') await new Promise((resolve) => setTimeout(resolve, 200));
    }
    firstRun = runs[0]!;
    const workflow = await client.workflows.create({ slug: 'support-bot', name: 'Support bot', data: { parameters: { agent: {} } }, message: 'first' });
    await client.workflows.commit('support-bot', { data: { parameters: { agent: { instructions: { agents_md: 'Be brief.' } } } }, message: 'second' });
    workflowId = workflow.workflow.id;
    await client.environments.create({ slug: 'production' });
    pages = [
      ['#/chat', '#message'],
      ['#/chat/paused', '.kept-turn'],
      ['#/sessions', 'tbody tr'],
      ['#/sessions/paused', '.pending-card'],
      ['#/testsets', 'tbody tr'],
      [`#/testsets/${testset.testset.id}`, 'tbody tr'],
      ['#/evaluations', 'tbody tr'],
      [`#/evaluations/${firstRun}`, 'tbody tr'],
      [`#/evaluations/compare/${runs[0]}/${runs[1]}`, 'tbody tr'],
      ['#/workflows', 'tbody tr'],
      [`#/workflows/${workflowId}`, 'tbody tr'],
    ];
    browser = await launchBrowser();
    ({ page } = await openPage(browser, h.url));
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  async function open(view: string, loaded: string) {
    await page.goto(`${h.url}/${view}`);
    await page.locator(loaded).first().waitFor();
    await page.waitForLoadState('networkidle');
  }

  async function signedIn() {
    if (await page.getByLabel('API key').count()) await signIn(page, h.apiKey);
  }

  /** The states a page shows only after something is done on it, each a step from the one before. */
  const states: [state: string, reach: () => Promise<void>][] = [
    [
      'chat: a pending approval',
      async () => {
        await open('#/chat', '#message');
        await page.getByLabel('Message').fill('write approved words');
        await page.getByRole('button', { name: 'Send' }).click();
        await page.getByRole('button', { name: 'Approve' }).waitFor();
      },
    ],
    ['chat: the reason to deny', () => page.getByRole('button', { name: 'Deny…' }).click()],
    [
      'chat: the agent picker with the template editor',
      async () => {
        await page.getByRole('button', { name: 'Back' }).click();
        await page.getByRole('button', { name: /^Agent:/ }).click();
        // The toggle says which part of the page it opened.
        const controlled = await page.getByRole('button', { name: /^Agent:/ }).evaluate((button) => document.getElementById(button.getAttribute('aria-controls') ?? '')?.querySelector('legend')?.textContent);
        expect(controlled).toBe('Agent');
        await page.getByLabel('Run').selectOption('inline');
        await page.waitForLoadState('networkidle');
      },
    ],
    [
      'chat: the agent picker with a workflow',
      async () => {
        await page.getByLabel('Run').selectOption('workflow');
      },
    ],
    [
      'chat: an error',
      async () => {
        await open('#/chat', '#message');
        await page.route((url) => url.pathname === '/services/agent/v0/invoke', (route) => void route.abort('connectionrefused'));
        await page.getByLabel('Message').fill('anyone there?');
        await page.getByRole('button', { name: 'Send' }).click();
        await page.locator('.conversation').getByRole('alert').waitFor();
        await page.unrouteAll();
      },
    ],
    [
      'an evaluation run: a case opened',
      async () => {
        await open(`#/evaluations/${firstRun}`, 'tbody tr');
        await page.getByRole('button', { name: 'Open case 1' }).click();
        await page.getByRole('dialog', { name: /^Case/ }).waitFor();
      },
    ],
    [
      'a workflow: two revisions diffed',
      async () => {
        await open(`#/workflows/${workflowId}`, 'tbody tr');
        await page.getByRole('row', { name: /v1 — first/ }).getByLabel(/^A:/).check();
        await page.getByRole('row', { name: /v2 — second/ }).getByLabel(/^B:/).check();
        await page.getByLabel(/^Differences/).waitFor();
      },
    ],
  ];

  for (const width of WIDTHS) {
    it(`passes axe-core's checks on every page and state at ${width} px`, async () => {
      await page.setViewportSize({ width, height: 844 });
      const found: string[] = [];
      const check = async (where: string) => found.push(...(await accessibilityProblems(page, { every: true })).map((line) => `${where}: ${line}`));
      await page.goto(h.url);
      await page.getByLabel('API key').fill('agd_wrong');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('alert').waitFor();
      await check('sign in, a wrong key');
      await signIn(page, h.apiKey);
      for (const [view, loaded] of pages) {
        await open(view, loaded);
        await check(view);
      }
      for (const [state, reach] of states) {
        await reach();
        await check(state);
      }
      await page.getByRole('button', { name: /^Sign out/ }).click();
      await check('sign in');
      expect(found).toEqual([]);
    }, 120_000);
  }

  /**
   * Tabs through the page from its start. What the keyboard reached, and each control it should
   * have and did not, or reached without showing where the focus is, as one line each.
   */
  async function tabProblems(): Promise<string[]> {
    await page.evaluate(() => {
      (document.activeElement as HTMLElement | null)?.blur();
      let n = 0;
      for (const el of document.querySelectorAll('*')) el.setAttribute('data-kb', String(n++));
    });
    const reached = new Set<string>();
    const problems: string[] = [];
    // Round the page once: Tab leaves the last control for the browser's own, then comes back to the first.
    for (let i = 0, outside = 0; i < 400 && outside < 3; i++) {
      await page.keyboard.press('Tab');
      const at = await page.evaluate(() => {
        const el = document.activeElement as HTMLElement | null;
        if (!el || el === document.body) return null;
        // A hidden file input shows its focus on its label, which looks like a button.
        const shown = el.classList.contains('visually-hidden') ? document.querySelector<HTMLElement>(`label[for="${el.id}"]`) ?? el : el;
        const style = getComputedStyle(shown);
        const visible = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0;
        // Against the white the ring is drawn on, at least 3:1 (WCAG 1.4.11), as axe does not check.
        const channel = (c: number) => (c / 255 <= 0.03928 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4);
        const [r, g, b] = (style.outlineColor.match(/\d+(\.\d+)?/g) ?? []).map(Number);
        const contrast = 1.05 / (0.2126 * channel(r!) + 0.7152 * channel(g!) + 0.0722 * channel(b!) + 0.05);
        return { id: el.dataset.kb!, name: `${el.tagName.toLowerCase()} "${(el.getAttribute('aria-label') ?? el.textContent ?? '').trim().slice(0, 40)}"`, visible, contrast };
      });
      if (at === null) {
        outside++;
        continue;
      }
      if (reached.has(at.id)) break;
      reached.add(at.id);
      if (!at.visible) problems.push(`no focus shown on ${at.name}`);
      else if (at.contrast < 3) problems.push(`the focus on ${at.name} is shown at ${at.contrast.toFixed(2)}:1 against white, under 3:1`);
    }
    const missed = await page.evaluate((ids) => {
      // With a modal dialog open, only its controls can be reached; the rest of the page is inert.
      const scope = document.querySelector('dialog:modal') ?? document;
      const controls = scope.querySelectorAll<HTMLElement>('a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"])');
      const radioGroups = new Set([...controls].filter((el) => ids.includes(el.dataset.kb!) && el instanceof HTMLInputElement && el.type === 'radio').map((el) => (el as HTMLInputElement).name));
      return [...controls]
        .filter((el) => !(el as HTMLButtonElement).disabled && el.checkVisibility() && !ids.includes(el.dataset.kb!))
        .filter((el) => !(el instanceof HTMLInputElement && el.type === 'radio' && radioGroups.has(el.name)))
        .filter((el) => !(el.classList.contains('visually-hidden') && el.id && document.querySelector(`label[for="${el.id}"]`)?.checkVisibility() === false))
        .map((el) => `not reached: ${el.tagName.toLowerCase()} "${(el.getAttribute('aria-label') ?? el.textContent ?? '').trim().slice(0, 40)}"`);
    }, [...reached]);
    return [...problems, ...missed];
  }

  for (const width of WIDTHS) {
    it(`reaches every control of every page with Tab at ${width} px, showing where the focus is`, async () => {
      await page.setViewportSize({ width, height: 844 });
      await page.goto(h.url);
      await signedIn();
      const found: string[] = [];
      for (const [view, loaded] of pages) {
        await open(view, loaded);
        found.push(...(await tabProblems()).map((line) => `${view}: ${line}`));
      }
      await open(`#/evaluations/${firstRun}`, 'tbody tr');
      await page.getByRole('button', { name: 'Open case 1' }).click();
      found.push(...(await tabProblems()).map((line) => `an open case: ${line}`));
      expect(found).toEqual([]);
    }, 120_000);
  }

  it('lets a table wider than a phone be scrolled from the keyboard, and is no tab stop where it fits', async () => {
    await page.goto(h.url);
    await signedIn();
    const metrics = page.getByRole('region', { name: 'Metrics (scrolls sideways)' });
    await page.setViewportSize({ width: 390, height: 844 });
    await open(`#/evaluations/${firstRun}`, 'tbody tr');
    await metrics.focus();
    await page.keyboard.press('ArrowRight');
    await expect.poll(() => metrics.evaluate((el) => el.scrollLeft)).toBeGreaterThan(0);
    await page.setViewportSize({ width: 1280, height: 860 });
    await expect.poll(() => metrics.count()).toBe(0);
    expect(await page.locator('.table-wrap[tabindex]').count()).toBe(0);
  });

  it('keeps the focus in an open case, which covers the page, until Escape gives it back to the case', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(h.url);
    await signedIn();
    await open(`#/evaluations/${firstRun}`, 'tbody tr');
    const opener = page.getByRole('button', { name: 'Open case 1' });
    await opener.focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: /^Case/ });
    await dialog.waitFor();
    const outside: string[] = [];
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press(i % 3 ? 'Tab' : 'Shift+Tab');
      // The body: the focus is in the browser's own controls, which a modal dialog lets Tab reach.
      const where = await page.evaluate(() => {
        const el = document.activeElement;
        return !el || el === document.body || el.closest('dialog') ? null : `${el.tagName} "${el.textContent?.slice(0, 30)}"`;
      });
      if (where) outside.push(where);
    }
    expect(outside).toEqual([]);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    expect(await opener.evaluate((el) => el === document.activeElement)).toBe(true);
  });

  const focused = (name: string, exact = true) => page.getByRole('button', { name, exact }).evaluate((el) => el === document.activeElement);
  const onMessageBox = () => page.getByLabel('Message').evaluate((el) => el === document.activeElement);

  /** Presses Shift+Tab from where the focus is until `name` has it, at most `steps` times. */
  async function tabBackTo(name: string, steps = 12) {
    for (let i = 0; i < steps && !(await focused(name)); i++) await page.keyboard.press('Shift+Tab');
    expect(await focused(name), `${name} reached by Shift+Tab`).toBe(true);
  }

  it('answers approvals from the keyboard alone: Enter sends, Space approves, Escape leaves the reason, the focus comes back to the message box', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(h.url);
    await signedIn();
    await open('#/chat', '#message');
    const keys = page.keyboard;
    const conversation = page.locator('.conversation');

    await page.getByLabel('Message').focus();
    await keys.type('write denied words');
    await keys.press('Enter');
    await page.getByRole('button', { name: 'Deny…' }).waitFor();
    await tabBackTo('Deny…');
    await keys.press('Space');
    const reason = page.getByLabel(/Why deny write/);
    await expect.poll(() => reason.evaluate((el) => el === document.activeElement)).toBe(true);
    await keys.press('Escape');
    await expect.poll(() => focused('Deny…')).toBe(true);
    await keys.press('Enter');
    await expect.poll(() => reason.evaluate((el) => el === document.activeElement)).toBe(true);
    await keys.type('not today');
    await keys.press('Enter');
    await expect.poll(onMessageBox).toBe(true);
    await conversation.getByText(/Tool said:.*not today/).waitFor();

    await keys.type('write approved words');
    await keys.press('Enter');
    await page.getByRole('button', { name: 'Approve' }).waitFor();
    await tabBackTo('Approve');
    await keys.press('Space');
    await expect.poll(onMessageBox).toBe(true);
    await conversation.getByText('Tool said: wrote').waitFor();
  });

  it('answers an approval on the session page from the keyboard, the focus going to what it says', async () => {
    await page.setViewportSize({ width: 1280, height: 860 });
    await page.goto(h.url);
    await signedIn();
    await open('#/sessions/paused', '.pending-card');
    const approve = page.getByRole('group', { name: 'Waiting for an answer: write' }).getByRole('button', { name: 'Approve' });
    await approve.focus();
    await page.keyboard.press('Enter');
    await page.getByText('Approved: the turn goes on by itself.').waitFor();
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('pending-title');
  });

  it('tells a screen reader that the agent answers and that it has answered, not every word as it streams in', async () => {
    await page.setViewportSize({ width: 1280, height: 860 });
    await page.goto(h.url);
    await signedIn();
    await open('#/chat', '#message');
    // What a screen reader is told: each change inside a live region, as that region's text then.
    await page.evaluate(() => {
      const told: string[] = [];
      (window as unknown as { told: string[] }).told = told;
      const live = '[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"], [role="log"]';
      new MutationObserver((records) => {
        for (const record of records) {
          const node = record.target instanceof Element ? record.target : record.target.parentElement;
          const region = node?.closest(live);
          const text = region?.textContent?.trim();
          if (text && told.at(-1) !== text) told.push(text);
        }
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    await page.getByLabel('Message').fill('slow');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.conversation').getByText('first words, then more words, then the last words').waitFor();
    await expect.poll(() => page.evaluate(() => (window as unknown as { told: string[] }).told)).toContain('The agent has answered.');
    const told = await page.evaluate(() => (window as unknown as { told: string[] }).told);
    expect(told.filter((line) => line.includes('words'))).toEqual([]);
    // "Waiting for the agent…" shows for as long as the first token takes, which may be no time at all.
    expect(told.filter((line) => line !== 'Waiting for the agent…')).toEqual(['The agent is answering…', 'The agent has answered.']);
  });
});
