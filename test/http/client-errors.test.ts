import { once } from 'node:events';
import { connect } from 'node:net';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invokeBody, startHarness, template, type Harness } from '../support/harness.ts';
import type { Upload, UploadResult } from '../support/upload-client.ts';

/**
 * Requests refused before any route runs (Node's HTTP parser) or while their body is still
 * arriving (the body limit) are answered in the error envelope too, and the client can read it.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ env: { AGENTD_MAX_BODY: String(1024 * 1024), AGENTD_MAX_UPLOAD: String(1024 * 1024) }, script: { text: 'fine' } });
});
afterAll(async () => h.close());

/** Sends raw bytes and reads the reply until the server closes the connection; `end: false` leaves the request unfinished. */
function rawExchange(url: string, request: string, { end = true } = {}): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: text.slice(end + 4) });
    });
    if (end) socket.end(request);
    else socket.write(request);
  });
}

function expectRawEnvelope(res: Awaited<ReturnType<typeof rawExchange>>, status: number, type: string, mentions: RegExp) {
  expect(res.status).toBe(status);
  expect(res.headers).toMatchObject({ 'content-type': 'application/json; charset=utf-8', 'x-ag-version': '2025.07.14', connection: 'close', 'content-length': String(Buffer.byteLength(res.body)) });
  const body = JSON.parse(res.body);
  expect(body).toEqual({ version: '2025.07.14', status: { code: status, type, message: expect.stringMatching(mentions) } });
}

/** Runs the uploads one after another from a client thread (test/support/upload-client.ts). */
async function upload(uploads: Upload[]): Promise<UploadResult[]> {
  const worker = new Worker(new URL('../support/upload-client.ts', import.meta.url), { workerData: uploads });
  const [results] = (await once(worker, 'message')) as [UploadResult[]];
  await worker.terminate();
  return results;
}

function expectEnvelope(result: UploadResult, status: number, type: string, mentions: string) {
  expect(result, JSON.stringify(result).slice(0, 300)).toMatchObject({ status, headers: { 'content-type': 'application/json; charset=utf-8', 'x-ag-version': '2025.07.14' } });
  const body = JSON.parse((result as { text: string }).text);
  expect(body).toMatchObject({ version: '2025.07.14', status: { code: status, type, message: expect.stringContaining(mentions) } });
}

