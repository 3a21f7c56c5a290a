import { describe, expect, it } from 'vitest';
import { MAX_TESTCASES } from '../../src/contract/evaluations.ts';
import { AppError } from '../../src/errors.ts';
import { parseCsv, parseJsonl, toTestcases } from '../../src/evaluation/testset-import.ts';

/** Uploaded test set files: CSV per RFC 4180, JSONL, and the mapping of rows to conversations. */

function invalid(run: () => unknown, ...parts: string[]): void {
  let caught: unknown;
  try {
    run();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(AppError);
  const error = caught as AppError;
  expect(error.type).toBe('invalid-request');
  expect(error.status).toBe(400);
  for (const part of parts) expect(error.message).toContain(part);
}

describe('parseCsv', () => {
  it('reads rows keyed by the header, with a trailing newline', () => {
    expect(parseCsv('question,expected\nWhat is 2+2?,4\nCapital of France?,Paris\n')).toEqual([
      { question: 'What is 2+2?', expected: '4' },
      { question: 'Capital of France?', expected: 'Paris' },
    ]);
  });

  it('reads quoted commas, newlines and escaped quotes', () => {
    expect(parseCsv('a,b\n"x, y","line 1\nline 2"\n"say ""hi""",""\n')).toEqual([
      { a: 'x, y', b: 'line 1\nline 2' },
      { a: 'say "hi"', b: '' },
    ]);
  });

  it('reads CRLF line endings, keeping a CRLF inside quotes', () => {
    expect(parseCsv('a,b\r\n1,"2\r\n3"\r\n4,5\r\n')).toEqual([
      { a: '1', b: '2\r\n3' },
      { a: '4', b: '5' },
    ]);
  });

  it('drops a BOM and skips blank lines', () => {
    expect(parseCsv('\uFEFFa,b\n\n1,2\n\r\n3,4\n\n')).toEqual([
      { a: '1', b: '2' },
      { a: '3', b: '4' },
    ]);
  });

  it('keeps empty fields, including a last one', () => {
    expect(parseCsv('a,b,c\n,x,\n')).toEqual([{ a: '', b: 'x', c: '' }]);
  });

  it('reads nothing from an empty file', () => {
    expect(parseCsv('')).toEqual([]);
    expect(parseCsv('a,b\n')).toEqual([]);
  });

  it('names the line of a row with a different field count, counting lines inside quotes', () => {
    invalid(() => parseCsv('a,b\n1,2\n3,4\n5,6,7\n'), 'CSV line 4 has 3 fields; the header has 2');
    invalid(() => parseCsv('a,b\n"1\n2",3\n\n4\n'), 'CSV line 5 has 1 field; the header has 2');
  });

  it('names the line where an unterminated quote opens', () => {
    invalid(() => parseCsv('a,b\n1,2\n3,"four\nfive\n'), 'CSV line 3', 'never closed');
  });

  it('rejects text after a closing quote', () => {
    invalid(() => parseCsv('a,b\n"1"x,2\n'), 'CSV line 2', 'after a closing quote');
  });

  it('reads the delimiter the header line uses: semicolons, tabs, pipes', () => {
    expect(parseCsv('question;expected\n"a, b";1,5\n')).toEqual([{ question: 'a, b', expected: '1,5' }]);
    expect(parseCsv('question\texpected\nx, y\t2\n')).toEqual([{ question: 'x, y', expected: '2' }]);
    expect(parseCsv('question|expected\nx|3\n')).toEqual([{ question: 'x', expected: '3' }]);
    // A delimiter given wins over the guess.
    expect(parseCsv('a;b,c\n1;2,3\n', ',')).toEqual([{ 'a;b': '1;2', c: '3' }]);
  });

  it('rejects duplicate and empty header names', () => {
    invalid(() => parseCsv('a,b,a\n1,2,3\n'), 'column "a" twice');
    invalid(() => parseCsv('a,,c\n1,2,3\n'), 'column 2 has no name');
  });
});

describe('parseJsonl', () => {
  it('reads one object per line, skipping blank lines, and keeps arrays', () => {
    const text = '{"messages":[{"role":"user","content":"hi"}],"expected":"hello"}\r\n\n{"input":"2+2","tags":["math"]}\n';
    expect(parseJsonl(text)).toEqual([
      { messages: [{ role: 'user', content: 'hi' }], expected: 'hello' },
      { input: '2+2', tags: ['math'] },
    ]);
  });

  it('names a line that is not JSON', () => {
    invalid(() => parseJsonl('{"input":"a"}\n\n{"input":\n'), 'JSONL line 3 is not valid JSON');
  });

  it('names a line that is not an object', () => {
    invalid(() => parseJsonl('{"input":"a"}\n[1,2]\n'), 'JSONL line 2 is not a JSON object');
    invalid(() => parseJsonl('null\n'), 'JSONL line 1 is not a JSON object');
  });
});

describe('toTestcases', () => {
  it('parses a messages column given as JSON text', () => {
    const rows = parseCsv('messages,expected\n"[{""role"":""user"",""content"":""hi""}]",hello\n');
    expect(toTestcases(rows)).toEqual([{ data: { messages: [{ role: 'user', content: 'hi' }], expected: 'hello' } }]);
  });

  it('keeps a messages column that is already an array', () => {
    const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }];
    expect(toTestcases(parseJsonl(JSON.stringify({ messages, expected: 'hello' })))).toEqual([{ data: { messages, expected: 'hello' } }]);
  });

  it('turns an input or question column into a user message, keeping the column', () => {
    expect(toTestcases([{ question: 'Capital of France?', expected: 'Paris' }])).toEqual([
      { data: { question: 'Capital of France?', expected: 'Paris', messages: [{ role: 'user', content: 'Capital of France?' }] } },
    ]);
    expect(toTestcases([{ question: 'not this', input: 'this' }])[0]!.data.messages).toEqual([{ role: 'user', content: 'this' }]);
  });

  it('uses the column the input option names', () => {
    expect(toTestcases([{ prompt: 'hi', question: 'not this' }], { input: 'prompt' })).toEqual([
      { data: { prompt: 'hi', question: 'not this', messages: [{ role: 'user', content: 'hi' }] } },
    ]);
  });

  it('names the row that lacks the input option column', () => {
    invalid(() => toTestcases([{ prompt: 'a' }, { other: 'b' }], { input: 'prompt' }), 'row 2 has no column "prompt"', 'other');
  });

  it('names the row and column of a messages value that is not a JSON array', () => {
    invalid(() => toTestcases([{ messages: '[]' }, { messages: 'hello' }]), 'row 2', 'column "messages"', 'JSON array');
    invalid(() => toTestcases([{ messages: '{"role":"user"}' }]), 'row 1', 'column "messages"');
  });

  it('says which columns were found when a row has no conversation', () => {
    invalid(() => toTestcases([{ prompt: 'hi', expected: 'hello' }]), 'row 1', 'prompt, expected', '"messages" column', '"input" or "question" column', 'input option');
  });

  it('rejects a text column that is not text', () => {
    invalid(() => toTestcases([{ input: 42 }]), 'row 1', 'column "input" is not text');
  });

  it('rejects a file with no rows or too many', () => {
    invalid(() => toTestcases([]), 'the file has no test cases: a CSV needs a row under its header, JSONL one object a line');
    invalid(() => toTestcases(parseCsv('input,expected\n')), 'the file has no test cases: a CSV needs a row under its header');
    const rows = Array.from({ length: MAX_TESTCASES + 1 }, () => ({ input: 'x' }));
    invalid(() => toTestcases(rows), `${MAX_TESTCASES + 1} rows`, `at most ${MAX_TESTCASES}`);
  });
});
