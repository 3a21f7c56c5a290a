import { bodyText, type Answers, type HttpAnswer } from './mcp-failure.ts';

/**
 * fetch for one server's transport, for what the SDK leaves open:
 *
 * - It waits for a request's answer until the call's deadline (AGENTD_MCP_CALL_TIMEOUT_MS, two
 *   minutes by default) even once the event stream that was to carry it has ended, closed or cut
 *   off: so when one ends, an error answer is added at its end for each request it may have owed
 *   (the request of a Streamable HTTP POST; every request sent, for the stream of an `sse`
 *   server). An answer that already came makes its added one an answer to nothing, which the SDK
 *   drops.
 * - It reads a message whole however large, before any cap on a tool's output applies: a server
 *   sending gigabytes would fill the heap of a server every project shares. A message (a JSON
 *   body, an event of a stream) past MCP_MAX_MESSAGE_BYTES ends its stream the same way, its
 *   answer an error that says so.
 * - Its errors say what went wrong in its own words, an HTTP error's whole body included: so the
 *   answer to the request sent last is noted in `answers` when no MCP client can read it (an
 *   HTTP error, a redirect, a web page), for a failure to say what the server answered instead.
 */
export function answeringFetch(type: 'http' | 'sse', answers: Answers, dispatcher: object | undefined): typeof fetch {
  const sent = new Set<string | number>();
  return async (input, init) => {
    const id = requestId(init);
    // A request that asks for an answer (http's optional GET stream and a closing DELETE do not);
    // for an `sse` server, its stream's GET too. A failure is the last one's.
    const asks = id !== undefined || (type === 'sse' && (init?.method ?? 'GET') === 'GET');
    if (asks) answers.odd = undefined;
    // Refused as the SDK asks, but seen first, so the refusal can name it.
    const refuse = init?.redirect === 'error';
    // Node's fetch takes undici's `dispatcher`, which the DOM's RequestInit does not name.
    let response = await fetch(input, { ...init, ...(refuse ? { redirect: 'manual' } : {}), ...(dispatcher ? { dispatcher } : {}) } as RequestInit);
    if (refuse && response.status >= 300 && response.status < 400) {
      void response.body?.cancel().catch(() => undefined);
      if (asks) answers.odd = { status: response.status, contentType: '' };
      throw new TypeError(`the server answered HTTP ${response.status}, a redirect, which is not followed`);
    }
    if (asks) response = await noted(response, type === 'sse' ? (init?.method === 'POST' ? undefined : 'text/event-stream') : 'application/json or text/event-stream', answers);
    if (id !== undefined) sent.add(id);
    const body = response.body;
    if (!body) return response;
    const events = response.headers.get('content-type')?.includes('text/event-stream') === true;
    const owed = () => (init?.method === 'POST' ? (id === undefined ? [] : [id]) : [...sent]);
    const reader = body.getReader();
    let cancelled = false;
    /** Bytes of the message being read: since the last event's end, or of the whole body. */
    let message = 0;
    let before: number[] = [];
    const answered = new ReadableStream<Uint8Array>({
      async pull(controller) {
        let why = ENDED;
        let failure: unknown;
        try {
          const { done, value } = await reader.read();
          if (!done) {
            const end = events ? lastEventEnd(value, before) : -1;
            message = end === -1 ? message + value.length : value.length - end;
            before = [...before, ...value.subarray(-2)].slice(-2);
            if (message <= MCP_MAX_MESSAGE_BYTES) return controller.enqueue(value);
            why = TOO_LARGE;
            failure = new Error(TOO_LARGE);
            void reader.cancel().catch(() => undefined);
          }
        } catch (error) {
          // Cut off: a stream is told below, as an end is.
          failure = error;
        }
        // Closed by the client itself: nobody reads on.
        if (cancelled) return;
        if (!events) {
          // A JSON body is read whole by the SDK: its failure, with its reason, is the call's.
          if (failure === undefined) controller.close();
          else controller.error(failure);
          return;
        }
        // The blank line ends an event the server broke off mid-way, so ours is read on its own.
        const errors = owed().map((owedId) => `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: owedId, error: { code: -32000, message: why } })}\n\n`);
        controller.enqueue(new TextEncoder().encode(`\n\n${errors.join('')}`));
        controller.close();
      },
      cancel: (reason) => {
        cancelled = true;
        return reader.cancel(reason);
      },
    });
    return new Response(answered, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/** Enough of an HTTP error's body for its reason; the rest is not read. */
const MAX_ERROR_BODY = 64 * 1024;

/**
 * The response, noted in `answers` when no MCP client can read it: an HTTP error (whose body is
 * read here, its start kept as the reason), or content of a type other than `expected`.
 */
async function noted(response: Response, expected: string | undefined, answers: Answers): Promise<Response> {
  const contentType = response.headers.get('content-type') ?? '';
  if (response.ok) {
    // 202 answers a notification; a request's answer then comes on a stream.
    if (expected && response.status !== 202 && !expected.split(' or ').some((t) => contentType.includes(t))) answers.odd = { status: response.status, contentType, expected };
    return response;
  }
  const body = await headOf(response, MAX_ERROR_BODY);
  const text = bodyText(body, contentType);
  answers.odd = { status: response.status, contentType, ...(text ? { text } : {}) } satisfies HttpAnswer;
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** The first `max` bytes of a body, as text; the rest is not waited for. */
async function headOf(response: Response, max: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < max) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } catch {
    // Cut off: what came says enough.
  } finally {
    void reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).subarray(0, max).toString('utf8');
}

/** Far above any tool listing or answer a model could use (its output is cut to MCP_MAX_OUTPUT_BYTES anyway). */
export const MCP_MAX_MESSAGE_BYTES = 32 * 1024 * 1024;
const TOO_LARGE = `the server sent a message of more than ${MCP_MAX_MESSAGE_BYTES / 1024 / 1024} MB`;

/**
 * Where the last event of `chunk` ends (just past its blank line), or -1 when none ends in it.
 * `before` holds the last two bytes read before it: a blank line may begin in the chunk before.
 */
function lastEventEnd(chunk: Uint8Array, before: readonly number[]): number {
  const at = (i: number) => (i >= 0 ? chunk[i] : before[before.length + i]);
  for (let i = chunk.length - 1; i >= 0; i--) if (chunk[i] === 10 && (at(i - 1) === 10 || (at(i - 1) === 13 && at(i - 2) === 10))) return i + 1;
  return -1;
}

const ENDED = 'the server closed the connection before it answered';

/** The id of the JSON-RPC request a POST carries, which its answer names; undefined for a notification or for an answer of the client's. */
function requestId(init: RequestInit | undefined): string | number | undefined {
  if (init?.method !== 'POST' || typeof init.body !== 'string') return undefined;
  try {
    const message = JSON.parse(init.body) as { id?: unknown; method?: unknown };
    return typeof message.method === 'string' && (typeof message.id === 'number' || typeof message.id === 'string') ? message.id : undefined;
  } catch {
    return undefined;
  }
}
