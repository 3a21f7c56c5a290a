import { Ajv2020, type Options } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';

/**
 * A JSON Schema 2020-12 validator for the OpenAPI document's schemas that also checks the formats
 * they name (`uri`, `date-time`, …), which Ajv alone ignores with a warning: a reply whose
 * `created_at` is no date, or a link that is no URI, then fails as the document says it should.
 */
export function schemaValidator(options: Options = {}): Ajv2020 {
  return formats.default(new Ajv2020({ strict: false, ...options }));
}
