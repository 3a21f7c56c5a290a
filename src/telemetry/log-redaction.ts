/**
 * What no log line may show by name, whatever a call logs: a `secrets`, `credentials`, `apiKey` or
 * `api_key` field of any object at a line's top level (`log.warn({ template }, …)`), as pino's
 * `*.secrets`-style redact paths would hide it. pino runs a path redactor over every value of every
 * line, the message and plain numbers included, each cloned and stringified on its way: it made the
 * access line four times dearer. This looks at the line's few top-level objects once, for well under
 * a microsecond (`npm run bench:log-line`, BENCHMARKS.md "Log lines without pino's path
 * redaction"). Secret values wherever they appear are redact.ts's job, before logging.
 *
 * Request headers need no rule: Fastify's request serializer writes the method, URL, host and
 * addresses only, so an `Authorization` header never reaches a line (test/http/log-redaction.test.ts).
 * A child logger's bindings are not looked at (pino gives them no formatter): the only ones agentd
 * makes are Fastify's, which bind the request id.
 */
const FIELDS = ['secrets', 'credentials', 'apiKey', 'api_key'] as const;
const LOG_CENSOR = '[redacted]';

/**
 * Every own property of `value` (non-enumerable ones too, as an Error's message and stack) read as
 * a plain value onto an object of the same prototype, so the serializers read the copy as they
 * would the original. Accessors are read on the original: V8's `stack` reads empty elsewhere.
 */
function copied(value: object): object {
  const copy = Object.create(Object.getPrototypeOf(value)) as object;
  for (const [key, property] of Object.entries(Object.getOwnPropertyDescriptors(value))) {
    Object.defineProperty(copy, key, { value: (value as Record<string, unknown>)[key], enumerable: property.enumerable, writable: true, configurable: true });
  }
  return copy;
}

/** `value` with its credential fields censored: itself when it has none, else a copy, its own prototype kept. */
function censored(value: object): object {
  let copy: object | undefined;
  for (const field of FIELDS) {
    if (!(field in value)) continue;
    copy ??= copied(value);
    Object.defineProperty(copy, field, { value: LOG_CENSOR, enumerable: true, writable: true, configurable: true });
  }
  return copy ?? value;
}

/** A log line's fields as they may be written: pino's `formatters.log`. */
export function redactLogFields(fields: Record<string, unknown>): Record<string, unknown> {
  let copy: Record<string, unknown> | undefined;
  for (const key in fields) {
    const value = fields[key];
    if (typeof value !== 'object' || value === null) continue;
    const safe = censored(value);
    if (safe !== value) (copy ??= { ...fields })[key] = safe;
  }
  return copy ?? fields;
}
