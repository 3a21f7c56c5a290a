import type { z } from 'zod';

/** The parts of a zod schema's definition the walk below reads. */
interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  in?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
}

const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;
const isOptional = (schema: z.ZodType): boolean => (schema as unknown as { _zod: { optin?: string } })._zod.optin !== undefined;

/** Wrappers whose inner schema decides the shape of the value. */
const WRAPPERS = new Set(['optional', 'nullable', 'default', 'prefault', 'readonly', 'catch', 'nonoptional']);

/**
 * `value` with each `null` that stands for an optional field left unset taken out, as if the field
 * were absent: the reference's clients send `null` for what they do not set (`description`, `tags`
 * …), and replies here omit nulls the same way (spec §2.6). Only a field the schema declares
 * optional, and that does not take `null` itself, loses its null; a null inside free-form data (a
 * record's value, an `unknown`) is data and stays.
 */
export function withoutOptionalNulls(schema: z.ZodType, value: unknown): unknown {
  const def = defOf(schema);
  if (WRAPPERS.has(def.type)) return withoutOptionalNulls(def.innerType!, value);
  switch (def.type) {
    case 'pipe':
      return withoutOptionalNulls(def.in!, value);
    case 'array':
      return Array.isArray(value) ? value.map((item) => withoutOptionalNulls(def.element!, item)) : value;
    case 'union':
      // The option the value fits once its nulls are out, if any does.
      for (const option of def.options!) {
        const candidate = withoutOptionalNulls(option, value);
        if (candidate !== value && option.safeParse(candidate).success) return candidate;
      }
      return value;
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
      const shape = def.shape!;
      const kept = Object.entries(value).flatMap(([key, field]): Array<[string, unknown]> => {
        const fieldSchema = Object.hasOwn(shape, key) ? shape[key] : undefined;
        if (!fieldSchema) return [[key, field]];
        if (field === null) return isOptional(fieldSchema) && !fieldSchema.safeParse(null).success ? [] : [[key, field]];
        return [[key, withoutOptionalNulls(fieldSchema, field)]];
      });
      return Object.fromEntries(kept);
    }
    default:
      return value;
  }
}

/**
 * `schema.safeParse(value)`, reading a `null` given for an optional field as the field left out.
 * The second parse that does so runs only when the first fails, so a value that needs none costs
 * nothing more.
 */
export function safeParseNullsAbsent<S extends z.ZodType>(schema: S, value: unknown): z.ZodSafeParseResult<z.output<S>> {
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed : schema.safeParse(withoutOptionalNulls(schema, value));
}
