import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Kysely, sql, type CompiledQuery, type LogEvent } from 'kysely';
import { AppError } from '../errors.ts';
import { within } from '../within.ts';
import { createApiKeysRepo, type ApiKeysOptions, type ApiKeysRepo } from './api-keys.ts';
import { createConfigsRepo, type ConfigsRepo } from './configs.ts';
import { createConnectionsRepo, type ConnectionsRepo } from './connections.ts';
import { isPostgresUrl, sqlitePathFromUrl } from './database-url.ts';
import { createEvaluationsRepo, type EvaluationsRepo } from './evaluations.ts';
import { createInteractionsRepo, type InteractionsRepo } from './interactions.ts';
import { createLeasesRepo, type LeasesRepo } from './leases.ts';
import { createMigrator, migrateToLatest } from './migrate.ts';
import { OwnSchemaPostgresDialect } from './own-schema-dialect.ts';
import type { Notifications } from './notifications.ts';
import { boundedClient, boundedSettings, type PgBounds } from './pg-bounds.ts';
import { createPausedStatesRepo, type PausedStatesRepo } from './paused-states.ts';
import { createProjectsRepo, type ProjectsRepo } from './projects.ts';
import { runPreparedDirectly } from './prepared.ts';
import type { Database } from './schema.ts';
import { createSecretBox, loadSecretKey } from './secret-box.ts';
import { createSessionsRepo, type SessionsRepo } from './sessions.ts';
import { checkpointInBackground, createNodeSqliteDialect, openSqliteDatabase } from './sqlite-dialect.ts';
import { createTurnsRepo, type TurnsRepo } from './turns.ts';
import { databaseUnavailable } from './unavailable.ts';

export interface Store {
  db: Kysely<Database>;
  projects: ProjectsRepo;
  apiKeys: ApiKeysRepo;
  sessions: SessionsRepo;
  turns: TurnsRepo;
  interactions: InteractionsRepo;
  pausedStates: PausedStatesRepo;
  leases: LeasesRepo;
  connections: ConnectionsRepo;
  configs: ConfigsRepo;
  evaluations: EvaluationsRepo;
  /** Which engine holds the data: one SQLite server, or PostgreSQL shared by replicas. */
  engine: 'sqlite' | 'postgres';
  /** PostgreSQL: messages between the replicas. SQLite has one server and nobody to tell. */
  notifications: Notifications | undefined;
  /** Why this process should not take traffic (the database cannot be reached, migrations not applied); undefined when it may. */
  unreadiness(): Promise<string | undefined>;
  /** Hears how long each statement took (ms), for the metrics; one listener, the last set. */
  timeQueries(listener: ((ms: number) => void) | undefined): void;
  close(): Promise<void>;
}

export interface StoreOptions {
  /** Where `agentd.db` lives when no `databaseUrl` is given; `:memory:` for a throwaway database. */
  dataDir: string;
  /** `sqlite:<path>`, `file:<path>`, a `file://` URL, or `postgres://…` for PostgreSQL. */
  databaseUrl?: string | undefined;
  /** PostgreSQL: connections in the pool (AGENTD_PG_POOL_SIZE). */
  poolSize?: number | undefined;
  /**
   * PostgreSQL: the URL of the one connection that LISTENs (AGENTD_DATABASE_LISTEN_URL), when
   * `databaseUrl` goes through a pooler in transaction mode, which cannot hold a LISTEN.
   */
  listenUrl?: string | undefined;
  /** PostgreSQL: how long a request waits for a connection and for a statement (AGENTD_PG_CONNECT_TIMEOUT_MS, AGENTD_PG_STATEMENT_TIMEOUT_MS); unset, not at all. */
  bounds?: PgBounds | undefined;
  apiKeys?: ApiKeysOptions;
  /** Seals stored provider keys (AGENTD_SECRET_KEY); unset, `<dataDir>/secret.key` is used, made on first open. */
  secretKey?: Buffer | undefined;
}

export const DATABASE_FILE = 'agentd.db';

/**
 * A query the database refused because of a value the request carried. PostgreSQL cannot hold a
 * NUL character in text (SQLite can), so an id, slug or name with "\u0000" fails the query itself.
 */
export function refusedValue(error: unknown): AppError | undefined {
  if (pgDatabaseError && error instanceof pgDatabaseError && error.code === '22021') {
    return new AppError('invalid-request', 'a text value in the request holds a NUL character (\\u0000), which the database cannot store; remove it');
  }
  return undefined;
}

