/**
 * Values a JSON Schema (as /openapi.json gives it) says are valid, built by walking the schema, so
 * a test can send what a client generated from the document would send.
 *
 * One walk builds one value; `Variant` says which of the valid values to take: only the required
 * properties or every one, strings and numbers at their lower or upper bound, a `null` wherever
 * the schema allows one, and, through `k`, the k-th option of every enum and union (walks for
 * k = 0, 1, 2 … together take each option of each).
 */

export type JsonSchema = Record<string, any>;

/** Every operation of the document: its method (lower case, as the document keys it), path and operation object. */
export function operationsOf(doc: any): Array<[method: string, path: string, op: any]> {
  return Object.entries<any>(doc.paths).flatMap(([path, ops]) => Object.entries<any>(ops).map(([method, op]) => [method, path, op] as [string, string, any]));
}

/** Resolves the document's own `$ref`s (`#/components/…`). */
export function resolverOf(doc: any): (ref: string) => JsonSchema {
  return (ref) => ref.replace(/^#\//, '').split('/').reduce((node: any, key) => node[key], doc);
}

export interface Variant {
  k: number;
  /** Every optional property too, and one entry in each free-form map. */
  optional: boolean;
  bound: 'min' | 'max';
  /** `null` wherever the schema takes it. */
  nulls: boolean;
}

/**
 * A value the test chooses for one place (a real id, a turn that can run); undefined leaves it to
 * the schema. `walk` samples a schema of the hint's choosing (one branch of a union) at that place.
 */
export type Hint = (path: string, schema: JsonSchema, variant: Variant, walk: (schema: JsonSchema) => unknown) => unknown;

/** The variants a request body is sent in; `k` runs past every union and enum the document has. */
export function variants(maxOptions: number): Variant[] {
  const out: Variant[] = [];
  for (let k = 0; k < maxOptions; k++) {
    out.push({ k, optional: false, bound: 'min', nulls: false });
    out.push({ k, optional: true, bound: 'min', nulls: false });
    out.push({ k, optional: true, bound: 'max', nulls: false });
    out.push({ k, optional: true, bound: 'min', nulls: true });
  }
  return out;
}

/** The most options any enum or union in the schema offers: how many `k` it takes to meet them all. */
export function maxOptions(schema: unknown): number {
  if (Array.isArray(schema)) return Math.max(1, ...schema.map(maxOptions));
  if (typeof schema !== 'object' || schema === null) return 1;
  const s = schema as JsonSchema;
  const own = Math.max(1, s.enum?.length ?? 0, s.anyOf?.length ?? 0, s.oneOf?.length ?? 0, Array.isArray(s.type) ? s.type.length : 0);
  return Math.max(own, ...Object.values(s).map(maxOptions));
}

/** Where a pattern's last repeat allows at most n characters (`{0,127}`), the longest string it can take. */
function patternMax(pattern: string): number | undefined {
  const counts = [...pattern.matchAll(/\{(\d+),(\d+)\}/g)].map((m) => Number(m[2]) + 1);
  return counts.length ? Math.max(...counts) : undefined;
}

const FILLERS = ['a', 'i', '0', 'A', '_', 'x1'];

function stringSample(schema: JsonSchema, variant: Variant): string {
  if (schema.format === 'date-time') return new Date(Date.UTC(2026, 0, variant.bound === 'min' ? 1 : 31)).toISOString();
  if (schema.format === 'uri') return variant.bound === 'min' ? 'http://a.example' : `https://example.com/${'p'.repeat(Math.max(0, Math.min(schema.maxLength ?? 64, 2048) - 20))}`;
  const pattern = schema.pattern ? new RegExp(schema.pattern, 'u') : undefined;
  const min = schema.minLength ?? (pattern ? 1 : 0);
  const max = schema.maxLength ?? (pattern ? patternMax(schema.pattern) : undefined) ?? Math.max(min, 12);
  const length = variant.bound === 'min' ? min : max;
  for (const filler of FILLERS) {
    const value = filler.repeat(Math.ceil(length / filler.length)).slice(0, length);
    if (!pattern || pattern.test(value)) return value;
  }
  // A pattern none of the fillers meets at that length: the shortest that does, or fail loudly.
  for (const filler of FILLERS) for (let n = 1; n <= 8; n++) if (pattern!.test(filler.repeat(n))) return filler.repeat(n);
  throw new Error(`no sample for the pattern ${schema.pattern}`);
}

function numberSample(schema: JsonSchema, variant: Variant): number {
  const min = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : undefined);
  const max = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : undefined);
  if (variant.bound === 'min') return min ?? 0;
  // Unbounded: the largest a JSON number holds exactly, where a database column may end sooner.
  return max ?? Number.MAX_SAFE_INTEGER;
}

