import { parse } from 'csv-parse/sync';
import { MAX_TESTCASES } from '../contract/evaluations.ts';
import { AppError } from '../errors.ts';

/**
 * Turns an uploaded CSV or JSONL file into the rows of a test set. Errors name the line or row at
 * fault, since the user fixes them in a spreadsheet or editor, not in the request.
 */

type Row = Record<string, unknown>;

const BOM = /^\uFEFF/;

/** What a file's columns may be separated by when nobody says: whichever its header line uses most. */
export const CSV_DELIMITERS = [',', ';', '\t', '|'] as const;
export type CsvDelimiter = (typeof CSV_DELIMITERS)[number];

/**
 * The delimiter of a file whose exporter chose it (a spreadsheet in a comma-decimal locale writes
 * `;`, a copy from a table tabs): the one its header line holds most often outside quotes.
 */
function sniffDelimiter(text: string): CsvDelimiter {
  const counts = new Map<CsvDelimiter, number>(CSV_DELIMITERS.map((d) => [d, 0]));
  let quoted = false;
  for (const char of text) {
    if (char === '"') quoted = !quoted;
    else if (!quoted && (char === '\n' || char === '\r')) break;
    else if (!quoted && counts.has(char as CsvDelimiter)) counts.set(char as CsvDelimiter, counts.get(char as CsvDelimiter)! + 1);
  }
  return [...counts].reduce((best, next) => (next[1] > best[1] ? next : best))[0];
}

/** The line on which the quote that is never closed opens (csv-parse names the line where the file ended). */
function unclosedQuoteLine(text: string): number {
  let line = 1;
  let opened = 1;
  let quoted = false;
  for (const char of text) {
    if (char === '"') {
      quoted = !quoted;
      if (quoted) opened = line;
    } else if (char === '\n') line++;
  }
  return opened;
}

/** csv-parse's words for a broken file, as the user fixing it in a spreadsheet needs them: the line and what to do. */
function csvError(error: unknown, text: string): AppError {
  const e = error as { code?: string; lines?: number; message?: string };
  switch (e.code) {
    case 'CSV_QUOTE_NOT_CLOSED':
      return new AppError('invalid-request', `CSV line ${unclosedQuoteLine(text)} opens a quoted field that is never closed`);
    case 'CSV_INVALID_CLOSING_QUOTE':
      return new AppError('invalid-request', `CSV line ${e.lines} has text after a closing quote; a quote inside a quoted field is written ""`);
    default:
      return new AppError('invalid-request', `the CSV file cannot be read: ${e.message ?? String(error)}`);
  }
}

/**
 * One object per row, keyed by the header line's column names; every value is text. Read by
 * csv-parse (RFC 4180: quotes, quoted line breaks, CRLF, a BOM), with `delimiter` or the one the
 * header line uses.
 */
export function parseCsv(text: string, delimiter?: CsvDelimiter): Record<string, string>[] {
  const source = text.replace(BOM, '');
  let records: Array<{ record: string[]; info: { lines: number } }>;
  try {
    records = parse(source, {
      delimiter: delimiter ?? sniffDelimiter(source),
      record_delimiter: ['\r\n', '\n'],
      skip_empty_lines: true,
      relax_column_count: true,
      info: true,
    }) as unknown as typeof records;
  } catch (error) {
    throw csvError(error, source);
  }
  const [header, ...rows] = records;
  if (!header) return [];
  const names = new Set<string>();
  header.record.forEach((name, i) => {
    if (name.trim() === '') throw new AppError('invalid-request', `CSV header column ${i + 1} has no name; every column needs one`);
    if (names.has(name)) throw new AppError('invalid-request', `CSV header names the column "${name}" twice; column names must be unique`);
    names.add(name);
  });
  return rows.map(({ record, info }) => {
    if (record.length !== header.record.length) {
      throw new AppError('invalid-request', `CSV line ${info.lines} has ${record.length} field${record.length === 1 ? '' : 's'}; the header has ${header.record.length}`);
    }
    return Object.fromEntries(header.record.map((name, i) => [name, record[i]!]));
  });
}

/** One JSON object per non-blank line. */
export function parseJsonl(text: string): Record<string, unknown>[] {
  const rows: Row[] = [];
  text
    .replace(BOM, '')
    .split('\n')
    .forEach((source, i) => {
      if (source.trim() === '') return;
      let value: unknown;
      try {
        value = JSON.parse(source);
      } catch (error) {
        throw new AppError('invalid-request', `JSONL line ${i + 1} is not valid JSON: ${(error as Error).message}`);
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        throw new AppError('invalid-request', `JSONL line ${i + 1} is not a JSON object; each line holds one test case`);
      }
      rows.push(value as Row);
    });
  return rows;
}

/** Columns that hold a test case's question when no `messages` column or `input` option says otherwise. */
const TEXT_COLUMNS = ['input', 'question'];

/**
 * Test cases from parsed rows: each keeps all its columns (evaluators read them) and gets the
 * conversation a run sends in `messages`, either given as such or built from a text column.
 */
export function toTestcases(rows: Record<string, unknown>[], options: { input?: string } = {}): { data: Record<string, unknown> }[] {
  if (rows.length === 0) throw new AppError('invalid-request', 'the file has no test cases: a CSV needs a row under its header, JSONL one object a line');
  if (rows.length > MAX_TESTCASES) {
    throw new AppError('invalid-request', `the file has ${rows.length} rows; a test set holds at most ${MAX_TESTCASES}`);
  }
  return rows.map((row, i) => ({ data: { ...row, messages: conversation(row, i + 1, options.input) } }));
}

function conversation(row: Row, n: number, input: string | undefined): unknown[] {
  if (Object.hasOwn(row, 'messages')) return messagesColumn(row.messages, n);
  const columns = Object.keys(row);
  if (input !== undefined && !Object.hasOwn(row, input)) {
    throw new AppError('invalid-request', `row ${n} has no column "${input}" (the input option); its columns are: ${columns.join(', ') || 'none'}`);
  }
  const column = input ?? TEXT_COLUMNS.find((name) => Object.hasOwn(row, name));
  if (column === undefined) {
    throw new AppError(
      'invalid-request',
      `row ${n} has no conversation: its columns are ${columns.join(', ') || 'none'}; a test case needs a "messages" column (a JSON array of messages) or an "input" or "question" column (or name its text column with the input option)`,
    );
  }
  const text = row[column];
  if (typeof text !== 'string') throw new AppError('invalid-request', `row ${n}: column "${column}" is not text`);
  return [{ role: 'user', content: text }];
}

/** A `messages` column: an array from JSONL, or its JSON text from a CSV cell. */
function messagesColumn(value: unknown, n: number): unknown[] {
  if (Array.isArray(value)) return value;
  if (typeof value === 'string') {
    try {
      const parsed: unknown = JSON.parse(value);
      if (Array.isArray(parsed)) return parsed;
    } catch {
      // reported below, as a value that is not an array is
    }
  }
  throw new AppError('invalid-request', `row ${n}: column "messages" is not a JSON array of messages`);
}
