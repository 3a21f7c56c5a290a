import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, type AgentdClient } from '../../src/client/index.ts';
import type { FakeReply, RecordedRequest } from '../../src/testing/fake-model.ts';
import { agentdCommand } from '../support/child-server.ts';
import { startHarness, template, type Harness } from '../support/harness.ts';
import { agentdInTerminal, hasTmux } from '../support/terminal.ts';

/**
 * `agentd eval show --cases`, `compare`, `stop`, and `run` by application, variant or environment;
 * the screens in a real pseudo-terminal at 60 and 120 columns, Ctrl-C included.
 */

const ANSWERS: Record<string, string> = { 'what is 2+2, written out in a long sentence for the table': '4', 'capital of France': 'Paris', 'what is 3*3': '9' };
let wrong = new Set<string>(['what is 3*3']);
let latencyMs = 0;
/** Questions the model refuses (HTTP 400: not retried), failing their case. */
let refused = new Set<string>();

function script(req: RecordedRequest): FakeReply {
  const said = req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
  if (refused.has(said)) return { error: { status: 400, message: 'refused' } };
  const instructions = JSON.stringify(req.body).includes('Answer in French') ? ' (fr)' : '';
  return { text: wrong.has(said) ? 'I do not know' : `${ANSWERS[said] ?? said}${instructions}`, latencyMs };
}

let h: Harness;
let client: AgentdClient;
let env: Record<string, string>;
let testset: string;
let runA: string;
let runB: string;

const evaluators = [{ kind: 'exact_match' as const, column: 'expected' }];

async function finished(id: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (!['pending', 'running'].includes((await client.evaluations.get(id)).evaluation.data.status)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`run ${id} did not end`);
}

async function evaluate(name: string): Promise<string> {
  const { evaluation } = await client.evaluations.create({ name, data: { testset_steps: [testset], application_steps: ['agenta:builtin:agent:v0'], evaluators } });
  await finished(evaluation.id);
  return evaluation.id;
}

beforeAll(async () => {
  h = await startHarness({ script });
  client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
  env = { AGENTD_URL: h.url, AGENTD_API_KEY: h.apiKey, AGENTD_PROJECT_ID: h.projectId };
  const rows = Object.entries(ANSWERS).map(([question, expected]) => ({ data: { messages: [{ role: 'user', content: question }], expected } }));
  testset = (await client.testsets.create({ name: 'cli', data: { testcases: rows } })).revision_id;
  runA = await evaluate('A');
  wrong = new Set(['capital of France']);
  runB = await evaluate('B');
  wrong = new Set();
}, 60_000);
afterAll(async () => h.close());

async function evaluatorsFile(): Promise<string> {
  const file = path.join(await mkdtemp(path.join(os.tmpdir(), 'agentd-eval-cli-')), 'evaluators.json');
  await writeFile(file, JSON.stringify(evaluators));
  return file;
}

describe('agentd eval show --cases', () => {
  it('prints every case: input, expected, output, scores, attempts and time', async () => {
    const run = await agentdCommand(['eval', 'show', runA, '--cases'], env);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^case\s+status\s+input\s+expected\s+output\s+scores\s+tries\s+time$/);
    expect(lines).toHaveLength(4);
    expect(run.stdout).toMatch(/what is 3\*3\s+9\s+I do not know\s+exact_match fail\s+1\s+\d/);
    // Not a terminal: whole lines, nothing cut.
    expect(run.stdout).toContain('what is 2+2, written out in a long sentence for the table');
    expect(run.code).toBe(0);
  });

  it('with --failed, only the cases that failed', async () => {
    const run = await agentdCommand(['eval', 'show', runA, '--cases', '--failed'], env);
    const lines = run.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/^3\s+scored low\s+what is 3\*3/);
  });
});

describe('agentd eval show --cases of a run with repeats', () => {
  it("numbers each row by its test case's place in the test set, and the repeat past the first", async () => {
    const { evaluation } = await client.evaluations.create({ data: { testset_steps: [testset], application_steps: ['agenta:builtin:agent:v0'], repeats: 2, evaluators } });
    await finished(evaluation.id);
    const run = await agentdCommand(['eval', 'show', evaluation.id, '--cases'], env);
    const numbers = run.stdout.trim().split('\n').slice(1).map((line) => line.split(/\s+/)[0]);
    // Results 4-6 are the second repeat of cases 1-3, not cases 4-6 of a three-case test set.
    expect(numbers).toEqual(['1', '2', '3', '1.1', '2.1', '3.1']);
  });
});

