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

describe('every command’s --help', () => {
  const env = { AGENTD_URL: 'http://127.0.0.1:9', AGENTD_API_KEY: 'agd_unused', AGENTD_PROJECT_ID: 'p' };
  it.each([[], ['serve'], ['keys'], ['demo-model'], ['invoke'], ['run-many'], ['testsets'], ['eval'], ['workflows'], ['sessions'], ['eval', 'run'], ['testsets', 'import']])(
    'agentd %s fits in 80 columns',
    async (...command) => {
      const run = await agentdCommand([...command, '--help'], env);
      expect(run.code).toBe(0);
      const lines = run.stdout.split('\n');
      expect(lines.length).toBeGreaterThan(3);
      for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(80);
    },
  );
});
