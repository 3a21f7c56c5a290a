import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kysely } from 'kysely';
import { createApiKeysRepo, type ApiKeysOptions, type ApiKeysRepo } from './api-keys.ts';
import { createConfigsRepo, type ConfigsRepo } from './configs.ts';
import { createConnectionsRepo, type ConnectionsRepo } from './connections.ts';
import { createEvaluationsRepo, type EvaluationsRepo } from './evaluations.ts';
import { createInteractionsRepo, type InteractionsRepo } from './interactions.ts';
import { createLeasesRepo, type LeasesRepo } from './leases.ts';
import { migrateToLatest } from './migrate.ts';
import { createProjectsRepo, type ProjectsRepo } from './projects.ts';
import type { Database } from './schema.ts';
import { createSecretBox, loadSecretKey } from './secret-box.ts';
import { createSessionsRepo, type SessionsRepo } from './sessions.ts';
import { checkpointInBackground, createNodeSqliteDialect, openSqliteDatabase } from './sqlite-dialect.ts';
import { createTurnsRepo, type TurnsRepo } from './turns.ts';

export interface Store {
  db: Kysely<Database>;
  projects: ProjectsRepo;
  apiKeys: ApiKeysRepo;
  sessions: SessionsRepo;
  turns: TurnsRepo;
  interactions: InteractionsRepo;
  leases: LeasesRepo;
  connections: ConnectionsRepo;
  configs: ConfigsRepo;
  evaluations: EvaluationsRepo;
  close(): Promise<void>;
}

export interface StoreOptions {
  /** Where `agentd.db` lives when no `databaseUrl` is given; `:memory:` for a throwaway database. */
  dataDir: string;
  /** `sqlite:<path>`, `file:<path>` or a `file://` URL; `postgres://…` once the pg driver lands. */
  databaseUrl?: string | undefined;
  apiKeys?: ApiKeysOptions;
  /** Seals stored provider keys (AGENTD_SECRET_KEY); unset, `<dataDir>/secret.key` is used, made on first open. */
  secretKey?: Buffer | undefined;
}

export const DATABASE_FILE = 'agentd.db';

const MEMORY = ':memory:';

function sqlitePathFromUrl(url: string): string {
  if (url.startsWith('file://')) return fileURLToPath(url);
  for (const scheme of ['sqlite://', 'sqlite:', 'file:']) {
    if (url.startsWith(scheme)) {
      const rest = url.slice(scheme.length);
      if (rest === '') break;
      return rest;
    }
  }
  throw new Error(
    `DATABASE_URL "${url}" is not supported: use sqlite:<path> or file:<path> (or leave it unset for ` +
      `<AGENTD_DATA_DIR>/${DATABASE_FILE})`,
  );
}

/** Decides which SQLite file to open; exported so `agentd` can say where its data is. */
export function resolveDatabaseLocation(options: Pick<StoreOptions, 'dataDir' | 'databaseUrl'>): string {
  const url = options.databaseUrl;
  if (url !== undefined && url !== '') {
    if (/^postgres(ql)?:/i.test(url)) {
      throw new Error(
        'DATABASE_URL points at PostgreSQL, which arrives with the pg driver (issue 7); ' +
          `unset DATABASE_URL to use the embedded SQLite database in AGENTD_DATA_DIR for now`,
      );
    }
    const file = sqlitePathFromUrl(url);
    return file === MEMORY ? MEMORY : path.resolve(file);
  }
  return options.dataDir === MEMORY ? MEMORY : path.join(path.resolve(options.dataDir), DATABASE_FILE);
}

/** Opens the database, brings its schema up to date and wires the repositories to it. */
export async function openStore(options: StoreOptions): Promise<Store> {
  const location = resolveDatabaseLocation(options);
  if (location !== MEMORY) mkdirSync(path.dirname(location), { recursive: true });
  // Before the database opens: a key file that cannot be read stops the start, not a later turn.
  const box = createSecretBox(loadSecretKey(options.dataDir, options.secretKey));

  const sqlite = openSqliteDatabase(location);
  const db = new Kysely<Database>({ dialect: createNodeSqliteDialect(sqlite) });
  try {
    await migrateToLatest(db);
  } catch (error) {
    await db.destroy();
    throw error;
  }

  const stopCheckpoints = checkpointInBackground(sqlite, location);
  return {
    db,
    projects: createProjectsRepo(db),
    apiKeys: createApiKeysRepo(db, options.apiKeys),
    sessions: createSessionsRepo(db),
    turns: createTurnsRepo(db),
    interactions: createInteractionsRepo(db),
    leases: createLeasesRepo(db),
    connections: createConnectionsRepo(db, box),
    configs: createConfigsRepo(db),
    evaluations: createEvaluationsRepo(db),
    close: async () => {
      await stopCheckpoints();
      await db.destroy();
    },
  };
}
