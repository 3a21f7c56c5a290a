import type { JSONRPCMessage, ListToolsResult, MCPClient } from '@ai-sdk/mcp';
import { AppError } from '../errors.ts';
import { isObject } from '../objects.ts';
import { transportOf } from './mcp-transport.ts';

/**
 * A server's tools/list answers, every page of them, checked before the MCP SDK reads them. The
 * SDK refuses a whole page over one tool it cannot read (a tool without `inputSchema`, a
 * description that is a number) and says so in its validator's words; here each tool is judged on
 * its own:
 *
 * - what makes a tool unusable (no usable name, an input schema no model provider takes, a name
 *   listed twice) takes it out of the page and becomes a fault, which fails the connection only
 *   when the template keeps that tool, so `policy.tools` can leave it out;
 * - what only describes a tool (`title`, `description`, `annotations`, `outputSchema`, `_meta`)
 *   is dropped where it is malformed: the tool works without it, and a read-only hint that is not
 *   `true` leaves the tool gated as a write.
 */

/**
 * A listing longer than this is a server paging without end (a `nextCursor` on every page): read
 * to the deadline, it would fill the heap and then be reported as a server that never answered.
 */
export const MCP_MAX_TOOL_PAGES = 100;
export const MCP_MAX_TOOLS = 10_000;

/** Every tool the server lists, and those it cannot offer; `server` names it in a refusal. */
export async function listAllTools(client: MCPClient, server: () => string, signal: AbortSignal): Promise<{ listing: ListToolsResult['tools']; faults: ToolFault[] }> {
  const check = new ToolListing(MCP_MAX_TOOLS);
  let malformed: string | undefined;
  const transport = transportOf(client);
  const deliver = transport.onmessage!;
  // Every answer that comes while the listing is read answers tools/list: nothing else is asked meanwhile.
  transport.onmessage = (message) => {
    if (!('result' in message)) return deliver(message);
    const page = check.page(message.result);
    if (typeof page !== 'string') return deliver({ ...message, result: page } as JSONRPCMessage);
    malformed = page;
    // Refused here: the SDK would validate every tool of a page agentd is about to refuse anyway.
    deliver({ jsonrpc: '2.0', id: message.id, error: { code: -32000, message: page } });
  };
  const tools: ListToolsResult['tools'] = [];
  let cursor: string | undefined;
  let pages = 0;
  try {
    do {
      const page = await client.listTools({ ...(cursor ? { params: { cursor } } : {}), options: { signal } }).catch((error: unknown) => {
        if (malformed === undefined) throw error;
        throw new AppError('mcp-unavailable', `${server()} answered tools/list ${malformed}: see the server's logs`);
      });
      tools.push(...page.tools);
      cursor = page.nextCursor ?? undefined;
      if (cursor && (++pages >= MCP_MAX_TOOL_PAGES || tools.length >= MCP_MAX_TOOLS)) {
        throw new AppError(
          'mcp-unavailable',
          `${server()} lists tools without end: its tools/list did not end within ${MCP_MAX_TOOL_PAGES} pages or ${MCP_MAX_TOOLS} tools (a "nextCursor" on every page); see the server's logs`,
        );
      }
    } while (cursor);
  } finally {
    transport.onmessage = deliver;
  }
  return { listing: tools, faults: check.faults };
}

/** Why one tool of the listing cannot be offered, said as the rest of "MCP server "s" lists …". */
export interface ToolFault {
  /** Its place in the server's whole listing, counted from 0 across pages. */
  index: number;
  /** Its name, when it has one a template could name in `policy.tools`. */
  name: string | undefined;
  why: string;
}

/** Deeper than any real tool's input, and far from where serializing a schema overflows the stack. */
const MAX_SCHEMA_DEPTH = 64;

class ToolListing {
  readonly faults: ToolFault[] = [];
  /** Tools read so far, faulty ones included: the next page's first index. */
  private count = 0;
  private readonly firstAt = new Map<string, number>();

  /** Past it, across pages or in one, the listing is refused before a tool of the page is read. */
  private readonly maxTools: number;

  constructor(maxTools: number) {
    this.maxTools = maxTools;
  }

