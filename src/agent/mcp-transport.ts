import type { MCPClient, MCPClientConfig, MCPTransport } from '@ai-sdk/mcp';
import type { McpServer } from '../contract/template.ts';
import type { McpAddresses } from './mcp-address.ts';
import { answeringFetch } from './mcp-fetch.ts';
import type { Answers } from './mcp-failure.ts';
import type { RequestSecrets } from './mcp-secrets.ts';

/**
 * The transport a server is reached through, made for the SDK and reached again behind its back:
 * what agentd's MCP handling adds sits on the transport, where the SDK offers no hook of its own.
 */

export async function transportFor(server: McpServer, opts: RequestSecrets & { cwd?: string | undefined }, addresses: McpAddresses, answers: Answers): Promise<MCPClientConfig['transport']> {
  const connection = server.connection;
  if (connection.type === 'stdio') {
    const { StdioMCPTransport } = await import('@ai-sdk/mcp/mcp-stdio');
    // The child gets the SDK's minimal environment (PATH, HOME, …), never the server's API keys;
    // its stderr is dropped so it cannot flood or forge the server's log.
    return new StdioMCPTransport({
      command: connection.command,
      ...(connection.args ? { args: connection.args } : {}),
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      stderr: 'ignore',
    });
  }
  const headers = { ...connection.headers };
  if (connection.forward_credentials && opts.credentials) {
    // A template's own Authorization header would be sent alongside ours, as one merged value.
    for (const key of Object.keys(headers)) if (key.toLowerCase() === 'authorization') delete headers[key];
    headers.authorization = `Bearer ${opts.credentials}`;
  }
  // 'error' is the SDK's default too; spelled out because following a redirect would carry the
  // bearer token to wherever the server points.
  return { type: connection.type, url: connection.url, headers, redirect: 'error', fetch: answeringFetch(connection.type, answers, addresses.dispatcherFor()) };
}

/**
 * The transport the SDK made for `client` from its config. The SDK offers no hook between a
 * message's arrival and its validation, which refuses a whole tool listing over one tool it
 * cannot read; the transport's `onmessage`, which it sets to its own handler, is that place.
 * test/mcp/connect.test.ts ("listings the SDK would refuse whole") holds an SDK update to it.
 */
export function transportOf(client: MCPClient): MCPTransport {
  const transport = (client as unknown as { transport?: MCPTransport }).transport;
  if (typeof transport?.onmessage !== 'function') throw new Error('@ai-sdk/mcp no longer keeps its transport where transportOf (src/agent/mcp-transport.ts) reads it');
  return transport;
}
