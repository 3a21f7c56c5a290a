import { once } from 'node:events';
import { createServer, request, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../src/contract/events.ts';
import { writeStream } from '../../src/http/stream-reply.ts';

/** How src/http/stream-reply.ts puts a turn's frames on the socket. */

let server: Server | undefined;
afterEach(() => server?.close());

const delta = (i: number): AgentEvent => ({ type: 'message_delta', data: { id: 'm1', delta: `part ${i} ` } });

/** Serves `events` through writeStream on a real socket; counts the writes made to the response. */
async function serve(events: () => AsyncIterable<AgentEvent>): Promise<{ url: string; writes: () => number }> {
  let writes = 0;
  server = createServer((_req, res: ServerResponse) => {
    const write = res.write.bind(res);
    res.write = ((...args: Parameters<typeof write>) => {
      writes++;
      return write(...args);
    }) as typeof res.write;
    void writeStream(res, {}, events(), { wire: 'sse', vercel: undefined });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, writes: () => writes };
}

/** The response's head, and then its whole body once `release` is called. */
function get(url: string): Promise<{ status: number; body: Promise<string> }> {
  return new Promise((resolve, reject) => {
    request(url, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      resolve({ status: res.statusCode!, body: new Promise((done) => res.on('end', () => done(text))) });
    })
      .on('error', reject)
      .end();
  });
}

describe('stream writes', () => {
  it('sends the frames of one iteration of the event loop in one write, in order', async () => {
    const { url, writes } = await serve(async function* () {
      for (let i = 0; i < 5; i++) yield delta(i);
      await new Promise((resolve) => setTimeout(resolve, 20));
      yield { type: 'done', data: { stop_reason: 'end_turn', stopReason: 'end_turn' } } as AgentEvent;
    });
    const res = await get(url);
    const body = await res.body;
    expect(body.split('\n\n').filter(Boolean).map((frame) => JSON.parse(frame.slice('data: '.length)).data.delta ?? 'done')).toEqual([
      'part 0 ',
      'part 1 ',
      'part 2 ',
      'part 3 ',
      'part 4 ',
      'done',
    ]);
    // The five deltas went in one write; the last frame went with the end of the response.
    expect(writes()).toBe(1);
  });

  it('sends the headers at once when no frame is ready yet', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const { url } = await serve(async function* () {
      await released;
      yield delta(0);
    });
    const res = await get(url);
    expect(res.status).toBe(200);
    release();
    expect(await res.body).toBe(`data: ${JSON.stringify(delta(0))}\n\n`);
  });
});

describe('a client that stops reading', () => {
  const STALL_MS = 50;
  const sockets: Socket[] = [];
  afterEach(() => sockets.splice(0).forEach((socket) => socket.destroy()));

  /**
   * Serves `events(res)` through writeStream to a client that sends its request and then reads
   * nothing; resolves with the server's response once writeStream has returned.
   */
  async function stalled(events: (res: ServerResponse) => AsyncIterable<AgentEvent>): Promise<{ res: ServerResponse; maxQueued: number }> {
    let maxQueued = 0;
    const served = new Promise<ServerResponse>((resolve) => {
      server = createServer((_req, res) => {
        const write = res.write.bind(res);
        res.write = ((...args: Parameters<typeof write>) => {
          const accepted = write(...args);
          maxQueued = Math.max(maxQueued, res.writableLength);
          return accepted;
        }) as typeof res.write;
        void writeStream(res, {}, events(res), { wire: 'sse', vercel: undefined }, STALL_MS).then(() => resolve(res));
      });
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const socket = connect((server!.address() as AddressInfo).port, '127.0.0.1');
    sockets.push(socket);
    socket.pause();
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    const res = await served;
    return { res, maxQueued };
  }

  const big = (i: number): AgentEvent => ({ type: 'message_delta', data: { id: 'm1', delta: `${i} ${'x'.repeat(16 * 1024)}` } });

  it('holds a bounded backlog for it, takes no more of the turn meanwhile, and hangs up on it', async () => {
    // 64 MiB: more than the kernel's socket buffers on both ends take, so the rest waits in the server.
    const total = 4096;
    let pulled = 0;
    const { res, maxQueued } = await stalled(async function* () {
      for (; pulled < total; pulled++) yield big(pulled);
    });
    expect(pulled).toBeLessThan(total);
    expect(maxQueued).toBeLessThan(1024 * 1024);
    if (!res.destroyed) await once(res, 'close');
    expect(res.writableFinished).toBe(false);
  });

  it('hangs up on it when the rest of an ended stream waits for it', async () => {
    const { res } = await stalled(async function* (res) {
      // Until the kernel takes no more; then the stream ends with what the client has not taken queued.
      for (let i = 0; res.writableLength === 0; i++) {
        yield delta(i);
        await new Promise(setImmediate);
      }
      yield { type: 'done', data: { stop_reason: 'end_turn', stopReason: 'end_turn' } } as AgentEvent;
    });
    expect(res.writableEnded).toBe(true);
    if (!res.destroyed) await once(res, 'close');
    expect(res.writableFinished).toBe(false);
  });
});
