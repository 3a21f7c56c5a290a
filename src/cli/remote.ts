import { createClient, type AgentdClient } from '../client/index.ts';
import { AgentdError } from '../client/errors.ts';
import { SESSION_ID_PATTERN } from '../contract/session-id.ts';
import { keepAliveFetch } from '../keep-alive-fetch.ts';
import { parseCommand, type FlagValues, type Options } from './args.ts';
import { fitUsage } from './usage.ts';

/**
 * Where the client commands (`invoke`, `run-many`, `testsets`, `eval`) find the server: flags, else
 * AGENTD_URL, AGENTD_API_KEY and AGENTD_PROJECT_ID.
 */

export const CONNECTION_FLAGS = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  project: { type: 'string' },
} as const;

export const CONNECTION_HELP = `Connection (flags, else environment):
  --url URL          AGENTD_URL (default http://127.0.0.1:8787)
  --api-key KEY      AGENTD_API_KEY
  --project ID       AGENTD_PROJECT_ID
`;

export class CliError extends Error {}

/**
 * A whole-number flag's value, its default when absent, from `min` to `max`: the server's bounds,
 * so a value past them is the command line's error (exit 2) rather than a refused request.
 */
export function numberFlag(raw: string | undefined, flag: string, fallback: number, min: number, max = Number.POSITIVE_INFINITY): number {
  const value = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.POSITIVE_INFINITY ? `of at least ${min}` : `from ${min} to ${max}`;
    throw new CliError(`--${flag} must be a whole number ${range}, got "${raw}"`);
  }
  return value;
}

const UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000 };

/**
 * A duration flag in milliseconds: a number with its unit, `500ms`, `2s`, `1.5s` or `1m`. Every
 * command reads durations this way; a bare number is refused, since one command once meant seconds
 * and another milliseconds by it.
 */
export function durationFlag(raw: string | undefined, flag: string, fallbackMs: number, maxMs = Number.POSITIVE_INFINITY): number {
  if (raw === undefined) return fallbackMs;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(raw.trim());
  if (!match) throw new CliError(`--${flag} must be a duration with its unit, such as 2s, 1.5s or 500ms, got "${raw}"`);
  const ms = Number(match[1]) * UNITS_MS[match[2]!]!;
  if (ms > maxMs) throw new CliError(`--${flag} may be at most ${maxMs / 1000}s, got "${raw}"`);
  return ms;
}

/**
 * A session id from the command line, held to the server's pattern: one it would refuse is the
 * command line's mistake (exit 2), said before anything is sent.
 */
export function sessionIdFlag(raw: string | undefined, name: string): string | undefined {
  if (raw === undefined || SESSION_ID_PATTERN.test(raw)) return raw;
  throw new CliError(`${name} must be 1-128 letters, digits, ".", "_", ":" or "-", got "${raw}"`);
}

export function remoteClient(values: { url?: string | undefined; 'api-key'?: string | undefined; project?: string | undefined }, env: NodeJS.ProcessEnv = process.env): AgentdClient {
  const apiKey = values['api-key'] ?? env.AGENTD_API_KEY;
  const projectId = values.project ?? env.AGENTD_PROJECT_ID;
  if (!apiKey || !projectId) {
    throw new CliError(
      `no ${!apiKey ? 'API key' : 'project id'}: pass --${!apiKey ? 'api-key' : 'project'} or set ${!apiKey ? 'AGENTD_API_KEY' : 'AGENTD_PROJECT_ID'} ` +
        '(the first `agentd serve` prints both; `agentd keys create --project NAME --json` makes more)',
    );
  }
  const baseUrl = values.url ?? env.AGENTD_URL ?? 'http://127.0.0.1:8787';
  // `localhost:8787` parses too, as a URL of scheme "localhost:".
  if (!/^https?:$/.test(URL.parse(baseUrl)?.protocol ?? '')) {
    throw new CliError(`${values.url !== undefined ? '--url' : 'AGENTD_URL'} "${baseUrl}" is not an http(s) URL; give the server's address, e.g. http://127.0.0.1:8787`);
  }
  return createClient({ baseUrl, apiKey, projectId, fetch: keepAliveFetch });
}

