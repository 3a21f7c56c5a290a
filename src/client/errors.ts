/**
 * A failed call: the server's error envelope (spec §7) as an exception, or a transport failure
 * (`status.code` 0, type `network`) when no reply arrived at all.
 */
export class AgentdError extends Error {
  readonly status: { code: number; type?: string; message: string };
  /** From `retry-after`, when the server (or the provider behind it) asked to wait. */
  readonly retryAfterMs: number | undefined;
  readonly body: unknown;

  constructor(status: { code: number; type?: string; message: string }, options: { retryAfterMs?: number | undefined; body?: unknown; cause?: unknown } = {}) {
    super(`${status.code}${status.type ? ` ${status.type}` : ''}: ${status.message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AgentdError';
    this.status = status;
    this.retryAfterMs = options.retryAfterMs;
    this.body = options.body;
  }

  /**
   * Worth trying again: rate limits, server-side and transport failures, timeouts, and a session
   * busy with another turn (it is free again once that turn ends).
   */
  get retryable(): boolean {
    const code = this.status.code;
    if (this.sessionBusy) return true;
    // A request the model provider refused is refused again.
    return (code === 0 || code === 408 || code === 429 || code >= 500) && this.status.type !== 'upstream-rejected';
  }

  /** The session runs another turn: no turn ran for this request. */
  get sessionBusy(): boolean {
    return this.status.code === 409 && this.status.type === 'session-busy';
  }
}

export function retryAfterMs(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}
