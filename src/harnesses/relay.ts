import { randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, LookupFunction } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { secretList } from '../telemetry/redact.ts';
import { ModelCalls } from './model-calls.ts';

/** A server the harness reaches only through agentd: its model endpoint, an MCP server. */
export interface Upstream {
  url: string;
  /** Sent upstream on every request, in place of what the harness sent: the key, the MCP server's headers. */
  headers: Record<string, string>;
  /** Resolves its host name, refusing an address agentd does not connect to (src/agent/address-policy.ts): an MCP server's, a project connection's. */
  lookup?: LookupFunction | undefined;
}

/** Where, inside the sandbox, the relay's sockets are and the ports the launcher listens on. */
export const RELAY_DIR = '/tmp/.agentd-relay';
const FIRST_PORT = 41_000;

/** The headers a harness may carry the relay's token in: its API key, or the one agentd sets for an MCP server. */
const TOKEN_HEADERS = ['x-agentd-relay', 'authorization', 'x-api-key', 'api-key'];
/** Not passed on: hop-by-hop, and the token. */
const DROPPED = new Set([...TOKEN_HEADERS, 'host', 'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/**
 * The harness's only way out when its network is off, and its only way to a key in every case.
 * For each upstream agentd serves a relay that checks the process's token, puts the real
 * credentials on the request and passes it on, streaming both ways. The harness is told the
 * relay's URL and the token as its key: the keys and the MCP servers' secrets never enter the
 * sandbox, and a token is worth nothing once its process has ended.
 *
 * With the network off, each relay listens on a Unix socket in a folder the sandbox mounts, and
 * a launcher inside (relay-launcher.mjs) listens on the sandbox's own loopback and forwards to it.
 * With the network on, each listens on the host's loopback (the sandbox shares the network).
 */
export class HarnessRelay {
  /** What the harness presents as its key, and the relay checks. */
  readonly token: string;
  /** The URLs the harness is told, one per upstream, each with the upstream's path. */
  readonly urls: string[];
  /** The host folder of the sockets (network off), mounted at RELAY_DIR. */
  readonly socketDir: string | undefined;
  /** The loopback ports the launcher listens on inside the sandbox (network off). */
  readonly ports: number[];
  /** The model's calls (the first upstream): their last failure and their time limit. */
  readonly modelCalls: ModelCalls;
  readonly #servers: http.Server[];

  private constructor(token: string, servers: http.Server[], urls: string[], socketDir: string | undefined, ports: number[], modelCalls: ModelCalls) {
    this.token = token;
    this.modelCalls = modelCalls;
    this.#servers = servers;
    this.urls = urls;
    this.socketDir = socketDir;
    this.ports = ports;
  }

  /** `upstreams[0]` is the model, whose calls get `modelTimeoutMs` and are watched (ModelCalls). */
  static async open(upstreams: readonly Upstream[], network: 'on' | 'off', modelTimeoutMs: number, secrets: ReadonlyArray<string | undefined> = []): Promise<HarnessRelay> {
    const token = randomBytes(24).toString('base64url');
    const masked = secretList(secrets).map((secret) => Buffer.from(secret));
    const modelCalls = new ModelCalls(upstreams[0]!.url, modelTimeoutMs);
    const socketDir = network === 'off' ? mkdtempSync(path.join(os.tmpdir(), 'agentd-relay-')) : undefined;
    const servers: http.Server[] = [];
    const urls: string[] = [];
    const ports: number[] = [];
    try {
      for (const [i, upstream] of upstreams.entries()) {
        const server = http.createServer((req, res) => void relay(upstream, token, req, res, i === 0 ? modelCalls : undefined, masked));
        servers.push(server);
        // Without the upstream's query: it may hold a secret filled in (`?token={{secrets.T}}`), so the
        // relay adds it on its side (`relay`), and the harness never holds it.
        const suffix = new URL(upstream.url).pathname.replace(/\/+$/, '');
        if (socketDir) {
          await listen(server, path.join(socketDir, `${i}.sock`));
          ports.push(FIRST_PORT + i);
          urls.push(`http://127.0.0.1:${FIRST_PORT + i}${suffix}`);
        } else {
          await listen(server, { host: '127.0.0.1', port: 0 });
          urls.push(`http://127.0.0.1:${(server.address() as AddressInfo).port}${suffix}`);
        }
      }
    } catch (error) {
      for (const server of servers) server.close();
      if (socketDir) rmSync(socketDir, { recursive: true, force: true });
      throw error;
    }
    return new HarnessRelay(token, servers, urls, socketDir, ports, modelCalls);
  }

  /** Stops relaying: the process it served has ended. */
  close(): void {
    for (const server of this.#servers) {
      server.close();
      server.closeAllConnections();
    }
    if (this.socketDir) rmSync(this.socketDir, { recursive: true, force: true });
  }
}

function listen(server: http.Server, where: string | { host: string; port: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(where, () => resolve());
  });
}

function carriesToken(req: http.IncomingMessage, token: string): boolean {
  const expected = Buffer.from(token);
  return TOKEN_HEADERS.some((name) => {
    const value = req.headers[name];
    if (typeof value !== 'string') return false;
    const given = Buffer.from(value.replace(/^Bearer\s+/i, ''));
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/**
 * One request, passed on to the upstream with its credentials, the answer streamed back as it
 * comes. A model call (`model`) is cut when the model sends nothing for its time limit, and what
 * it came to is kept.
 */
async function relay(upstream: Upstream, token: string, req: http.IncomingMessage, res: http.ServerResponse, model: ModelCalls | undefined, masked: readonly Buffer[]): Promise<void> {
  if (!carriesToken(req, token)) {
    res.writeHead(403, { 'content-type': 'text/plain' }).end('agentd relay: this request does not carry its harness process token\n');
    return;
  }
  const base = new URL(upstream.url);
  const target = new URL(req.url ?? '/', base.origin);
  // What is asked at the upstream's path or below gets the upstream's own query, as a client given
  // its url would send it; kept as written, so a value reaches the server encoded as it was.
  const basePath = base.pathname.replace(/\/+$/, '');
  if (base.search && (target.pathname === basePath || target.pathname.startsWith(`${basePath}/`))) {
    target.search = target.search ? `${target.search}&${base.search.slice(1)}` : base.search;
  }
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) if (!DROPPED.has(name)) headers[name] = value;
  Object.assign(headers, upstream.headers);
  // Answers are masked as they pass, so they must come as text.
  if (masked.length > 0) headers['accept-encoding'] = 'identity';
  const lookup = upstream.lookup;
  const request = (target.protocol === 'https:' ? https : http).request(target, { method: req.method, headers, ...(lookup ? { lookup, agent: agentFor(target, lookup) } : {}) });
  // A model call is a POST; what else a harness asks (Claude's HEAD preflight, a model list) may
  // fail without harm.
  const watch = req.method === 'POST' ? model : undefined;
  let timedOut = false;
  // The harness hung up (a cancelled turn): what the call comes to then is not the model's doing.
  let hungUp = false;
  if (watch) {
    request.setTimeout(watch.timeoutMs, () => {
      timedOut = true;
      watch.timedOut();
      request.destroy(new Error(`nothing from the model for ${watch.timeoutMs} ms`));
    });
  }
  request.once('response', (answer) => {
    watch?.answered(answer.statusCode ?? 502, answer.headers);
    const back: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(answer.headers)) if (!DROPPED.has(name)) back[name] = value;
    // Masking changes the length.
    if (masked.length > 0) delete back['content-length'];
    res.writeHead(answer.statusCode ?? 502, back);
    res.flushHeaders();
    void (masked.length > 0 ? pipeline(answer, new Masking(masked), res) : pipeline(answer, res)).catch(() => res.destroy());
  });
  request.once('error', (error) => {
    if (watch && !timedOut && !hungUp) watch.unreachable(error);
    if (res.headersSent) res.destroy();
    else if (timedOut) res.writeHead(504, { 'content-type': 'text/plain' }).end(`agentd relay: ${error.message}\n`);
    else res.writeHead(502, { 'content-type': 'text/plain' }).end(`agentd relay: ${target.origin} cannot be reached (${error.message})\n`);
  });
  res.once('close', () => {
    hungUp = !res.writableFinished;
    request.destroy();
  });
  await pipeline(req, request).catch(() => request.destroy());
}

/**
 * Kept-alive sockets opened through a checking lookup, pooled apart per lookup: Node's global agent
 * hands a socket it keeps for a host and port to the next request there, which would then skip
 * its own lookup (one opened for an MCP server by one policy, reused for a connection's model by
 * another, or one opened with no check at all).
 */
const checkedAgents = new WeakMap<LookupFunction, { http: http.Agent; https: https.Agent }>();

function agentFor(target: URL, lookup: LookupFunction): http.Agent {
  let agents = checkedAgents.get(lookup);
  if (!agents) checkedAgents.set(lookup, (agents = { http: new http.Agent({ keepAlive: true, lookup }), https: new https.Agent({ keepAlive: true, lookup }) }));
  return target.protocol === 'https:' ? agents.https : agents.http;
}

const MASK = Buffer.from('[redacted]');

/**
 * An upstream's answer with the run's secrets masked on their way to the harness. A model that
 * repeats its key, an MCP server that echoes the headers or the url the relay sent it: the harness
 * would keep the value in its own transcripts (Codex's rollouts, Pi's sessions, in the state
 * folder), where agentd's masking of the turn's events never reaches. A tail that could begin a
 * secret waits for the next chunk, so a value split between two is masked too.
 */
class Masking extends Transform {
  readonly #secrets: readonly Buffer[];
  readonly #longest: number;
  #held: Buffer = Buffer.alloc(0);

  constructor(secrets: readonly Buffer[]) {
    super();
    this.#secrets = secrets;
    this.#longest = Math.max(...secrets.map((s) => s.length));
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const data = this.#mask(this.#held.length > 0 ? Buffer.concat([this.#held, chunk]) : chunk);
    const keep = this.#tail(data);
    this.#held = Buffer.from(data.subarray(data.length - keep));
    if (data.length > keep) this.push(data.subarray(0, data.length - keep));
    done();
  }

  override _flush(done: TransformCallback): void {
    done(null, this.#held.length > 0 ? this.#held : undefined);
  }

  #mask(data: Buffer): Buffer {
    let out = data;
    for (const secret of this.#secrets) {
      let at = out.indexOf(secret);
      if (at === -1) continue;
      const parts: Buffer[] = [];
      let from = 0;
      for (; at !== -1; at = out.indexOf(secret, from)) {
        parts.push(out.subarray(from, at), MASK);
        from = at + secret.length;
      }
      parts.push(out.subarray(from));
      out = Buffer.concat(parts);
    }
    return out;
  }

  /** How many bytes at the end of `data` could begin a secret. */
  #tail(data: Buffer): number {
    for (let n = Math.min(data.length, this.#longest - 1); n > 0; n--) {
      const tail = data.subarray(data.length - n);
      if (this.#secrets.some((secret) => secret.length > n && secret.subarray(0, n).equals(tail))) return n;
    }
    return 0;
  }
}
