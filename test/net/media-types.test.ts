import { describe, expect, it } from 'vitest';
import { isJsonType } from '../../src/media-types.ts';

describe('isJsonType', () => {
  it('takes JSON and +json types with parameters, and nothing whose body is many values', () => {
    for (const type of ['application/json', 'Application/JSON; charset=utf-8', 'application/problem+json', 'application/vnd.api+json ;x=1']) expect(isJsonType(type), type).toBe(true);
    for (const type of [undefined, '', 'text/event-stream', 'application/jsonl', 'application/json-seq', 'application/x-ndjson', 'text/json']) expect(isJsonType(type), String(type)).toBe(false);
  });
});
