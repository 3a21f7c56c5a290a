import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.ts';

/**
 * "Try it out" at /docs starts every request from what /openapi.json gives it: a body's example
 * (Swagger UI makes one from the schema only where there is none, and such a body can break a
 * rule no schema holds), a parameter's example. Each is sent here, as Swagger UI would send it,
 * to a fresh project: none may be refused as malformed (a 400 or 415), nor fail the server (a 5xx).
 * What an example names that a fresh project lacks (a path's id, a revision in the body) is a
 * placeholder the reader fills in, and may be a clear 404.
 */

let h: Harness;
let doc: any;
let adminKey: string;

beforeAll(async () => {
  h = await startHarness();
  doc = await (await fetch(`${h.url}/openapi.json`)).json();
  // Storing a connection or a key takes the admin role.
  adminKey = (await h.store.apiKeys.create(h.projectId, 'admin')).key;
});
afterAll(async () => h?.close());

interface Operation {
  name: string;
  method: string;
  path: string;
  op: any;
}

const operations = (): Operation[] =>
  Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops as Record<string, any>).map(([method, op]) => ({ name: `${method.toUpperCase()} ${path}`, method, path, op })));

const withBody = () => operations().filter(({ op }) => op.requestBody);

/** A content type Swagger UI offers as a file to pick, with nothing to fill in. */
const isFile = (media: any) => media.schema?.format === 'binary';

/** The body Swagger UI starts from: the media type's example, else its first named one (the one it shows first). */
function exampleOf(media: any): unknown {
  if ('example' in media) return media.example;
  const [first] = Object.values((media.examples ?? {}) as Record<string, { value: unknown }>);
  return first?.value;
}

/** The URL Swagger UI calls: path ids as the placeholders a reader types (their names), required query parameters as their examples. */
function urlOf({ path, op }: Operation): string {
  const query = new URLSearchParams();
  for (const parameter of op.parameters ?? []) {
    if (parameter.in !== 'query') continue;
    if (parameter.name === 'project_id') {
      // The one value a reader must type on the services surface; on /api the key's own project is used.
      if (parameter.required) query.set('project_id', h.projectId);
      continue;
    }
    if (parameter.example !== undefined) query.set(parameter.name, String(parameter.example));
  }
  const url = path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent(name));
  return `${h.url}${url}${query.size ? `?${query}` : ''}`;
}

describe('the examples of /openapi.json', () => {
  it('give every operation that takes a body something to send, and every required parameter a value', () => {
    const missing: string[] = [];
    for (const { name, op } of withBody()) {
      for (const [type, media] of Object.entries<any>(op.requestBody.content)) {
        if (!isFile(media) && exampleOf(media) === undefined) missing.push(`${name} ${type}`);
      }
      for (const parameter of op.parameters ?? []) {
        if (parameter.in === 'query' && parameter.required && parameter.name !== 'project_id' && parameter.example === undefined) missing.push(`${name} ?${parameter.name}`);
      }
    }
    expect(withBody().length).toBeGreaterThanOrEqual(20);
    expect(missing).toEqual([]);
  });

  it('are valid by the schema they stand beside', () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    ajv.addSchema({ $id: 'doc', components: doc.components });
    const invalid: string[] = [];
    for (const { name, op } of withBody()) {
      const media = op.requestBody.content['application/json'];
      if (!media) continue;
      const validate = ajv.compile(JSON.parse(JSON.stringify(media.schema).replaceAll('"#/components/', '"doc#/components/')));
      const examples = 'example' in media ? [media.example] : Object.values<{ value: unknown }>(media.examples ?? {}).map((e) => e.value);
      for (const example of examples) if (!validate(example)) invalid.push(`${name}: ${JSON.stringify(validate.errors?.[0])}`);
    }
    expect(invalid).toEqual([]);
  });

  it('are taken by the server as Swagger UI sends them to a fresh project: never a 400, 415 or 5xx, a clear 404 where they name what it lacks', async () => {
    const answers: string[] = [];
    const refused: string[] = [];
    for (const operation of withBody()) {
      for (const [type, media] of Object.entries<any>(operation.op.requestBody.content)) {
        const example = exampleOf(media);
        const body = isFile(media) ? 'the picked file' : typeof example === 'string' ? example : JSON.stringify(example);
        const res = await fetch(urlOf(operation), {
          method: operation.method.toUpperCase(),
          headers: { authorization: `ApiKey ${adminKey}`, 'content-type': type, accept: 'application/json' },
          body,
        });
        const text = await res.text();
        const what = `${operation.name} (${type}) ${res.status}`;
        answers.push(what);
        const placeholder = res.status === 404 && ['not-found', 'unknown-reference'].includes(JSON.parse(text).status?.type);
        if (res.status >= 400 && !placeholder) refused.push(`${what}: ${text.slice(0, 300)}`);
      }
    }
    expect(refused).toEqual([]);
    // Most examples run as they are on a fresh project; only those naming an id are placeholders.
    expect(answers.filter((answer) => / 2\d\d$/.test(answer)).length).toBeGreaterThanOrEqual(12);
  });
});
