import type { McpServer } from '../contract/template.ts';
import { AppError } from '../errors.ts';

/**
 * What a template's MCP servers must be before any of them is connected to: refused here, a
 * mistake costs no connection and its 400 names the field.
 */

/** Where a request carries its MCP servers, for the messages that name one. */
export const MCP_WHERE = 'data.parameters.agent.mcps';

export function checkTemplate(servers: readonly McpServer[], allowStdio: boolean): void {
  const seen = new Map<string, number>();
  for (const [i, server] of servers.entries()) {
    const first = seen.get(server.name);
    if (first !== undefined) {
      throw new AppError('invalid-request', `${MCP_WHERE}[${i}].name: "${server.name}" is already the name of ${MCP_WHERE}[${first}]; MCP server names must be unique`);
    }
    seen.set(server.name, i);
    if (server.connection.type === 'stdio' && !allowStdio) {
      throw new AppError(
        'invalid-request',
        `${MCP_WHERE}[${i}].connection: stdio MCP servers are disabled on this server (they run a command on its host); the operator must set AGENTD_ALLOW_STDIO_MCP=1 to allow them`,
      );
    }
    if (server.connection.type !== 'stdio' && /^[a-z]+:\/\/[^/]*@/i.test(server.connection.url)) {
      // fetch refuses such URLs anyway; saying so here keeps the password out of every message.
      throw new AppError('invalid-request', `${MCP_WHERE}[${i}].connection.url must not carry a user name or password; send credentials in connection.headers`);
    }
    const filter = server.policy?.tools;
    if (filter?.mode === 'include' && filter.names === undefined) {
      throw new AppError('invalid-request', `${MCP_WHERE}[${i}].policy.tools.names is required when mode is "include"`);
    }
  }
}
