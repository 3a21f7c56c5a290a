import type { ProjectConnection } from '../contract/connections.ts';
import { AppError } from '../errors.ts';
import { AddressPolicy, allowListOf, type Guarded } from './address-policy.ts';

/**
 * Where agentd may send a project connection's calls (address-policy.ts). A project admin sets a
 * connection's base_url, and agentd calls it on every turn that uses the connection, from the host
 * other projects share: the host's credentials at a metadata address must stay out of reach. The
 * operator's own URLs (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, OLLAMA_BASE_URL,
 * AGENTD_OPENAI_COMPATIBLE, AGENTD_DEMO_MODEL_URL) are not checked, nor is where a connection
 * without base_url goes (its provider's public API, or OLLAMA_BASE_URL): no project chose those.
 */
const CONNECTIONS: Guarded = { setting: 'AGENTD_CONNECTION_ALLOWED_HOSTS', server: 'model server', example: 'llm.example.com' };

/** AGENTD_CONNECTION_ALLOWED_HOSTS read, as AGENTD_MCP_ALLOWED_HOSTS is. */
export function connectionAllowedHosts(raw: string | undefined): string[] | undefined {
  return allowListOf(CONNECTIONS, raw);
}

let made = 0;

export class ConnectionAddresses extends AddressPolicy {
  /** Tells the models made under this policy from those made under another (kept models are keyed by it). */
  readonly serial = ++made;

  constructor(allowed: readonly string[] | undefined) {
    super(CONNECTIONS, allowed);
  }
}

/** One policy per list, so its dispatcher's kept-alive connections serve every turn: the server's list and, in a test, others. */
const policies = new WeakMap<readonly string[], ConnectionAddresses>();
let unlisted: ConnectionAddresses | undefined;

export function connectionAddresses(allowed: readonly string[] | undefined): ConnectionAddresses {
  if (!allowed) return (unlisted ??= new ConnectionAddresses(undefined));
  let policy = policies.get(allowed);
  if (!policy) policies.set(allowed, (policy = new ConnectionAddresses(allowed)));
  return policy;
}

/** A base URL's host refused before any lookup (an address as written, or a name the list cannot allow), as a 400 naming `where`. */
export function refuseBaseUrl(baseUrl: string, addresses: ConnectionAddresses, where: string): void {
  const host = URL.parse(baseUrl)?.hostname;
  const why = host === undefined ? undefined : addresses.literalRefusal(host, `its host ${host}`);
  if (why) throw new AppError('invalid-request', `${where}: ${why}`);
}

/** Where a stored connection's base URL is named in a turn's error. */
export const baseUrlOf = (connection: Pick<ProjectConnection, 'slug'>) => `the base_url of connection "${connection.slug}"`;
