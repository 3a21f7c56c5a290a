/**
 * A stdio MCP server for tests: `node test/support/mcp-stdio-server.ts`. Its `where` tool answers
 * with its working folder and whether it can see an environment variable, so a test can check
 * what the spawned command was given.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'agentd-test-stdio', version: '1.0.0' });
server.registerTool(
  'where',
  { description: 'Working folder and whether an environment variable is set', inputSchema: { env: z.string() }, annotations: { readOnlyHint: true } },
  ({ env }) => ({ content: [{ type: 'text', text: JSON.stringify({ cwd: process.cwd(), hasEnv: process.env[env] !== undefined }) }] }),
);
await server.connect(new StdioServerTransport());