const MEMORY = ':memory:';

/**
 * pg's error class, once a store on PostgreSQL has loaded pg: a server on SQLite never loads it
 * (nor the notifications built on it), 1.4 MB of heap it has no use for (BENCHMARKS.md, "An idle server").
 */
let pgDatabaseError: typeof import('pg').DatabaseError | undefined;

/** How long a readiness probe waits for the database. */
const READINESS_TIMEOUT_MS = 2_000;

/** Decides which SQLite file to open; exported so `agentd` can say where its data is. */
export function resolveDatabaseLocation(options: Pick<StoreOptions, 'dataDir' | 'databaseUrl'>): string {
  const url = options.databaseUrl;
  if (url !== undefined && url !== '') {
    if (isPostgresUrl(url)) return redactUrl(url);
    const file = sqlitePathFromUrl(url);
    return file === MEMORY ? MEMORY : path.resolve(file);
  }
  return options.dataDir === MEMORY ? MEMORY : path.join(path.resolve(options.dataDir), DATABASE_FILE);
}

/** A PostgreSQL URL as it may be shown: without its password. */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://…';
  }
}

/** Kysely's query log as a hook the metrics set later: statements are timed only while one listens. */
function queryTimer() {
  let listener: ((ms: number) => void) | undefined;
  return {
    log: (event: LogEvent) => listener?.(event.queryDurationMillis),
    time: (ms: number) => listener?.(ms),
    set: (next: ((ms: number) => void) | undefined) => void (listener = next),
  };
}

interface Engine {
  db: Kysely<Database>;
  timer: ReturnType<typeof queryTimer>;
  /** PostgreSQL: the schema the tables live in (the first of the connection's search_path). */
  schema(): Promise<string | undefined>;
  /** Brings the schema up to date (migrate.ts). */
  migrate(schema: string | undefined): Promise<unknown>;
  notifications(schema: string | undefined): Notifications | undefined;
  /** SQLite on a file: what moves when another connection commits to it (api-keys.ts). */
  dataVersion?: () => number;
  close(): Promise<void>;
}

async function openPostgres(url: string, poolSize: number | undefined, listenUrl: string | undefined, bounds: PgBounds | undefined): Promise<Engine> {
  const [{ default: pg }, { channelPrefix, createPgNotifications }] = await Promise.all([import('pg'), import('./notifications.ts')]);
  pgDatabaseError = pg.DatabaseError;
  const Client = boundedClient(pg.Client);
  const openPool = (bounded: PgBounds | undefined, max: number) => {
    const pool = new pg.Pool({ ...boundedSettings(url, bounded), max, Client });
    // An idle connection the server drops (a restart, a failover) must not crash the process.
    pool.on('error', () => {});
    // Nor one checked out: pg-pool listens for an idle connection's errors only, and a socket reset
    // or pg_terminate_backend on a connection lent to a query or a transaction is emitted on it
    // (the query itself fails with the error too, and the pool drops the connection on release).
    pool.on('connect', (client) => client.on('error', () => {}));
    return pool;
  };
  const pool = openPool(bounds, poolSize ?? 10);
  const timer = queryTimer();
  const db = new Kysely<Database>({ dialect: new OwnSchemaPostgresDialect({ pool }), log: timer.log });
  let notifications: Notifications | undefined;
  return {
    db,
    timer,
    schema: async () => (await sql<{ schema: string }>`select current_schema() as schema`.execute(db)).rows[0]?.schema,
    // A connection of its own, with no bound on its statements: a migration may build an index on
    // a big table, or wait on its lock for another replica's migrations to end.
    migrate: async (schema) => {
      const unbounded = new Kysely<Database>({ dialect: new OwnSchemaPostgresDialect({ pool: openPool(bounds && { ...bounds, statementTimeoutMs: 0 }, 1) }) });
      try {
        await migrateToLatest(unbounded, schema);
      } finally {
        await unbounded.destroy();
      }
    },
    notifications: (schema) => (notifications = createPgNotifications({ connectionString: listenUrl ?? url, bounds, Client, pool, prefix: channelPrefix(schema ?? 'public') })),
    close: async () => {
      const closing = (async () => {
        await notifications?.close();
        await db.destroy();
      })();
      // A frozen database never answers a connection's goodbye, and a connection waiting for one
      // holds the process (pg-pool's end resolves once each is asked to end, not once it has):
      // past a statement's bound they are cut.
      if (!bounds?.statementTimeoutMs) return closing;
      const ended = Promise.all([closing, Client.ended()]).then(() => true, () => true);
      if (await within(ended, bounds.statementTimeoutMs)) return closing;
      Client.cutAll();
      await closing;
    },
  };
}

