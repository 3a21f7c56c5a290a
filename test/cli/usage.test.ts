import { describe, expect, it } from 'vitest';
import { fitUsage } from '../../src/cli/usage.ts';
import { agentdCommand } from '../support/child-server.ts';

/** Help fits the terminal: 80 columns when it is written to a pipe, as here. */

const words = (text: string) => text.split(/\s+/).filter(Boolean);

describe('fitUsage', () => {
  const usage = [
    'Runs one agent turn per input line, --concurrency at a time, and writes one result line per input to --out as each finishes.',
    'Exits 0 when every input succeeded.',
    '',
    '  --out FILE           where results go, one JSON line per input: {index, status, session_id,',
    '                       output, error, attempts, duration_ms}',
    '  --resume             keep --out',
    '  agentd keys create --project NAME [--role viewer|editor|admin] [--json] [--and-a-long-flag]',
    '  agentd keys list',
  ].join('\n');

  it.each([80, 60, 40])('keeps every word, in order, within %i columns', (width) => {
    const fitted = fitUsage(usage, width);
    for (const line of fitted.split('\n')) expect(line.length, line).toBeLessThanOrEqual(width);
    expect(words(fitted)).toEqual(words(usage));
  });

  it('carries what it cuts into the line that goes on with the same text, and leaves a separate line alone', () => {
    expect(fitUsage(usage, 80).split('\n')).toEqual([
      'Runs one agent turn per input line, --concurrency at a time, and writes one',
      'result line per input to --out as each finishes. Exits 0 when every input',
      'succeeded.',
      '',
      '  --out FILE           where results go, one JSON line per input: {index,',
      '                       status, session_id, output, error, attempts, duration_ms}',
      '  --resume             keep --out',
      '  agentd keys create --project NAME [--role viewer|editor|admin] [--json]',
      '  [--and-a-long-flag]',
      '  agentd keys list',
    ]);
  });
});

/**
 * What reads unevenly in a help: options (or commands) of one list whose descriptions start in
 * different columns, a line that goes on with a description and does not start under it, or one
 * whose first word would have fitted on the line before it (the line above cut short). The lines
 * of a paragraph at the left margin are held to the last.
 */
function uneven(help: string, width = 80): string[] {
  type Entry = { indent: number; column: number };
  const problems: string[] = [];
  // The options and commands the line at hand may belong to, innermost last (eval run's own options sit in its description).
  let entries: Entry[] = [];
  let previous: { line: string; owner: Entry | undefined } | undefined;
  // Per list (lines between blank ones), the column descriptions start in, by the indent of their names.
  let columns = new Map<number, number>();
  for (const line of help.split('\n')) {
    if (line.trim() === '') {
      entries = [];
      previous = undefined;
      columns = new Map();
      continue;
    }
    const indent = /^ */.exec(line)![0].length;
    while (entries.length && indent <= entries.at(-1)!.indent) entries.pop();
    const entry = /^( *\S+(?: \S+)* {2,})\S/.exec(line);
    let owner = entries.at(-1);
    if (entry) {
      owner = { indent, column: entry[1]!.length };
      entries.push(owner);
      if (!columns.has(indent)) columns.set(indent, owner.column);
      else if (columns.get(indent) !== owner.column) problems.push(`not in the column of the list's other descriptions: ${line}`);
    } else if (owner && indent !== owner.column) {
      problems.push(`not under its description: ${line}`);
    }
    const goesOn = !entry && previous && (owner ? previous.owner === owner : indent === 0 && /^\S/.test(previous.line));
    if (goesOn && previous!.line.length + 1 + line.trim().split(' ')[0]!.length <= width) problems.push(`could have gone on the line above: ${line}`);
    previous = { line, owner };
  }
  return problems;
}

describe('fitUsage in a narrower terminal', () => {
  it('fills each description anew, every line under where it starts', () => {
    const help = [
      '  --session-id ID         shared: the session\'s id; fresh: the prefix of each',
      '                          input\'s id, ID-<index> (default: a new prefix each',
      '                          run, so --resume runs inputs in new sessions)',
      '  --template FILE         an agent template (JSON) for inputs that carry none',
    ].join('\n');
    for (const width of [60, 50]) {
      const fitted = fitUsage(help, width);
      expect(uneven(fitted, width), fitted).toEqual([]);
      expect(words(fitted)).toEqual(words(help));
    }
  });
});

describe('every command’s --help', () => {
  const env = { AGENTD_URL: 'http://127.0.0.1:9', AGENTD_API_KEY: 'agd_unused', AGENTD_PROJECT_ID: 'p' };
  it.each([[], ['serve'], ['keys'], ['demo-model'], ['invoke'], ['run-many'], ['testsets'], ['eval'], ['workflows'], ['sessions'], ['eval', 'run'], ['testsets', 'import']])(
    'agentd %s fits in 80 columns, each description going on under itself',
    async (...command) => {
      const run = await agentdCommand([...command, '--help'], env);
      expect(run.code).toBe(0);
      const lines = run.stdout.split('\n');
      expect(lines.length).toBeGreaterThan(3);
      for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(80);
      expect(uneven(run.stdout)).toEqual([]);
    },
  );
});
