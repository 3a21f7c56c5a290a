import { AppError } from '../errors.ts';
import { tlsFailure } from '../tls-failure.ts';

/**
 * Why connecting to an MCP server failed, in agentd's words: the 424 `mcp-unavailable` that
 * names the server and says what to do. Three kinds, told apart because each asks for a different
 * fix: it could not be reached (nothing answered: the address, the network, a server that is
 * down; or its TLS failed: src/tls-failure.ts), it answered but not as an MCP server (an HTTP
 * status, a web page: the URL, the transport, the credentials), or it answered as one and the MCP
 * handshake or its tool listing failed (the server's own message).
 */

/** An HTTP answer an MCP client cannot read, as the transport's fetch saw it. */
export interface HttpAnswer {
  status: number;
  contentType: string;
  /** For an answer whose status is fine: the content types an MCP client reads there. */
  expected?: string;
  /** Its body (its first 64 KiB) when it is text a person may read (not a web page), unmasked. */
  text?: string;
}

/** What a server sent that an MCP client cannot read. */
export interface Answers {
  /** The HTTP answer to the request sent last, when no MCP client can read it. */
  odd: HttpAnswer | undefined;
  /** Whether it sent a message that is not JSON-RPC, which the SDK drops (a stdio server's log lines). */
  unreadable: boolean;
}

/** Notes in `answers` a message the SDK could not read: it reports those aside and waits on. */
export function noteUnreadable(answers: Answers, error: unknown): void {
  if (causes(error).some((e) => e instanceof SyntaxError || isZodError(e))) answers.unreadable = true;
}

export interface FailedConnect {
  name: string;
  /** Where it is, masked: `http://host/path` or `command "…"`. */
  endpoint: string;
  stdio: boolean;
  /** Connecting (the transport and the handshake), or listing its tools. */
  stage: 'connect' | 'list';
  error: unknown;
  /** Set when the connect deadline ran out, to what it was. */
  timedOutAfter: number | undefined;
  answers: Answers;
  /** Which credentials agentd sent it, by name: for a refusal. */
  credentials: string;
  mask: (text: string) => string;
}

const MAX_REASON = 400;
const MAX_TEXT = 200;
const STDOUT = 'an MCP server on stdio writes nothing but MCP messages to its standard output (its logs go to standard error)';
const FIX_ADDRESS = 'check that connection.url is its MCP endpoint, and connection.type its transport ("http" for Streamable HTTP, "sse" for the older HTTP+SSE)';

