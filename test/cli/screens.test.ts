import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import { displayWidth } from '../../src/cli/text-table.ts';
import { invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';
import { agentdInTerminal, hasTmux } from '../support/terminal.ts';

/**
 * Every listing the command line prints, in a real terminal 60 and 120 columns wide: no line
 * wraps (a wrapped table cannot be read), and long values are cut with "…" rather than dropped.
 */

let h: Harness;
let env: Record<string, string>;
let testset: string;
/** The revision of a test set in Chinese, Japanese and emoji: two columns a character, an emoji two UTF-16 units or more. */
let wide: string;
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
  const cjk = await client.testsets.create({
    name: '中文测试集：一个很长很长的名字 😀🎉',
    data: { testcases: [{ data: { messages: [{ role: 'user', content: '请用中文回答这个很长很长的问题，并附上表情符号 👨‍👩‍👧 好吗？' }], expected: '这是期待的答案 😀😀 和日本語のテキスト、とても長い' } }] },
  });
  wide = cjk.revision_id;
  await client.workflows.create({ slug: 'cjk', name: '中文工作流的名字很长很长很长很长很长 🚀', data: { parameters: { agent: template() } } });
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
        for (const line of lines) expect(displayWidth(line), `${args.join(' ')}: ${line}`).toBeLessThanOrEqual(columns);
        if (columns === 60 && args[1] !== 'show') expect(screen, args.join(' ')).toContain('…');
      } finally {
        await term.close();
      }
    }
  });
});

describe.runIf(hasTmux())('Chinese, Japanese and emoji in a terminal', () => {
  /** The lines of a listing as the terminal shows them, once it has printed `last`. */
  const shown = async (args: string[], last: RegExp) => {
    const term = await agentdInTerminal(args, env, 60);
    try {
      await term.waitFor(last);
      await new Promise((resolve) => setTimeout(resolve, 300));
      return (await term.screen()).split('\n').filter((line) => line.trim());
    } finally {
      await term.close();
    }
  };
  const fits = (lines: string[]) => {
    for (const line of lines) {
      expect(displayWidth(line), line).toBeLessThanOrEqual(60);
      // A surrogate pair or an emoji sequence cut in half shows as U+FFFD.
      expect(line).not.toContain('\ufffd');
    }
  };

  it('fits 60 columns with its columns lined up in agentd testsets list', async () => {
    const lines = await shown(['testsets', 'list'], new RegExp(wide));
    fits(lines);
    const start = (line: string, text: string) => displayWidth(line.slice(0, line.indexOf(text)));
    const header = lines.find((line) => line.startsWith('test set'))!;
    const row = lines.find((line) => line.includes(wide))!;
    expect(row).toMatch(/^中文测试…/);
    expect(start(row, wide), row).toBe(start(header, 'revision id'));
  });

  it('fits 60 columns with its columns lined up in agentd testsets show', async () => {
    const lines = await shown(['testsets', 'show', wide], /^ *1 /m);
    fits(lines);
    const header = lines.find((line) => /^# +messages/.test(line))!;
    const row = lines.find((line) => /^1 /.test(line))!;
    // The expected answer's column starts where its heading does: the cells before it are padded by columns, not characters.
    const expectedAt = displayWidth(header.slice(0, header.indexOf('expected')));
    expect(row, row).toMatch(/…/);
    expect(displayWidth(row.slice(0, row.indexOf('这是'))), `${header}\n${row}`).toBe(expectedAt);
  });

  it('fits 60 columns in agentd workflows list', async () => {
    fits(await shown(['workflows', 'list'], /cjk/));
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
