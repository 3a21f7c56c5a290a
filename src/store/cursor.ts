import { createHash } from 'node:crypto';
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
  throw new AppError('invalid-request', `cursor "${shownCursor(cursor)}" is not valid; pass the "next" value of the previous page`);
}

/** A cursor as an error quotes it: cut after 80 characters, so a huge one does not fill the reply. */
const shownCursor = (cursor: string) => (cursor.length > 80 ? `${cursor.slice(0, 80)}…` : cursor);

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

/**
 * A list read whole unless a page is asked for (test sets, workflows, environments, keys,
 * connections): `limit` absent, every item after `after` comes back. A store given a limit reads
 * `limit + 1` items, as toPage expects, in the list's order: by `key` (a slug, a creation time),
 * ties broken by id.
 */
export interface ListWindow {
  limit?: number | undefined;
  after?: ListPosition | undefined;
}

/** The item a page ended with: its sort key and its id. */
export interface ListPosition {
  key: string;
  id: string;
}

/** Which list of which project a cursor continues; it is refused by any other. */
export interface ListScope {
  list: string;
  projectId: string;
}

// A digest, not the project id itself: a cursor that travels in a URL says nothing of the project.
const scopeTag = (scope: ListScope) => createHash('sha256').update(`${scope.list}\n${scope.projectId}`).digest('base64url').slice(0, 16);

export function encodeListCursor(scope: ListScope, position: ListPosition): string {
  return Buffer.from(JSON.stringify([scopeTag(scope), position.key, position.id]), 'utf8').toString('base64url');
}

/**
 * The position a cursor names, when this list of this project gave it out. A cursor of another
 * list or project is refused rather than read as a position: it could only be a mistake, and a
 * page it started would be some other list's. `name` is the parameter the cursor came in.
 */
export function decodeListCursor(scope: ListScope, cursor: string, name = 'cursor'): ListPosition {
  let triple: unknown;
  try {
    triple = /^[A-Za-z0-9_-]+$/.test(cursor) ? JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) : undefined;
  } catch {
    triple = undefined;
  }
  const shown = shownCursor(cursor);
  // No slug, time or id holds a control character; PostgreSQL would refuse a NUL in the query with a message naming no parameter.
  if (!Array.isArray(triple) || triple.length !== 3 || !triple.every((part) => typeof part === 'string' && part !== '' && !/\p{Cc}/u.test(part))) {
    throw new AppError('invalid-request', `${name} "${shown}" is not valid; pass the "next" value of the previous page`);
  }
  if (triple[0] !== scopeTag(scope)) {
    throw new AppError('invalid-request', `${name} "${shown}" was not given by this list in this project; pass the "next" value of the previous page of ${scope.list}`);
  }
  return { key: triple[1] as string, id: triple[2] as string };
}

/** The page a window's `limit + 1` items make (all of them when no limit was asked for). */
export function toListPage<T>(items: T[], window: ListWindow, scope: ListScope, position: (item: T) => ListPosition): Page<T> {
  if (window.limit === undefined || items.length <= window.limit) return { items };
  const kept = items.slice(0, window.limit);
  return { items: kept, next: encodeListCursor(scope, position(kept.at(-1)!)) };
}
