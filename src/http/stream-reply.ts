import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { AgentEvent } from '../contract/events.ts';
import { ndjsonLine, sseFrame } from '../stream/native-frames.ts';
import { VERCEL_DONE, VERCEL_HEADERS, VercelProjector, vercelSseFrame, type VercelProjectorOptions } from '../stream/vercel.ts';
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
    ...(projector ? VERCEL_HEADERS : {}),
    'content-type': CONTENT_TYPE[target.wire],
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  });
  res.flushHeaders();
  let closed = false;
  res.on('close', () => (closed = true));
  const keepalive =
    target.wire === 'sse'
      ? setInterval(() => {
          if (!closed) res.write(': keepalive\n\n');
        }, KEEPALIVE_MS)
      : undefined;
  const encode = (chunk: unknown) => (target.wire === 'sse' ? vercelSseFrame(chunk as never) : `${JSON.stringify(chunk)}\n`);
  try {
    for await (const event of events) {
      if (closed) break;
      if (projector) {
        let out = '';
        for (const chunk of projector.push(event)) out += encode(chunk);
        if (out) res.write(out);
      } else {
        res.write(target.wire === 'sse' ? sseFrame(event) : ndjsonLine(event));
      }
    }
    if (!closed && projector && target.wire === 'sse') res.write(VERCEL_DONE);
  } finally {
    clearInterval(keepalive);
    if (!closed) res.end();
  }
}
