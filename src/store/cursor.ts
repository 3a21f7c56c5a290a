import { AppError } from '../errors.ts';

/**
 * Keyset paging. A cursor names the last item a page returned by its sort timestamp and id (the
 * id breaks ties between items stamped in the same millisecond), so a page never skips or repeats
 * an item when rows are added meanwhile. Callers treat it as opaque: base64url of a JSON array.
 */
export interface CursorKey {
  at: string;
  id: string;
  /** Where items of one millisecond have an order of their own (a revision's version), it comes before the id. */
  rank?: number;
}

export interface Page<T> {
  items: T[];
  /** Present when more items may follow; pass it back as `cursor` for the next page. */
  next?: string;
}

export interface PageRequest {
  limit: number;
  cursor?: string | undefined;
}

export function encodeCursor(key: CursorKey): string {
  return Buffer.from(JSON.stringify(key.rank === undefined ? [key.at, key.id] : [key.at, key.id, key.rank]), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): CursorKey {
  let pair: unknown;
  try {
    pair = /^[A-Za-z0-9_-]+$/.test(cursor) ? JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) : undefined;
  } catch {
    pair = undefined;
  }
  if (
    Array.isArray(pair) &&
    (pair.length === 2 || (pair.length === 3 && Number.isSafeInteger(pair[2]))) &&
    typeof pair[0] === 'string' &&
    typeof pair[1] === 'string' &&
    pair[1] !== '' &&
    !Number.isNaN(Date.parse(pair[0]))
  ) {
    return { at: pair[0], id: pair[1], ...(pair.length === 3 ? { rank: pair[2] as number } : {}) };
  }
  const shown = cursor.length > 80 ? `${cursor.slice(0, 80)}…` : cursor;
  throw new AppError('invalid-request', `cursor "${shown}" is not valid; pass the "next" value of the previous page`);
}

/**
 * Turns `limit + 1` fetched rows into a page: the extra row only says that another page exists,
 * which saves the caller a last request that would come back empty.
 */
export function toPage<R, T>(rows: R[], limit: number, key: (row: R) => CursorKey, map: (row: R) => T): Page<T> {
  const more = rows.length > limit;
  const kept = more ? rows.slice(0, limit) : rows;
  const items = kept.map(map);
  const last = kept.at(-1);
  return more && last !== undefined ? { items, next: encodeCursor(key(last)) } : { items };
}

/** Clamps a page size the store was given to something a query can use. */
export function pageSize(limit: number): number {
  return Math.max(1, Math.trunc(limit));
}
