import { createHash } from 'node:crypto';
import type { CallToolResult, ListToolsResult, MCPClient } from '@ai-sdk/mcp';
import { dynamicTool } from '@ai-sdk/provider-utils';
import type { ToolSet } from 'ai';
import type { McpServer, ToolPermission } from '../contract/template.ts';
import { AppError } from '../errors.ts';
import { maskIn } from '../telemetry/redact.ts';
import { callFailure } from './mcp-failure.ts';
import type { ToolFault } from './mcp-listing.ts';
import { secretsOf, type RequestSecrets } from './mcp-secrets.ts';
import { MCP_WHERE } from './mcp-template.ts';
import { ToolError } from './tools/tool-error.ts';

/**
 * Connected servers' tools as AI SDK tools: named, chosen by the template's policy, and called.
 * Apart from connecting, which is over once the tools are listed: these live for the whole turn.
 */

/** The template's MCP tools, as a turn offers them. */
export interface OfferedTools {
  tools: ToolSet;
  /** Tool names whose MCP annotations say `readOnlyHint: true`: reads, for `allow_reads`. */
  readOnly: ReadonlySet<string>;
  /** The server's `policy.permission`, for each of its tools, where the template sets one. */
  permissions: ReadonlyMap<string, ToolPermission>;
}

/** A server connected to, with its tools listed. */
export interface ConnectedServer {
  client: MCPClient;
  listing: ListToolsResult['tools'];
  /** Tools of its listing that cannot be offered: refused when the template keeps one. */
  faults: ToolFault[];
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** A tool result is capped as `read`'s is: a server's 20 MB answer would otherwise go whole to the model, the stream and the store. */
export const MCP_MAX_OUTPUT_BYTES = 256 * 1024;

function capped(text: string): string {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= MCP_MAX_OUTPUT_BYTES) return text;
  // A cut inside a character is dropped by the decoder's replacement, not shown as half a character.
  const head = Buffer.from(text, 'utf8').subarray(0, MCP_MAX_OUTPUT_BYTES).toString('utf8').replace(/\uFFFD$/, '');
  return `${head}\n[output truncated: showed the first ${Buffer.byteLength(head, 'utf8')} of ${bytes} bytes]`;
}

/**
 * A server's tool `t` is offered to the model as `<server>__<t>`. Provider tool names are
 * `^[A-Za-z0-9_-]{1,64}$` (the same rule as the template's client tools), while MCP server and tool
 * names may carry `.` and run to 128 characters; when `<server>__<t>` breaks the rule, every other
 * character becomes `_`, it is cut to fit, and `_<8 hex of sha256(server NUL tool)>` keeps it
 * unique. The name depends only on the two names, so a tool keeps it across turns and a
 * conversation's earlier calls still match. Two tools that still land on one name are a 400.
 */
export function mcpToolName(server: string, tool: string): string {
  const plain = `${server}__${tool}`;
  if (TOOL_NAME.test(plain)) return plain;
  const hash = createHash('sha256').update(`${server}\0${tool}`).digest('hex').slice(0, 8);
  return `${plain.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64 - hash.length - 1)}_${hash}`;
}

