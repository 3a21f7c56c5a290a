/**
 * Replaces every occurrence of the run's secret values in text. Built per run from `secrets`,
 * `credentials` and the provider key in use, so a value echoed by a model or an upstream error
 * never reaches a response, a log line or the database.
 */
export type Redactor = <T>(value: T) => T;

const MASK = '[redacted]';
const identity: Redactor = (value) => value;

export function makeRedactor(values: Iterable<string | undefined>): Redactor {
  // Short values would mask ordinary words; a real secret is longer than this.
  const secrets = [...new Set([...values].filter((v): v is string => typeof v === 'string' && v.length >= 6))].sort((a, b) => b.length - a.length);
  if (secrets.length === 0) return identity;
  const redactString = (text: string) => {
    let out = text;
    for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(MASK);
    return out;
  };
  const walk = (value: unknown): unknown => {
    if (typeof value === 'string') return redactString(value);
    if (Array.isArray(value)) return value.map(walk);
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v)]));
    }
    return value;
  };
  return <T>(value: T) => walk(value) as T;
}
