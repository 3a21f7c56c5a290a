import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/testing/fake-model.ts';
import { builtin, startHarness, template, type Harness } from '../support/harness.ts';
import { agentdCommand, runAgentd, type CommandRun } from '../support/child-server.ts';
import { createWorkflow } from '../configs/client.ts';
import { createClient } from '../../src/client/index.ts';

/**
 * The client commands as a user runs them (issue 6): `agentd invoke` (streaming, approvals answered
 * on stdin, a chat), `run-many` (results file line by line, resume), `testsets import`, `eval run`
 * and `eval show`, each a child process against a real server.
 */

let h: Harness;
let dir: string;
const calls = new Map<string, number>();

const userText = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';

function script(req: RecordedRequest) {
  const text = userText(req);
  calls.set(text, (calls.get(text) ?? 0) + 1);
  const last = req.messages.at(-1);
  if (text.startsWith('write')) {
    if (last?.role === 'tool') return { text: `tool said: ${last.content}` };
    return { toolCalls: [{ name: 'write', input: { path: 'note.txt', content: 'from the cli' } }] };
  }
  if (text.startsWith('emoji')) return last?.role === 'tool' ? { text: 'done' } : { toolCalls: [{ name: 'write', input: { path: 'note.txt', content: `a${'😀'.repeat(150)}` } }] };
  if (text.startsWith('fail')) return { error: { status: 401, message: 'bad key' } };
  if (text.startsWith('slow')) return { text: `echo: ${text}`, latencyMs: 1500 };
  if (text.startsWith('held')) return { text: `echo: ${text}`, latencyMs: 3000 };
  return { text: `echo: ${text}` };
}

const agentd = (args: string[], stdin = '', env: Record<string, string> = {}): Promise<CommandRun> =>
  agentdCommand(args, { AGENTD_URL: h.url, AGENTD_API_KEY: h.apiKey, AGENTD_PROJECT_ID: h.projectId, ...env }, stdin);

const file = async (name: string, content: string) => {
  const at = path.join(dir, name);
  await writeFile(at, content);
  return at;
};

let templateFile: string;

beforeAll(async () => {
  h = await startHarness({ script });
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-cli-'));
  templateFile = await file('template.json', JSON.stringify(template({ tools: [builtin('write')], mode: 'ask' })));
});
afterAll(async () => {
  await h.close();
  await rm(dir, { recursive: true, force: true });
});

