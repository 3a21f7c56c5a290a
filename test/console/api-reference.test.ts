import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessibilityProblems, browserTestsRun, launchBrowser, openPage } from '../support/browser.ts';
import { startHarness, type Harness } from '../support/harness.ts';

/**
 * The API reference at /docs as a person meets it in a real Chromium: named, from this server
 * alone, under the console's security headers, "Try it out" answered by this server with the key
 * given to Authorize, and no serious accessibility problem, in its dialog, its forms or its answers.
 */

const run = browserTestsRun({ console: false });

describe.runIf(run)('the API reference', () => {
  let h: Harness;
  let browser: Browser;

  beforeAll(async () => {
    h = await startHarness();
    browser = await launchBrowser({ console: false });
  });
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('is named, served with the security headers, and runs an invoke example with the key given to Authorize, without a serious accessibility problem in its dialog, its forms or its answer', async () => {
    const { page, problems } = await openPage(browser, `${h.url}/docs`);
    const elsewhere: string[] = [];
    page.on('request', (request) => void (new URL(request.url()).origin !== h.url && elsewhere.push(request.url())));
    const headers = (await page.request.get(`${h.url}/docs`)).headers();
    expect(headers).toMatchObject({ 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'x-frame-options': 'DENY' });
    expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(await page.title()).toBe('agentd API reference');

    const invoke = page.locator('.opblock', { has: page.locator('[data-path="/services/agent/v0/invoke"]') }).filter({ has: page.locator('.opblock-summary-method', { hasText: 'POST' }) });
    await invoke.locator('.opblock-summary-control').click();
    // Away from the pointer, a copy-path button Swagger UI would show 0 px wide, or growing.
    await page.mouse.move(0, 0);
    const copyPath = await invoke.getByRole('button', { name: 'Copy path to clipboard' }).boundingBox();
    expect(copyPath).toMatchObject({ width: expect.toSatisfy((w: number) => w >= 24), height: expect.toSatisfy((h: number) => h >= 24) });
    await page.getByRole('button', { name: 'Authorize' }).first().click();
    const found = await accessibilityProblems(page);
    await page.locator('.modal-ux input').fill(`ApiKey ${h.apiKey}`);
    await page.getByRole('button', { name: 'Authorize', exact: true }).last().click();
    await page.getByRole('button', { name: 'Close', exact: true }).last().click();
    await invoke.getByRole('button', { name: 'Try it out' }).click();
    await invoke.locator('input[placeholder="project_id"]').fill(h.projectId);
    found.push(...(await accessibilityProblems(page)));
    await invoke.getByRole('button', { name: 'Execute' }).click();
    await invoke.locator('.live-responses-table .response-col_status').filter({ hasText: '200' }).waitFor();
    expect(await invoke.locator('.live-responses-table').innerText()).toContain('You said: Write a haiku into haiku.txt');
    found.push(...(await accessibilityProblems(page)));

    expect(found).toEqual([]);
    expect(problems).toEqual([]);
    expect(elsewhere).toEqual([]);
  });

  it("starts each body from the example its contract gives, which the server takes as it is: a workflow's JSON, a test set's CSV", async () => {
    const { page, problems } = await openPage(browser, `${h.url}/docs`);
    await page.getByRole('button', { name: 'Authorize' }).first().click();
    await page.locator('.modal-ux input').fill(`ApiKey ${h.apiKey}`);
    await page.locator('.modal-ux button.authorize').click();
    await page.locator('.modal-ux .btn-done').click();
    const operation = (path: string) => page.locator('.opblock', { has: page.locator(`[data-path="${path}"]`) }).filter({ has: page.locator('.opblock-summary-method', { hasText: 'POST' }) });
    for (const [path, status, answer] of [
      ['/api/workflows', '201', '"slug": "support-bot"'],
      ['/api/simple/testsets/import', '200', 'How do I reset my password?'],
    ] as const) {
      const block = operation(path);
      await block.locator('.opblock-summary-control').click();
      await block.getByRole('button', { name: 'Try it out' }).click();
      await block.getByRole('button', { name: 'Execute' }).click();
      await block.locator('.live-responses-table .response-col_status').filter({ hasText: status }).waitFor();
      expect(await block.locator('.live-responses-table').innerText(), path).toContain(answer);
    }
    expect(problems).toEqual([]);
  });
});
