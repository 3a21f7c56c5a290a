import { createClient, type AgentdClient } from '../client/index.ts';
import { AgentdError } from '../client/errors.ts';
import { keepAliveFetch } from '../keep-alive-fetch.ts';

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

export function remoteClient(values: { url?: string | undefined; 'api-key'?: string | undefined; project?: string | undefined }, env: NodeJS.ProcessEnv = process.env): AgentdClient {
  const apiKey = values['api-key'] ?? env.AGENTD_API_KEY;
  const projectId = values.project ?? env.AGENTD_PROJECT_ID;
  if (!apiKey || !projectId) {
    throw new CliError(
      `no ${!apiKey ? 'API key' : 'project id'}: pass --${!apiKey ? 'api-key' : 'project'} or set ${!apiKey ? 'AGENTD_API_KEY' : 'AGENTD_PROJECT_ID'} ` +
        '(the first `agentd serve` prints both; `agentd keys create --project NAME --json` makes more)',
    );
  }
  return createClient({ baseUrl: values.url ?? env.AGENTD_URL ?? 'http://127.0.0.1:8787', apiKey, projectId, fetch: keepAliveFetch });
}

/** Reports a client command's failure; the exit status says whose it was (2: the command line). */
export function exitWith(command: string, error: unknown): number {
  process.stderr.write(`agentd ${command}: ${describeFailure(error)}\n`);
  return error instanceof CliError ? 2 : 1;
}

/** One line for the terminal: what failed and, from the server's message, what to do. */
export function describeFailure(error: unknown): string {
  if (error instanceof AgentdError) return `${error.status.code ? `${error.status.code} ` : ''}${error.status.type ?? 'error'}: ${error.status.message}`;
  return (error as Error).message ?? String(error);
}
