import type { McpServer } from '../contract/template.ts';
import { AppError } from '../errors.ts';
import { own } from '../objects.ts';
import { maskIn, secretForms } from '../telemetry/redact.ts';
import { MCP_WHERE } from './mcp-template.ts';

/**
 * The secrets a remote MCP server is sent: filled into its url and headers from the request, and
 * kept out of every message about it. One place, so what is filled in and what is masked cannot
 * drift apart.
 */

/** What a request brings for its MCP servers that no message may quote. */
export interface RequestSecrets {
  /** The request's `credentials`, sent as a bearer token to servers with `forward_credentials`. */
  credentials?: string | undefined;
  /** The request's `secrets`, which a server's url and header values name as `{{secrets.NAME}}`. */
  secrets?: Readonly<Record<string, string>> | undefined;
}

const SECRET_REFERENCE = /\{\{\s*secrets\.([A-Za-z0-9_.-]+)\s*\}\}/g;

/**
 * The server with each `{{secrets.NAME}}` in its url and header values replaced by the request's
 * secret of that name, so a stored template need not hold the token. Like every secret of a run,
 * the values are kept out of what the turn records and of error messages.
 */
function withSecrets(server: McpServer, i: number, secrets: Readonly<Record<string, string>>): McpServer {
  const connection = server.connection;
  if (connection.type === 'stdio') return server;
  const fill = (text: string, where: string) =>
    text.replace(SECRET_REFERENCE, (_, name: string) => {
      const value = own(secrets, name);
      if (value === undefined) {
        throw new AppError('invalid-request', `${MCP_WHERE}[${i}].connection.${where} names the secret "${name}", which the request does not carry; send it in secrets.${name}`);
      }
      return value;
    });
  const headers = connection.headers && Object.fromEntries(Object.entries(connection.headers).map(([name, value]) => [name, fill(value, `headers.${name}`)]));
  return { ...server, connection: { ...connection, url: fill(connection.url, 'url'), ...(headers ? { headers } : {}) } };
}

/** Every server with the request's secrets filled in; a 400 naming the first secret the request lacks. */
export function withMcpSecrets(servers: readonly McpServer[], secrets: Readonly<Record<string, string>>): McpServer[] {
  return servers.map((server, i) => withSecrets(server, i, secrets));
}

/**
 * The credentials agentd sends a server, by name and never by value, for a server that refuses
 * them: the template's headers (and the request secrets they are filled from), the request's
 * forwarded credentials.
 */
export function credentialsSent(server: McpServer, opts: RequestSecrets): string {
  const connection = server.connection;
  if (connection.type === 'stdio') return '';
  const forwarded = connection.forward_credentials === true && opts.credentials !== undefined;
  const from = (text: string) => {
    const names = [...text.matchAll(SECRET_REFERENCE)].map((m) => `secrets.${m[1]}`);
    return names.length > 0 ? ` (from ${names.join(', ')})` : '';
  };
  const sent = Object.entries(connection.headers ?? {})
    // A forwarded token replaces the template's own Authorization header (transportFor).
    .filter(([name]) => !(forwarded && name.toLowerCase() === 'authorization'))
    .map(([name, value]) => `the header "${name}"${from(value)}`);
  if (forwarded) sent.push("the request's credentials, as Authorization (forward_credentials)");
  if (from(connection.url)) sent.push(`its URL${from(connection.url)}`);
  const unforwarded = connection.forward_credentials && !forwarded ? '; forward_credentials is set, but the request carried no credentials to forward' : '';
  if (sent.length === 0) {
    return `agentd sent none${unforwarded || ": set connection.headers (a value may name a request secret as {{secrets.NAME}}), or forward_credentials to send the request's credentials"}`;
  }
  return `agentd sent ${sent.join(', ')}; check ${sent.length > 1 ? 'their values' : 'its value'}${unforwarded}`;
}

/** The server's address for a message, masked. */
export function endpointFor(server: McpServer, opts: RequestSecrets): string {
  // The whole URL is on the list for errors that quote it; the address, cut before its query
  // string, is that URL too whenever it has none, and masking it whole would name no server.
  const whole = urlForms(server);
  return maskIn(secretsOf(server, opts).filter((s) => !whole.includes(s)), endpointOf(server));
}

/** Where a server is, for messages: no userinfo, no query string (either may hold a secret). */
function endpointOf(server: McpServer): string {
  const connection = server.connection;
  if (connection.type === 'stdio') return `command "${connection.command}"`;
  try {
    const url = new URL(connection.url);
    return `${url.origin}${url.pathname}`;
  } catch {
    return 'its URL';
  }
}

/**
 * What must not reach a message: transport errors quote the URL (query strings carry API keys),
 * and a server may echo a header back in its error body.
 */
export function secretsOf(server: McpServer, opts: RequestSecrets): string[] {
  const connection = server.connection;
  if (connection.type === 'stdio') return [];
  // Short header values are flags and content types, and would blot out ordinary words. A server
  // that refuses `Bearer <token>` tends to quote the token alone, as one refusing `?key=<token>`
  // quotes the key: each is masked on its own too.
  const headerValues = Object.values(connection.headers ?? {});
  const tokens = headerValues.map((v) => /^[A-Za-z][\w.+-]*\s+(\S+)$/.exec(v)?.[1]).filter((v) => v !== undefined);
  const secrets = [...urlForms(server), ...[...headerValues, ...tokens].filter((v) => v.length >= 8)];
  // The request's secrets that the url or a header was filled with, short ones too (not a letter or
  // two), and as the URL carries them: a value with a space or a quote in it reaches the server,
  // and its errors, percent-encoded.
  for (const value of Object.values(opts.secrets ?? {})) {
    if (value.length >= 4 && [connection.url, ...headerValues].some((text) => text.includes(value))) secrets.push(...secretForms(value));
  }
  try {
    const url = new URL(connection.url);
    if (url.search) secrets.push(url.search.slice(1));
    for (const value of url.searchParams.values()) if (value.length >= 8) secrets.push(...secretForms(value));
  } catch {
    // Not a URL: nothing more to hide.
  }
  if (connection.forward_credentials && opts.credentials) secrets.push(opts.credentials);
  return secrets.filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
}

/** A remote server's URL as given and as parsed (`http://h` reads back as `http://h/`). */
function urlForms(server: McpServer): string[] {
  const connection = server.connection;
  if (connection.type === 'stdio') return [];
  return URL.canParse(connection.url) ? [connection.url, new URL(connection.url).href] : [connection.url];
}
