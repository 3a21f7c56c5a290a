import { MAX_TESTCASES } from '../contract/evaluations.ts';
import { AppError } from '../errors.ts';

/**
 * Turns an uploaded CSV or JSONL file into the rows of a test set. Errors name the line or row at
 * fault, since the user fixes them in a spreadsheet or editor, not in the request.
 */

type Row = Record<string, unknown>;

const BOM = /^\uFEFF/;
/** An unquoted field: anything up to a comma or a line break (`\n` or `\r\n`). */
const UNQUOTED = /(?:[^,\r\n]|\r(?!\n))*/y;
const LINE_BREAK = /\r?\n/y;

/** Where the reader is: an offset in the text and the line it falls on, for error messages. */
interface Position {
  at: number;
  line: number;
}

interface CsvRecord {
  /** The line the record starts on; a quoted field may carry it over several. */
  line: number;
  fields: string[];
}

/** Splits RFC 4180 text into records, skipping blank lines. */
function readRecords(text: string): CsvRecord[] {
  const records: CsvRecord[] = [];
  const pos: Position = { at: 0, line: 1 };
  while (pos.at < text.length) {
    const line = pos.line;
    const fields: string[] = [];
    let quoted = false;
    for (;;) {
      quoted ||= text[pos.at] === '"';
      fields.push(text[pos.at] === '"' ? readQuoted(text, pos) : readUnquoted(text, pos));
      if (text[pos.at] !== ',') break;
      pos.at++;
    }
    endRecord(text, pos);
    const blank = !quoted && fields.length === 1 && fields[0]!.trim() === '';
    if (!blank) records.push({ line, fields });
  }
  return records;
}

/** A field in quotes, where `""` stands for one quote and commas and line breaks are text. */
function readQuoted(text: string, pos: Position): string {
  const opened = pos.line;
  let value = '';
  let from = pos.at + 1;
  for (;;) {
    const close = text.indexOf('"', from);
    if (close === -1) throw new AppError('invalid-request', `CSV line ${opened} opens a quoted field that is never closed`);
    value += text.slice(from, close);
    if (text[close + 1] !== '"') {
      pos.at = close + 1;
      pos.line += value.split('\n').length - 1;
      return value;
    }
    value += '"';
    from = close + 2;
  }
}

function readUnquoted(text: string, pos: Position): string {
  UNQUOTED.lastIndex = pos.at;
  UNQUOTED.test(text);
  const value = text.slice(pos.at, UNQUOTED.lastIndex);
  pos.at = UNQUOTED.lastIndex;
  return value;
}

/** A record ends at a line break or the end of the text; anything else follows a closing quote. */
function endRecord(text: string, pos: Position): void {
  LINE_BREAK.lastIndex = pos.at;
  if (LINE_BREAK.test(text)) {
    pos.at = LINE_BREAK.lastIndex;
    pos.line++;
  } else if (pos.at < text.length) {
    throw new AppError('invalid-request', `CSV line ${pos.line} has text after a closing quote; a quote inside a quoted field is written ""`);
  }
}

/** One object per row, keyed by the header line's column names; every value is text. */
export function parseCsv(text: string): Record<string, string>[] {
  const [header, ...records] = readRecords(text.replace(BOM, ''));
  if (!header) return [];
  const names = new Set<string>();
  header.fields.forEach((name, i) => {
    if (name.trim() === '') throw new AppError('invalid-request', `CSV header column ${i + 1} has no name; every column needs one`);
    if (names.has(name)) throw new AppError('invalid-request', `CSV header names the column "${name}" twice; column names must be unique`);
    names.add(name);
  });
  return records.map(({ line, fields }) => {
    if (fields.length !== header.fields.length) {
      throw new AppError('invalid-request', `CSV line ${line} has ${fields.length} fields; the header has ${header.fields.length}`);
    }
    return Object.fromEntries(header.fields.map((name, i) => [name, fields[i]!]));
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
  if (rows.length === 0) throw new AppError('invalid-request', 'the file has no rows');
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
