import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import cors from '@fastify/cors';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import pino from 'pino';
import type { Config } from '../config.ts';
import { CONTRACT_VERSION } from '../contract/invoke.ts';
import { AppError, isAppError } from '../errors.ts';
import { ServiceMetrics } from '../telemetry/metrics.ts';
import { redactLogFields } from '../telemetry/log-redaction.ts';
import { makeRedactor } from '../telemetry/redact.ts';
import { serverKeys } from '../agent/model.ts';
import { metricsRoute } from './routes/metrics.ts';
import { TurnService } from '../sessions/turn-service.ts';
import { refusedValue, type Store } from '../store/db.ts';
import { databaseUnavailable } from '../store/unavailable.ts';
import { AccessLog } from './access-log.ts';
import { clientErrorHandler, discardUnreadBody } from './client-errors.ts';
import { errorEnvelope } from './envelope.ts';
import { invokeRoutes } from './routes/invoke.ts';
import { sessionFileRoutes } from './routes/session-files.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { interactionRoutes } from './routes/interactions.ts';
import { connectionRoutes } from './routes/connections.ts';
import { connectionAddresses } from '../agent/connection-address.ts';
import { keyRoutes } from './routes/keys.ts';
import { inspectRoutes } from './routes/inspect.ts';
import { configRoutes } from './routes/configs.ts';
import { ConfigService } from '../configs/service.ts';
import { evaluationRoutes } from './routes/evaluations.ts';
import { EvaluationEngine } from '../evaluation/engine.ts';
import { judgeModel } from '../evaluation/judge-model.ts';
import { RunService } from '../evaluation/runs.ts';
import { TestsetService } from '../evaluation/testsets.ts';
import { InteractionService } from '../interactions/service.ts';
import { runHeaders } from './run-headers.ts';
import { checkBodyDepth, jsonBodyError } from './validate.ts';
import { authenticate } from './auth.ts';
import type { VerifiedApiKey } from '../store/api-keys.ts';
import { openApiDocument } from './openapi.ts';
import { documentedRoutes, isApiPath } from './route-doc.ts';
import { consoleRoutes } from './console.ts';
import { VERSION } from '../version.ts';
import { isObject } from '../objects.ts';

declare module 'fastify' {
  interface FastifyInstance {
    turns: TurnService;
    interactions: InteractionService;
    evaluations: EvaluationEngine;
    /** Set when the server begins to stop: `/ready` then fails, so a load balancer sends no more. */
    draining: boolean;
  }
  interface FastifyRequest {
    /** What is known of the run so far, so an error reply can still name its session and trace. */
    run: { sessionId?: string | undefined; traceId?: string | undefined; spanId?: string | undefined };
    /**
     * The caller's key, once verified (http/auth.ts). Not named `apiKey`: the log formatter copies
     * every object with such a field to censor it (telemetry/log-redaction.ts), and the access
     * line logs the request.
     */
    verifiedKey: VerifiedApiKey | undefined;
  }
  interface FastifyContextConfig {
    /** The route needs no body, so an empty one is no body whatever its content type says. */
    optionalBody?: boolean;
  }
}

export interface AppDeps {
  config: Config;
  store: Store;
  /** The built console to serve at `/` (default: dist/console, where `npm run build` puts it). */
  consoleDir?: string;
  /** Where log lines go instead of stdout; tests capture them to prove secrets stay out. */
  logStream?: { write(line: string): void };
}

const MAX_PARAM_LENGTH = 1024;

/** How many bytes of JSON log lines, or how long, wait to be written together (logDestination). */
const LOG_BATCH_BYTES = 4096;
const LOG_BATCH_MS = 250;

/**
 * Where log lines go: the test's capture, else stdout, as JSON lines, or, for a person at a
 * terminal (AGENTD_LOG_FORMAT=pretty, the default when stdout is one), as pino-pretty's readable
 * lines, written in the same thread and in order. Redaction happens before either.
 *
 * JSON lines are written without waiting for each write, and gathered: they go out together once
 * 4 KB are waiting or a quarter of a second has passed, so a busy server makes one write for a few
 * dozen requests instead of one each (BENCHMARKS.md, "Log lines written together"). pino writes
 * what is left when the process exits, a crash included; only a process killed outright (SIGKILL,
 * out of memory) can lose its last quarter second of lines.
 */
async function logDestination(config: Config, capture: AppDeps['logStream']): Promise<{ stream?: { write(line: string): void } }> {
  if (capture) return { stream: capture };
  if (config.logFormat !== 'pretty') return { stream: pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_BATCH_MS }) };
  const { default: pinoPretty } = await import('pino-pretty');
  return { stream: pinoPretty({ colorize: true, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }) };
}

