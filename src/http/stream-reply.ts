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

/**
 * What a stream may have waiting for its client before the writer stops taking the turn's events
 * until the client takes some: the turn keeps every event anyway (LiveTurn), so a reader that
 * lags costs this much more, not a second copy of the turn in the socket's buffer.
 */
const BACKLOG_BYTES = 64 * 1024;

/**
 * How long a client may leave what is waiting for it untaken before the server hangs up: a client
 * that stopped reading without closing would otherwise hold its connection and the turn's events
 * for good. The turn goes on; a client that comes back resumes it.
 */
const STALL_MS = 60_000;

export interface StreamTarget {
  wire: Exclude<Wire, 'json'>;
  vercel: VercelProjectorOptions | undefined;
}

/**
 * Writes a turn's events to the socket in the negotiated projection. Writing stops when the
 * client goes away; the turn itself keeps running (its reader is the only thing that ends).
 */
export async function writeStream(res: ServerResponse, headers: OutgoingHttpHeaders, events: AsyncIterable<AgentEvent>, target: StreamTarget, stallMs = STALL_MS): Promise<void> {
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
  const out = new IterationWriter(res, stallMs);
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
      if (out.backlogged) await out.taken();
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
  readonly #stallMs: number;
  #pending = '';
  #scheduled = false;
  #flushed = false;

  constructor(res: ServerResponse, stallMs: number) {
    this.#res = res;
    this.#stallMs = stallMs;
    // The headers leave in this iteration even when no frame does (a turn relayed from another replica).
    this.#schedule();
  }

  send(text: string): void {
    this.#pending += text;
    this.#schedule();
  }

  /** More is waiting for the client than a stream may hold for it. */
  get backlogged(): boolean {
    return this.#pending.length + this.#res.writableLength > BACKLOG_BYTES;
  }

  /** Resolves once the client has taken what waits for it, or the connection is gone. */
  async taken(): Promise<void> {
    this.#flush();
    if (this.#res.writableNeedDrain) await this.#watch('drain');
  }

  end(): void {
    const text = this.#take();
    if (this.#res.writableEnded || this.#res.destroyed) return;
    this.#res.end(text);
    // The end leaves with the rest; a client that never takes it must not keep the socket.
    if (!this.#res.writableFinished) void this.#watch('finish');
  }

  #watch(event: 'drain' | 'finish'): Promise<void> {
    const res = this.#res;
    return new Promise((resolve) => {
      const cut = setTimeout(() => res.destroy(), this.#stallMs).unref();
      const settle = (): void => {
        clearTimeout(cut);
        res.off(event, settle).off('close', settle);
        resolve();
      };
      res.on(event, settle).on('close', settle);
    });
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
