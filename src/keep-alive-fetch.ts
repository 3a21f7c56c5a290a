import { createRequire } from 'node:module';
import type { Readable, Transform } from 'node:stream';
import zlib from 'node:zlib';
import type { Agent as UndiciAgent, Dispatcher } from 'undici';
import { isJsonType } from './media-types.ts';
import { webReadable } from './web-readable.ts';

/**
 * `fetch` for the common case, over undici's `request` with kept-alive connections: a request with
 * a text or byte body to an http(s) URL. Node's own `fetch` spends 0.1–0.15 ms more CPU per call,
 * and the `node:http` client this replaced about 0.05 ms more (BENCHMARKS.md, "The HTTP client
 * under every model call", `npm run bench:http-client`). Anything else — a `Request` object, a
 * stream or form body, a redirect to follow — goes to the global `fetch`, so callers keep its
 * contract. So does everything when the operator routes outbound traffic through a proxy with
 * Node's NODE_USE_ENV_PROXY, which the global `fetch` honours.
 */

type Fetch = typeof globalThis.fetch;

/*
 * undici's `Agent` and `request`, from the two files that are them: its index loads all of undici
 * (its fetch, WebSocket, caches, mocks), 3.4 MB of heap and 7 MB of RSS in every thread that calls
 * a model (BENCHMARKS.md, "The `ai` package and undici's index off the serving path"). undici is
 * pinned to one version, so the paths cannot move under us unseen.
 */
const require = createRequire(import.meta.url);
const Agent: typeof UndiciAgent = require('undici/lib/dispatcher/agent.js');
const request: (this: Dispatcher, options: Dispatcher.RequestOptions) => Promise<Dispatcher.ResponseData> = require('undici/lib/api/api-request.js');

const shared = new Agent();
const PROTOCOLS = new Set(['http:', 'https:']);
const NO_BODY_STATUS = new Set([101, 204, 205, 304]);
const REDIRECT_STATUS = new Set([301, 302, 303, 307, 308]);

/**
 * The stream that undoes a response's encoding. Nothing asks for one (no Accept-Encoding is sent),
 * so any other (a list, an unknown name) passes through as it came, as it does through `fetch`.
 */
function decoderFor(encoding: string | undefined): Transform | null {
  switch (encoding?.trim().toLowerCase()) {
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip();
    case 'deflate':
      return zlib.createInflate();
    case 'br':
      return zlib.createBrotliDecompress();
    case 'zstd':
      return zlib.createZstdDecompress();
    default:
      return null;
  }
}

function requestHeaders(init: RequestInit, body: string | Uint8Array | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  const given = init.headers;
  if (given && !(given instanceof Headers) && !Array.isArray(given)) {
    for (const [name, value] of Object.entries(given)) if (value !== undefined) headers[name.toLowerCase()] = value;
  } else if (given) {
    new Headers(given).forEach((value, name) => (headers[name] = value));
  }
  if (body !== undefined) {
    headers['content-length'] = String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength);
    if (typeof body === 'string') headers['content-type'] ??= 'text/plain;charset=UTF-8';
  }
  return headers;
}

function responseHeaders(raw: Record<string, string | string[] | undefined>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (Array.isArray(value)) for (const one of value) headers.append(name, one);
    else if (value !== undefined) headers.append(name, value);
  }
  return headers;
}

/** A rejection as `fetch` gives it: the signal's reason on abort, else a TypeError with the cause. */
function failure(error: unknown, signal: AbortSignal | null | undefined): unknown {
  if (signal?.aborted) return signal.reason;
  return new TypeError('fetch failed', { cause: error });
}

export const keepAliveFetch: Fetch = keepAliveFetchThrough(undefined);

/**
 * keepAliveFetch with every connection opened by `through` (an address policy's dispatcher, which
 * checks where each one goes), those of the global `fetch` it hands over to included: a redirect
 * is followed through it too.
 */
export function keepAliveFetchThrough(through: UndiciAgent | undefined): Fetch {
  const dispatcher = through ?? shared;
  // Node's fetch takes undici's `dispatcher`, which the DOM's RequestInit does not name.
  const handOver: Fetch = through ? (input, init) => fetch(input, { ...init, dispatcher: through } as RequestInit) : (input, init) => fetch(input, init);
  return (input, init = {}) => fetchVia(dispatcher, handOver, input, init);
}

async function fetchVia(dispatcher: UndiciAgent, handOver: Fetch, input: Parameters<Fetch>[0], init: RequestInit): Promise<Response> {
  const url = typeof input === 'string' ? URL.parse(input) : input instanceof URL ? input : null;
  const body = init.body ?? undefined;
  const plainBody = body === undefined || typeof body === 'string' || body instanceof Uint8Array;
  if (!url || !PROTOCOLS.has(url.protocol) || !plainBody || init.redirect === 'error' || process.env.NODE_USE_ENV_PROXY) return handOver(input, init);
  const signal = init.signal ?? undefined;
  if (signal?.aborted) throw signal.reason;

  let res: Dispatcher.ResponseData;
  try {
    const target = { origin: url.origin, path: `${url.pathname}${url.search}` };
    res = await request.call(dispatcher, { ...target, method: (init.method ?? 'GET') as 'GET', headers: requestHeaders(init, body), body, ...(signal ? { signal } : {}) });
  } catch (error) {
    throw failure(error, signal);
  }
  const status = res.statusCode;
  // Only the redirect itself was answered: fetch sends the request again and follows it.
  if (REDIRECT_STATUS.has(status) && res.headers.location && init.redirect !== 'manual') {
    res.body.resume();
    return handOver(input, init);
  }
  // From here the body stream carries the failure (an abort included), as with fetch.
  const empty = NO_BODY_STATUS.has(status) || init.method === 'HEAD';
  if (empty) res.body.resume();
  const encoding = res.headers['content-encoding'];
  const decoder = empty ? null : decoderFor(Array.isArray(encoding) ? encoding.join(',') : encoding);
  const source: Readable = decoder ? res.body.pipe(decoder) : res.body;
  if (decoder) res.body.once('error', (error) => decoder.destroy(error));
  if (signal && !empty) {
    const onAbort = () => source.destroy(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    source.once('close', () => signal.removeEventListener('abort', onAbort));
  }
  // A JSON answer is read whole before anything parses it; a Response over its bytes spares the web
  // stream that reading it through one costs (BENCHMARKS.md, "JSON answers read whole").
  if (!empty && typeof res.headers['content-type'] === 'string' && isJsonType(res.headers['content-type'])) {
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      // undici reads its own body whole without a stream; a decoder's output is gathered.
      bytes = decoder ? Buffer.concat(await source.toArray()) : ((await res.body.bytes()) as Uint8Array<ArrayBuffer>);
    } catch (error) {
      throw failure(error, signal);
    }
    return new Response(bytes, { status, headers: responseHeaders(res.headers) });
  }
  return new Response(empty ? null : webReadable(source), { status, headers: responseHeaders(res.headers) });
}