describe("errors from Node's HTTP parser", () => {
  it('request headers over 16 KB → 431 in the envelope', async () => {
    const res = await rawExchange(h.url, `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`);
    expectRawEnvelope(res, 431, 'headers-too-large', /16 KB/);
  });

  it('a header value with a control character → 400 in the envelope', async () => {
    const res = await rawExchange(h.url, 'GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n');
    expectRawEnvelope(res, 400, 'invalid-request', /not valid HTTP: .*control character/);
  });

  it('a chunk extension over 16 KB → 413 in the envelope', async () => {
    const request = `POST /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;${'a'.repeat(20 * 1024)}\r\nhello\r\n0\r\n\r\n`;
    expectRawEnvelope(await rawExchange(h.url, request), 413, 'payload-too-large', /chunk extensions/);
  });

  it('a request that does not arrive in time → 408 in the envelope', async () => {
    // Node gives up on headers after 60 s; its timeout error is raised here rather than waited for.
    const accepted = once(h.app.server, 'connection');
    const reply = rawExchange(h.url, 'GET /health HTTP/1.1\r\nHost: x\r\n', { end: false });
    const [socket] = await accepted;
    h.app.server.emit('clientError', Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), socket);
    expectRawEnvelope(await reply, 408, 'request-timeout', /in time/);
  });

  it('a body that stops short of its Content-Length → 408 once the request time is up, not a connection held for good', async () => {
    const slow = await startHarness({ env: { AGENTD_REQUEST_TIMEOUT_MS: '600' } });
    try {
      const head = `POST /services/agent/v0/invoke?project_id=${slow.projectId} HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${slow.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n`;
      const res = await rawExchange(slow.url, `${head}{"data": {`, { end: false });
      expectRawEnvelope(res, 408, 'request-timeout', /in time/);
      expect(slow.model.requests).toHaveLength(0);
    } finally {
      await slow.close();
    }
  });

  it('headers over 16 KB on a request whose body fetch is still sending → a 431 the client reads, every time', async () => {
    const big = { url: `${h.url}/health`, method: 'POST', headers: { 'x-big': 'a'.repeat(20 * 1024) }, size: 5 * 1024 * 1024, streamed: false };
    for (const result of await upload(Array.from({ length: 6 }, () => big))) expectEnvelope(result, 431, 'headers-too-large', '16 KB');
  });

  it.each([
    ['a malformed request line', 'NOT HTTP AT ALL\r\n\r\n'],
    ['a bad chunk size', 'POST /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
    ['both Content-Length and chunked', 'POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
  ])('%s → 400 in the envelope', async (_name, request) => {
    expectRawEnvelope(await rawExchange(h.url, request), 400, 'invalid-request', /not valid HTTP/);
  });

  it('an HTTP/1.1 request without a Host header → 400 in the envelope', async () => {
    const res = await rawExchange(h.url, 'GET /health HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(res.status).toBe(400);
    expect(res.headers).toMatchObject({ 'content-type': 'application/json; charset=utf-8', 'x-ag-version': '2025.07.14' });
    expect(JSON.parse(res.body)).toEqual({ version: '2025.07.14', status: { code: 400, type: 'invalid-request', message: expect.stringMatching(/Host header/) } });
    expect((await rawExchange(h.url, 'GET /health HTTP/1.0\r\n\r\n')).status).toBe(200);
  });

  it('the server answers normally afterwards', async () => {
    expect((await fetch(`${h.url}/health`)).status).toBe(200);
  });
});

describe('a body over the limit, sent with fetch', () => {
  const MB = 1024 * 1024;
  /** Ten uploads of 5 and 20 MB in turn: each refused after 1 MB, while the client still sends. */
  const sizes = Array.from({ length: 10 }, (_, i) => (i % 2 ? 20 : 5) * MB);

  function expectRefused(results: UploadResult[], mentions: string) {
    for (const result of results) expectEnvelope(result, 413, 'payload-too-large', mentions);
  }

  it.each([
    ['a Content-Length', false],
    ['a stream (chunked)', true],
  ])('an invoke body with %s over AGENTD_MAX_BODY → a 413 the client reads, every time', async (_name, streamed) => {
    const invoke = (size: number): Upload => ({
      url: `${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${h.apiKey}` },
      size,
      streamed,
    });
    expectRefused(await upload(sizes.map(invoke)), 'AGENTD_MAX_BODY');
  });

  it.each([
    ['a Content-Length', false],
    ['a stream (chunked)', true],
  ])('a session file upload with %s over AGENTD_MAX_UPLOAD → a 413 the client reads, every time', async (_name, streamed) => {
    const put = (size: number): Upload => ({
      url: `${h.url}/api/sessions/upload-limit/files?project_id=${h.projectId}&path=big.bin`,
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream', authorization: `ApiKey ${h.apiKey}` },
      size,
      streamed,
    });
    expectRefused(await upload(sizes.map(put)), 'AGENTD_MAX_UPLOAD');
  });

  it('a client that sends the whole refused body can go on using the connection', async () => {
    const body = 'x'.repeat(2 * MB);
    const refused = `POST /services/agent/v0/invoke?project_id=${h.projectId} HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey ${h.apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const res = await rawExchange(h.url, `${refused}GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(res.status).toBe(413);
    expect(res.body).toMatch(/"payload-too-large".*HTTP\/1\.1 200 OK.*\{"status":"ok"\}$/s);
  });

  it('the server stays healthy afterwards', async () => {
    expect((await fetch(`${h.url}/health`)).status).toBe(200);
    expect((await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template()))).status).toBe(200);
  });
});
