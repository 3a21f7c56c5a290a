import { afterEach, describe, expect, it } from 'vitest';
import { ProgressReporter } from '../../src/cli/progress.ts';

describe('the progress line', () => {
  const columns = process.env.COLUMNS;
  afterEach(() => {
    if (columns === undefined) delete process.env.COLUMNS;
    else process.env.COLUMNS = columns;
  });

  const finished = (env: string | undefined) => {
    if (env === undefined) delete process.env.COLUMNS;
    else process.env.COLUMNS = env;
    const written: string[] = [];
    // A pseudo-terminal that reports no size (`script`, `docker run -t`) says 0 columns.
    new ProgressReporter({ isTTY: true, columns: 0, write: (text) => written.push(text) }).finish({ total: 200, done: 200, failed: 3, inFlight: 0 });
    return written.join('').replace('\r\x1b[2K', '').trimEnd();
  };

  it('on a terminal that reports no size takes COLUMNS, else 80, rather than cutting itself to "…"', () => {
    const plain = finished(undefined);
    expect(plain).toMatch(/^\[#+\] 200\/200 done, 3 failed, 0 in flight/);
    expect(plain.length).toBeLessThan(80);
    const narrow = finished('40');
    expect(narrow).toMatch(/^200\/200 done, 3 failed/);
    expect(narrow.length).toBeLessThan(40);
  });
});
