import type { z } from 'zod';
import type * as Configs from '../contract/configs.ts';
import type * as Connections from '../contract/connections.ts';
import type * as Evaluations from '../contract/evaluations.ts';
import type { AgentEvent } from '../contract/events.ts';
import type { InspectRequest, InspectResponse } from '../contract/inspect.ts';
import type * as Interactions from '../contract/interactions.ts';
import type * as Keys from '../contract/keys.ts';
import type { InvokeRequest, InvokeResponse } from '../contract/invoke.ts';
import type * as Sessions from '../contract/sessions.ts';
import { readFrames } from './frames.ts';
import { invokeMany, type InvokeManyOptions, type Outcome } from './invoke-many.ts';
import { call, failure, send, type ClientOptions } from './transport.ts';

/**
 * The typed client of both surfaces. Request and reply types are the contract's zod schemas
 * (`z.input` for what is sent, `z.output` for what comes back), imported as types only: the
 * client carries no schema code and runs wherever `fetch` does.
 */

type In<S extends z.ZodType> = z.input<S>;
type Out<S extends z.ZodType> = z.output<S>;

export type InvokeBody = In<typeof InvokeRequest>;
/** A page of a list the server sends whole unless `limit` is given; `cursor` is the previous page's `next`. */
export type ListPage = { limit?: number; cursor?: string };
export type InvokeReply = Out<typeof InvokeResponse>;
export type NativeFrame = Out<typeof AgentEvent>;
/** A chunk of the Vercel AI SDK UI message stream (`{type: 'text-delta', …}` and the rest). */
export type VercelChunk = { type: string } & Record<string, unknown>;

export interface TurnOptions {
  /** `vercel`: messages and frames in the Vercel AI SDK representation. */
  format?: 'native' | 'vercel';
  /** Only the trailing unit of the turn (`x-ag-messages-transcript: last`). */
  trim?: boolean;
  /** Take over (with input) or attach to (without) the session's live turn. */
  force?: boolean;
  /** Resolve `@ag.embed`s in the configuration. */
  resolveEmbeds?: boolean;
  signal?: AbortSignal;
}

function turnHeaders(options: TurnOptions): Record<string, string> {
  return {
    ...(options.format === 'vercel' ? { 'x-ag-messages-format': 'vercel' } : {}),
    ...(options.trim ? { 'x-ag-messages-transcript': 'last' } : {}),
    ...(options.force ? { 'x-ag-session-control': 'force' } : {}),
    ...(options.resolveEmbeds ? { 'x-ag-workflow-embeds': 'resolve' } : {}),
  };
}

const seg = encodeURIComponent;

