import { finished, type Readable } from 'node:stream';

/**
 * What a source is destroyed with when its reader cancels: one error, made once. Destroyed without
 * one, a body undici has read to its end but nobody to its `end` event (an event stream let go at
 * its last event, every streamed model answer) makes a fresh abort error and formats its stack
 * trace: 3% of the server's CPU on an SSE echo (BENCHMARKS.md).
 */
const LET_GO = new Error('the reader let the stream go');

/**
 * A Node stream of bytes as a web `ReadableStream`, read from `source` only when the reader asks
 * (pull). Node's own adapter, `Readable.toWeb`, lets the stream flow and enqueues from its `data`
 * events: cancelled with a read pending and a chunk still to come — what a pipe does when its
 * reader stops early (a provider's, when a turn stops reading a model's answer; the ACP
 * connection's, when a harness is let go) — it throws ERR_INVALID_STATE out of the event handler,
 * uncaught, and the process ends (nodejs/node#54205, open). Read on demand, nothing comes after a
 * cancel. Each chunk is copied, as Node's adapter does: a reader may keep it.
 */
export function webReadable(source: Readable): ReadableStream<Uint8Array> {
  let wake: (() => void) | undefined;
  let ended: { error?: unknown } | undefined;
  let cancelled = false;
  const rouse = () => {
    const resume = wake;
    wake = undefined;
    resume?.();
  };
  source.on('readable', rouse);
  finished(source, (error) => {
    ended = { error };
    rouse();
  });
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        if (cancelled) return;
        const chunk = source.read() as Buffer | null;
        if (chunk !== null) return controller.enqueue(new Uint8Array(chunk));
        if (ended) return ended.error ? controller.error(ended.error) : controller.close();
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
    cancel() {
      cancelled = true;
      source.destroy(LET_GO);
      rouse();
    },
  });
}