function openSqlite(location: string): Engine {
  if (location !== MEMORY) mkdirSync(path.dirname(location), { recursive: true });
  const sqlite = openSqliteDatabase(location);
  const timer = queryTimer();
  const { dialect, plugin, runNow } = createNodeSqliteDialect(sqlite, location);
  const db = new Kysely<Database>({ dialect, plugins: [plugin], log: timer.log });
  // Timed as Kysely's log times a statement: its run, not the wait for its group's commit.
  runPreparedDirectly(db, <R>(compiled: CompiledQuery) => {
    const started = performance.now();
    const answer = runNow<R>(compiled);
    if (answer) timer.time(performance.now() - started);
    return answer;
  });
  const stopCheckpoints = checkpointInBackground(sqlite, location);
  // Read on the connection itself, past Kysely's executor: requests read it (api-keys.ts).
  const version = sqlite.prepare('PRAGMA data_version');
  return {
    db,
    timer,
    schema: async () => undefined,
    migrate: () => migrateToLatest(db),
    notifications: () => undefined,
    ...(location === MEMORY ? {} : { dataVersion: () => (version.get() as { data_version: number }).data_version }),
    close: async () => {
      await stopCheckpoints();
      await db.destroy();
    },
  };
}

/** Opens the database, brings its schema up to date and wires the repositories to it. */
export async function openStore(options: StoreOptions): Promise<Store> {
  const location = resolveDatabaseLocation(options);
  // Before the database opens: a key file that cannot be read stops the start, not a later turn.
  const box = createSecretBox(loadSecretKey(options.dataDir, options.secretKey));

  const url = options.databaseUrl;
  const postgres = isPostgresUrl(url);
  const kind = postgres ? 'postgres' : 'sqlite';
  const engine = postgres ? await openPostgres(url, options.poolSize, options.listenUrl, options.bounds) : openSqlite(location);
  const db = engine.db;
  let schema: string | undefined;
  try {
    schema = await engine.schema();
    await engine.migrate(schema);
  } catch (error) {
    await engine.close();
    // A server that is down or refuses connections for now is the operator's to bring up; agentd does not wait for it.
    const hint = databaseUnavailable(error) ? `; make sure the database is running and reachable there (${postgres ? 'DATABASE_URL' : 'its folder writable, its disk not full'}), then start agentd again` : '';
    throw new Error(`cannot open the database at ${location}: ${(error as Error).message}${hint}`, { cause: error });
  }

  const notifications = engine.notifications(schema);
  const sessions = createSessionsRepo(db, kind);
  const leases = createLeasesRepo(db, kind);
  return {
    db,
    projects: createProjectsRepo(db),
    apiKeys: createApiKeysRepo(db, { ...options.apiKeys, notifications, dataVersion: engine.dataVersion }),
    sessions,
    turns: createTurnsRepo(db, kind, { sessions, leases }),
    interactions: createInteractionsRepo(db),
    pausedStates: createPausedStatesRepo(db),
    leases,
    connections: createConnectionsRepo(db, box),
    configs: createConfigsRepo(db, kind),
    evaluations: createEvaluationsRepo(db, kind),
    engine: kind,
    notifications,
    async unreadiness() {
      try {
        // A database that does not answer at all (a pool waiting for a connection) must not hang the probe.
        const migrations = await within(createMigrator(db, schema).getMigrations(), READINESS_TIMEOUT_MS);
        if (!migrations) return `the database cannot be reached: no answer within ${READINESS_TIMEOUT_MS} ms`;
        const pending = migrations.filter((m) => m.executedAt === undefined).map((m) => m.name);
        return pending.length ? `the database lacks migrations ${pending.join(', ')}: restart a server of this version to apply them` : undefined;
      } catch (error) {
        return `the database cannot be reached: ${(error as Error).message}`;
      }
    },
    timeQueries: (listener) => engine.timer.set(listener),
    close: () => engine.close(),
  };
}
