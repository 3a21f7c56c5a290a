import type { z } from 'zod';

/**
 * `schema`, carrying `value` as the example the API reference shows for it (/openapi.json puts it
 * on the request body it is, and Swagger UI's "Try it out" fills the body with it): a realistic
 * request the server takes as it is, instead of one made from the schema, which a refinement or
 * a value that must name something can refuse. Typed as the schema's input, so it cannot drift
 * from the shape; test/http/openapi-examples.test.ts sends each one.
 */
export const withExample = <S extends z.ZodType>(schema: S, value: z.input<S>): S => schema.meta({ examples: [value] });

/** The example `schema` carries (withExample), if any. */
export const exampleOf = (schema: z.ZodType): { value: unknown } | undefined => {
  const examples = schema.meta()?.examples;
  return Array.isArray(examples) && examples.length > 0 ? { value: examples[0] } : undefined;
};
