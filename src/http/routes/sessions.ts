import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config.ts';
import { SessionList, SessionListStatus, SessionStopped, SessionView } from '../../contract/sessions.ts';
import { AppError } from '../../errors.ts';
import { discardParked } from '../../harnesses/parked.ts';
import { deletingFolder } from '../../sessions/folder-lock.ts';
import { harnessStateFolder, moveSessionAside, sessionFolder } from '../../sessions/folders.ts';
import { toSessionList, toSessionView } from '../../sessions/view.ts';
import type { TurnService } from '../../sessions/turn-service.ts';
import type { Store } from '../../store/db.ts';
import { authorize } from '../auth.ts';
import { documented, paging, parameter } from '../route-doc.ts';
import { runHeaders } from '../run-headers.ts';
import { pageQuery, SessionIdPrefix, sessionIdParam, sessionListFilter, sessionNotFound } from '../session-request.ts';

export interface SessionRoutesDeps {
  store: Store;
  config: Config;
  turns: TurnService;
}

/**
 * How long a deletion holds the session's lease. It only has to outlive removing the folder and
 * the records; should the process die midway, the session frees itself after this.
 */
const DELETE_LEASE_MS = 60_000;

/** Reading a session with its turns, and deleting it (design.md §4, issue "Reading a session"). */
export async function sessionRoutes(app: FastifyInstance, deps: SessionRoutesDeps): Promise<void> {
  const { store, config, turns } = deps;

  app.get(
    '/api/sessions',
    documented({
      summary: "The project's sessions, newest first (paged), with each one's live turn, pending interactions and latest turn",
      role: 'viewer',
      query: {
        ...paging('Sessions'),
        id_prefix: parameter('Only sessions whose id starts with this', SessionIdPrefix),
        status: parameter('pending: only sessions with an interaction waiting for an answer; live: only sessions running a turn', SessionListStatus),
      },
      ok: { status: 200, schema: SessionList, description: 'One page of sessions' },
    }),
    async (request): Promise<SessionList> => {
      const { projectId } = await authorize(store, request);
      const page = await store.sessions.list(projectId, pageQuery(request), sessionListFilter(request));
      return toSessionList(store, projectId, page);
    },
  );

  app.get(
    '/api/sessions/:session_id',
    documented({
      summary: 'Read a session, its live turn and its turns (newest first, paged)',
      role: 'viewer',
      errors: ['not-found'],
      query: paging('Turns'),
      ok: { status: 200, schema: SessionView, description: 'The session' },
    }),
    async (request, reply): Promise<SessionView> => {
      const { projectId } = await authorize(store, request);
      const sessionId = sessionIdParam(request);
      const page = pageQuery(request);
      const session = await store.sessions.get(projectId, sessionId);
      if (!session) throw sessionNotFound(sessionId);
      const [lease, turns] = await Promise.all([store.leases.get(projectId, sessionId), store.turns.listForSessionPage(projectId, sessionId, page)]);
      reply.headers(runHeaders({ sessionId }));
      return toSessionView(session, lease, turns.items, turns.next);
    },
  );

  app.post(
    '/api/sessions/:session_id/stop',
    documented(
      {
        summary: "Stop the session's live turn: it ends cancelled, and its pending interactions with it",
        role: 'editor',
        errors: ['not-found'],
        ok: { status: 200, schema: SessionStopped, description: 'The turn stopped (or, on another replica, asked to stop at its next lease renewal); 404 when none runs' },
      },
      { optionalBody: true },
    ),
    async (request, reply): Promise<SessionStopped> => {
      const { projectId } = await authorize(store, request);
      const sessionId = sessionIdParam(request);
      const stopped = await turns.stop(projectId, sessionId);
      if (!stopped) throw new AppError('not-found', `session "${sessionId}" runs no turn to stop`);
      reply.headers(runHeaders({ sessionId }));
      return { turn_id: stopped };
    },
  );

  app.delete(
    '/api/sessions/:session_id',
    documented(
      {
        summary: 'Delete a session: its folder and every record',
        role: 'editor',
        errors: ['not-found', 'session-busy'],
        ok: { status: 204, description: 'Deleted' },
      },
      { optionalBody: true },
    ),
    async (request, reply) => {
      const { projectId } = await authorize(store, request);
      const sessionId = sessionIdParam(request);
      if (!(await store.sessions.get(projectId, sessionId))) throw sessionNotFound(sessionId);

      // Taking the session's lease keeps a turn from starting in a folder that is being removed.
      const deletion = `delete-${randomUUID()}`;
      const taken = await store.leases.acquire({ projectId, sessionId, turnId: deletion, holder: deletion, ttlMs: DELETE_LEASE_MS });
      if (!taken.acquired) {
        const current = taken.current.turn_id;
        throw new AppError(
          'session-busy',
          current.startsWith('delete-')
            ? `session "${sessionId}" is being deleted by another request`
            : `session "${sessionId}" is running turn "${current}"; wait for it to end, then delete the session`,
        );
      }
      const folder = sessionFolder(config.dataDir, projectId, sessionId);
      try {
        await deletingFolder(folder, async () => {
          // A harness process kept for the session's next turn sees the folders it was started on.
          await discardParked(harnessStateFolder(config.dataDir, projectId, sessionId));
          const removeFiles = await moveSessionAside(config.dataDir, projectId, sessionId);
          // Removes the lease taken above along with the records.
          await store.sessions.remove(projectId, sessionId);
          await removeFiles();
        });
      } catch (error) {
        await store.leases.release(projectId, sessionId, deletion);
        throw error;
      }
      return reply.code(204).headers(runHeaders({ sessionId })).send();
    },
  );
}
