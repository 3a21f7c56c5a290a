import { AgentdError, retryAfterMs } from './errors.ts';

/** Where the server is and who is calling. Only `fetch` is used, so this runs in browsers too. */
export interface ClientOptions {
  /** e.g. `http://127.0.0.1:8787` */
  baseUrl: string;
  apiKey: string;
  /** Absent: the `/api` surface acts in the key's own project; invoke and inspect need one. */
  projectId?: string;
  /** Defaults to the global `fetch`. */
  fetch?: typeof fetch;
  /** Sent with every request. */
  headers?: Record<string, string>;
}

export interface RequestOptions {
  body?: unknown;
  /** A body sent as is (a file), with its content type. */
  raw?: { data: BodyInit; contentType: string };
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
}

/** Sends one request and returns the reply whatever its status; a transport failure throws. */
export async function send(options: ClientOptions, method: string, path: string, request: RequestOptions = {}): Promise<Response> {
  // An id in the path may be "." or ".." (a session's may, by the spec's pattern), and every URL,
  // fetch's and a browser's, %2E or not, reads those as steps through the path: `sessions/../files`
  // is `/api/files`, `sessions/.` the list of sessions. That would reach another resource than the
  // one named, so it is not sent.
  const step = path.split('/').find((part) => part === '.' || part === '..');
  if (step !== undefined) {
    throw new AgentdError({
      code: 400,
      type: 'invalid-request',
      message: `the id "${step}" cannot be named in a URL path (${method} /${path}): a URL reads it as a step through the path, to another resource; the request was not sent`,
    });
  }
  // A key pasted with a stray character (a zero-width space, "…", a space) would make fetch throw
  // before anything is sent, a TypeError that reads as the server being out of reach.
  const stray = /[^\x21-\x7E]/u.exec(options.apiKey);
  if (stray) {
    throw new AgentdError({
      code: 401,
      type: 'unauthenticated',
      message: `the API key holds U+${stray[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')} at character ${stray.index + 1}, which no key has (a key is printable ASCII without spaces): copy it again; the request was not sent`,
    });
  }
  const url = new URL(path, options.baseUrl.endsWith('/') ? options.baseUrl : `${options.baseUrl}/`);
  if (options.projectId) url.searchParams.set('project_id', options.projectId);
  for (const [key, value] of Object.entries(request.query ?? {})) if (value !== undefined) url.searchParams.set(key, String(value));
  const headers: Record<string, string> = { authorization: `ApiKey ${options.apiKey}`, ...options.headers, ...request.headers };
  let body: BodyInit | undefined;
  if (request.raw) {
    body = request.raw.data;
    headers['content-type'] = request.raw.contentType;
  } else if (request.body !== undefined) {
    body = JSON.stringify(request.body);
    headers['content-type'] = 'application/json';
  }
  try {
    return await (options.fetch ?? fetch)(url, { method, headers, ...(body === undefined ? {} : { body }), ...(request.signal ? { signal: request.signal } : {}) });
  } catch (error) {
    if (request.signal?.aborted) throw request.signal.reason ?? error;
    throw new AgentdError({ code: 0, type: 'network', message: `could not reach ${url.origin}: ${(error as Error).message}; is agentd running there?` }, { cause: error });
  }
}

/** The error a non-2xx reply stands for: its envelope when it has one. */
export async function failure(res: Response): Promise<AgentdError> {
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's page): the text is the message.
  }
  const status = (body as { status?: { code?: unknown; type?: unknown; message?: unknown } } | undefined)?.status;
  return new AgentdError(
    {
      code: res.status,
      ...(typeof status?.type === 'string' ? { type: status.type } : {}),
      message: typeof status?.message === 'string' ? status.message : text.slice(0, 500) || res.statusText,
    },
    { retryAfterMs: retryAfterMs(res.headers.get('retry-after')), body },
  );
}

/** A JSON call: the parsed reply, or the AgentdError its failure stands for. */
export async function call<T>(options: ClientOptions, method: string, path: string, request: RequestOptions = {}): Promise<T> {
  const res = await send(options, method, path, request);
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}
