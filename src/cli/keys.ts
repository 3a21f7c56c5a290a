import { parseArgs } from 'node:util';
import { AgentdError, createClient, type AgentdClient } from '../client/index.ts';
import { keepAliveFetch } from '../keep-alive-fetch.ts';
import { describeFailure } from './remote.ts';
import type { Config } from '../config.ts';
import { isAppError } from '../errors.ts';
import { openStore, type Store } from '../store/db.ts';
import { ROLES, type Role } from '../store/schema.ts';
import { fitUsage } from './usage.ts';

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
  agentd keys create|list|revoke --url URL --api-key ADMIN_KEY …

create   Creates an API key for a project (creating the project if it does not
         exist yet) and prints it once; only its hash is stored. --role defaults
         to editor. With --json, prints one line: {"project_id": "...",
         "api_key": "..."}.
list     Lists a project's keys by id and prefix (never the key itself), role,
         and when each was created and last used.
revoke   Revokes a key; requests using it are refused at once: by a server on
         the same SQLite file (it sees the write at its next request), and by
         every server of a PostgreSQL deployment (they are told; should one miss
         it, its key cache forgets within a minute).

Beside the server, these work on its database: the one \`agentd serve\` uses
(AGENTD_DATA_DIR, or DATABASE_URL). With --url they go through that server's API
instead, with an admin key (--api-key, or AGENTD_API_KEY), and act in that key's
project (no --project).

Keys go in requests as: Authorization: ApiKey <key>
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
  const store = await openStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, poolSize: config.pgPoolSize, bounds: config.pgBounds, listenUrl: config.databaseListenUrl, secretKey: config.secretKey });
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

const REMOTE_FLAGS: FlagSpecs = { url: { type: 'string' }, 'api-key': { type: 'string' } };

/** The server's API, when --url says to use it: with an admin key, in that key's project. */
function remote(values: Record<string, unknown>): AgentdClient | undefined {
  const url = stringFlag(values, 'url');
  if (url === undefined) return undefined;
  if (stringFlag(values, 'project') !== undefined) throw new UsageError("--project goes with the database; through --url a key acts in its own project: leave --project out");
  const apiKey = stringFlag(values, 'api-key') ?? process.env.AGENTD_API_KEY;
  if (!apiKey) throw new UsageError('--url needs an admin key: --api-key KEY or AGENTD_API_KEY');
  if (!/^https?:$/.test(URL.parse(url)?.protocol ?? '')) throw new UsageError(`--url "${url}" is not an http(s) URL; give the server's address, e.g. http://127.0.0.1:8787`);
  return createClient({ baseUrl: url, apiKey, fetch: keepAliveFetch });
}

function keyLine(key: { id: string; prefix: string; role: string; created_at: string; last_used_at?: string | null; revoked_at?: string | null }): string {
  const state = key.revoked_at ? `revoked ${key.revoked_at}` : 'active';
  return `${key.id}  ${key.prefix}…  ${key.role.padEnd(6)}  created ${key.created_at}  last used ${key.last_used_at ?? 'never'}  ${state}\n`;
}

function printCreated(io: CliIo, json: boolean, role: string, project: { id: string; name: string }, key: { id: string; key: string; prefix: string }, createdProject = false): number {
  if (json) {
    io.stdout(`${JSON.stringify({ project_id: project.id, api_key: key.key })}\n`);
    return EXIT_OK;
  }
  io.stdout(
    [
      ...(createdProject ? [`Created project "${project.name}" (${project.id}).`] : []),
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

async function create(args: string[], config: Config, io: CliIo): Promise<number> {
  const { values } = parse(args, {
    project: { type: 'string', short: 'p' },
    role: { type: 'string', short: 'r' },
    json: { type: 'boolean' },
    ...REMOTE_FLAGS,
  });
  if (values.help) return help(io);
  const role = stringFlag(values, 'role') ?? 'editor';
  if (!isRole(role)) throw new UsageError(`--role must be one of ${ROLES.join(', ')}, got "${role}"`);
  const api = remote(values);
  if (api) {
    const { project } = await api.keys.self();
    return printCreated(io, values.json === true, role, project, await api.keys.create({ role }));
  }
  const projectName = stringFlag(values, 'project');
  if (!projectName) throw new UsageError('--project NAME is required: the project the key belongs to');

  const { project, key, created } = await withStore(config, async (store) => {
    const existing = await store.projects.findByName(projectName);
    const project = existing ?? (await store.projects.ensure(projectName));
    return { project, key: await store.apiKeys.create(project.id, role), created: !existing };
  });
  return printCreated(io, values.json === true, role, project, key, created);
}

async function list(args: string[], config: Config, io: CliIo): Promise<number> {
  const { values } = parse(args, { project: { type: 'string', short: 'p' }, json: { type: 'boolean' }, ...REMOTE_FLAGS });
  if (values.help) return help(io);
  const api = remote(values);
  if (api) {
    const { project } = await api.keys.self();
    const { keys } = await api.keys.list();
    if (values.json) io.stdout(`${JSON.stringify({ project_id: project.id, keys })}\n`);
    else for (const key of keys) io.stdout(keyLine(key));
    return EXIT_OK;
  }
  const projectName = stringFlag(values, 'project');
  if (!projectName) throw new UsageError('--project NAME is required');
  const found = await withStore(config, async (store) => {
    const project = await store.projects.findByName(projectName);
    return project && { project, keys: await store.apiKeys.list(project.id) };
  });
  if (!found) {
    io.stderr(`No project named "${projectName}": check the name (the first start made "default"); \`agentd keys create --project ${projectName}\` would create it.\n`);
    return EXIT_FAILURE;
  }
  if (values.json) {
    io.stdout(`${JSON.stringify({ project_id: found.project.id, keys: found.keys })}\n`);
    return EXIT_OK;
  }
  if (found.keys.length === 0) io.stdout(`Project "${projectName}" has no keys.\n`);
  for (const key of found.keys) io.stdout(keyLine(key));
  return EXIT_OK;
}

async function revoke(args: string[], config: Config, io: CliIo): Promise<number> {
  const { values } = parse(args, { id: { type: 'string' }, ...REMOTE_FLAGS });
  if (values.help) return help(io);
  const id = stringFlag(values, 'id');
  if (!id) throw new UsageError('--id KEY_ID is required (see `agentd keys list --project NAME`)');
  const api = remote(values);
  const revoked = api ? await api.keys.revoke(id).then(() => true) : await withStore(config, (store) => store.apiKeys.revoke(id));
  if (!revoked) {
    io.stderr(`No active key with id ${id}: \`agentd keys list --project NAME\` lists each key's id.\n`);
    return EXIT_FAILURE;
  }
  io.stdout(`Revoked key ${id}.\n`);
  return EXIT_OK;
}

function help(io: CliIo): number {
  io.stdout(fitUsage(USAGE));
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
      io.stderr(`agentd keys needs a subcommand.\n\n${fitUsage(USAGE)}`);
      return EXIT_USAGE;
    }
    return help(io);
  }
  const run = Object.hasOwn(SUBCOMMANDS, subcommand) ? SUBCOMMANDS[subcommand] : undefined;
  if (!run) {
    io.stderr(`Unknown subcommand "${subcommand}" for agentd keys.\n\n${fitUsage(USAGE)}`);
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
    if (error instanceof AgentdError) {
      io.stderr(`agentd keys ${subcommand}: ${describeFailure(error, 'keys')}\n`);
      return EXIT_FAILURE;
    }
    io.stderr(`agentd keys ${subcommand} failed: ${error instanceof Error ? error.message : String(error)}\n`);
    return EXIT_FAILURE;
  }
}
