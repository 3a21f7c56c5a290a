import { AppError } from '../errors.ts';
import { STATEMENT_TIMEOUT_MESSAGE } from './pg-bounds.ts';

/**
 * A statement that failed because the database could not serve it (it is down, restarting, out of
 * connections, cut off, silent past agentd's time limits, or its disk is full or read-only), as
 * the error the caller answers with: the request was fine and may be sent again once the database
 * is back, which `internal` (a bug in agentd) would not say. Undefined for any other failure.
 * `advice` replaces what the message tells the client to do, for a caller that does something
 * else about it.
 *
 * Drivers wrap their errors (SQLite's grouped commits, pg-pool's connection timeout), so the
 * whole chain of causes is looked at.
 */
export function databaseUnavailable(error: unknown, advice?: string): AppError | undefined {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 8; cause = cause.cause, depth++) {
    const failure = classify(cause);
    if (failure) {
      const type = failure.full ? 'insufficient-storage' : 'unavailable';
      return new AppError(type, `${failure.what}; ${advice ?? (failure.full ? FULL_ADVICE : ADVICE)}`, { cause });
    }
  }
  return undefined;
}

const ADVICE = 'send the request again once it is back';
const FULL_ADVICE = 'nothing was stored; send the request again once the operator has made room';

/** Connection failures: the socket could not be opened, or was cut. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);

/**
 * What pg and pg-pool throw when the database is silent past a bound of agentd's (pg-bounds.ts): a
 * statement past query_timeout, no pooled connection free or no new one opened within
 * connectionTimeoutMillis (pg-pool's words for a pooled one, pg's for the listening one). Looked
 * at before the messages below, which one of them also begins with.
 */
const PG_TIMEOUT_MESSAGES: [string, string][] = [
  [STATEMENT_TIMEOUT_MESSAGE, 'a statement got no answer within its time limit'],
  ['timeout exceeded when trying to connect', 'no connection to it came free within its time limit'],
  ['Connection terminated due to connection timeout', 'no connection to it opened within its time limit'],
  ['timeout expired', 'no connection to it opened within its time limit'],
];

/** What pg and pg-pool throw, with no code, when a connection ends or never comes. */
const PG_CONNECTION_MESSAGES = [
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool',
];

/** SQLite's primary result codes (the low byte of an extended one). */
const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_FULL = 13;
const SQLITE_CANTOPEN = 14;

interface Failure {
  /** What went wrong, as the client reads it. */
  what: string;
  /** The disk is full: the operator must make room, trying again alone does not help. */
  full?: boolean;
}

function classify(error: Error): Failure | undefined {
  const { code, errcode } = error as Error & { code?: unknown; errcode?: unknown };
  if (code === 'ERR_SQLITE_ERROR' && typeof errcode === 'number') return sqliteFailure(errcode & 0xff, error.message);
  if (typeof code === 'string') {
    // The code, not the message: that names the database's host and port, which clients need not learn.
    if (SOCKET_CODES.has(code)) return { what: `the database cannot be reached (${code})` };
    // SQLSTATE: 53100 its disk full; 08 connection exception, 57P01–57P03 the server shutting down
    // or starting, 53 out of resources, 25006 a standby after a failover that refuses writes.
    if (code === '53100') return { what: `the database's disk is full (${error.message})`, full: true };
    if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code.startsWith('53') || code === '25006') {
      return { what: `the database cannot serve the request (${error.message})` };
    }
  }
  const timeout = PG_TIMEOUT_MESSAGES.find(([message]) => error.message.startsWith(message));
  if (timeout) return { what: `the database did not answer in time (${timeout[1]})` };
  if (PG_CONNECTION_MESSAGES.some((message) => error.message.startsWith(message))) return { what: `the connection to the database was lost (${error.message})` };
  return undefined;
}

function sqliteFailure(primary: number, message: string): Failure | undefined {
  if (primary === SQLITE_FULL) return { what: `the database's disk is full (${message})`, full: true };
  if (primary === SQLITE_READONLY || primary === SQLITE_IOERR || primary === SQLITE_CANTOPEN) {
    return { what: `the database cannot be written (${message}): its file or its folder is read-only, or its disk failed` };
  }
  return undefined;
}