describe('agentd invoke', () => {
  it('streams one turn to stdout and exits 0', async () => {
    const run = await agentd(['invoke', '--message', 'hello there', '--template', templateFile, '--session', 'cli-one']);
    expect(run).toMatchObject({ code: 0, stdout: 'echo: hello there\n' });
  });

  it('takes --stream, the default, as the API names it', async () => {
    const run = await agentd(['invoke', '--message', 'streamed', '--stream', '--template', templateFile]);
    expect(run).toMatchObject({ code: 0, stdout: 'echo: streamed\n' });
    const both = await agentd(['invoke', '--message', 'x', '--stream', '--json', '--template', templateFile]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('give --stream or --json, not both');
  });

  it('asks about an approval on stdin and goes on with the answer', async () => {
    const approved = await agentd(['invoke', '--message', 'write a note', '--template', templateFile, '--session', 'cli-approve'], 'y\n');
    expect(approved.code).toBe(0);
    expect(approved.stderr).toMatch(/allow write \{"path":"note.txt","content":"from the cli"\}\? \[y\/N\]/);
    expect(approved.stdout).toContain('tool said:');
    expect(await readFile(path.join(h.sessionDir('cli-approve'), 'note.txt'), 'utf8')).toBe('from the cli');

    const denied = await agentd(['invoke', '--message', 'write another', '--template', templateFile, '--session', 'cli-deny'], 'n not today\n');
    expect(denied.code).toBe(0);
    expect(denied.stderr).toContain('denied:');
    expect(denied.stdout).toContain('not today');
    expect(existsSync(path.join(h.sessionDir('cli-deny'), 'note.txt'))).toBe(false);
  });

  it('cuts a long tool input between characters, never inside an emoji', async () => {
    // The input's 200th UTF-16 unit is the first half of an emoji: cut there, it printed "�".
    const run = await agentd(['invoke', '--message', 'emoji', '--template', templateFile, '--session', 'cli-emoji'], 'n\n');
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/allow write \{"path":"note.txt","content":"a(😀)+…\? \[y\/N\]/);
    expect(run.stderr).not.toContain('\ufffd');
  });

  it('says the turn stays paused, and how to answer it, when stdin ends before an approval', async () => {
    const run = await agentd(['invoke', '--message', 'write unanswered', '--template', templateFile, '--session', 'cli-eof'], '');
    expect(run.code).toBe(1);
    const [pending] = await h.store.interactions.listPending(h.projectId, 'cli-eof');
    expect(pending).toMatchObject({ kind: 'user_approval', status: 'pending' });
    expect(run.stderr).toContain('? [y/N] \nagentd invoke: stdin ended before the approval was given; the turn stays paused.');
    expect(run.stderr).toContain('--approve or --deny');
    expect(run.stderr).toContain(`/api/sessions/interactions/${pending!.id}/respond`);
    expect(existsSync(path.join(h.sessionDir('cli-eof'), 'note.txt'))).toBe(false);
  });

  it('is a chat without --message: each turn carries the conversation so far', async () => {
    h.model.reset();
    const run = await agentd(['invoke', '--template', templateFile, '--session', 'cli-chat'], 'first line\nsecond line\n\n');
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('echo: first line\necho: second line\n');
    const second = h.model.requests.at(-1)!.messages.map((m) => m.content);
    expect(second).toEqual(expect.arrayContaining(['first line', 'echo: first line', 'second line']));
  });

  it('refuses a --file with no conversation instead of exiting 0 having done nothing', async () => {
    const empty = await file('empty-request.json', JSON.stringify({ session_id: 'cli-empty' }));
    const run = await agentd(['invoke', '--file', empty, '--template', templateFile]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`--file ${empty} has no conversation: put it in data.inputs.messages, or use --message`);
  });

  it('fails with the server error and exit 1', async () => {
    const run = await agentd(['invoke', '--message', 'fail now', '--template', templateFile]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/424 upstream-auth/);
  });
});

describe('agentd run-many', () => {
  it('writes one result line per input, exits 1 when one failed, and resumes', async () => {
    const inputs = await file('inputs.jsonl', ['{"message": "one"}', '{"messages": [{"role": "user", "content": "two"}]}', '{"message": "fail three"}', '{"data": {"inputs": {"messages": [{"role": "user", "content": "four"}]}}}'].join('\n'));
    const out = path.join(dir, 'results.jsonl');
    const run = await agentd(['run-many', '--input', inputs, '--out', out, '--template', templateFile, '--concurrency', '2', '--retries', '0']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/3 succeeded, 1 failed/);
    const lines = (await readFile(out, 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.index, l.status]).sort()).toEqual([
      [0, 'success'],
      [1, 'success'],
      [2, 'failure'],
      [3, 'success'],
    ]);
    const byIndex = Object.fromEntries(lines.map((l) => [l.index, l]));
    expect(byIndex[1].output.at(-1).content).toBe('echo: two');
    expect(byIndex[2].error).toMatchObject({ code: 424, type: 'upstream-auth' });
    expect(new Set(lines.filter((l) => l.status === 'success').map((l) => l.session_id)).size).toBe(3);

    const before = calls.get('one');
    const resumed = await agentd(['run-many', '--input', inputs, '--out', out, '--template', templateFile, '--resume', '--retries', '0']);
    expect(resumed.stderr).toContain('resuming: 3 of 4 inputs already succeeded');
    expect(calls.get('one')).toBe(before);
    const after = (await readFile(out, 'utf8')).trim().split('\n');
    expect(after).toHaveLength(5);
    expect(JSON.parse(after[4]!)).toMatchObject({ index: 2, status: 'failure' });
  });

  it("names a failed input's session as it names a succeeded one's, minted by the server or not", async () => {
    const inputs = await file('failing.jsonl', ['{"message": "fail once"}', '{"message": "fine"}'].join('\n'));
    for (const session of ['fresh', 'none']) {
      const run = await agentd(['run-many', '--input', inputs, '--out', '-', '--template', templateFile, '--session', session, '--retries', '0']);
      expect(run.code).toBe(1);
      const failed = run.stdout.trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.status === 'failure');
      expect(failed).toMatchObject({ index: 0, error: { code: 424 }, session_id: expect.any(String) });
      const turns = await h.store.turns.listForSession(h.projectId, failed.session_id, { limit: 5 });
      expect(turns.map((t) => t.status)).toEqual(['failed']);
    }
  });

  it('Ctrl-C stops it and says what happened: inputs cut off are cancelled, not failed, and which had started', async () => {
    const inputs = await file('slow.jsonl', [1, 2, 3, 4, 5, 6].map((n) => JSON.stringify({ message: `slow ${n}` })).join('\n'));
    const out = path.join(dir, 'slow-out.jsonl');
    h.model.reset();
    const run = runAgentd(['run-many', '--input', inputs, '--out', out, '--template', templateFile, '--concurrency', '2'], { AGENTD_URL: h.url, AGENTD_API_KEY: h.apiKey, AGENTD_PROJECT_ID: h.projectId });
    while (h.model.requests.length < 2) await new Promise((r) => setTimeout(r, 20));
    run.child.kill('SIGINT');
    await run.exited;
    expect(run.output()).toMatch(/interrupted: 0 succeeded, 0 failed, 6 cancelled/);
    expect(run.output()).toMatch(/2 of them had started and run on to their end on the server \(sessions run-many-\S+-[01], run-many-\S+-[01]\)/);
    expect(run.output()).toMatch(/--resume runs the 6 cancelled inputs again/);
  });

  it('--resume right after a Ctrl-C waits for a turn still running in its session, then runs the input there', async () => {
    const inputs = await file('held.jsonl', '{"message": "held for a while"}\n');
    const out = path.join(dir, 'held-out.jsonl');
    const args = ['run-many', '--input', inputs, '--out', out, '--template', templateFile, '--session-id', 'cli-held', '--retries', '0', '--retry-delay', '200ms'];
    h.model.reset();
    const first = runAgentd(args, { AGENTD_URL: h.url, AGENTD_API_KEY: h.apiKey, AGENTD_PROJECT_ID: h.projectId });
    while (h.model.requests.length < 1) await new Promise((r) => setTimeout(r, 20));
    first.child.kill('SIGINT');
    await first.exited;
    expect(first.output()).toMatch(/interrupted: 0 succeeded, 0 failed, 1 cancelled/);
    const client = createClient({ baseUrl: h.url, apiKey: h.apiKey, projectId: h.projectId });
    expect((await client.sessions.get('cli-held-0')).live_turn).toBeDefined();

    const resumed = await agentd([...args, '--resume']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toMatch(/1 succeeded, 0 failed/);
    const last = JSON.parse((await readFile(out, 'utf8')).trim().split('\n').at(-1)!);
    // The wait was no attempt: --retries 0 still had its one.
    expect(last).toMatchObject({ index: 0, status: 'success', session_id: 'cli-held-0', attempts: 1 });
    expect(h.model.requests).toHaveLength(2);
  });

  it('reads the inputs from stdin with --input - and writes the results to stdout with --out -', async () => {
    const run = await agentd(['run-many', '--input', '-', '--out', '-', '--template', templateFile], '{"message": "piped one"}\n{"message": "piped two"}\n');
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.index, l.status, l.output.at(-1).content]).sort()).toEqual([
      [0, 'success', 'echo: piped one'],
      [1, 'success', 'echo: piped two'],
    ]);
    expect(run.stderr).toMatch(/2 succeeded, 0 failed .*; results on stdout\n/);

    const resume = await agentd(['run-many', '--input', '-', '--out', '-', '--resume'], '{"message": "never sent"}\n');
    expect(resume).toMatchObject({ code: 2, stdout: '' });
    expect(resume.stderr).toContain('--resume reads the results so far from --out: give it the results file, not -');
  });

  it('refuses a malformed input file, naming the line', async () => {
    const inputs = await file('bad.jsonl', '{"message": "ok"}\nnot json\n');
    const run = await agentd(['run-many', '--input', inputs, '--out', path.join(dir, 'bad-out.jsonl')]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--input line 2 is not JSON/);
  });

  it('reads a file saved with a byte-order mark', async () => {
    const inputs = await file('bom.jsonl', '\uFEFF{"message": "with a mark"}\n');
    const out = path.join(dir, 'bom-out.jsonl');
    const run = await agentd(['run-many', '--input', inputs, '--out', out, '--template', templateFile]);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse((await readFile(out, 'utf8')).trim())).toMatchObject({ index: 0, status: 'success' });
  });

  it('names the file it cannot read or write, before running anything', async () => {
    const missing = await agentd(['run-many', '--input', path.join(dir, 'no-such.jsonl'), '--out', path.join(dir, 'unused.jsonl')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^agentd run-many: --input \S+no-such\.jsonl cannot be read: ENOENT/);

    h.model.reset();
    const inputs = await file('unwritable.jsonl', '{"message": "never sent"}\n');
    const unwritable = await agentd(['run-many', '--input', inputs, '--out', path.join(dir, 'no-such-folder', 'out.jsonl'), '--template', templateFile]);
    expect(unwritable.code).toBe(2);
    expect(unwritable.stderr).toMatch(/^agentd run-many: --out \S+out\.jsonl cannot be written: ENOENT/);
    expect(unwritable.stderr).not.toMatch(/\n\s+at /);
    expect(h.model.requests).toHaveLength(0);
  });
});

