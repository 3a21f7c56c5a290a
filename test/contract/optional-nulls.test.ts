import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { safeParseNullsAbsent, withoutOptionalNulls } from '../../src/contract/optional-nulls.ts';

/** A `null` for an optional field is the field left out; a null that is data stays (issue 18). */

const Row = z.strictObject({ id: z.string().optional(), data: z.record(z.string(), z.unknown()), note: z.string().nullish() });
const Body = z.strictObject({
  name: z.string(),
  description: z.string().optional(),
  repeats: z.number().default(1),
  rows: z.array(Row).optional(),
  anything: z.unknown().optional(),
  steps: z.union([z.array(z.string()), z.strictObject({ mode: z.string().optional() })]).optional(),
  nested: z.strictObject({ limit: z.number().optional() }).transform((v) => v).optional(),
});

describe('withoutOptionalNulls', () => {
  it('drops the nulls of optional fields, at any depth, and keeps the rest', () => {
    const given = {
      name: 'x',
      description: null,
      repeats: null,
      rows: [{ id: null, data: { expected: null }, note: null }],
      anything: null,
      steps: { mode: null },
      nested: { limit: null },
    };
    expect(withoutOptionalNulls(Body, given)).toEqual({
      name: 'x',
      rows: [{ data: { expected: null }, note: null }],
      // A field that takes anything takes null too: it is its value.
      anything: null,
      steps: {},
      nested: {},
    });
    expect(safeParseNullsAbsent(Body, given)).toMatchObject({ success: true, data: { repeats: 1, rows: [{ data: { expected: null }, note: null }] } });
  });

  it('keeps a null where a value is required, so the parse still fails there', () => {
    const parsed = safeParseNullsAbsent(Body, { name: null });
    expect(parsed.success).toBe(false);
    expect(parsed.error!.issues[0]!.path).toEqual(['name']);
  });

  it('leaves a value that parses as it is, unknown keys and all', () => {
    const value = { name: 'x', anything: null };
    expect(safeParseNullsAbsent(Body, value)).toMatchObject({ success: true, data: { anything: null } });
    expect(withoutOptionalNulls(Body, { name: 'x', surprise: null })).toEqual({ name: 'x', surprise: null });
  });
});
