import http from 'node:http';
import https from 'node:https';
import { Readable, type Transform } from 'node:stream';
import zlib from 'node:zlib';

/**
 * `fetch` for the common case, over `node:http` with kept-alive connections: a request with a text
 * or byte body to an http(s) URL. Node's own `fetch` (undici) spent 0.2–0.3 ms more CPU per call,
 * which on a busy two-core machine is a tenth of a turn (BENCHMARKS.md, "Model calls and the CLI
 * over node:http"). Anything else — a `Request` object, a stream or form body, a redirect to
 * follow — goes to the global `fetch`, so callers keep its contract.
 * So does everything when the operator routes outbound traffic through a proxy with Node's
 * NODE_USE_ENV_PROXY, which the global `fetch` honours.
 */

type Fetch = typeof globalThis.fetch;

const agents = { 'http:': new http.Agent({ keepAlive: true }), 'https:': new https.Agent({ keepAlive: true }) };
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

function responseHeaders(raw: string[]): Headers {
  const headers = new Headers();
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  return headers;
}

/** A rejection as `fetch` gives it: the signal's reason on abort, else a TypeError with the cause. */
function failure(error: unknown, signal: AbortSignal | null | undefined): unknown {
  if (signal?.aborted) return signal.reason;
  return new TypeError('fetch failed', { cause: error });
}

export const keepAliveFetch: Fetch = (input, init = {}) => {
  const url = typeof input === 'string' ? URL.parse(input) : input instanceof URL ? input : null;
  const body = init.body ?? undefined;
  const plainBody = body === undefined || typeof body === 'string' || body instanceof Uint8Array;
  if (!url || !(url.protocol in agents) || !plainBody || init.redirect === 'error' || process.env.NODE_USE_ENV_PROXY) return fetch(input, init);
  const signal = init.signal;
  if (signal?.aborted) return Promise.reject(signal.reason);

  return new Promise<Response>((resolve, reject) => {
    const transport = url.protocol === 'https:' ? https : http;
    const req = transport.request(url, {
      method: init.method ?? 'GET',
      headers: requestHeaders(init, body),
      agent: agents[url.protocol as keyof typeof agents],
    });
    let response: http.IncomingMessage | undefined;
    const onAbort = () => (response ?? req).destroy(signal!.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    const settled = () => signal?.removeEventListener('abort', onAbort);
    req.on('error', (error) => {
      settled();
      reject(failure(error, signal));
    });
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      // Only the redirect itself was answered: fetch sends the request again and follows it.
      if (REDIRECT_STATUS.has(status) && res.headers.location && init.redirect !== 'manual') {
        res.resume();
        settled();
        resolve(fetch(input, init));
        return;
      }
      // From here the body stream carries the failure (an abort included), as with fetch.
      response = res;
      res.once('close', settled);
      const empty = NO_BODY_STATUS.has(status) || init.method === 'HEAD';
      const decoder = empty ? null : decoderFor(res.headers['content-encoding']);
      const source: Readable = decoder ? res.pipe(decoder) : res;
      if (decoder) res.once('error', (error) => decoder.destroy(error));
      if (empty) res.resume();
      resolve(
        new Response(empty ? null : (Readable.toWeb(source) as ReadableStream<Uint8Array>), {
          status,
          statusText: res.statusMessage ?? '',
          headers: responseHeaders(res.rawHeaders),
        }),
      );
    });
    req.end(body);
  });
};