/** Reports a client command's failure; the exit status says whose it was (2: the command line). */
export function exitWith(command: string, error: unknown): number {
  process.stderr.write(`agentd ${command}: ${describeFailure(error, command)}\n`);
  return error instanceof CliError ? 2 : 1;
}

/**
 * The server's words for a refused key or project are for API callers; on the command line the
 * fix is a flag or a variable.
 */
const CONNECTION_HINTS: Record<string, string> = {
  unauthenticated: 'check --api-key or AGENTD_API_KEY',
  forbidden: 'check --project or AGENTD_PROJECT_ID, and the key\'s role',
};

/** Where the ids a command takes come from, on the command line. */
const REVISION_IDS = '`agentd workflows create` and `agentd workflows commit` print a revision\'s id';
const TESTSET_IDS = '`agentd testsets list` shows each test set\'s revision id';

/**
 * A 404 names what the project lacks, and the server's message the HTTP route that lists what it
 * has; a user of the command line needs the command that does, or the one that printed the id.
 */
const LOOKUP_HINTS: Record<string, Partial<Record<string, string>>> = {
  invoke: { 'unknown-reference': REVISION_IDS },
  'run-many': { 'unknown-reference': REVISION_IDS },
  eval: { 'unknown-reference': `${TESTSET_IDS}; ${REVISION_IDS}`, 'not-found': 'a run\'s id is the one `agentd eval run` printed' },
  sessions: { 'not-found': '`agentd sessions list` lists the sessions' },
  testsets: { 'not-found': '`agentd testsets list` lists the test sets' },
  workflows: { 'not-found': '`agentd workflows list` lists the workflows and environments', 'unknown-reference': '`agentd workflows list` lists the workflows and their versions' },
  keys: { 'not-found': '`agentd keys list` lists the keys' },
};

/**
 * One line for the terminal: what failed and, from the server's message, what to do. `command`
 * (`eval`, `keys`) adds where to find the right id when the server had none by the one given.
 */
export function describeFailure(error: unknown, command?: string): string {
  if (error instanceof AgentdError) {
    const type = error.status.type;
    const hint = type ? (CONNECTION_HINTS[type] ?? (command ? LOOKUP_HINTS[command]?.[type] : undefined)) : undefined;
    return `${error.status.code ? `${error.status.code} ` : ''}${error.status.type ?? 'error'}: ${error.status.message}${hint ? ` (${hint})` : ''}`;
  }
  return (error as Error).message ?? String(error);
}

/**
 * A command made of subcommands (`agentd eval run`, `agentd sessions show ID`): the usage for no
 * subcommand (status 2: there is nothing to run) or for --help, the flags parsed, and whatever the
 * subcommand throws told the way every command tells it (`exitWith`). `run` answers with the exit
 * status, or nothing for 0.
 */
export async function runSubcommand<O extends Options>(
  command: string,
  argv: string[],
  options: O,
  usage: string,
  run: (sub: string, values: FlagValues<O>, positionals: string[]) => Promise<number | void>,
): Promise<number> {
  const [sub, ...rest] = argv;
  // `agentd eval help` as `agentd keys help` and `agentd help eval` read it.
  if (!sub || sub === '--help' || sub === '-h' || sub === 'help') {
    process.stdout.write(fitUsage(usage));
    return sub ? 0 : 2;
  }
  const parsed = parseCommand(rest, options, usage, true);
  if (typeof parsed === 'number') return parsed;
  try {
    return (await run(sub, parsed.values as FlagValues<O>, parsed.positionals)) ?? 0;
  } catch (error) {
    return exitWith(command, error);
  }
}