export function connectFailure(f: FailedConnect): AppError {
  const fail = (message: string) => new AppError('mcp-unavailable', message);
  const at = `MCP server "${f.name}" at ${f.endpoint}`;
  const within = f.timedOutAfter === undefined ? '' : ` within ${f.timedOutAfter} ms (AGENTD_MCP_TIMEOUT_MS)`;
  if (f.answers.unreadable && (within || f.stdio)) {
    return fail(`${at} sent something that is not a JSON-RPC message, and no answer${within}: ${f.stdio ? STDOUT : FIX_ADDRESS}`);
  }
  if (within) return fail(`${at} gave no answer${f.stage === 'list' ? ' to tools/list' : ''}${within}: check that it is running and answers MCP there`);
  const odd = f.answers.odd;
  if (odd) return fail(`${at} ${answered(odd, f)}`);
  const chain = causes(f.error);
  const reason = reasonOf(f.error, f.mask);
  if (f.stdio && chain.some((e) => String((e as { syscall?: unknown }).syscall).startsWith('spawn'))) {
    return fail(`${at} could not be started: ${reason}; check connection.command, and that it is installed where agentd runs`);
  }
  const tls = f.stdio ? undefined : tlsFailure(f.error);
  if (tls) return fail(`${at} ${tls}`);
  if (!f.stdio && chain.some((e) => systemCode(e) !== undefined || (e instanceof TypeError && e.message === 'fetch failed'))) {
    return fail(`${at} could not be reached: ${innermost(chain, f.mask)}; check that it is running and that agentd can reach that address`);
  }
  if (chain[0] instanceof SyntaxError) return fail(`${at} answered with a body that is not JSON, not as an MCP server: ${FIX_ADDRESS}`);
  if (isZodError(chain[0])) return fail(`${at} answered with JSON that is not a JSON-RPC message, not as an MCP server: ${FIX_ADDRESS}`);
  return fail(f.stage === 'connect' ? handshakeFailure(at, f, chain, reason) : `${at} could not list its tools (tools/list): ${serverSays(chain[0]) ? `${reason}; see the server's logs` : reason}`);
}

/**
 * Why a tool call failed, for the model and whoever reads the turn: what the server answered
 * instead of a tool result, in agentd's words; the SDK's would be its validator's issue list as
 * JSON, or the whole JSON-RPC message the server sent. Anything else as `reasonOf` says it.
 */
export function callFailure(error: unknown, mask: (text: string) => string): string {
  const chain = causes(error);
  const [outer] = chain;
  const message = outer instanceof Error ? outer.message : '';
  if (chain.some((e) => e instanceof SyntaxError)) return 'the server answered with a body that is not JSON, not as an MCP server does';
  if (chain.some(isZodError)) {
    return message.startsWith('Failed to parse server response')
      ? 'the server answered with a result that is not a tool result (a "content" array of text, image, audio or resource parts)'
      : 'the server answered with JSON that is not a JSON-RPC message, not as an MCP server does';
  }
  if (message.startsWith('Protocol error: Received a response for an unknown message ID')) return "the server answered with the id of no request agentd sent, not with this call's";
  const { statusCode, responseBody } = outer as { statusCode?: unknown; responseBody?: unknown };
  if (typeof statusCode === 'number' && statusCode >= 400) {
    const text = typeof responseBody === 'string' ? bodyText(responseBody, '') : undefined;
    return `the server answered HTTP ${statusCode}${text ? `: ${cut(mask(text), MAX_TEXT)}` : ''}${statusCode >= 500 ? '; it failed on its side' : ''}`;
  }
  return reasonOf(error, mask);
}

/** What an answer no MCP client reads says, and what to do about it. */
function answered(odd: HttpAnswer, f: FailedConnect): string {
  const text = odd.text ? `: ${cut(f.mask(odd.text), MAX_TEXT)}` : '';
  if (odd.status >= 300 && odd.status < 400) {
    return `answered HTTP ${odd.status}, a redirect, which agentd does not follow (it would take the credentials along): set connection.url to the address it redirects to`;
  }
  if (odd.status === 401 || odd.status === 403) return `refused the credentials agentd sent (HTTP ${odd.status}${text}): ${f.credentials}`;
  if (odd.status >= 500) return `answered HTTP ${odd.status}${text}, not as an MCP server: it failed on its side; see its logs, or ${FIX_ADDRESS}`;
  if (odd.expected) return `answered with content type ${odd.contentType || '(none)'}, not as an MCP server (${odd.expected}): ${FIX_ADDRESS}`;
  return `answered HTTP ${odd.status}${text}, not as an MCP server: ${FIX_ADDRESS}`;
}

function handshakeFailure(at: string, f: FailedConnect, chain: unknown[], reason: string): string {
  const [outer] = chain;
  const message = outer instanceof Error ? outer.message : '';
  const version = /protocol version is not supported: (\S+)/.exec(message)?.[1];
  if (version) return `${at} speaks MCP protocol version ${JSON.stringify(f.mask(version))}, which agentd's MCP client does not: run a version of the server that speaks a current one`;
  if (serverSays(outer)) return `${at} refused the MCP handshake (initialize): ${reason}; see the server's logs`;
  const invalid = chain.find(isZodError);
  if (invalid) {
    const fields = [...new Set(invalid.issues.map((issue) => issue.path.join('.') || '(the whole answer)'))].join(', ');
    return `${at} answered the MCP handshake (initialize) with something that is not an initialize result (${f.mask(fields)}): ${FIX_ADDRESS}`;
  }
  if (/endpoint event/.test(message)) return `${at} ended its event stream before naming where to send messages, as an "sse" MCP server does first: ${FIX_ADDRESS}`;
  if (f.stdio && /closed/i.test(message)) return `${at} ended before it answered the MCP handshake: check that connection.command and connection.args start an MCP server on its standard input and output`;
  return `${at} failed the MCP handshake (initialize): ${reason}`;
}

/** A JSON-RPC error the server sent (the SDK keeps its numeric code), not one of the client's own. */
function serverSays(error: unknown): boolean {
  return typeof (error as { code?: unknown } | undefined)?.code === 'number';
}

/** A system error's code (`ECONNREFUSED`, `ENOTFOUND`, `UND_ERR_CONNECT_TIMEOUT`, …): nothing answered. */
function systemCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]+$/.test(code) ? code : undefined;
}

function isZodError(error: unknown): error is Error & { issues: { path: PropertyKey[] }[] } {
  return error instanceof Error && error.name === 'ZodError' && Array.isArray((error as { issues?: unknown }).issues);
}

/** The error and its causes, outermost first. */
function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let current = error, depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    chain.push(current);
    current = (current as { cause?: unknown }).cause;
  }
  return chain;
}

/** The deepest message: the system's own (`connect ECONNREFUSED 127.0.0.1:9`) rather than fetch's "fetch failed". */
function innermost(chain: unknown[], mask: (text: string) => string): string {
  // A connection tried on several addresses fails with an AggregateError that has a code and no message.
  const messages = chain.map((e) => (e instanceof Error ? e.message || systemCode(e) : undefined)).filter(Boolean);
  return cut(mask(messages.at(-1) ?? 'unknown error'), MAX_REASON);
}

/**
 * The error and its causes, outermost first: `fetch failed: connect ECONNREFUSED 127.0.0.1:9`.
 * Masked before it is cut, so a secret the cut goes through is not left half shown.
 */
export function reasonOf(error: unknown, mask: (text: string) => string): string {
  const parts: string[] = [];
  for (const current of causes(error)) {
    const message = current instanceof Error ? current.message : typeof current === 'string' ? current : '';
    if (message && !parts.some((p) => p.includes(message))) parts.push(message);
  }
  return cut(mask(parts.join(': ') || 'unknown error'), MAX_REASON);
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** An HTTP answer's body as a reason a person wrote, on one line; never a web page. */
export function bodyText(body: string, contentType: string): string | undefined {
  const text = body.replace(/\s+/g, ' ').trim();
  return !text || /html|xml/i.test(contentType) || text.startsWith('<') ? undefined : text;
}
