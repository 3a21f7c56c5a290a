import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import { invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';
import { agentdInTerminal, hasTmux } from '../support/terminal.ts';

/**
 * Every listing the command line prints, in a real terminal 60 and 120 columns wide: no line
 * wraps (a wrapped table cannot be read), and long values are cut with "…" rather than dropped.
 */

let h: Harness;
let env: Record<string, string>;
let testset: string;
const long = 'a session id long enough that a narrow terminal cannot show it whole';

beforeAll(async () => {
  h = await startHarness();
  env = { AGENTD_URL: h.url, AGENTD_API_KEY: h.apiKey, AGENTD_PROJECT_ID: h.projectId };
  const client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
  const session = long.replaceAll(' ', '-');
  h.model.script({ text: 'a reply' });
  await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hello' }], template(), { session_id: session })));
  const question = 'a question far longer than any narrow terminal could show on one line of its table';
  testset = (await client.testsets.create({ name: 'a test set with a rather long name', data: { testcases: [{ data: { messages: [{ role: 'user', content: question }], expected: 'an expected answer that is long too' } }] } })).revision_id;
  await client.workflows.create({ slug: 'a-workflow-with-a-long-slug', name: 'A workflow whose name goes on and on', data: { parameters: { agent: template() } } });
}, 60_000);
afterAll(async () => h.close());

describe.runIf(hasTmux())('the command line in a terminal', () => {
  const screens = () => [['sessions', 'list'], ['sessions', 'show', long.replaceAll(' ', '-')], ['testsets', 'list'], ['testsets', 'show', testset], ['workflows', 'list']];

  it.each([60, 120])('fits every listing in %i columns', async (columns) => {
    for (const args of screens()) {
      const term = await agentdInTerminal(args, env, columns);
      try {
        const screen = await term.waitFor(/\S[^\n]*\n[^\n]*\S/);
        await new Promise((resolve) => setTimeout(resolve, 300));
        const lines = (await term.screen()).split('\n').filter((line) => line.trim());
        for (const line of lines) expect(line.length, `${args.join(' ')}: ${line}`).toBeLessThanOrEqual(columns);
        if (columns === 60 && args[1] !== 'show') expect(screen, args.join(' ')).toContain('…');
      } finally {
        await term.close();
      }
    }
  });
});

describe.runIf(hasTmux())('agentd invoke in a terminal', () => {
  it("shows a model's escape sequences as their pictures instead of obeying them, its lines kept", async () => {
    // Cleared and overwritten, the screen would show only what the model wanted seen.
    h.model.script({ text: 'first line\nsecond \u001b[2J\u001b[Hhidden?\u0007 \u001b]0;retitled\u0007end' });
    const term = await agentdInTerminal(['invoke', '--message', 'hi', '--session', 'tty-escapes'], env, 120);
    try {
      const screen = await term.waitFor(/end/);
      expect(screen).toContain('first line\nsecond ␛[2J␛[Hhidden?␇ ␛]0;retitled␇end');
    } finally {
      await term.close();
    }
  });
});
