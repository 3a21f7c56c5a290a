/**
 * Whether a Content-Type is JSON: `application/json` or a `+json` type such as
 * `application/problem+json`, with or without parameters; not `application/jsonl` or
 * `application/json-seq`, whose bodies are many values.
 */
export function isJsonType(contentType: string | undefined): boolean {
  return contentType !== undefined && /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(contentType);
}