/** The secret values a request carries (`secrets`, `credentials`): an error quoting what was sent must not echo them. */
function requestSecrets(body: unknown): string[] {
  if (!isObject(body)) return [];
  const values = isObject(body.secrets) ? Object.values(body.secrets).filter((value): value is string => typeof value === 'string') : [];
  return typeof body.credentials === 'string' ? [...values, body.credentials] : values;
}

const ROUTE_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

const BAD_PERCENT = 'the URL is not valid: a "%" must start a percent-encoded UTF-8 byte such as %2F';

/**
 * The router refuses a path it cannot decode, but the query parser keeps a bad escape as it is,
 * so `project_id=%zz` would be looked up as the text "%zz" (a 403) instead of refused.
 */
function checkQueryEncoding(url: string): void {
  const start = url.indexOf('?');
  if (start === -1 || !url.includes('%', start)) return;
  try {
    decodeURIComponent(url.slice(start + 1));
  } catch {
    throw new AppError('invalid-request', `${BAD_PERCENT} (in the query string)`);
  }
}

function refuseRouteSchemas(): never {
  throw new Error('a route asked Fastify to validate or serialize by a JSON schema; agentd reads requests with zod (src/http/validate.ts)');
}

/** Whether a request carries a body, by its framing headers. */
function hasBody(raw: IncomingMessage): boolean {
  return raw.headers['transfer-encoding'] !== undefined || (raw.headers['content-length'] !== undefined && raw.headers['content-length'] !== '0');
}