describe('agentd testsets', () => {
  it('imports a CSV of any delimiter, guessed from its header or given, and lists and shows test sets', async () => {
    const semicolons = await agentd(['testsets', 'import', await file('semi.csv', 'question;expected\n"one, two";1,5\n'), '--name', 'semicolons']);
    expect(semicolons.stdout).toMatch(/^test set "semicolons" .*: 1 rows$/m);
    const tabs = await agentd(['testsets', 'import', await file('tabs.tsv', 'question\texpected\nthree, four\t2\n'), '--name', 'tabs']);
    expect(tabs.stdout).toMatch(/^test set "tabs" .*: 1 rows$/m);
    const given = await agentd(['testsets', 'import', await file('given.csv', 'question|expected\na;b|c\n'), '--delimiter', '|', '--name', 'pipes']);
    expect(given.code).toBe(0);
    const wrong = await agentd(['testsets', 'import', await file('wrong.csv', 'a\n1\n'), '--delimiter', 'x']);
    expect(wrong).toMatchObject({ code: 2, stderr: 'agentd testsets: --delimiter must be one of , ; | tab, got "x"\n' });

    const listed = await agentd(['testsets', 'list']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^test set\s+rows\s+ver\s+revision id$/m);
    expect(listed.stdout).toMatch(/^semicolons \(\S+\)\s+1\s+1\s+\S+$/m);
    const shown = await agentd(['testsets', 'show', /revision id: (\S+)/.exec(semicolons.stdout)![1]!]);
    expect(shown.stdout).toMatch(/^test set "semicolons", version 1, 1 rows/);
    expect(shown.stdout).toMatch(/^1\s+\[\{"role":"user","content":"one, two"\}\]\s+one, two\s+1,5$/m);
  });
});

