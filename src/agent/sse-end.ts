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

function isLastEvent(line: string): boolean {
  if (line.startsWith('event:')) return LAST_TYPES.has(line.slice(6).trim());
  if (!line.startsWith('data:')) return false;
  const data = line.slice(5).trim();
  if (data === '[DONE]') return true;
  const type = TYPE.exec(data)?.[1];
  return type !== undefined && LAST_TYPES.has(type);
}

function untilLastEvent(): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  let line = '';
  let last = false;
  return new TransformStream({
    transform(chunk, controller) {
      controller.enqueue(chunk);
      const text = decoder.decode(chunk, { stream: true });
      let from = 0;
      for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', from)) {
        line += text.slice(from, at);
        from = at + 1;
        const whole = line.endsWith('\r') ? line.slice(0, -1) : line;
        line = '';
        if (whole === '') {
          // The blank line that ends the event: after the last one, nothing more is read.
          if (last) return controller.terminate();
        } else if (!last && isLastEvent(whole)) last = true;
      }
      line += text.slice(from);
    },
  });
}

/** The response as it came, its body ending at the stream's last event when it is an event stream. */
export function endingAtLastEvent(response: Response): Response {
  const type = response.headers.get('content-type') ?? '';
  if (!response.body || !/^\s*text\/event-stream/i.test(type)) return response;
  return new Response(response.body.pipeThrough(untilLastEvent()), { status: response.status, statusText: response.statusText, headers: response.headers });
}
