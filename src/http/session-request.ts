import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { Paging } from '../contract/interactions.ts';
import { SessionId } from '../contract/invoke.ts';
import { SessionListStatus } from '../contract/sessions.ts';
import { AppError } from '../errors.ts';
import type { PageRequest } from '../store/cursor.ts';
import type { SessionFilter } from '../store/sessions.ts';

/** Reading the parts of a `/api/sessions/{session_id}…` request that every sessions route shares. */

const DEFAULT_PAGE_SIZE = 20;

type Query = Record<string, unknown> | undefined;

/**
 * The `session_id` path parameter, checked against the same rule as an invoke's `session_id`, and
 * recorded on the request so an error reply names the session it was about.
 */
export function sessionIdParam(request: FastifyRequest): string {
  const raw = (request.params as Record<string, unknown> | undefined)?.session_id;
  const parsed = SessionId.safeParse(raw);
  if (!parsed.success) {
    throw new AppError('invalid-session-id', 'the session id in the path must be 1-128 letters, digits, ".", "_", ":" or "-"');
  }
  request.run = { sessionId: parsed.data };
  return parsed.data;
}

/** One message for a missing session and a session of another project, so neither reveals the other. */
export function sessionNotFound(sessionId: string): AppError {
  return new AppError('not-found', `session "${sessionId}" does not exist in this project`);
}

// Query values arrive as text; the contract's paging rules apply once a number is read from it.
const asNumber = (value: unknown) => (typeof value === 'string' && value.trim() !== '' ? Number(value) : value);
const PageQuery = z.object({ limit: z.preprocess(asNumber, Paging.limit), cursor: Paging.cursor });

/** `limit` and `cursor` as given; `absent` says what no limit means, for the error. */
export function pagingQuery(request: FastifyRequest, absent: string): { limit?: number | undefined; cursor?: string | undefined } {
  const query = request.query as Query;
  const parsed = PageQuery.safeParse({ limit: query?.limit, cursor: query?.cursor });
  if (!parsed.success) {
    const name = String(parsed.error.issues[0]?.path[0] ?? 'limit');
    throw new AppError(
      'invalid-request',
      name === 'cursor'
        ? 'the query parameter cursor must be the "next" value of the previous page'
        : `the query parameter limit must be a whole number from 1 to 200 (${absent}), got ${JSON.stringify(query?.limit)}`,
    );
  }
  return parsed.data;
}

export function pageQuery(request: FastifyRequest): PageRequest {
  const { limit, cursor } = pagingQuery(request, `default ${DEFAULT_PAGE_SIZE}`);
  return { limit: limit ?? DEFAULT_PAGE_SIZE, cursor };
}

/** The start of a session id, as `GET /api/sessions?id_prefix=` takes it. */
export const SessionIdPrefix = z.string().regex(/^[A-Za-z0-9._:-]{0,128}$/);

/** `GET /api/sessions`'s filters: `id_prefix` (the start of a session id) and `status` (`pending` or `live`). */
export function sessionListFilter(request: FastifyRequest): SessionFilter {
  const query = request.query as Query;
  const idPrefix = query?.id_prefix === undefined ? undefined : SessionIdPrefix.safeParse(query.id_prefix);
  if (idPrefix && !idPrefix.success) {
    throw new AppError('invalid-request', 'the query parameter id_prefix must be the start of a session id: up to 128 letters, digits, ".", "_", ":" or "-"');
  }
  const status = query?.status;
  if (status !== undefined && status !== '' && !SessionListStatus.safeParse(status).success) {
    throw new AppError('invalid-request', `the query parameter status must be one of ${SessionListStatus.options.join(', ')}, got ${JSON.stringify(status)}`);
  }
  return { idPrefix: idPrefix?.data || undefined, status: (status || undefined) as SessionFilter['status'] };
}

/** The `path` query parameter: a path inside the session folder. */
export function filePathQuery(request: FastifyRequest, fallback?: string): string {
  const value = (request.query as Query)?.path;
  if ((value === undefined || value === '') && fallback !== undefined) return fallback;
  if (typeof value !== 'string' || value === '') {
    throw new AppError('invalid-request', 'the query parameter path is required: the file\'s path inside the session folder, e.g. ?path=notes/todo.md');
  }
  return value;
}
