import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type AgentdClient } from '../../src/client/index.ts';
import type { FakeReply, RecordedRequest } from '../../src/testing/fake-model.ts';
import { browserTestsRun, launchBrowser, openPage, screenshot, signIn } from '../support/browser.ts';
import { startHarness, type Harness } from '../support/harness.ts';

/**
 * The console's evaluation and workflow pages in a real Chromium: a test set uploaded, a run
 * created and watched to its end, a failed case opened, two runs compared, a run stopped, two
 * revisions diffed and one deployed, and the API reference.
 */

/** The right answers; each run's model gets some of them wrong on purpose. */
const ANSWERS: Record<string, string> = { 'what is 2+2': '4', 'capital of France': 'Paris', 'what is 3*3': '9', 'color of the sky': 'blue' };
let wrong = new Set<string>(['color of the sky']);
let slow = false;

function script(req: RecordedRequest): FakeReply {
  const said = req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
  const answer = ANSWERS[said];
  if (answer === undefined) return { text: `You said: ${said}` };
  return { text: wrong.has(said) ? 'I do not know' : answer, ...(slow ? { latencyMs: 1500 } : {}) };
}

const CSV = 'input,expected\nwhat is 2+2,4\ncapital of France,Paris\nwhat is 3*3,9\ncolor of the sky,blue\n';

const run = browserTestsRun();

