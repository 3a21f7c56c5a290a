import { createServer, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
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
