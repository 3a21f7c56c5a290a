/**
 * Replaces every occurrence of the run's secret values in text. Built per run from `secrets`,
 * `credentials` and the provider key in use, so a value echoed by a model or an upstream error
 * never reaches a response, a log line or the database.
 */
import type { AgentEvent } from '../contract/events.ts';

export type Redactor = <T>(value: T) => T;

const MASK = '[redacted]';
const identity: Redactor = (value) => value;

const UNRESERVED = /^[\w.~-]*$/;

/**
 * A secret as text may quote it: as it is, and as it reads once escaped on its way somewhere. A
 * value put into an MCP server's url comes back percent-encoded (the URL parser encodes a space,
 * `"`, `<`, `{`, non-ASCII…), a value inside JSON text comes back with `"` and `\\` escaped, so a
 * server that echoes its URL or its headers as JSON would otherwise slip the value past the mask.
 */
export function secretForms(value: string): string[] {
  // Letters, digits and `-._~` read the same escaped every way: nearly every key is such a value.
  if (UNRESERVED.test(value)) return [value];
  const forms = new Set([value]);
  const add = (form: () => string) => {
    try {
      forms.add(form());
    } catch {
      // Not encodable that way (a lone surrogate): it cannot come back in that form either.
    }
  };
  add(() => JSON.stringify(value).slice(1, -1));
  add(() => encodeURIComponent(value));
  add(() => encodeURI(value));
  add(() => new URLSearchParams({ v: value }).toString().slice(2));
  // As the WHATWG URL parser writes it in a query and in a path (it leaves more as it is than encodeURI).
  if (!value.includes('#')) add(() => new URL(`http://h/?${value}`).search.slice(1));
  if (!/[?#]/.test(value)) add(() => new URL(`http://h/${value}`).pathname.slice(1));
  return [...forms];
}

/** The texts to mask for these secret values, every form of each, longest first. */
export function secretList(values: Iterable<string | undefined>): string[] {
  // Short values would mask ordinary words; a real secret is longer than this.
  const raw = [...values].filter((v): v is string => typeof v === 'string' && v.length >= 6);
  return [...new Set(raw.flatMap(secretForms))].filter((v) => v.length >= 6).sort((a, b) => b.length - a.length);
}

/** `text` with each of `secrets` masked, in the order given: longest first, so no part of one is left. */
export function maskIn(secrets: readonly string[], text: string): string {
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
    if (Array.isArray(value)) {
      let copy: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const redacted = walk(value[i]);
        if (redacted !== value[i]) (copy ??= [...value])[i] = redacted;
      }
      return copy ?? value;
    }
    // An object's keys are text the caller or a model chose too (`tags: {"<secret>": …}` would
    // otherwise reach the stored turn and a span attribute's name): masked as its values are.
    // Rebuilt with fromEntries, which defines each key: an own `__proto__` stays a key.
    const entries = Object.entries(value);
    let copy: [string, unknown][] | undefined;
    for (let i = 0; i < entries.length; i++) {
      const [key, item] = entries[i]!;
      const name = redactString(key);
      const redacted = walk(item);
      if (!copy && (name !== key || redacted !== item)) copy = entries.slice(0, i);
      copy?.push([name, redacted]);
    }
    return copy ? Object.fromEntries(copy) : value;
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
  const given = [...values];
  const secrets = secretList(given);
  if (secrets.length === 0) return (event) => [event];
  const redact = makeRedactor(given);
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