describe('agentd testsets import', () => {
  it('refuses a file that is not UTF-8, saying how to fix it', async () => {
    const at = path.join(dir, 'latin1.csv');
    await writeFile(at, Buffer.from('question,expected\ncaf\xe9,ol\xe9\n', 'latin1'));
    const run = await agentd(['testsets', 'import', at]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/latin1\.csv is not UTF-8 text: save it as UTF-8/);
  });
});

describe('agentd testsets and eval', () => {
  it('imports a CSV, runs an evaluation with a metrics table, exits by its outcome, and shows it', async () => {
    const csv = await file('cases.csv', 'question,expected\nhi,echo: hi\n"a, b","echo: a, b"\n');
    const imported = await agentd(['testsets', 'import', csv]);
    expect(imported).toMatchObject({ code: 0, stderr: '' });
    const revision = /revision id: (\S+)/.exec(imported.stdout)![1]!;
    expect(imported.stdout).toMatch(/^test set "cases.csv" \(\S+\), version 1: 2 rows$/m);
    const workflow = (await createWorkflow(h, 'cli-eval', { agent: template() })).revision.id;
    const evaluators = await file('evaluators.json', JSON.stringify([{ kind: 'exact_match' }]));

    const run = await agentd(['eval', 'run', '--testset', revision, '--revision', workflow, '--evaluators', evaluators, '--batch-size', '2']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/: success — 2 succeeded, 0 failed/);
    expect(run.stdout).toMatch(/evaluator-exact_match\s+pass rate\s+2\s+100\.0%/);
    expect(run.stdout).toMatch(/application-cli-eval\s+duration_ms\s+2/);
    const id = /run (\S+) started/.exec(run.stderr)![1]!;

    const show = await agentd(['eval', 'show', id, '--json']);
    expect(show.code).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ evaluation: { id, data: { status: 'success' } }, metrics: [{ run_id: id }] });

    const failing = await agentd(['testsets', 'import', await file('failing.jsonl', '{"question": "fail this"}\n')]);
    const failingRevision = /revision id: (\S+)/.exec(failing.stdout)![1]!;
    const bad = await agentd(['eval', 'run', '--testset', failingRevision, '--revision', workflow]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/errors — 0 succeeded, 1 failed/);
  });

  it('refuses counts that are not whole numbers on the command line, naming the flag', async () => {
    const run = await agentd(['eval', 'run', '--testset', 'any', '--revision', 'any', '--repeats', '1.5']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--repeats must be a whole number from 1 to 100, got "1.5"');
  });

  it('takes a retry delay as a duration with its unit, the same in every command', async () => {
    for (const delay of ['1.5s', '500ms', '1m']) {
      const ok = await agentd(['eval', 'run', '--testset', 'any', '--revision', 'any', '--retry-delay', delay]);
      expect(ok.stderr).not.toContain('--retry-delay');
    }
    for (const command of [['eval', 'run', '--testset', 'any'], ['run-many', '--input', 'in.jsonl', '--out', 'out.jsonl']]) {
      for (const bad of ['0.5', '-1s', 'soon']) {
        const run = await agentd([...command, `--retry-delay=${bad}`]);
        expect(run.code).toBe(2);
        expect(run.stderr).toContain(`--retry-delay must be a duration with its unit, such as 2s, 1.5s or 500ms, got "${bad}"`);
      }
    }
  });
});