export function createClient(options: ClientOptions) {
  const json = <T>(method: string, path: string, body?: unknown, query?: Record<string, string | number | boolean | undefined>) =>
    call<T>(options, method, path, { ...(body === undefined ? {} : { body }), ...(query ? { query } : {}) });

  /** One turn, as one JSON reply once it has ended. */
  async function invoke(request: InvokeBody, turn: TurnOptions = {}): Promise<InvokeReply> {
    return call<InvokeReply>(options, 'POST', 'services/agent/v0/invoke', {
      body: { ...request, flags: { ...request.flags, stream: false } },
      headers: { accept: 'application/json', ...turnHeaders(turn) },
      signal: turn.signal,
    });
  }

  /**
   * One turn as its frames arrive: native events, or Vercel UI message chunks with
   * `format: 'vercel'`. A turn that fails before its first frame throws its error instead.
   */
  function stream(request: InvokeBody, turn: TurnOptions & { format: 'vercel'; transport?: 'sse' | 'ndjson' }): AsyncGenerator<VercelChunk>;
  function stream(request: InvokeBody, turn?: TurnOptions & { format?: 'native'; transport?: 'sse' | 'ndjson' }): AsyncGenerator<NativeFrame>;
  async function* stream(request: InvokeBody, turn: TurnOptions & { transport?: 'sse' | 'ndjson' } = {}): AsyncGenerator<NativeFrame | VercelChunk> {
    const transport = turn.format === 'vercel' ? 'sse' : (turn.transport ?? 'sse');
    const res = await send(options, 'POST', 'services/agent/v0/invoke', {
      body: { ...request, flags: { ...request.flags, stream: true } },
      headers: { accept: transport === 'sse' ? 'text/event-stream' : 'application/x-ndjson', ...turnHeaders(turn) },
      signal: turn.signal,
    });
    if (!res.ok) throw await failure(res);
    if (!res.body) return;
    yield* readFrames<NativeFrame | VercelChunk>(res.body, transport);
  }

  /**
   * The session's live turn from its start, followed to its end, as Vercel UI message chunks: what
   * `useChat`'s resume reads after a reload. Nothing when the session runs no turn.
   */
  async function* resume(sessionId: string, opts: { signal?: AbortSignal } = {}): AsyncGenerator<VercelChunk> {
    const res = await send(options, 'GET', `services/agent/v0/invoke/${seg(sessionId)}/stream`, { headers: { accept: 'text/event-stream' }, signal: opts.signal });
    if (!res.ok) throw await failure(res);
    if (res.status === 204 || !res.body) return;
    yield* readFrames<VercelChunk>(res.body, 'sse');
  }

  const client = {
    options,
    invoke,
    stream,
    resume,
    invokeMany: (inputs: readonly InvokeBody[], opts: InvokeManyOptions = {}): Promise<Outcome[]> => invokeMany(client, inputs, opts),
    inspect: (request: In<typeof InspectRequest> = {}) => json<Out<typeof InspectResponse>>('POST', 'services/agent/v0/inspect', request),

    sessions: {
      /** Newest first; `idPrefix` and `status` (`pending`: an answer awaited, `live`: a turn running) narrow it. */
      list: (query: { limit?: number; cursor?: string; idPrefix?: string; status?: 'pending' | 'live' } = {}) =>
        json<Out<typeof Sessions.SessionList>>('GET', 'api/sessions', undefined, { limit: query.limit, cursor: query.cursor, id_prefix: query.idPrefix, status: query.status }),
      get: (sessionId: string, page: { limit?: number; cursor?: string } = {}) => json<Out<typeof Sessions.SessionView>>('GET', `api/sessions/${seg(sessionId)}`, undefined, page),
      delete: (sessionId: string) => json<void>('DELETE', `api/sessions/${seg(sessionId)}`),
      /** Stops the session's live turn; a 404 error when none runs. */
      stop: (sessionId: string) => json<Out<typeof Sessions.SessionStopped>>('POST', `api/sessions/${seg(sessionId)}/stop`),
      listFiles: (sessionId: string, path = '.') => json<Out<typeof Sessions.FileListing>>('GET', `api/sessions/${seg(sessionId)}/files`, undefined, { path }),
      /** A file's bytes. */
      readFile: async (sessionId: string, path: string): Promise<ArrayBuffer> => {
        const res = await send(options, 'GET', `api/sessions/${seg(sessionId)}/files`, { query: { path } });
        if (!res.ok) throw await failure(res);
        return res.arrayBuffer();
      },
      writeFile: (sessionId: string, path: string, data: BodyInit) =>
        call<Out<typeof Sessions.FileUploaded>>(options, 'PUT', `api/sessions/${seg(sessionId)}/files`, { query: { path }, raw: { data, contentType: 'application/octet-stream' } }),
    },

    interactions: {
      query: (query: In<typeof Interactions.InteractionQuery> = {}) => json<Out<typeof Interactions.InteractionList>>('POST', 'api/sessions/interactions/query', query),
      get: (id: string) => json<Out<typeof Interactions.InteractionReply>>('GET', `api/sessions/interactions/${seg(id)}`),
      respond: (id: string, answer: Record<string, unknown>) => json<Out<typeof Interactions.InteractionReply>>('POST', `api/sessions/interactions/${seg(id)}/respond`, { answer }),
      transition: (body: In<typeof Interactions.TransitionBody>) => json<Out<typeof Interactions.InteractionReply>>('POST', 'api/sessions/interactions/transition', body),
    },

    keys: {
      /** The calling key and its project. */
      self: () => json<Out<typeof Keys.KeySelf>>('GET', 'api/keys/self'),
      /** Every key, oldest first; with `limit`, one page of them and `next` to pass back as `cursor`. */
      list: (page: ListPage = {}) => json<Out<typeof Keys.KeyList>>('GET', 'api/keys', undefined, page),
      /** The reply's `key` is the secret, shown this once. */
      create: (body: In<typeof Keys.KeyCreate> = {}) => json<Out<typeof Keys.KeyCreated>>('POST', 'api/keys', body),
      revoke: (id: string) => json<void>('DELETE', `api/keys/${seg(id)}`),
    },

    connections: {
      create: (body: In<typeof Connections.ConnectionCreate>) => json<Out<typeof Connections.ConnectionView>>('POST', 'api/connections', body),
      /** Every connection, by slug; with `limit`, one page of them and `next` to pass back as `cursor`. */
      list: (page: ListPage = {}) => json<Out<typeof Connections.ConnectionList>>('GET', 'api/connections', undefined, page),
      get: (slug: string) => json<Out<typeof Connections.ConnectionView>>('GET', `api/connections/${seg(slug)}`),
      delete: (slug: string) => json<void>('DELETE', `api/connections/${seg(slug)}`),
    },

    workflows: {
      create: (body: In<typeof Configs.WorkflowCreate>) => json<Out<typeof Configs.WorkflowCreated>>('POST', 'api/workflows', body),
      /** Every workflow (of `family`), by slug; with `limit`, one page of them and `next` to pass back as `cursor`. */
      list: (query: Configs.WorkflowFamily | (ListPage & { family?: Configs.WorkflowFamily }) = {}) =>
        json<Out<typeof Configs.WorkflowList>>('GET', 'api/workflows', undefined, typeof query === 'string' ? { family: query } : query),
      get: (idOrSlug: string) => json<Out<typeof Configs.WorkflowView>>('GET', `api/workflows/${seg(idOrSlug)}`),
      commit: (idOrSlug: string, body: In<typeof Configs.RevisionCommit>) => json<Out<typeof Configs.RevisionView>>('POST', `api/workflows/${seg(idOrSlug)}/revisions`, body),
      revisions: (idOrSlug: string, query: { variant?: string; limit?: number; cursor?: string } = {}) =>
        json<Out<typeof Configs.RevisionList>>('GET', `api/workflows/${seg(idOrSlug)}/revisions`, undefined, query),
      resolve: (body: In<typeof Configs.ResolveRequest>) => json<Out<typeof Configs.ResolvedRevision>>('POST', 'api/workflows/resolve', body),
    },

    environments: {
      create: (body: In<typeof Configs.EnvironmentCreate>) => json<Out<typeof Configs.EnvironmentView>>('POST', 'api/environments', body),
      /** Every environment, by slug; with `limit`, one page of them and `next` to pass back as `cursor`. */
      list: (page: ListPage = {}) => json<Out<typeof Configs.EnvironmentList>>('GET', 'api/environments', undefined, page),
      get: (idOrSlug: string) => json<Out<typeof Configs.EnvironmentView>>('GET', `api/environments/${seg(idOrSlug)}`),
      revisions: (idOrSlug: string, page: { limit?: number; cursor?: string } = {}) =>
        json<Out<typeof Configs.EnvironmentRevisionList>>('GET', `api/environments/${seg(idOrSlug)}/revisions`, undefined, page),
      deploy: (idOrSlug: string, body: In<typeof Configs.DeployBody>) => json<Out<typeof Configs.EnvironmentView>>('POST', `api/environments/${seg(idOrSlug)}/deploy`, body),
      undeploy: (idOrSlug: string, body: In<typeof Configs.UndeployBody>) => json<Out<typeof Configs.EnvironmentView>>('POST', `api/environments/${seg(idOrSlug)}/undeploy`, body),
    },

    testsets: {
      create: (testset: In<typeof Evaluations.TestsetCreate>['testset']) => json<Out<typeof Evaluations.TestsetReply>>('POST', 'api/simple/testsets/', { testset }),
      /** A CSV or JSONL file's text; `testset` commits it as a new revision of that test set. */
      import: (file: string, query: { format: 'csv' | 'jsonl'; slug?: string; name?: string; input?: string; testset?: string; delimiter?: ',' | ';' | '\t' | '|' | 'tab' }) =>
        call<Out<typeof Evaluations.TestsetReply>>(options, 'POST', 'api/simple/testsets/import', {
          query,
          raw: { data: file, contentType: query.format === 'csv' ? 'text/csv' : 'application/x-ndjson' },
        }),
      /** Every test set, by slug; with `limit`, one page of them and `next` to pass back as `cursor`. */
      list: (page: ListPage = {}) => json<Out<typeof Evaluations.TestsetList>>('GET', 'api/simple/testsets/', undefined, page),
      /** The reference's query; with `windowing.limit`, one page of the matches and `next` to pass back as `windowing.next`. */
      query: (query: In<typeof Evaluations.TestsetQuery> = {}) => json<Out<typeof Evaluations.TestsetList>>('POST', 'api/simple/testsets/query', query),
      get: (idOrSlug: string) => json<Out<typeof Evaluations.TestsetReply>>('GET', `api/simple/testsets/${seg(idOrSlug)}`),
      edit: (idOrSlug: string, testset: In<typeof Evaluations.TestsetEdit>['testset']) => json<Out<typeof Evaluations.TestsetReply>>('PUT', `api/simple/testsets/${seg(idOrSlug)}`, { testset }),
    },

    evaluations: {
      create: (evaluation: In<typeof Evaluations.EvaluationCreate>['evaluation']) => json<Out<typeof Evaluations.EvaluationReply>>('POST', 'api/simple/evaluations/', { evaluation }),
      list: (page: { limit?: number; cursor?: string } = {}) => json<Out<typeof Evaluations.EvaluationList>>('GET', 'api/simple/evaluations/', undefined, page),
      get: (id: string) => json<Out<typeof Evaluations.EvaluationReply>>('GET', `api/simple/evaluations/${seg(id)}`),
      stop: (id: string) => json<Out<typeof Evaluations.EvaluationReply>>('POST', `api/simple/evaluations/${seg(id)}/stop`),
      rerunFailed: (id: string) => json<Out<typeof Evaluations.EvaluationReply>>('POST', `api/simple/evaluations/${seg(id)}/rerun-failed`),
      results: (query: In<typeof Evaluations.ResultsQuery>) => json<Out<typeof Evaluations.ResultList>>('POST', 'api/evaluations/results/query', query),
      metrics: (query: In<typeof Evaluations.MetricsQuery>) => json<Out<typeof Evaluations.MetricsList>>('POST', 'api/evaluations/metrics/query', query),
    },
  };
  return client;
}

export type AgentdClient = ReturnType<typeof createClient>;
