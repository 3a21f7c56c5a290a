import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { AgentEvent } from '../contract/events.ts';
import { ndjsonLine, sseFrame } from '../stream/native-frames.ts';
import { VERCEL_DONE, VERCEL_FORMAT_HEADERS, VERCEL_HEADERS, VercelProjector, vercelSseFrame, type VercelProjectorOptions } from '../stream/vercel.ts';
import type { Wire } from './negotiate.ts';

const CONTENT_TYPE: Record<Exclude<Wire, 'json'>, string> = {
  sse: 'text/event-stream; charset=utf-8',
  ndjson: 'application/x-ndjson; charset=utf-8',
  jsonl: 'application/jsonl; charset=utf-8',
};

/** Idle streams get an SSE comment now and then so proxies do not cut them. */
const KEEPALIVE_MS = 15_000;

export interface StreamTarget {
  wire: Exclude<Wire, 'json'>;
  vercel: VercelProjectorOptions | undefined;
}

/**
 * Writes a turn's events to the socket in the negotiated projection. Writing stops when the
 * client goes away; the turn itself keeps running (its reader is the only thing that ends).
 */
export async function writeStream(res: ServerResponse, headers: OutgoingHttpHeaders, events: AsyncIterable<AgentEvent>, target: StreamTarget): Promise<void> {
  const projector = target.vercel ? new VercelProjector(target.vercel) : undefined;
  res.writeHead(200, {
    ...headers,
    ...(projector ? (target.wire === 'sse' ? VERCEL_HEADERS : VERCEL_FORMAT_HEADERS) : {}),
    'content-type': CONTENT_TYPE[target.wire],
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  });
  let closed = false;
  res.on('close', () => (closed = true));
  const out = new IterationWriter(res);
  const keepalive = target.wire === 'sse' ? setInterval(() => out.send(': keepalive\n\n'), KEEPALIVE_MS) : undefined;
  const encode = (chunk: unknown) => (target.wire === 'sse' ? vercelSseFrame(chunk as never) : `${JSON.stringify(chunk)}\n`);
  try {
    for await (const event of events) {
      if (closed) break;
      if (projector) {
        for (const chunk of projector.push(event)) out.send(encode(chunk));
      } else {
        out.send(target.wire === 'sse' ? sseFrame(event) : ndjsonLine(event));
      }
    }
    if (!closed && projector && target.wire === 'sse') out.send(VERCEL_DONE);
  } finally {
    clearInterval(keepalive);
    out.end();
  }
}

/**
 * The frames written in one iteration of the event loop go to the socket as one write, in its
 * check phase, the headers with the first. Under load a turn's events arrive one message from its
 * thread at a time, and a write per frame (or per tick: the same, each message is a tick of its
 * own) cost the SSE echo 12% of the server thread's CPU (BENCHMARKS.md, "One socket write per
 * event-loop iteration"). Nothing waits longer than the rest of the iteration that produced it.
 */
class IterationWriter {
  readonly #res: ServerResponse;
  #pending = '';
  #scheduled = false;
  #flushed = false;

  constructor(res: ServerResponse) {
    this.#res = res;
    // The headers leave in this iteration even when no frame does (a turn relayed from another replica).
    this.#schedule();
  }

  send(text: string): void {
    this.#pending += text;
    this.#schedule();
  }

  end(): void {
    const text = this.#take();
    if (!this.#res.writableEnded && !this.#res.destroyed) this.#res.end(text);
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.#flush());
  }

  #flush(): void {
    this.#scheduled = false;
    const text = this.#take();
    if (this.#res.writableEnded || this.#res.destroyed) return;
    if (text) this.#res.write(text);
    else if (!this.#flushed) this.#res.flushHeaders();
    this.#flushed = true;
  }

  #take(): string {
    const text = this.#pending;
    this.#pending = '';
    return text;
  }
}
