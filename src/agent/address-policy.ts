import { createRequire } from 'node:module';
import dns, { type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import type { Agent as UndiciAgent, buildConnector as BuildConnector } from 'undici';

/**
 * Where agentd may connect for what its callers name: a template's HTTP and SSE MCP servers
 * (mcp-address.ts), a project connection's base URL (connection-address.ts). Whoever names such a
 * URL is not the operator: without a policy agentd would connect for them anywhere it can reach,
 * and a failed call quotes the start of what was answered.
 *
 * Always refused, unless an address entry of the kind's setting holds the address: link-local
 * addresses (169.254.0.0/16, fe80::/10), where cloud metadata services hand out the host's
 * credentials, and the metadata services that sit elsewhere (METADATA). Set, the list is also all
 * agentd connects to: a host name it names, or an address in one of its ranges.
 *
 * The check holds on the address connected to, not on the URL as written: names are resolved by
 * `lookup` (below), so one that resolves, or later rebinds, to a refused address is refused too,
 * and literals in any form the URL parser reads (`2852039166`, `[::ffff:169.254.169.254]`) are
 * read as the address they are, as is an IPv4 address carried in an IPv6 one (`plain`).
 */

/** Cloud metadata services outside the link-local ranges, which are refused whole. */
const METADATA: ReadonlyArray<readonly [string, string]> = [
  ['fd00:ec2::254', 'the AWS instance metadata service (IPv6)'],
  ['fd00:ec2::23', 'the AWS EKS Pod Identity agent (IPv6)'],
  ['fd20:ce::254', 'the Google Cloud metadata server (IPv6)'],
  ['fd00:a9fe:a9fe::1', 'the Akamai (Linode) metadata service (IPv6)'],
  ['100.100.100.200', 'the Alibaba Cloud metadata service'],
  ['192.0.0.192', 'the Oracle Cloud metadata service'],
  ['168.63.129.16', "Azure's WireServer"],
];

/** What a policy guards, for its messages: its setting, the kind of server it reaches and a host name one might have. */
export interface Guarded {
  setting: string;
  server: string;
  example: string;
}

/** An entry of an allow-list: a host name, `*.` and a domain, an address, or a CIDR range. */
type Entry = { name: string } | { suffix: string } | { address: string; prefix: number; family: 'ipv4' | 'ipv6' };

const HOST_NAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/;

/** An allow-list setting read: a comma-separated list, unset or empty for no list. Throws, naming the entry, on one it cannot read. */
export function allowListOf(guarded: Guarded, raw: string | undefined): string[] | undefined {
  const entries = (raw ?? '')
    .split(',')
    .map((entry) => entry.trim().toLowerCase())
    .filter(Boolean);
  if (entries.length === 0) return undefined;
  for (const entry of entries) parseEntry(guarded, entry);
  return entries;
}

function parseEntry(guarded: Guarded, entry: string): Entry {
  const slash = entry.indexOf('/');
  const address = unbracketed(slash === -1 ? entry : entry.slice(0, slash));
  const family = isIP(address);
  if (family !== 0) {
    const bits = family === 4 ? 32 : 128;
    const prefix = slash === -1 ? bits : Number(entry.slice(slash + 1));
    if (Number.isInteger(prefix) && prefix >= 0 && prefix <= bits && (slash === -1 || /^\d+$/.test(entry.slice(slash + 1)))) {
      return { address, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
    }
  } else if (entry.startsWith('*.') && HOST_NAME.test(entry.slice(2))) {
    return { suffix: entry.slice(1).replace(/\.$/, '') };
  } else if (HOST_NAME.test(entry)) {
    return { name: entry.replace(/\.$/, '') };
  }
  throw new Error(`${guarded.setting}: "${entry}" is not a host name (${guarded.example}), a wildcard (*.example.com), an address (10.0.0.5, ::1) or a CIDR range (10.0.0.0/8, fd00::/8)`);
}

function unbracketed(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/**
 * An IPv4 address carried in an IPv6 one, as that IPv4 address: the socket reaches it. Mapped
 * (`::ffff:a9fe:a9fe`) on this host; NAT64's well-known prefix (`64:ff9b::a9fe:a9fe`, RFC 6052) and
 * 6to4 (`2002:a9fe:a9fe::`, RFC 3056) through a translator or relay on the way.
 */
function plain(address: string): { address: string; family: 'ipv4' | 'ipv6' } {
  if (isIP(address) === 4) return { address, family: 'ipv4' };
  // The URL parser writes every IPv6 address one way: lowercase hex, `::ffff:1.2.3.4` as `::ffff:102:304`.
  const canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  const g = hextets(canonical);
  const zeros = (from: number, to: number) => g.slice(from, to).every((h) => h === 0);
  const mapped = zeros(0, 5) && g[5] === 0xffff;
  const nat64 = g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6);
  const carried = mapped || nat64 ? [g[6]!, g[7]!] : g[0] === 0x2002 ? [g[1]!, g[2]!] : undefined;
  if (!carried) return { address: canonical, family: 'ipv6' };
  const [high, low] = carried as [number, number];
  return { address: [high >> 8, high & 255, low >> 8, low & 255].join('.'), family: 'ipv4' };
}

/** A canonical IPv6 address's eight 16-bit groups. */
function hextets(canonical: string): number[] {
  const [head, tail] = canonical.split('::') as [string, string | undefined];
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((h) => parseInt(h, 16)));
  if (tail === undefined) return groups(head);
  const before = groups(head);
  const after = groups(tail);
  return [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after];
}

/** Raised by `lookup` for a name that resolves to a refused address, and by a dispatcher's connect; the caller turns it into a 400. */
export class AddressRefused extends Error {
  override name = 'AddressRefused';
}

export class AddressPolicy {
  readonly #guarded: Guarded;
  readonly #names = new Set<string>();
  readonly #suffixes: string[] = [];
  /** The list's ranges; undefined when no list is set. */
  readonly #allowed: BlockList | undefined;
  readonly #linkLocal = new BlockList();
  readonly #metadata = new Map<string, string>();
  readonly #hasRanges: boolean;

  constructor(guarded: Guarded, allowed: readonly string[] | undefined) {
    this.#guarded = guarded;
    this.#linkLocal.addSubnet('169.254.0.0', 16, 'ipv4');
    this.#linkLocal.addSubnet('fe80::', 10, 'ipv6');
    for (const [address, what] of METADATA) this.#metadata.set(address, what);
    let ranges = false;
    if (allowed) {
      this.#allowed = new BlockList();
      for (const entry of allowed.map((entry) => parseEntry(guarded, entry))) {
        if ('name' in entry) this.#names.add(entry.name);
        else if ('suffix' in entry) this.#suffixes.push(entry.suffix);
        else {
          this.#allowed.addSubnet(entry.address, entry.prefix, entry.family);
          ranges = true;
        }
      }
    }
    this.#hasRanges = ranges;
  }

  /**
   * Why `host` may not be reached at `address` (a host name and what it resolved to, or an address
   * twice), or undefined when it may. `shown` is how the host may be named in the message.
   */
  refusal(host: string, address: string, shown: string): string | undefined {
    const { address: ip, family } = plain(address);
    const listed = this.#allowed?.check(ip, family) === true;
    const literal = isIP(host) !== 0;
    const is = literal ? `${shown} is` : `${shown} resolves to`;
    const blocked = this.#linkLocal.check(ip, family) ? 'a link-local address' : this.#metadata.get(ip);
    const { setting, server } = this.#guarded;
    if (blocked && !listed) {
      return `${is} ${blocked}, where cloud metadata services hand out this host's credentials and no ${server} lives; agentd connects there only when ${setting} names the address or a range holding it`;
    }
    if (!this.#allowed || listed || (!literal && this.#nameListed(host))) return undefined;
    return `${is} an address that ${setting} does not hold${literal ? '' : ', and the list does not name the host'}; the operator may add it there`;
  }

  /** The refusal of a URL's host before any lookup: a literal address, or a name the list cannot allow. */
  literalRefusal(host: string, shown: string): string | undefined {
    const bare = unbracketed(host);
    if (isIP(bare) !== 0) return this.refusal(bare, bare, shown);
    if (this.#allowed && !this.#hasRanges && !this.#nameListed(bare)) return `${shown} is a host ${this.#guarded.setting} does not name; the operator may add it there`;
    return undefined;
  }

  #nameListed(host: string): boolean {
    const name = host.toLowerCase().replace(/\.$/, '');
    return this.#names.has(name) || this.#suffixes.some((suffix) => name.endsWith(suffix));
  }

  /** `dns.lookup` that refuses a name resolving to any address this policy refuses, before a socket opens. */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, '', 0);
      for (const { address } of addresses) {
        const why = this.refusal(hostname, address, `"${hostname}"`);
        if (why) return callback(new AddressRefused(why), '', 0);
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const [first] = addresses;
      if (!first) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
      callback(null, first.address, first.family);
    });
  };

  #dispatcher: UndiciAgent | undefined;

  /**
   * The dispatcher for a fetch to what the policy guards: every connection it opens, to any URL
   * (an `sse` MCP server names where messages go, a redirect where to go next), is checked here,
   * names through `lookup`.
   * Undefined when the operator routes outbound traffic through a proxy (NODE_USE_ENV_PROXY): the
   * proxy resolves names and connects, so only a URL's literal address is checked (above), and
   * the proxy is where the rest is refused.
   */
  dispatcherFor(env: NodeJS.ProcessEnv = process.env): UndiciAgent | undefined {
    if (viaProxy(env)) return undefined;
    return (this.#dispatcher ??= this.#build());
  }

  /** `lookup` for a `node:http` request (the harnesses' relay); undefined behind a proxy, as `dispatcherFor`. Literal addresses skip it: check them with `literalRefusal`. */
  lookupFor(env: NodeJS.ProcessEnv = process.env): LookupFunction | undefined {
    return viaProxy(env) ? undefined : this.lookup;
  }

  #build(): UndiciAgent {
    // From undici's own files, as src/keep-alive-fetch.ts takes them (its index loads all of
    // undici), and only once a server is connected to: AGENTD_* settings are read without them.
    const require = createRequire(import.meta.url);
    const Agent: typeof UndiciAgent = require('undici/lib/dispatcher/agent.js');
    const buildConnector: typeof BuildConnector = require('undici/lib/core/connect.js');
    const base = buildConnector({ lookup: this.lookup });
    const connect: BuildConnector.connector = (options, callback) => {
      const why = this.literalRefusal(options.hostname, `"${options.hostname}"`);
      if (why) return callback(new AddressRefused(why), null);
      return base(options, callback);
    };
    return new Agent({ connect });
  }
}

function viaProxy(env: NodeJS.ProcessEnv): boolean {
  const on = env.NODE_USE_ENV_PROXY;
  return on !== undefined && on !== '' && on !== '0' && ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'].some((name) => env[name]);
}

/** The refusal in an error's causes, if the connection failed for one. */
export function refusalIn(error: unknown): AddressRefused | undefined {
  for (let current = error, depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    if (current instanceof AddressRefused) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
