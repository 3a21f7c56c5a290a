import { parseArgs } from 'node:util';
import type { Config } from '../config.ts';
import { isAppError } from '../errors.ts';
import { openStore, type Store } from '../store/db.ts';
import { ROLES, type Role } from '../store/schema.ts';

/** `agentd keys …`: API keys from the command line, for the operator of this server. */

export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const processIo: CliIo = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
};

const USAGE = `Usage:
  agentd keys create --project NAME [--role viewer|editor|admin] [--json]
  agentd keys list --project NAME [--json]
  agentd keys revoke --id KEY_ID

create   Creates an API key for a project (creating the project if it does not exist yet) and
         prints it once; only its hash is stored. --role defaults to editor. With --json, prints
         one line: {"project_id": "...", "api_key": "..."}.
list     Lists a project's keys by id and prefix (never the key itself).
revoke   Revokes a key; requests using it are refused within a minute on every server.

Keys go in requests as: Authorization: ApiKey <key>
The database is the one \`agentd serve\` uses (AGENTD_DATA_DIR, or DATABASE_URL).
`;

const EXIT_OK = 0;
const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;

class UsageError extends Error {}

function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}

type FlagSpecs = Record<string, { type: 'string' | 'boolean'; short?: string }>;

/** Strict parsing: an unknown or malformed flag is a usage error, never silently ignored. */
function parse(args: string[], options: FlagSpecs): { values: Record<string, string | boolean | undefined> } {
  try {
    const { values } = parseArgs({
      args,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
    });
    return { values: values as Record<string, string | boolean | undefined> };
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

function stringFlag(values: Record<string, unknown>, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

async function withStore<T>(config: Config, work: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, poolSize: config.pgPoolSize, secretKey: config.secretKey });
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

async function create(args: string[], config: Config, io: CliIo): Promise<number> {
  const { values } = parse(args, {
    project: { type: 'string', short: 'p' },
    role: { type: 'string', short: 'r' },
    json: { type: 'boolean' },
  });
  if (values.help) return help(io);
  const projectName = stringFlag(values, 'project');
  if (!projectName) throw new UsageError('--project NAME is required: the project the key belongs to');
  const role = stringFlag(values, 'role') ?? 'editor';
  if (!isRole(role)) throw new UsageError(`--role must be one of ${ROLES.join(', ')}, got "${role}"`);

  const { project, key, created } = await withStore(config, async (store) => {
    const existing = await store.projects.findByName(projectName);
    const project = existing ?? (await store.projects.ensure(projectName));
    return { project, key: await store.apiKeys.create(project.id, role), created: !existing };
  });

  if (values.json) {
    io.stdout(`${JSON.stringify({ project_id: project.id, api_key: key.key })}\n`);
    return EXIT_OK;
  }
  io.stdout(
    [
      ...(created ? [`Created project "${project.name}" (${project.id}).`] : []),
      `New ${role} key ${key.id} for project "${project.name}" (${project.id}):`,
      '',
      `  ${key.key}`,
      '',
      'Keep it now: it is not stored and will not be shown again.',
      `Use it as: Authorization: ApiKey ${key.prefix}…`,
      '',
    ].join('\n'),
  );
  return EXIT_OK;
}

async function list(args: string[], config: Config, io: CliIo): Promise<number> {
  const { values } = parse(args, { project: { type: 'string', short: 'p' }, json: { type: 'boolean' } });
  if (values.help) return help(io);
  const projectName = stringFlag(values, 'project');
  if (!projectName) throw new UsageError('--project NAME is required');
  const found = await withStore(config, async (store) => {
    const project = await store.projects.findByName(projectName);
    return project && { project, keys: await store.apiKeys.list(project.id) };
  });
  if (!found) {
    io.stderr(`No project named "${projectName}".\n`);
    return EXIT_FAILURE;
  }
  if (values.json) {
    io.stdout(`${JSON.stringify({ project_id: found.project.id, keys: found.keys })}\n`);
    return EXIT_OK;
  }
  if (found.keys.length === 0) io.stdout(`Project "${projectName}" has no keys.\n`);
  for (const key of found.keys) {
    const state = key.revoked_at ? `revoked ${key.revoked_at}` : 'active';
    io.stdout(`${key.id}  ${key.prefix}…  ${key.role.padEnd(6)}  created ${key.created_at}  ${state}\n`);
  }
  return EXIT_OK;
}

async function revoke(args: string[], config: Config, io: CliIo): Promise<number> {
  const { values } = parse(args, { id: { type: 'string' } });
  if (values.help) return help(io);
  const id = stringFlag(values, 'id');
  if (!id) throw new UsageError('--id KEY_ID is required (see `agentd keys list --project NAME`)');
  const revoked = await withStore(config, (store) => store.apiKeys.revoke(id));
  if (!revoked) {
    io.stderr(`No active key with id ${id}.\n`);
    return EXIT_FAILURE;
  }
  io.stdout(`Revoked key ${id}.\n`);
  return EXIT_OK;
}

function help(io: CliIo): number {
  io.stdout(USAGE);
  return EXIT_OK;
}

const SUBCOMMANDS: Record<string, (args: string[], config: Config, io: CliIo) => Promise<number>> = {
  create,
  list,
  revoke,
};

/** Runs `agentd keys <argv…>` and returns the exit code; never exits the process itself. */
export async function keysCommand(argv: string[], config: Config, io: CliIo = processIo): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand === undefined || subcommand === '--help' || subcommand === '-h' || subcommand === 'help') {
    if (subcommand === undefined) {
      io.stderr(`agentd keys needs a subcommand.\n\n${USAGE}`);
      return EXIT_USAGE;
    }
    return help(io);
  }
  const run = Object.hasOwn(SUBCOMMANDS, subcommand) ? SUBCOMMANDS[subcommand] : undefined;
  if (!run) {
    io.stderr(`Unknown subcommand "${subcommand}" for agentd keys.\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  try {
    return await run(rest, config, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`agentd keys ${subcommand}: ${error.message}\nRun \`agentd keys --help\` for usage.\n`);
      return EXIT_USAGE;
    }
    if (isAppError(error)) {
      io.stderr(`agentd keys ${subcommand}: ${error.message}\n`);
      return EXIT_USAGE;
    }
    io.stderr(`agentd keys ${subcommand} failed: ${error instanceof Error ? error.message : String(error)}\n`);
    return EXIT_FAILURE;
  }
}
