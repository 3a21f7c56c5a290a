import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keepAliveFetch } from '../../src/keep-alive-fetch.ts';

/**
 * keepAliveFetch must keep fetch's contract wherever the AI SDK and the client rely on it, since it
 * stands in for fetch on every model call and every CLI request. Checked against a real server.
 */
let server: http.Server;
let base: string;
const sockets = new Set<number>();
/** Release for the /hang route's responses, so they end when a test is done with them. */
const hanging = new Set<http.ServerResponse>();

beforeAll(async () => {
  server = http.createServer(async (req, res) => {
    sockets.add(req.socket.remotePort!);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString();
    switch (req.url) {
      case '/echo':
        res.setHeader('content-type', 'application/json');
        res.setHeader('x-multi', ['a', 'b']);
        res.end(JSON.stringify({ method: req.method, body, headers: req.headers }));
        break;
      case '/gzip':
        res.setHeader('content-encoding', 'gzip');
        res.end(zlib.gzipSync('packed text'));
        break;
      case '/zstd':
        res.setHeader('content-encoding', 'zstd');
        res.end(zlib.zstdCompressSync('squeezed text'));
        break;
      case '/odd-encoding':
        res.setHeader('content-encoding', 'x-custom');
        res.end('as it came');
        break;
      case '/redirect':
        res.statusCode = 307;
        res.setHeader('location', '/echo');
        res.end();
        break;
      case '/empty':
        res.statusCode = 204;
        res.end();
        break;
      case '/stream':
        res.setHeader('content-type', 'text/event-stream');
        res.write('data: one\n\n');
        setTimeout(() => res.end('data: two\n\n'), 20);
        break;
      case '/paced': {
        // Two events at once, then one every few seconds until the client goes.
        res.setHeader('content-type', 'text/event-stream');
        res.write('data: one\n\n');
        res.write('data: two\n\n');
        const timer = setInterval(() => res.write('data: more\n\n'), 3000);
        res.once('close', () => clearInterval(timer));
        break;
      }
      case '/hang':
        res.write('data: first\n\n');
        hanging.add(res);
        break;
      case '/json-hang':
        res.setHeader('content-type', 'application/json; charset=utf-8');
        res.write('{"partial":');
        hanging.add(res);
        break;
      case '/json-cut':
        res.setHeader('content-type', 'application/json');
        res.setHeader('content-length', '100');
        res.write('{"cut":');
        setTimeout(() => res.destroy(), 10);
        break;
      case '/json-gzip':
        res.setHeader('content-type', 'application/json');
        res.setHeader('content-encoding', 'gzip');
        res.end(zlib.gzipSync('{"packed":true}'));
        break;
      case '/json-split':
        // "é" split across two writes: the text is whole once decoded.
        res.setHeader('content-type', 'application/vnd.api+json');
        res.write(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3]));
        setTimeout(() => res.end(Buffer.from([0xa9, 0x22, 0x7d])), 10);
        break;
      default:
        res.statusCode = 429;
        res.setHeader('retry-after', '3');
        res.end('slow down');
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const res of hanging) res.end();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('keepAliveFetch', () => {
  it('sends the method, headers and body, and reads status, headers and JSON back', async () => {
    const res = await keepAliveFetch(`${base}/echo`, { method: 'POST', headers: { 'Content-Type': 'application/json', authorization: 'Bearer k' }, body: '{"a":"é"}' });
    expect(res.status).toBe(200);
    expect(res.ok).toBe(true);
    expect(res.headers.get('x-multi')).toBe('a, b');
    const echo = (await res.json()) as { method: string; body: string; headers: Record<string, string> };
    expect(echo).toMatchObject({ method: 'POST', body: '{"a":"é"}' });
    expect(echo.headers).toMatchObject({ 'content-type': 'application/json', authorization: 'Bearer k', 'content-length': String(Buffer.byteLength('{"a":"é"}')) });
  });

  it('takes headers as a Headers object or pairs, and URL objects', async () => {
    const fromHeaders = await keepAliveFetch(new URL(`${base}/echo`), { headers: new Headers({ 'x-one': '1' }) });
    expect(((await fromHeaders.json()) as { headers: Record<string, string> }).headers['x-one']).toBe('1');
    const fromPairs = await keepAliveFetch(`${base}/echo`, { headers: [['x-two', '2']] });
    expect(((await fromPairs.json()) as { headers: Record<string, string> }).headers['x-two']).toBe('2');
  });

  it('reuses its connections: ten requests one after another open at most two', async () => {
    // A request sent in the very tick the previous answer's body ended may find that connection
    // not yet released and open a second, which is then kept as well.
    sockets.clear();
    for (let i = 0; i < 10; i++) await (await keepAliveFetch(`${base}/echo`)).text();
    expect(sockets.size).toBeLessThanOrEqual(2);
  });

  it('reports error statuses as responses, with their headers', async () => {
    const res = await keepAliveFetch(`${base}/nope`, { method: 'POST', body: 'x' });
    expect(res.status).toBe(429);
    expect(res.ok).toBe(false);
    expect(res.headers.get('retry-after')).toBe('3');
    expect(await res.text()).toBe('slow down');
  });

  it('streams a body as it arrives', async () => {
    const res = await keepAliveFetch(`${base}/stream`);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    expect((await reader.read()).value).toBe('data: one\n\n');
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += r.value;
    expect(rest).toBe('data: two\n\n');
  });

  it('lets a reader cancel a body while a read waits, as a pipe does', async () => {
    // Node's Readable.toWeb throws ERR_INVALID_STATE out of an event handler, uncaught, when its
    // web stream is cancelled with a read pending and a chunk still to come (nodejs/node#54205):
    // a provider that stops reading a model's answer early ended the process.
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      for (let i = 0; i < 5; i++) {
        const reader = (await keepAliveFetch(`${base}/paced`)).body!.getReader();
        const pending = reader.read();
        await reader.cancel();
        await pending;
        expect((await reader.read()).done).toBe(true);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      process.off('uncaughtException', onUncaught);
    }
    expect(uncaught).toEqual([]);
  });

  it('undoes gzip and zstd, passes an unknown encoding through, follows redirects and gives a 204 no body', async () => {
    expect(await (await keepAliveFetch(`${base}/gzip`)).text()).toBe('packed text');
    expect(await (await keepAliveFetch(`${base}/zstd`)).text()).toBe('squeezed text');
    expect(await (await keepAliveFetch(`${base}/odd-encoding`)).text()).toBe('as it came');
    const redirected = await keepAliveFetch(`${base}/redirect`, { method: 'POST', body: 'again' });
    expect(redirected.status).toBe(200);
    expect(((await redirected.json()) as { body: string }).body).toBe('again');
    const empty = await keepAliveFetch(`${base}/empty`);
    expect(empty.status).toBe(204);
    expect(empty.body).toBeNull();
  });

  it('fails as fetch does when nobody listens: a TypeError with the cause', async () => {
    const closed = http.createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const error = await keepAliveFetch(`http://127.0.0.1:${port}/`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as TypeError).message).toBe('fetch failed');
    expect(((error as TypeError).cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
  });

  it('rejects with the signal reason when aborted before or while the body streams', async () => {
    const before = AbortSignal.abort(new Error('too late'));
    await expect(keepAliveFetch(`${base}/echo`, { signal: before })).rejects.toThrow('too late');

    const controller = new AbortController();
    const res = await keepAliveFetch(`${base}/hang`, { signal: controller.signal });
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort(new DOMException('stopped', 'AbortError'));
    await expect(reader.read()).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('reads a JSON answer whole, and fails, as fetch would, when its body is cut or aborted', async () => {
    const split = await keepAliveFetch(`${base}/json-split`);
    expect(split.headers.get('content-type')).toBe('application/vnd.api+json');
    expect(await split.json()).toEqual({ a: 'é' });
    expect(await (await keepAliveFetch(`${base}/json-gzip`)).json()).toEqual({ packed: true });

    const cut = await keepAliveFetch(`${base}/json-cut`).then((res) => res.text()).catch((e: unknown) => e);
    expect(cut).toBeInstanceOf(TypeError);

    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('model took too long')), 20);
    const aborted = keepAliveFetch(`${base}/json-hang`, { signal: controller.signal }).then((res) => res.text());
    await expect(aborted).rejects.toThrow('model took too long');
  });

  it('leaves everything to the global fetch when the operator routes traffic through a proxy', async () => {
    const direct = (await (await keepAliveFetch(`${base}/echo`)).json()) as { headers: Record<string, string> };
    expect(direct.headers['user-agent']).toBeUndefined();
    process.env.NODE_USE_ENV_PROXY = '1';
    try {
      // undici names itself; node:http sends no user-agent.
      const viaFetch = (await (await keepAliveFetch(`${base}/echo`)).json()) as { headers: Record<string, string> };
      expect(viaFetch.headers['user-agent']).toBe('node');
    } finally {
      delete process.env.NODE_USE_ENV_PROXY;
    }
  });

  it('hands what it does not handle to the global fetch', async () => {
    const res = await keepAliveFetch(new Request(`${base}/echo`, { method: 'PUT', body: 'from a Request' }));
    expect(((await res.json()) as { method: string; body: string })).toMatchObject({ method: 'PUT', body: 'from a Request' });
    const streamed = await keepAliveFetch(`${base}/echo`, { method: 'POST', body: new Blob(['a blob']) });
    expect(((await streamed.json()) as { body: string }).body).toBe('a blob');
  });
});