describe('text a model or a test set wrote, printed in a table', () => {
  it('shows control characters as their pictures: no escape sequence reaches the terminal', async () => {
    const question = '\x1b]0;pwned\x07\x1b[2Jhi\x1b[31m\x9b1m';
    const { revision_id } = await client.testsets.create({ name: 'escapes\x1b[2J', data: { testcases: [{ data: { messages: [{ role: 'user', content: question }], expected: 'hi' } }] } });
    const { evaluation } = await client.evaluations.create({ data: { testset_steps: [revision_id], application_steps: ['agenta:builtin:agent:v0'], evaluators } });
    await finished(evaluation.id);
    for (const args of [['testsets', 'show', revision_id], ['testsets', 'list'], ['eval', 'show', evaluation.id, '--cases'], ['eval', 'compare', evaluation.id, evaluation.id]]) {
      const run = await agentdCommand(args, env);
      expect(run.code, run.stderr).toBeLessThan(2);
      expect(run.stdout, args.join(' ')).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f]/);
    }
    expect((await agentdCommand(['eval', 'show', evaluation.id, '--cases'], env)).stdout).toContain('␛]0;pwned␇␛[2Jhi␛[31m\ufffd1m');
  });
});

describe('agentd eval compare', () => {
  it('lists what got better and worse, and exits 1 when B regressed', async () => {
    const run = await agentdCommand(['eval', 'compare', runA, runB], env);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^change\s+input\s+A output\s+B output\s+score A→B\s+Δ time$/m);
    expect(run.stdout).toMatch(/^better\s+what is 3\*3\s+I do not know\s+9\s+0\.00→1\.00/m);
    expect(run.stdout).toMatch(/^worse\s+capital of France\s+Paris\s+I do not know\s+1\.00→0\.00/m);
    expect(run.stdout.trim().split('\n').at(-1)).toBe('1 better, 1 worse, 1 the same');
  });

  it('refuses two runs that share no test case (two test sets): nothing to compare is no pass', async () => {
    const other = (await client.testsets.create({ name: 'other', data: { testcases: [{ data: { messages: [{ role: 'user', content: 'capital of France' }], expected: 'Paris' } }] } })).revision_id;
    const { evaluation } = await client.evaluations.create({ data: { testset_steps: [other], application_steps: ['agenta:builtin:agent:v0'] } });
    await finished(evaluation.id);
    for (const json of [[], ['--json']]) {
      const run = await agentdCommand(['eval', 'compare', runA, evaluation.id, ...json], env);
      expect(run.code, run.stdout).toBe(2);
      expect(run.stderr).toContain(`runs ${runA} and ${evaluation.id} have no test case in common; compare two runs of one test set`);
    }
  });

  it('exits 0 when nothing got worse, and says so in JSON too', async () => {
    const run = await agentdCommand(['eval', 'compare', runB, runA, '--json'], env);
    expect(run.code).toBe(1);
    const same = await agentdCommand(['eval', 'compare', runA, runA, '--json'], env);
    expect(same.code).toBe(0);
    expect(JSON.parse(same.stdout)).toMatchObject({ better: 0, worse: 0, same: 3 });
  });
});

describe('agentd eval run by application, and stop', () => {
  it('runs an application by slug, a variant of it, or what an environment deploys', async () => {
    const workflow = await client.workflows.create({ slug: 'bot', family: 'application', data: { parameters: { agent: template() } } });
    const french = await client.workflows.commit('bot', { variant: 'french', data: { parameters: { agent: { ...template(), instructions: { agents_md: 'Answer in French.' } } } } });
    await client.environments.create({ slug: 'prod' });
    await client.environments.deploy('prod', { references: { workflow_revision: { id: french.id } } });
    const ran = async (...agent: string[]) => {
      const run = await agentdCommand(['eval', 'run', '--testset', testset, ...agent, '--json'], env);
      expect(run.code, run.stderr).toBe(0);
      return JSON.parse(run.stdout).evaluation.data.application_steps as Record<string, string>;
    };
    expect(Object.keys(await ran('--app', 'bot'))).toEqual([workflow.revision!.id]);
    expect(Object.keys(await ran('--app', 'bot', '--variant', 'french'))).toEqual([french.id]);
    expect(Object.keys(await ran('--app', 'bot', '--env', 'prod'))).toEqual([french.id]);
    const both = await agentdCommand(['eval', 'run', '--testset', testset, '--app', 'bot', '--revision', french.id], env);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--revision names the agent by itself');
  });

  it('run refuses a setting past the server limits itself: exit 2 naming the flag, no run made', async () => {
    const before = (await client.evaluations.list({ limit: 200 })).evaluations.length;
    for (const [flag, value] of [['--batch-size', '1001'], ['--repeats', '101'], ['--max-retries', '21'], ['--retry-delay', '61m']] as const) {
      const res = await agentdCommand(['eval', 'run', '--testset', testset, flag, value], env);
      expect(res.code, res.stderr).toBe(2);
      expect(res.stderr).toContain(flag);
    }
    expect((await client.evaluations.list({ limit: 200 })).evaluations.length).toBe(before);
  });

  it('run exits 1 when a case scores low on its evaluators, though every turn succeeded, and 0 when all pass', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-eval-cli-'));
    const file = path.join(dir, 'evaluators.json');
    await writeFile(file, JSON.stringify(evaluators));
    wrong = new Set(['what is 3*3']);
    const low = await agentdCommand(['eval', 'run', '--testset', testset, '--evaluators', file], env);
    expect(low.stdout).toContain('3 succeeded, 0 failed');
    expect(low.stderr).toMatch(/1 case scored low \(agentd eval show \S+ --cases --failed\)/);
    expect(low.code).toBe(1);
    wrong = new Set();
    const passed = await agentdCommand(['eval', 'run', '--testset', testset, '--evaluators', file], env);
    expect(passed.code, passed.stderr).toBe(0);
    await rm(dir, { recursive: true, force: true });
  });

  it('run says how many cases failed and where to read why, as it does for cases that scored low', async () => {
    refused = new Set(['capital of France']);
    wrong = new Set(['what is 3*3']);
    try {
      const plain = await agentdCommand(['eval', 'run', '--testset', testset], env);
      expect(plain.code).toBe(1);
      expect(plain.stderr).toMatch(/1 case failed \(agentd eval show \S+ --cases --failed\)/);
      const scored = await agentdCommand(['eval', 'run', '--testset', testset, '--evaluators', await evaluatorsFile()], env);
      expect(scored.code).toBe(1);
      expect(scored.stderr).toMatch(/1 case failed, 1 scored low \(agentd eval show \S+ --cases --failed\)/);
    } finally {
      refused = new Set();
      wrong = new Set();
    }
  });

  it('stops a running run', async () => {
    latencyMs = 2000;
    const { evaluation } = await client.evaluations.create({ data: { testset_steps: [testset], application_steps: ['agenta:builtin:agent:v0'], concurrency: { batch_size: 1 } } });
    const run = await agentdCommand(['eval', 'stop', evaluation.id], env);
    latencyMs = 0;
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe(`run ${evaluation.id}: cancelled`);
  });
});