describe('every client command', () => {
  it.each([['invoke'], ['run-many'], ['testsets'], ['eval'], ['sessions'], ['workflows']])('%s --help prints its usage', async (command) => {
    const run = await agentd([command, '--help']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Usage:/);
    expect(run.stdout).toContain('AGENTD_API_KEY');
  });

  it('help <command> prints that command\'s usage, as <command> --help does', async () => {
    const run = await agentd(['help', 'eval']);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe((await agentd(['eval', '--help'])).stdout);
  });

  it('says what to set when the key is missing', async () => {
    const run = await agentd(['invoke', '--message', 'hi'], '', { AGENTD_API_KEY: '' });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--api-key or set AGENTD_API_KEY/);
  });

  it('says which flag or variable to fix when the url, key or project is wrong', async () => {
    const url = await agentd(['invoke', '--message', 'hi', '--url', 'localhost:8787']);
    expect(url).toMatchObject({ code: 2, stderr: expect.stringContaining('--url "localhost:8787" is not an http(s) URL') });
    const envUrl = await agentd(['eval', 'show', 'x'], '', { AGENTD_URL: 'nowhere' });
    expect(envUrl).toMatchObject({ code: 2, stderr: expect.stringContaining('AGENTD_URL "nowhere" is not an http(s) URL') });

    const key = await agentd(['invoke', '--message', 'hi'], '', { AGENTD_API_KEY: 'agd_wrong' });
    expect(key.code).toBe(1);
    expect(key.stderr).toMatch(/401 unauthenticated: .*\(check --api-key or AGENTD_API_KEY\)/);
    const project = await agentd(['testsets', 'import', '--project', 'someone-else', await file('p.csv', 'question\nhi\n')]);
    expect(project.code).toBe(1);
    expect(project.stderr).toMatch(/403 forbidden: .*\(check --project or AGENTD_PROJECT_ID/);
  });

  it('refuses a session id the server would refuse as the command line\'s mistake (exit 2), before sending anything', async () => {
    const inputs = await file('one.jsonl', '{"message": "never sent"}\n');
    const cases: [string[], string][] = [
      [['invoke', '--message', 'never sent', '--session', 'my chat'], 'agentd invoke: --session must be 1-128 letters, digits, ".", "_", ":" or "-", got "my chat"'],
      [['run-many', '--input', inputs, '--out', path.join(dir, 'never.jsonl'), '--session-id', 'run/1'], 'agentd run-many: --session-id must be 1-128 letters, digits, ".", "_", ":" or "-", got "run/1"'],
      [['sessions', 'show', 'my chat'], 'agentd sessions: the session id must be 1-128 letters, digits, ".", "_", ":" or "-", got "my chat"'],
    ];
    for (const [args, message] of cases) {
      const run = await agentd(args);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr.trim(), args.join(' ')).toBe(message);
    }
    expect(calls.has('never sent')).toBe(false);
    expect(existsSync(path.join(dir, 'never.jsonl'))).toBe(false);
  });

  it('says where to find the right id when the project has none by the one given', async () => {
    const cases: [string[], RegExp][] = [
      [['sessions', 'show', 'no-such-session'], /404 not-found: .*\(`agentd sessions list` lists the sessions\)$/],
      [['testsets', 'show', 'no-such-testset'], /404 not-found: .*\(`agentd testsets list` lists the test sets\)$/],
      [['eval', 'show', 'no-such-run'], /404 not-found: .*\(a run's id is the one `agentd eval run` printed\)$/],
      [['eval', 'run', '--testset', 'no-such-revision'], /404 unknown-reference: .*\(`agentd testsets list` shows each test set's revision id; /],
      [['invoke', '--message', 'hi', '--revision', 'no-such-revision'], /404 unknown-reference: .*\(`agentd workflows create` and `agentd workflows commit` print a revision's id\)$/],
      [['workflows', 'commit', 'no-such-workflow', '--template', templateFile], /404 not-found: .*\(`agentd workflows list` lists the workflows and environments\)$/],
    ];
    for (const [args, message] of cases) {
      const run = await agentd(args);
      expect(run.code, args.join(' ')).toBe(1);
      expect(run.stderr.trim(), args.join(' ')).toMatch(message);
    }
  });
});
