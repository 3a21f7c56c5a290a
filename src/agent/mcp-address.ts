import type { McpServer } from '../contract/template.ts';
import { AppError } from '../errors.ts';
import { AddressPolicy, allowListOf, type Guarded } from './address-policy.ts';

export { refusalIn } from './address-policy.ts';

/**
 * Where agentd may connect to a template's HTTP and SSE MCP servers (address-policy.ts). A
 * template names its servers' URLs, and whoever may run turns writes templates.
 */
const MCP: Guarded = { setting: 'AGENTD_MCP_ALLOWED_HOSTS', server: 'MCP server', example: 'mcp.example.com' };

/** AGENTD_MCP_ALLOWED_HOSTS read: a comma-separated list, unset or empty for no list. Throws, naming the entry, on one it cannot read. */
export function allowedHosts(raw: string | undefined): string[] | undefined {
  return allowListOf(MCP, raw);
}

export class McpAddresses extends AddressPolicy {
  constructor(allowed: readonly string[] | undefined) {
    super(MCP, allowed);
  }
}

/** The first refusal among `servers`' URLs that needs no lookup, as a 400 naming the field. */
export function refuseMcpAddresses(servers: readonly McpServer[], templates: readonly McpServer[], addresses: McpAddresses): void {
  for (const [i, server] of servers.entries()) {
    if (server.connection.type === 'stdio' || !URL.canParse(server.connection.url)) continue;
    const host = new URL(server.connection.url).hostname;
    const template = templates[i]?.connection;
    // A host filled in from a request secret is not named back.
    const shown = template && template.type !== 'stdio' && template.url.includes(host) ? `its host ${host}` : 'its host';
    const why = addresses.literalRefusal(host, shown);
    if (why) throw refusedAt(i, why);
  }
}

export function refusedAt(index: number, why: string): AppError {
  return new AppError('invalid-request', `data.parameters.agent.mcps[${index}].connection.url: ${why}`);
}