describe.runIf(hasTmux())('in a terminal', () => {
  it.each([60, 120])('fits the case table and the comparison in %i columns', async (columns) => {
    for (const args of [['eval', 'show', runA, '--cases'], ['eval', 'compare', runA, runB]]) {
      const term = await agentdInTerminal(args, env, columns);
      try {
        const screen = await term.waitFor(/\n\S.*\n*$/);
        const lines = screen.split('\n').filter((line) => line.trim());
        expect(lines.length).toBeGreaterThan(1);
        for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(columns);
        if (columns === 60) expect(screen).toContain('…');
      } finally {
        await term.close();
      }
    }
  });

  it('fits a run\'s status line in 80 columns', async () => {
    const term = await agentdInTerminal(['eval', 'show', runA], { ...env, COLUMNS: '80' }, 80);
    try {
      // The table's last row; the step column is cut to what the numbers leave of 80 columns.
      const screen = await term.waitFor(/left of 3[\s\S]*evaluator-exact[^\n]*error rate/);
      for (const line of screen.split('\n')) expect(line.length, line).toBeLessThanOrEqual(80);
      expect(screen.replace(/\s+/g, ' ')).toContain(`run ${runA}: success — 3 succeeded, 0 failed, 0 cancelled, 0 left of 3`);
    } finally {
      await term.close();
    }
  });

  it.each([60, 120])('rewrites one progress line in %i columns, and Ctrl-C asks whether to stop the run', async (columns) => {
    latencyMs = 1500;
    const term = await agentdInTerminal(['eval', 'run', '--testset', testset, '--batch-size', '1'], env, columns);
    try {
      const progress = await term.waitFor(/done, \d+ failed/);
      const lines = progress.split('\n').filter((line) => /done, \d+ failed/.test(line));
      expect(lines).toHaveLength(1);
      expect(lines[0]!.length).toBeLessThanOrEqual(columns);
      const id = /run (\S+) started/.exec(progress)![1]!;
      await term.send('C-c');
      await term.waitFor(/Stop the run on the server too\? \[y\/N\]/);
      const stop = columns === 60;
      await term.send(stop ? 'y' : 'n', 'Enter');
      // What it says is wrapped to the terminal between its words, the commands in it kept whole.
      const said = await term.waitFor(stop ? /were cancelled/ : /stops it/);
      // (The terminal itself echoes Ctrl-C as "^C" after the progress line.)
      for (const line of said.split('\n')) expect(line.replace('^C', '').length, line).toBeLessThanOrEqual(columns);
      const text = said.replace(/\s+/g, ' ');
      expect(text).toContain(`run ${id} started (agentd eval show ${id})`);
      if (stop) {
        expect(text).toContain(`stopped run ${id}: its cases in flight were cancelled`);
        await finished(id);
        expect((await client.evaluations.get(id)).evaluation.data.status).toBe('cancelled');
      } else {
        expect(text).toContain(`left run ${id} running: agentd eval show ${id} follows it, agentd eval stop ${id} stops it`);
        await client.evaluations.stop(id);
      }
    } finally {
      latencyMs = 0;
      await term.close();
    }
  });
});