/** The tools of every server, `connected[i]` being `servers[i]`; a 400 or 424 for a template that asks for what they cannot give. */
export function offeredTools(servers: readonly McpServer[], connected: readonly ConnectedServer[], opts: RequestSecrets & { callTimeoutMs?: number | undefined }): OfferedTools {
  const tools: ToolSet = {};
  const readOnly = new Set<string>();
  const permissions = new Map<string, ToolPermission>();
  const origin = new Map<string, string>();
  for (const [i, server] of servers.entries()) {
    const { client, listing, faults } = connected[i]!;
    const secrets = secretsOf(server, opts);
    // The SDK turns each listed tool's JSON Schema into an input schema; a tool it drops (bad
    // header bindings on the newest protocol) does not exist for us either.
    const built = client.toolsFromDefinitions({ tools: listing });
    const available = listing.filter((t) => Object.hasOwn(built, t.name));
    const filter = server.policy?.tools;
    let chosen = available;
    // A tool the template leaves out may be as broken as it likes.
    let refused = faults;
    if (filter?.mode === 'include') {
      const wanted = new Set(filter.names);
      refused = faults.filter((f) => f.name !== undefined && wanted.has(f.name));
      const missing = [...wanted].filter((name) => !available.some((t) => t.name === name) && !refused.some((f) => f.name === name));
      if (missing.length > 0) {
        throw new AppError(
          'invalid-request',
          `${MCP_WHERE}[${i}].policy.tools.names: MCP server "${server.name}" has no tool ${missing.map((n) => `"${n}"`).join(', ')}; it has ${available.map((t) => `"${t.name}"`).join(', ') || 'none'}`,
        );
      }
      chosen = available.filter((t) => wanted.has(t.name));
    }
    const fault = refused[0];
    if (fault) throw faultyTool(server, i, fault);
    for (const definition of chosen) {
      const name = mcpToolName(server.name, definition.name);
      const clash = origin.get(name);
      if (clash !== undefined) {
        throw new AppError('invalid-request', `${MCP_WHERE}[${i}]: the tool "${definition.name}" of MCP server "${server.name}" would be named "${name}", like ${clash}; rename one server`);
      }
      origin.set(name, `the tool "${definition.name}" of MCP server "${server.name}"`);
      const base = built[definition.name]!;
      tools[name] = dynamicTool({
        ...(base.description !== undefined ? { description: base.description } : {}),
        inputSchema: base.inputSchema,
        metadata: { ...base.metadata, server: server.name },
        execute: (input, options) => callTool(client, server, secrets, definition.name, input, options.abortSignal, opts.callTimeoutMs),
      });
      // Hints are the server's word; the template author chose to trust this server.
      if (definition.annotations?.readOnlyHint === true) readOnly.add(name);
      if (server.policy?.permission) permissions.set(name, server.policy.permission);
    }
  }
  return { tools, readOnly, permissions };
}

/** A 424 for a tool the template keeps that cannot be offered, in the words of the input schema refusals. */
function faultyTool(server: McpServer, i: number, fault: ToolFault): AppError {
  const leave =
    fault.name === undefined
      ? `leave it out with ${MCP_WHERE}[${i}].policy.tools, mode "include" naming the tools to keep`
      : `leave the tool out with ${MCP_WHERE}[${i}].policy.tools`;
  const tool = fault.name === undefined ? `a tool (entry ${fault.index} of its tools/list)` : `the tool "${fault.name}"`;
  return new AppError('mcp-unavailable', `MCP server "${server.name}" lists ${tool} ${fault.why}; ${leave}`);
}

async function callTool(client: MCPClient, server: McpServer, secrets: string[], tool: string, input: unknown, signal: AbortSignal | undefined, timeout: number | undefined): Promise<string> {
  let result: CallToolResult;
  try {
    result = await client.callTool({
      name: tool,
      arguments: (input ?? {}) as Record<string, unknown>,
      options: { ...(signal ? { signal } : {}), ...(timeout ? { timeout } : {}) },
    });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw new ToolError(`MCP server "${server.name}" could not run "${tool}": ${callFailure(error, (text) => maskIn(secrets, text))}`);
  }
  const text = capped(resultText(result));
  // Thrown so the AI SDK reports a tool error: the model must see the call failed.
  if ('isError' in result && result.isError) throw new ToolError(text || `the MCP tool "${tool}" reported an error without a message`);
  return text;
}

/**
 * The result as the text a native tool message carries. Binary content is described, not
 * inlined: base64 in a transcript costs tokens and tells the model nothing.
 */
function resultText(result: CallToolResult): string {
  if ('toolResult' in result) return typeof result.toolResult === 'string' ? result.toolResult : JSON.stringify(result.toolResult);
  const content = result.content ?? [];
  if (content.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return content
    .map((part) => {
      const p = part as Record<string, unknown> & { type: string };
      if (p.type === 'text' && typeof p.text === 'string') return p.text;
      if (p.type === 'resource') {
        const resource = p.resource as { uri?: string; text?: string; mimeType?: string };
        if (typeof resource.text === 'string') return resource.text;
        return `[resource ${resource.uri ?? ''}${resource.mimeType ? ` (${resource.mimeType})` : ''}: binary content not shown]`;
      }
      if (p.type === 'resource_link') return `[resource link ${String(p.uri)}${p.name ? ` "${String(p.name)}"` : ''}]`;
      return `[${p.type}${typeof p.mimeType === 'string' ? ` (${p.mimeType})` : ''} content not shown]`;
    })
    .join('\n');
}
