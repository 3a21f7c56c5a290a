import type { FastifyRequest } from 'fastify';
import { decodeListCursor, toListPage, type ListPosition, type ListScope, type ListWindow } from '../store/cursor.ts';
import { pagingQuery } from './session-request.ts';

/**
 * The lists read whole unless a page is asked for (test sets, workflows, environments, keys,
 * connections): clients written before they paged read them whole, and still do.
 */

/** What a list without `limit` answers, as the errors and the API reference say it. */
const WHOLE_LIST = 'absent: the whole list';

/** `?limit=&cursor=`: a page of `limit` items, after the one `cursor` names. */
export function listQuery(request: FastifyRequest, scope: ListScope): ListWindow {
  const { limit, cursor } = pagingQuery(request, WHOLE_LIST);
  return { limit, after: cursor === undefined ? undefined : decodeListCursor(scope, cursor) };
}

/** A query body's `windowing`: `next` (or `cursor`, as results/query also takes it) continues. */
export function listWindowing(windowing: { limit?: number | undefined; next?: string | undefined; cursor?: string | undefined } | undefined, scope: ListScope): ListWindow {
  const cursor = windowing?.cursor ?? windowing?.next;
  const name = windowing?.cursor !== undefined ? 'windowing.cursor' : 'windowing.next';
  return { limit: windowing?.limit, after: cursor === undefined ? undefined : decodeListCursor(scope, cursor, name) };
}

/** A list's reply: `count` is the items in this reply, `next` is there when more follow. */
export function listReply<K extends string, T>(name: K, items: T[], window: ListWindow, scope: ListScope, position: (item: T) => ListPosition) {
  const page = toListPage(items, window, scope, position);
  return { count: page.items.length, [name]: page.items, ...(page.next ? { next: page.next } : {}) } as { count: number; next?: string } & Record<K, T[]>;
}

/** Position by slug, as test sets, workflows, environments and connections are listed. */
export const bySlug = (item: { slug: string; id: string }): ListPosition => ({ key: item.slug, id: item.id });