export interface Walk {
  variant: Variant;
  hint: Hint;
  /** Resolves `$ref`s (`#/components/…`, `#/$defs/…`). */
  resolve: (ref: string) => JsonSchema;
}

/** One value the schema accepts, as `walk.variant` picks it. */
export function sample(schema: JsonSchema, walk: Walk, path = ''): unknown {
  const { variant } = walk;
  if (schema.$ref) return sample({ ...walk.resolve(schema.$ref), ...withoutRef(schema) }, walk, path);
  const here: Hint = (at, ...rest) => (at === path ? undefined : walk.hint(at, ...rest));
  const hinted = walk.hint(path, schema, variant, (chosen) => sample(chosen, { ...walk, hint: here }, path));
  if (hinted !== undefined) return hinted;
  if ('const' in schema) return schema.const;
  if (schema.enum) return schema.enum[variant.k % schema.enum.length];
  const options: JsonSchema[] | undefined = schema.anyOf ?? schema.oneOf;
  // Alternatives beside the object's own properties narrow it (which fields it needs): one joins it.
  if (options && (schema.properties || schema.type === 'object')) {
    const { anyOf: _any, oneOf: _one, ...base } = schema;
    return sample(merged(base, options[variant.k % options.length]!), walk, path);
  }
  if (options) {
    const nonNull = options.filter((o) => o.type !== 'null');
    if (variant.nulls && nonNull.length < options.length) return null;
    return sample(nonNull[variant.k % nonNull.length]!, walk, path);
  }
  if (Array.isArray(schema.type)) {
    const nonNull = schema.type.filter((t: string) => t !== 'null');
    if (variant.nulls && nonNull.length < schema.type.length) return null;
    return sample({ ...schema, type: nonNull[variant.k % nonNull.length] }, walk, path);
  }
  switch (schema.type) {
    case 'string':
      return stringSample(schema, variant);
    case 'integer':
    case 'number':
      return numberSample(schema, variant);
    case 'boolean':
      return variant.k % 2 === 0;
    case 'null':
      return null;
    case 'array': {
      const count = variant.bound === 'min' ? (schema.minItems ?? 0) : Math.max(schema.minItems ?? 0, Math.min(schema.maxItems ?? 1, 1));
      return Array.from({ length: count }, (_, i) => sample(schema.items ?? {}, walk, `${path}[${i}]`));
    }
    case 'object':
      return objectSample(schema, walk, path);
    default:
      // `{}`: anything; a string is what most free-form values (a tag, a meta field) hold.
      return schema.properties ? objectSample(schema, walk, path) : 'v';
  }
}

function objectSample(schema: JsonSchema, walk: Walk, path: string): Record<string, unknown> {
  const required = new Set<string>(schema.required ?? []);
  const out: Record<string, unknown> = {};
  for (const [name, property] of Object.entries<JsonSchema>(schema.properties ?? {})) {
    if (!required.has(name) && !walk.variant.optional) continue;
    const value = sample(property, walk, path ? `${path}.${name}` : name);
    // A hint may leave a property out by answering OMIT.
    if (value !== OMIT) out[name] = value;
  }
  // A free-form map gets one entry when optional values are asked for.
  if (walk.variant.optional && !schema.properties && schema.additionalProperties !== false) {
    const names = schema.propertyNames ?? { type: 'string' };
    const key = stringSample({ minLength: 1, ...names }, { ...walk.variant, bound: 'min' }) || 'k';
    const value = sample(schema.additionalProperties === true ? {} : (schema.additionalProperties ?? {}), walk, `${path}.${key}`);
    if (value !== OMIT) out[key] = value;
  }
  return out;
}

/** An object schema with what one of its alternatives adds: its required names and narrower properties. */
function merged(base: JsonSchema, branch: JsonSchema): JsonSchema {
  const properties: Record<string, JsonSchema> = { ...base.properties };
  for (const [name, narrower] of Object.entries<JsonSchema>(branch.properties ?? {})) properties[name] = { ...properties[name], ...narrower };
  return { ...base, properties, required: [...new Set([...(base.required ?? []), ...(branch.required ?? [])])] };
}

/** What a hint answers to leave an optional property out. */
export const OMIT = Symbol('omit');

function withoutRef(schema: JsonSchema): JsonSchema {
  const { $ref: _ref, ...rest } = schema;
  return rest;
}
