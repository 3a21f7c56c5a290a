import type { Config } from '../config.ts';
import type { AgentEvent } from '../contract/events.ts';
import type { ErrorType } from '../contract/errors.ts';
import { AppError } from '../errors.ts';
import type { ModelFact } from './model-facts.ts';
import type { ProjectConnection } from '../contract/connections.ts';
import type { TurnInput } from './turn.ts';

/** The parts of the server's config a turn reads. */
export type WorkerSettings = Pick<Config, 'env' | 'openaiCompatible' | 'connections' | 'prices' | 'maxSteps' | 'modelTimeoutMs' | 'modelMaxRetries' | 'bash'>;

/** What a pool thread is given once, at its start: those settings, and what is known of model servers so far. */
export interface WorkerData {
  settings: WorkerSettings;
  facts: ModelFact[];
}

/**
 * A turn as it crosses to a pool thread: everything but what cannot be copied there. The thread
 * builds the model from the template's `llm`, the run's secrets and the connection itself.
 */
export type PooledTurnInput = Omit<TurnInput, 'model' | 'mcp' | 'config' | 'pricing' | 'signal' | 'newInteractionId'> & {
  secrets: Record<string, string>;
  connection: ProjectConnection | undefined;
};

/**
 * Plain objects as columns, one array of values per key. Structured cloning writes every object's
 * keys again and reads them back into new strings; a column costs that once. A history of 1,000
 * messages crosses in about 0.95 ms of CPU as objects and 0.45 ms as columns, both ways and
 * rebuilt (BENCHMARKS.md, "A long history handed to the turn thread").
 */
export interface Columns {
  length: number;
  columns: Column[];
}

/**
 * A key's values, and which rows have it when not all do. No holes: cloning writes an array with
 * holes key by key, which costs more than the objects did. Rows come back with their keys in the
 * order the keys first appear in the list.
 */
interface Column {
  key: string;
  values: unknown[];
  rows?: number[];
}

export function toColumns(rows: readonly object[]): Columns {
  const byKey = new Map<string, Required<Column>>();
  rows.forEach((row, i) => {
    for (const key of Object.keys(row)) {
      let column = byKey.get(key);
      if (!column) byKey.set(key, (column = { key, values: [], rows: [] }));
      column.values.push((row as Record<string, unknown>)[key]);
      column.rows.push(i);
    }
  });
  const columns = [...byKey.values()].map(({ key, values, rows: present }) => (present.length === rows.length ? { key, values } : { key, values, rows: present }));
  return { length: rows.length, columns };
}

export function fromColumns<T extends object>({ length, columns }: Columns): T[] {
  const rows: object[] = Array.from({ length }, () => ({}));
  for (const { key, values, rows: present } of columns) values.forEach((value, j) => setKey(rows[present ? present[j]! : j]!, key, value));
  return rows as T[];
}

/** Defined, not assigned: a key "__proto__" stays a key, as cloning the object kept it. */
function setKey(row: object, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(row, key, { value, enumerable: true, writable: true, configurable: true });
  else (row as Record<string, unknown>)[key] = value;
}

/** A turn as posted: its history in columns. */
type WireTurnInput = Omit<PooledTurnInput, 'history'> & { history: Columns };

/** The server's thread posts these in batches (`FromPool[]`), one per pass of its event loop. */
export type FromPool = { type: 'run'; id: number; input: WireTurnInput } | { type: 'abort'; id: number; reason: string } | { type: 'fact'; fact: ModelFact };

/** A thread posts these in batches (`ToPool[]`), one per pass of its event loop. */
export type ToPool = { type: 'event'; id: number; event: AgentEvent } | { type: 'end'; id: number } | { type: 'error'; id: number; error: WireError } | { type: 'fact'; fact: ModelFact };

/** An error as structured cloning keeps it: an AppError keeps its type, status and headers. */
export type WireError =
  | { app: true; type: ErrorType; message: string; status: number; headers?: Record<string, string> }
  | { app: false; name: string; message: string; stack?: string };

export function toWire(error: unknown): WireError {
  if (error instanceof AppError) return { app: true, type: error.type, message: error.message, status: error.status, ...(error.headers ? { headers: error.headers } : {}) };
  if (error instanceof Error) return { app: false, name: error.name, message: error.message, ...(error.stack ? { stack: error.stack } : {}) };
  return { app: false, name: 'Error', message: String(error) };
}

export function fromWire(error: WireError): Error {
  if (error.app) return new AppError(error.type, error.message, { status: error.status, ...(error.headers ? { headers: error.headers } : {}) });
  const rebuilt = new Error(error.message);
  rebuilt.name = error.name;
  if (error.stack) rebuilt.stack = error.stack;
  return rebuilt;
}

/**
 * Messages between the threads go over in batches, since every postMessage costs both threads a
 * copy and a wake-up: what one pass of the event loop sends leaves at the pass's end, together.
 * A model's answer arrives over many passes, one per read from its socket, so a streamed turn's
 * reader still sees each piece as soon as it was read and parsed; only the parts parsed from one
 * read travel together, and under load, the turns started in one pass.
 */
export function batchedPerPass<T>(postBatch: (batch: T[]) => void): (message: T) => void {
  let outbox: T[] = [];
  const flush = () => {
    const batch = outbox;
    outbox = [];
    postBatch(batch);
  };
  return (message) => {
    outbox.push(message);
    if (outbox.length === 1) setImmediate(flush);
  };
}
