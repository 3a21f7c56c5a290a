/**
 * A model's event stream that ends at its last event. Every protocol names its last event (Chat
 * Completions' `data: [DONE]`, the Responses API's `response.completed`, `response.incomplete` and
 * `response.failed`, Anthropic's `message_stop`); the providers read on until the server closes
 * the body. A server or proxy that keeps it open after that event would hold a finished answer
 * until AGENTD_MODEL_TIMEOUT_MS and fail the turn. The bytes pass through unchanged; after the
 * chunk that completes the last event the body ends and the connection is let go.
 */
const LAST_TYPES = new Set(['response.completed', 'response.incomplete', 'response.failed', 'message_stop']);
const TYPE = /"type"\s*:\s*"([^"]+)"/;
/** Bytes every last event holds: a chunk without any of them is passed on unread. */
const HINTS = ['[DONE]', 'response.completed', 'response.incomplete', 'response.failed', 'message_stop'].map((hint) => Buffer.from(hint));
const NEWLINE = 0x0a;
const NOTHING = Buffer.alloc(0);

function isLastEvent(line: string): boolean {
  if (line.startsWith('event:')) return LAST_TYPES.has(line.slice(6).trim());
  if (!line.startsWith('data:')) return false;
  const data = line.slice(5).trim();
  if (data === '[DONE]') return true;
  const type = TYPE.exec(data)?.[1];
  return type !== undefined && LAST_TYPES.has(type);
}

/**
 * Reads the stream's lines as they pass, for the blank line that closes its last event. A chunk is
 * decoded only when it (with the line the chunk before left unfinished) holds a hint: a stream's
 * deltas, nearly all of its chunks, cost a byte search.
 */
class LastEventWatch {
  /** The line the chunks so far left unfinished (nearly always none: events end their chunks). */
  #carry: Buffer = NOTHING;
  #last = false;

  /** Whether the stream has ended with `chunk`. */
  endsWith(chunk: Uint8Array): boolean {
    const bytes = this.#carry.length > 0 ? Buffer.concat([this.#carry, chunk]) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const lastNewline = bytes.lastIndexOf(NEWLINE);
    const rest = lastNewline === bytes.length - 1 ? NOTHING : Buffer.from(bytes.subarray(lastNewline + 1));
    if (!this.#last && !HINTS.some((hint) => bytes.includes(hint))) {
      this.#carry = rest;
      return false;
    }
    const lines = bytes.toString('utf8', 0, lastNewline + 1).split('\n');
    this.#carry = rest;
    for (const raw of lines.slice(0, -1)) {
      const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      if (line === '') {
        if (this.#last) return true;
      } else if (!this.#last && isLastEvent(line)) this.#last = true;
    }
    return false;
  }
}

/** The response as it came, its body ending at the stream's last event when it is an event stream. */
export function endingAtLastEvent(response: Response): Response {
  const type = response.headers.get('content-type') ?? '';
  if (!response.body || !/^\s*text\/event-stream/i.test(type)) return response;
  const reader = response.body.getReader();
  const watch = new LastEventWatch();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) return controller.close();
      controller.enqueue(value);
      if (watch.endsWith(value)) {
        controller.close();
        await reader.cancel();
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
