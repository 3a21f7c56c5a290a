/**
 * Replaces every occurrence of the run's secret values in text. Built per run from `secrets`,
 * `credentials` and the provider key in use, so a value echoed by a model or an upstream error
 * never reaches a response, a log line or the database.
 */
import type { AgentEvent } from '../contract/events.ts';

export type Redactor = <T>(value: T) => T;

const MASK = '[redacted]';
const identity: Redactor = (value) => value;

function secretList(values: Iterable<string | undefined>): string[] {
  // Short values would mask ordinary words; a real secret is longer than this.
  return [...new Set([...values].filter((v): v is string => typeof v === 'string' && v.length >= 6))].sort((a, b) => b.length - a.length);
}

function maskIn(secrets: readonly string[], text: string): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(MASK);
  return out;
}

export function makeRedactor(values: Iterable<string | undefined>): Redactor {
  const secrets = secretList(values);
  if (secrets.length === 0) return identity;
  const redactString = (text: string) => maskIn(secrets, text);
  // Copy on write: a value with no secret in it comes back as it is, which is nearly every event
  // of a turn, so a turn does not rebuild each of its events.
  const walk = (value: unknown): unknown => {
    if (typeof value === 'string') return redactString(value);
    if (!value || typeof value !== 'object') return value;
    let copy: Record<string, unknown> | undefined;
    for (const [key, item] of Object.entries(value)) {
      const redacted = walk(item);
      if (redacted !== item) (copy ??= (Array.isArray(value) ? [...value] : { ...value }) as Record<string, unknown>)[key] = redacted;
    }
    return copy ?? value;
  };
  return <T>(value: T) => walk(value) as T;
}

/**
 * An error as a log line may show it. Its message, stack and cause are not enumerable, so a
 * redactor's walk would pass them by, and an upstream error can quote the key it was sent.
 */
export function redactError(error: unknown, redact: Redactor): unknown {
  if (!(error instanceof Error)) return redact(error);
  return {
    type: error.name,
    message: redact(error.message),
    stack: redact(error.stack),
    ...(error.cause !== undefined ? { cause: redactError(error.cause, redact) } : {}),
  };
}

/**
 * The redactor for a turn's events. Text arrives in deltas, and a secret split across two of them
 * passes a per-event check, so each text holds back a tail that could begin a secret until a later
 * delta settles it or its end event releases it.
 */
export function makeEventRedactor(values: Iterable<string | undefined>): (event: AgentEvent) => AgentEvent[] {
  const secrets = secretList(values);
  if (secrets.length === 0) return (event) => [event];
  const redact = makeRedactor(secrets);
  const held = new Map<string, string>();
  const tailToHold = (text: string) => {
    for (let n = Math.min(text.length, secrets[0]!.length - 1); n > 0; n--) {
      const tail = text.slice(text.length - n);
      if (secrets.some((secret) => secret.startsWith(tail))) return n;
    }
    return 0;
  };
  return (event) => {
    switch (event.type) {
      case 'message_delta':
      case 'thought_delta': {
        const text = maskIn(secrets, (held.get(event.data.id) ?? '') + event.data.delta);
        const keep = tailToHold(text);
        held.set(event.data.id, text.slice(text.length - keep));
        const ready = text.slice(0, text.length - keep);
        return ready ? [{ ...event, data: { ...event.data, delta: ready } }] : [];
      }
      case 'message_end':
      case 'thought_end': {
        const rest = held.get(event.data.id);
        held.delete(event.data.id);
        if (!rest) return [event];
        const type = event.type === 'message_end' ? 'message_delta' : 'thought_delta';
        return [{ type, data: { id: event.data.id, delta: rest } }, event];
      }
      default:
        return [redact(event)];
    }
  };
}
