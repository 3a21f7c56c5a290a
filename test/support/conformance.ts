import type { Ajv2020, ValidateFunction } from 'ajv/dist/2020.js';
import { schemaValidator } from './json-schema.ts';
import type { FastifyInstance } from 'fastify';
import { openApiDocument } from '../../src/http/openapi.ts';

/**
 * Checks every JSON reply a test server sends against what /openapi.json documents for its route
 * and status: clients generated from the document must be able to read whatever the server says.
 * Each test server is watched, so the whole suite is the sample; what does not match is kept and
 * thrown when the server closes (`assertConformance`), failing the file that met it.
 */
export interface Conformance {
  /** One line per reply that did not match: route, status, what was wrong. */
  violations: string[];
}

export function assertConformance(conformance: Conformance): void {
  if (conformance.violations.length === 0) return;
  throw new Error(`replies that do not match /openapi.json:\n${[...new Set(conformance.violations)].join('\n')}`);
}

type Document = ReturnType<typeof openApiDocument>;

/** A document and the validators compiled from it so far. */
interface Checker {
  doc: Document;
  ajv: Ajv2020;
  validators: Map<string, ValidateFunction>;
}

/** By the document's text: the test servers of a file serve the same document, compiled once. */
const checkers = new Map<string, Checker>();

function checkerFor(text: string): Checker {
  let checker = checkers.get(text);
  if (!checker) {
    const doc = JSON.parse(text) as Document;
    const ajv = schemaValidator({ allErrors: false });
    ajv.addSchema({ $id: 'doc', components: doc.components } as object);
    checkers.set(text, (checker = { doc, ajv, validators: new Map() }));
  }
  return checker;
}

/** The validator for a documented reply, with `#/components/...` references resolved against the document. */
function validatorFor(checker: Checker, key: string, schema: object): ValidateFunction {
  let validate = checker.validators.get(key);
  if (!validate) checker.validators.set(key, (validate = checker.ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"doc#/components/')))));
  return validate;
}

/** The document's path for a Fastify route (`/a/:id` → `/a/{id}`), trailing slash as documented. */
function documentedPath(doc: Document, url: string): string | undefined {
  const path = url.replace(/:(\w+)/g, '{$1}');
  const paths = doc.paths as Record<string, unknown>;
  if (path in paths) return path;
  if (`${path}/` in paths) return `${path}/`;
  if (path.endsWith('/') && path.slice(0, -1) in paths) return path.slice(0, -1);
  return undefined;
}

/** Native events are a component of the document, the same whatever routes it describes. */
const events = checkerFor(JSON.stringify(openApiDocument('conformance', [])));
const eventValidators = new Map<unknown, ValidateFunction>();

/**
 * What is wrong with a native stream's event against the document's AgentEvent, or undefined:
 * checked against the branch for its own `type`, so the message names the field that is off.
 */
export function eventMismatch(event: unknown): string | undefined {
  const type = (event as { type?: unknown } | null)?.type;
  const branches = (events.doc.components.schemas.AgentEvent as { oneOf: Array<{ properties: { type: { const: string } } }> }).oneOf;
  const branch = branches.find((b) => b.properties.type.const === type);
  if (!branch) return `/type ${JSON.stringify(type)} is none of ${branches.map((b) => b.properties.type.const).join(', ')}`;
  let validate = eventValidators.get(type);
  if (!validate) eventValidators.set(type, (validate = events.ajv.compile(branch)));
  return validate(event) ? undefined : firstError(validate, '(event)');
}

function firstError(validate: ValidateFunction, whole: string): string {
  const [first] = validate.errors ?? [];
  return `${first?.instancePath || whole} ${first?.message ?? 'does not match'} ${JSON.stringify(first?.params ?? {})}`;
}

/**
 * Checks `app`'s replies against the document it serves at /openapi.json, read here: call it
 * before the app listens (reading the document readies the app, after which no hook is added).
 */
export async function watchConformance(app: FastifyInstance): Promise<Conformance> {
  const conformance: Conformance = { violations: [] };
  let checker: Checker | undefined;
  app.addHook('onSend', async (request, reply, payload) => {
    // Unset while the document itself is read, below.
    if (!checker) return payload;
    const { doc } = checker;
    const type = String(reply.getHeader('content-type') ?? '');
    const url = request.routeOptions.url;
    if (!url || !type.startsWith('application/json') || (typeof payload !== 'string' && !Buffer.isBuffer(payload))) return payload;
    const path = documentedPath(doc, url);
    if (!path) return payload;
    const method = request.method.toLowerCase();
    const operation = (doc.paths as Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>>)[path]?.[method];
    if (!operation) return payload;
    const status = reply.statusCode;
    const documented = operation.responses[String(status)] ?? (status >= 500 ? operation.responses['5XX'] : status >= 400 ? operation.responses['4XX'] : undefined);
    const where = `${request.method} ${path} ${status}`;
    if (!documented) {
      conformance.violations.push(`${where}: the status is not documented (documented: ${Object.keys(operation.responses).join(', ')})`);
      return payload;
    }
    const schema = documented.content?.['application/json']?.schema;
    if (!schema) {
      conformance.violations.push(`${where}: a JSON body where the document gives none`);
      return payload;
    }
    const validate = validatorFor(checker, `${method} ${path} ${status >= 400 ? 'error' : status}`, schema);
    let body: unknown;
    try {
      body = JSON.parse(String(payload));
    } catch {
      conformance.violations.push(`${where}: the body is not JSON`);
      return payload;
    }
    if (!validate(body)) conformance.violations.push(`${where}: ${firstError(validate, '(body)')}`);
    return payload;
  });
  const served = await app.inject({ url: '/openapi.json' });
  if (served.statusCode !== 200) throw new Error(`the app serves no document to check its replies against: GET /openapi.json is a ${served.statusCode}`);
  checker = checkerFor(served.body);
  return conformance;
}