  /**
   * The page with its faulty tools taken out and its malformed descriptions dropped, or why it is
   * no tool listing agentd takes.
   */
  page(result: Record<string, unknown>): Record<string, unknown> | string {
    const { tools, nextCursor } = result;
    const none = (why: string) => `${why}, which is no tool listing`;
    if (!Array.isArray(tools)) return none(tools === undefined ? 'with a result that has no "tools" array' : `with a result whose "tools" is ${kind(tools)}, not an array`);
    if (nextCursor !== undefined && nextCursor !== null && typeof nextCursor !== 'string') return none(`with a result whose "nextCursor" is ${kind(nextCursor)}, not a string`);
    // Each tool costs the server's shared thread work and the model request bytes: 100,000 of them
    // in one page held that thread for seconds, and 200,000 overflowed the stack.
    if (this.count + tools.length > this.maxTools) return `with more than ${this.maxTools} tools (${this.count + tools.length} so far), more than agentd offers a model`;
    const kept: Record<string, unknown>[] = [];
    for (const entry of tools) {
      const index = this.count++;
      const tool = this.tool(entry, index);
      if (tool) kept.push(tool);
    }
    const page: Record<string, unknown> = { ...result, tools: kept };
    // A null cursor is a server saying "no more", as an absent one is.
    if (nextCursor === null) delete page.nextCursor;
    return page;
  }

  private tool(entry: unknown, index: number): Record<string, unknown> | undefined {
    const fault = (why: string, name?: string) => void this.faults.push({ index, name, why });
    if (!isObject(entry)) return fault(`that is ${kind(entry)}, not an object`);
    const { name } = entry;
    if (typeof name !== 'string' || name === '') {
      return fault(name === undefined ? 'without a name' : name === '' ? 'with an empty name' : `whose name is ${kind(name)}, not a string`);
    }
    const first = this.firstAt.get(name);
    if (first !== undefined) return fault(`twice (entries ${first} and ${index}), so a call of it could run either`, name);
    this.firstAt.set(name, index);
    const schema = schemaProblem(entry.inputSchema);
    if (schema) return fault(`${schema}, which no model provider takes`, name);
    return described(entry);
  }
}

/** Why a tool's input schema cannot go to a provider, if it cannot: each refuses all but an object. */
function schemaProblem(schema: unknown): string | undefined {
  if (schema === undefined) return 'without an input schema';
  if (!isObject(schema)) return `with an input schema that is ${kind(schema)}, not an object`;
  if (schema.type !== undefined && schema.type !== 'object') return `with an input schema of type ${JSON.stringify(schema.type)}, not "object"`;
  if (schema.properties !== undefined && !isObject(schema.properties)) return `with an input schema whose "properties" is ${kind(schema.properties)}, not an object`;
  // Iterative: the check must not overflow on the very schema it is there to refuse.
  const stack: [unknown, number][] = [[schema, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (depth > MAX_SCHEMA_DEPTH) return `with an input schema nested more than ${MAX_SCHEMA_DEPTH} levels deep`;
    if (value && typeof value === 'object') for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
  return undefined;
}

const HINTS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'];

/** The tool without the descriptive fields the SDK would refuse it for; itself when it has none. */
function described(tool: Record<string, unknown>): Record<string, unknown> {
  const text = (value: unknown) => value === undefined || typeof value === 'string';
  const object = (value: unknown) => value === undefined || isObject(value);
  const annotations = tool.annotations;
  const hintsRead = isObject(annotations) && text(annotations.title) && HINTS.every((hint) => annotations[hint] === undefined || typeof annotations[hint] === 'boolean');
  if (text(tool.title) && text(tool.description) && object(tool.outputSchema) && object(tool._meta) && (annotations === undefined || hintsRead)) return tool;
  const out = { ...tool };
  for (const key of ['title', 'description'] as const) if (!text(out[key])) delete out[key];
  for (const key of ['outputSchema', '_meta'] as const) if (!object(out[key])) delete out[key];
  if (isObject(annotations) && !hintsRead) {
    out.annotations = Object.fromEntries(
      Object.entries(annotations).filter(([key, value]) => (key === 'title' ? typeof value === 'string' : !HINTS.includes(key) || typeof value === 'boolean')),
    );
  } else if (annotations !== undefined && !isObject(annotations)) {
    delete out.annotations;
  }
  return out;
}

/** A value's kind, for a message: never the value, which is the server's and may be anything. */
function kind(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'missing';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
