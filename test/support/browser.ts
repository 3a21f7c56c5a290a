import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CONSOLE_DIR } from '../../src/http/console.ts';

/**
 * A real Chromium for the console's tests: Debian's (`.ci/run` installs it), driven by Playwright.
 * Playwright's own browser download cannot work on these machines, so its executable is named.
 */

const CANDIDATES = [process.env.AGENTD_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].filter((p): p is string => !!p);
export const chromiumPath = CANDIDATES.find((p) => existsSync(p));

/** Where CI must have a browser; elsewhere the console's tests are skipped without one, and say so. */
export const browserRequired = !!process.env.CI;
export const consoleBuilt = existsSync(path.join(CONSOLE_DIR, 'index.html'));

/**
 * Whether a file's browser tests run here: with Chromium (and, unless `console: false`, a built
 * console). In CI their absence fails the file instead of skipping it.
 */
export function browserTestsRun(options: { console?: boolean } = {}): boolean {
  const needsConsole = options.console !== false;
  const run = !!chromiumPath && (!needsConsole || consoleBuilt);
  if (!run && browserRequired) throw new Error(`these tests need Chromium${needsConsole ? ' and a built console (npm run build)' : ''}; .ci/run installs Chromium`);
  return run;
}

/** `console: false` for a page of a test's own, which needs no built console. */
export async function launchBrowser(options: { console?: boolean } = {}): Promise<Browser> {
  if (!chromiumPath) throw new Error(`no Chromium at ${CANDIDATES.join(', ')}: install Debian's "chromium" package, or set AGENTD_CHROMIUM`);
  if (options.console !== false && !consoleBuilt) throw new Error(`the console is not built (${CONSOLE_DIR}): run npm run build`);
  // As root (CI), Chromium's own sandbox cannot start; the network flags keep it off the closed internet.
  return chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A page that records what the browser complains about: CSP refusals, script errors, failed requests. */
export async function openPage(browser: Browser, url: string): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  await page.goto(url);
  return { page, problems };
}

export async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

/** With AGENTD_SCREENSHOTS (npm run screenshots), a picture of the page for the docs. */
export async function screenshot(page: Page, name: string): Promise<void> {
  const dir = process.env.AGENTD_SCREENSHOTS;
  if (!dir) return;
  await mkdir(dir, { recursive: true });
  await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: false });
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * The page's accessibility problems (axe-core: the WCAG 2.0, 2.1 and 2.2 A and AA rules and axe's
 * best practices), as one line each: by default those that matter most, serious or critical;
 * `{ every: true }` for every one, minor too. Evaluated over the DevTools protocol, which the
 * page's CSP leaves alone, so the check needs no weaker policy.
 */
export async function accessibilityProblems(page: Page, options: { every?: boolean } = {}): Promise<string[]> {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() =>
    (window as unknown as { axe: { run(o: unknown): Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } }).axe.run({
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] },
    }),
  );
  return result.violations
    .filter((v) => options.every || v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}
