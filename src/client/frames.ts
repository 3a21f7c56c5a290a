/**
 * Reads a streamed reply into its frames: server-sent events (`data:` lines, events separated by a
 * blank line; the Vercel stream's `[DONE]` ends it) or newline-delimited JSON.
 */
export async function* readFrames<T>(body: ReadableStream<Uint8Array>, kind: 'sse' | 'ndjson'): AsyncGenerator<T> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      const separator = kind === 'sse' ? /\r?\n\r?\n/ : /\r?\n/;
      let match: RegExpExecArray | null;
      while ((match = separator.exec(buffer))) {
        const chunk = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        const frame = kind === 'sse' ? sseData(chunk) : chunk.trim();
        if (frame === undefined || frame === '') continue;
        if (frame === '[DONE]') return;
        yield JSON.parse(frame) as T;
      }
      if (done) break;
    }
    const rest = kind === 'sse' ? sseData(buffer) : buffer.trim();
    if (rest && rest !== '[DONE]') yield JSON.parse(rest) as T;
  } finally {
    reader.releaseLock();
  }
}

/** The data of one SSE event (its `data:` lines joined), or undefined for a comment or an empty event. */
function sseData(event: string): string | undefined {
  const lines = event.split(/\r?\n/).filter((line) => line.startsWith('data:'));
  if (lines.length === 0) return undefined;
  return lines.map((line) => line.slice(line.startsWith('data: ') ? 6 : 5)).join('\n');
}