describe.runIf(run)('the console: evaluations and workflows', () => {
  let h: Harness;
  let client: AgentdClient;
  let browser: Browser;
  let page: Page;
  let problems: string[];
  let testsetRevision: string;

  beforeAll(async () => {
    h = await startHarness({ script });
    client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
    browser = await launchBrowser();
    ({ page, problems } = await openPage(browser, h.url));
    await signIn(page, h.apiKey);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  const status = () => page.locator('.page .badge').first().textContent();

  it('uploads a CSV test set and shows its rows', async () => {
    await page.getByRole('link', { name: 'Test sets' }).click();
    await page.getByLabel('File', { exact: true }).setInputFiles({ name: 'math.csv', mimeType: 'text/csv', buffer: Buffer.from(CSV) });
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.getByRole('status').getByText('with 4 rows').waitFor();
    await page.getByRole('status').getByRole('link', { name: 'math.csv' }).click();
    await page.getByRole('cell', { name: /capital of France/ }).first().waitFor();
    expect(await page.locator('thead th').allTextContents()).toEqual(['#', 'input', 'expected', 'messages']);
    const list = await client.testsets.list();
    testsetRevision = list.testsets[0]!.revision_id;
  });

  it('creates a run, watches it to its end, and opens its failed case to the whole turn', async () => {
    await page.getByRole('link', { name: 'Evaluations' }).click();
    await page.getByLabel('Name', { exact: true }).fill('run A');
    await page.getByLabel('Test set').selectOption({ label: 'math.csv (v1, 4 rows)' });
    await page.getByLabel('Batch size').fill('2');
    await page.getByRole('button', { name: 'Start the run' }).click();
    await page.getByRole('heading', { name: 'run A' }).waitFor();
    await expect.poll(status, { timeout: 30_000 }).toBe('success');
    await page.getByText('4 of 4 cases').waitFor();
    await page.getByRole('cell', { name: 'exact_match' }).first().waitFor();
    await screenshot(page, 'evaluation-run');

    await page.getByLabel('Failures only').check();
    await expect.poll(() => page.locator('table[aria-labelledby="cases-title"] tbody tr').count()).toBe(1);
    await page.getByRole('button', { name: /^Open case/ }).click();
    const drawer = page.getByRole('dialog', { name: /^Case/ });
    await drawer.getByText('I do not know').waitFor();
    expect(await drawer.textContent()).toContain('color of the sky');
    await drawer.getByRole('button', { name: 'Close' }).click();
  });

  it('gives the focus back to the case that opened it when its view closes, from the keyboard', async () => {
    const opener = page.getByRole('button', { name: /^Open case/ });
    const drawer = page.getByRole('dialog', { name: /^Case/ });
    const focused = (locator: typeof opener) => locator.evaluate((el) => el === document.activeElement);
    for (const close of ['Escape', 'Enter']) {
      await opener.focus();
      await page.keyboard.press('Enter');
      await expect.poll(() => focused(drawer.getByRole('button', { name: 'Close' }))).toBe(true);
      await page.keyboard.press(close);
      await drawer.waitFor({ state: 'detached' });
      expect(await focused(opener), `closed with ${close}`).toBe(true);
    }
  });

  it('leaves the page usable beside an open case on a wide screen: another case opens from its row', async () => {
    await page.getByLabel('Failures only').uncheck();
    const openers = page.getByRole('button', { name: /^Open case/ });
    await expect.poll(() => openers.count()).toBe(4);
    const drawer = page.getByRole('dialog', { name: /^Case/ });
    await openers.nth(0).click();
    const first = await drawer.textContent();
    await openers.nth(1).click();
    await expect.poll(() => drawer.textContent()).not.toBe(first);
    await page.keyboard.press('Escape');
    await drawer.waitFor({ state: 'detached' });
  });

  it('compares two runs case by case: what got better and what got worse', async () => {
    wrong = new Set(['capital of France']);
    const b = await client.evaluations.create({
      name: 'run B',
      data: { testset_steps: { [testsetRevision]: 'auto' }, application_steps: { 'agenta:builtin:agent:v0': 'auto' }, evaluators: [{ kind: 'exact_match', column: 'expected' }] },
    });
    await expect.poll(async () => (await client.evaluations.get(b.evaluation.id)).evaluation.data.status, { timeout: 30_000 }).toBe('success');
    await page.getByRole('link', { name: 'Evaluations' }).click();
    await page.getByLabel('Pick run A to compare').check();
    await page.getByLabel('Pick run B to compare').check();
    await page.getByRole('button', { name: 'Compare the two picked' }).click();
    const summary = page.getByRole('list', { name: 'Summary' });
    await summary.waitFor();
    expect((await summary.textContent())!.replace(/\s+/g, ' ')).toContain('1 better1 worse2 the same'.replace(/(\d) /g, '$1 '));
    await screenshot(page, 'evaluation-compare');
    await page.getByLabel('Changed cases only').check();
    const changes = await page.locator('tbody th').allTextContents();
    expect(changes.sort()).toEqual(['better', 'worse']);
  });

  it('says which run of a comparison does not exist, and shows no table', async () => {
    const a = (await client.evaluations.list()).evaluations.find((e) => e.name === 'run A')!;
    await page.goto(`${h.url}/#/evaluations/compare/${a.id}/no-such-run`);
    const alert = page.getByRole('alert');
    await expect.poll(() => alert.textContent()).toMatch(/^Run B \(no-such-run\) was not found/);
    expect(await alert.textContent()).not.toContain(a.id);
    await page.waitForLoadState('networkidle');
    expect(await page.locator('table').count()).toBe(0);
    expect(await page.getByRole('list', { name: 'Summary' }).count()).toBe(0);
    await page.getByRole('link', { name: 'Back to the evaluation runs' }).click();
    await page.getByRole('heading', { name: 'Evaluations' }).waitFor();
  });

  it('stops a running run', async () => {
    slow = true;
    const c = await client.evaluations.create({
      name: 'run C',
      data: { testset_steps: { [testsetRevision]: 'auto' }, application_steps: { 'agenta:builtin:agent:v0': 'auto' }, concurrency: { batch_size: 1 } },
    });
    await page.goto(`${h.url}/#/evaluations/${c.evaluation.id}`);
    await page.getByRole('button', { name: 'Stop the run' }).click();
    await expect.poll(status, { timeout: 20_000 }).toBe('cancelled');
    slow = false;
  });

  it('diffs two revisions of a workflow and deploys one to an environment', async () => {
    const created = await client.workflows.create({ slug: 'support-bot', name: 'Support bot', data: { parameters: { agent: { instructions: { agents_md: 'Be brief.' } } } }, message: 'first' });
    const second = await client.workflows.commit('support-bot', { data: { parameters: { agent: { instructions: { agents_md: 'Be thorough.' } } } }, message: 'second' });
    await client.environments.create({ slug: 'production' });
    await page.getByRole('link', { name: 'Workflows' }).click();
    await page.getByRole('link', { name: 'Support bot' }).click();
    // Each radio is named for its revision: a screen reader's list of controls is not "A, B, A, B".
    await page.getByRole('radio', { name: 'A: compare from default v1 — first', exact: true }).check();
    await page.getByRole('radio', { name: 'B: compare to default v2 — second', exact: true }).check();
    const diff = page.getByLabel(/^Differences/);
    await diff.waitFor();
    const text = (await diff.textContent())!;
    expect(text).toContain('- ');
    expect(text).toMatch(/-\s+"agents_md": "Be brief\."/);
    expect(text).toMatch(/\+\s+"agents_md": "Be thorough\."/);
    await screenshot(page, 'workflow');

    await page.getByLabel('Revision', { exact: true }).selectOption({ label: 'default v2 — second' });
    await page.getByLabel('Environment').selectOption({ label: 'production' });
    await page.getByRole('button', { name: 'Deploy' }).click();
    await page.getByText('Deployed to production').waitFor();
    const env = await client.environments.get('production');
    const deployed = (env.revision?.data as { references: Record<string, { workflow_revision: { id: string } }> }).references['support-bot'];
    expect(deployed?.workflow_revision.id).toBe(second.id);
    expect(created.workflow.slug).toBe('support-bot');
  });

  it('chats with what an environment deploys', async () => {
    await page.getByRole('link', { name: 'Chat', exact: true }).click();
    await page.getByRole('button', { name: /^Agent:/ }).click();
    await page.getByLabel('Run').selectOption('environment');
    await page.getByLabel('Environment').selectOption({ label: 'production' });
    await expect.poll(() => page.getByLabel('Deployed key').inputValue()).toBe('support-bot');
    await page.getByLabel('Message').fill('hello production');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.conversation').getByText('You said: hello production').waitFor();
    expect(JSON.stringify(h.model.requests.at(-1)!.body)).toContain('Be thorough.');
  });

  it('renders the API reference with Swagger UI, from this server alone', async () => {
    const docs = await openPage(browser, `${h.url}/docs`);
    await docs.page.getByText('/services/agent/v0/invoke', { exact: true }).first().waitFor();
    await screenshot(docs.page, 'api-reference');
    expect(docs.problems).toEqual([]);
    await docs.page.context().close();
  });

  it('ran without a refused script, style or request', () => {
    expect(problems.filter((p) => !/status of 40[149]/.test(p))).toEqual([]);
  });
});