/** Fastify's own errors for bad requests, mapped to the stable error types. */
function fromFastifyError(error: FastifyError, maxBodyBytes: number): AppError | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      // The size is what the sender needs: to cut a test set file or a conversation down to it.
      return new AppError('payload-too-large', `the request body is larger than the ${maxBodyBytes} bytes the server accepts (AGENTD_MAX_BODY)`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('unsupported-media-type', 'send the body as JSON with "Content-Type: application/json"');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('invalid-json', 'the body is empty; send a JSON object');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('invalid-json', `the body is not valid JSON: ${error.message}`);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('invalid-request', 'the Content-Length header does not match the body');
  }
  if (error instanceof SyntaxError || (error.statusCode === 400 && /JSON/i.test(error.message))) {
    return new AppError('invalid-json', `the body is not valid JSON: ${error.message}`);
  }
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    return new AppError('invalid-request', error.message, { status: error.statusCode });
  }
  return undefined;
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const app = Fastify({
    logger: { level: config.logLevel, formatters: { log: redactLogFields }, ...(await logDestination(config, deps.logStream)) },
    logController: new AccessLog(),
    bodyLimit: config.maxBodyBytes,
    // Session ids in paths may be 128 characters (spec §2.1); the router's default of 100 would answer
    // a valid id with a bare 414. Values up to this limit reach the routes, which check them.
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH, ignoreTrailingSlash: true },
    // A URL the router cannot read (bad percent-encoding, a segment over the limit) is refused before
    // any hook runs, by default with a body outside the envelope; no route uses async constraints,
    // the only other error that comes here.
    frameworkErrors: (error, request, reply) => {
      const failure =
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new AppError('invalid-request', `the URL has a path segment longer than ${MAX_PARAM_LENGTH} characters; no id is that long`)
          : new AppError('invalid-request', BAD_PERCENT);
      // The option is typed for any route's reply schema; this one answers like every other error.
      return (reply as unknown as FastifyReply)
        .code(failure.status)
        .headers({ 'x-request-id': request.id, 'x-ag-version': CONTRACT_VERSION })
        .type('application/json; charset=utf-8')
        .send(errorEnvelope(failure, {}, false));
    },
    clientErrorHandler,
    // Requests are read with zod (validate.ts) and replies written as they are, never by a route's
    // JSON schema; without this Fastify loads ajv and the schema compilers for nothing (4 MB of RSS).
    // A plugin's route that did ask for one fails at start instead of going unchecked.
    schemaController: { compilersFactory: { buildValidator: refuseRouteSchemas, buildSerializer: refuseRouteSchemas } },
    // Fastify turns Node's limit on a whole request off; without one, a client that sends part of
    // its body and stops holds its connection for good. Node watches for that only when the server
    // is made with a limit (so it goes in `http` as well: Fastify's own option is set afterwards),
    // and looks once per checking interval, kept below the limit.
    requestTimeout: config.requestTimeoutMs,
    http: {
      requestTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(30_000, Math.ceil(config.requestTimeoutMs / 4)),
      // Node answers an HTTP/1.1 request without a Host header itself, with an empty 400; the
      // onRequest hook below refuses it in the envelope instead.
      requireHostHeader: false,
    },
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
    },
    requestIdHeader: false,
  });
  // Before any route, so that every route is seen: /openapi.json is made from these.
  const apiRoutes = documentedRoutes(app);

  // Browser pages on the listed origins may call the API, a useChat front end among them: they may
  // send the contract's headers and read the ones replies carry.
  if (config.corsOrigins) {
    await app.register(cors, {
      origin: config.corsOrigins,
      methods: ['GET', 'POST', 'PUT', 'DELETE'],
      allowedHeaders: ['authorization', 'content-type', 'accept', 'traceparent', 'baggage', 'x-request-id', 'x-ag-messages-format', 'x-ag-messages-transcript', 'x-ag-session-control', 'x-ag-workflow-embeds', 'x-ag-session-id'],
      exposedHeaders: ['x-request-id', 'x-ag-version', 'x-ag-trace-id', 'x-ag-span-id', 'x-ag-session-id', 'traceparent', 'baggage', 'retry-after', 'x-vercel-ai-ui-message-stream', 'x-ag-messages-format', 'x-ag-messages-version'],
      maxAge: 600,
    });
  }

  // Fastify parses text/plain into a string by default; every body here is JSON, so that type
  // gets the same 415 as any other non-JSON type instead of a confusing "must be an object" 400.
  app.removeContentTypeParser('text/plain');
  // Many clients send `Content-Type: application/json` on every request; on a route that needs no
  // body (stop, delete, inspect) an empty body is then no body, not a 400.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '' && request.routeOptions.config.optionalBody) return done(null, undefined);
    parseJson(request, body as string, (error, value) => (error && body !== '' ? done(jsonBodyError(body as string)) : done(error, value)));
  });

  // The OpenTelemetry SDK and its exporters load only when spans are exported: some 4 MB of heap otherwise (BENCHMARKS.md, "An idle server").
  const spans = config.otlp ? new (await import('../telemetry/tracing.ts')).Tracing(config.otlp, app.log) : undefined;
  // Its sources read the services made just below, when scraped.
  const metrics: ServiceMetrics | undefined = config.metrics
    ? new ServiceMetrics({ liveTurns: (): number => turns.live.size, placement: () => turns.placement, turnThreads: () => turns.threadsRunning, waiting: () => deps.store.interactions.waitingCounts(), casesInFlight: (): number => evaluations.inFlight(), notifications: deps.store.notifications && (() => deps.store.notifications!.counts()) }, deps.store.engine)
    : undefined;
  deps.store.timeQueries(metrics && ((ms) => metrics.query(deps.store.engine, ms)));
  const turns: TurnService = new TurnService({ store: deps.store, config, log: app.log, spans, metrics });
  app.decorate('turns', turns);
  const interactions = new InteractionService({ store: deps.store, turns, log: app.log });
  app.decorate('interactions', interactions);
  const testsets = new TestsetService(deps.store.configs);
  const runs = new RunService({ store: deps.store, config, testsets });
  const evaluations: EvaluationEngine = new EvaluationEngine({
    store: deps.store,
    turns,
    claimTtlMs: config.leaseTtlMs,
    pollMs: config.evalPollMs,
    prepare: (run) => runs.prepare(run),
    complete: judgeModel(config, spans),
    log: app.log,
    metrics,
  });
  runs.attach(evaluations);
  app.decorate('evaluations', evaluations);
  const stopFollowingRevocations = await deps.store.apiKeys.followRevocations();
  // A closed app runs no more cases; those in flight go back to pending for the next start.
  app.addHook('onClose', async () => {
    await stopFollowingRevocations();
    await interactions.close();
    await evaluations.drain();
    await turns.close();
    await spans?.close();
  });
  app.decorateRequest('run', null as never);
  app.decorateRequest('verifiedKey', undefined);
  app.addHook('onRequest', async (request, reply) => {
    request.run = {};
    // Every reply says which contract it speaks, on the /api surface too.
    reply.header('x-request-id', request.id).header('x-ag-version', CONTRACT_VERSION);
    checkQueryEncoding(request.url);
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      throw new AppError('invalid-request', 'the request has no Host header, which HTTP/1.1 requires; send one');
    }
    // Bodies are read as they are sent: a compressed one would be parsed as its compressed bytes
    // (a misleading "not valid JSON", or a stored file that is not what was uploaded).
    const coding = request.headers['content-encoding'];
    if (coding !== undefined && coding.trim().toLowerCase() !== 'identity' && hasBody(request.raw)) {
      throw new AppError('unsupported-media-type', `the body is sent with Content-Encoding "${coding}", which this server does not decode; send it uncompressed`, { headers: { 'accept-encoding': 'identity' } });
    }
    // Read once: Fastify builds `routeOptions` anew on every read. Its `config` holds the route's url.
    const route = request.routeOptions.config;
    // Every route of the API and the services needs a key: checked before the body is read (auth.ts).
    if (request.method !== 'OPTIONS' && route.url !== undefined && isApiPath(route.url)) await authenticate(deps.store, request);
    // A route that takes no body accepts an empty one whatever its Content-Type says (some clients
    // send a form type on every POST): there is nothing to parse, so no parser is looked for.
    if (route.optionalBody && !hasBody(request.raw)) delete request.headers['content-type'];
  });

  app.addHook('preValidation', async (request) => checkBodyDepth(request.body));

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const appError = isAppError(error) ? error : (fromFastifyError(error, config.maxBodyBytes) ?? refusedValue(error));
    const down = appError ? undefined : databaseUnavailable(error);
    // The operator's sign of a database outage besides /ready: one line a request, with the driver's words, no stack.
    if (down) request.log.warn({ error: { type: down.type, message: down.message }, driver: error.message }, 'database unavailable');
    else if (!appError) request.log.error({ err: error }, 'unhandled error');
    const failure = appError ?? down ?? new AppError('internal', 'the server failed to handle the request; it has been logged with the request id', { cause: error });
    const run = request.run ?? {};
    const body = errorEnvelope(failure, run, config.debug, makeRedactor([...serverKeys(config), ...requestSecrets(request.body)]));
    discardUnreadBody(request.raw, reply);
    return reply
      .code(failure.status)
      .headers({ ...runHeaders(run), ...(failure.headers ?? {}) })
      .type('application/json; charset=utf-8')
      .send(body);
  });

  app.setNotFoundHandler(async (request, reply) => {
    const path = request.url.split('?')[0]!;
    // A route asked with another method than it takes: 405 and what it takes (RFC 9110 §15.5.6).
    const allowed = ROUTE_METHODS.filter((method) => app.findRoute({ method, url: path }));
    const error = allowed.length
      ? new AppError('method-not-allowed', `${path} takes ${allowed.join(', ')}, not ${request.method}`, { headers: { allow: allowed.join(', ') } })
      : new AppError('not-found', `no route ${request.method} ${path}`);
    return reply.code(error.status).headers(error.headers ?? {}).send(errorEnvelope(error, {}, false));
  });

  // Liveness: the process answers. Readiness: it should get traffic (the database answers, its
  // migrations are applied, and it is not stopping).
  app.get('/health', async () => ({ status: 'ok' }));
  app.decorate('draining', false);
  app.get('/ready', async (_request, reply) => {
    const reason = app.draining ? 'the server is stopping: it lets its live turns end and takes no new work' : await deps.store.unreadiness();
    return reason ? reply.code(503).send({ status: 'not ready', reason }) : { status: 'ready' };
  });
  if (metrics && config.metrics) await app.register(metricsRoute, { metrics, access: config.metrics });
  await app.register(invokeRoutes, { store: deps.store, turns, streamHoldMs: config.streamHoldMs });
  await app.register(sessionRoutes, { store: deps.store, config, turns });
  await app.register(sessionFileRoutes, { store: deps.store, config });
  await app.register(interactionRoutes, { store: deps.store, interactions });
  await app.register(connectionRoutes, { store: deps.store, addresses: connectionAddresses(config.connections.allowedHosts) });
  await app.register(keyRoutes, { store: deps.store });
  await app.register(inspectRoutes, { store: deps.store, config });
  await app.register(evaluationRoutes, { store: deps.store, testsets, runs });
  await app.register(configRoutes, { store: deps.store, configs: new ConfigService(deps.store.configs, config.defaultLlm) });
  // After the API's routes, which it describes; built once: they do not change while the server runs.
  const openapi = openApiDocument(VERSION, apiRoutes);
  app.get('/openapi.json', async () => openapi);
  await app.register(consoleRoutes, { openapi, ...(deps.consoleDir ? { dir: deps.consoleDir } : {}) });
  return app;
}
