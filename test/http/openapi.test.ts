import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify, { type FastifyInstance } from 'fastify';
import { assertConformance, eventMismatch, watchConformance } from '../support/conformance.ts';
import { invokeBody, startHarness, template, type Harness } from '../support/harness.ts';
import { schemaValidator } from '../support/json-schema.ts';

/** The OpenAPI document is generated from the routes, with the schemas that validate requests; it must match them. */

let h: Harness;
let doc: any;
const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
/** Every route the test server registered, as Fastify added it (HEAD routes aside), seen apart from the app's own collection. */
const registered: Array<{ method: string; url: string }> = [];
const watchRoutes = ({ fastify }: { fastify: FastifyInstance }) =>
  fastify.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) if (method !== 'HEAD') registered.push({ method, url: route.url });
  });
beforeAll(async () => {
  // Fastify announces each instance on this channel as it is made, before any route is added.
  subscribe('fastify.initialization', watchRoutes as (message: unknown) => void);
  try {
    h = await startHarness();
  } finally {
    unsubscribe('fastify.initialization', watchRoutes as (message: unknown) => void);
  }
  doc = await (await fetch(`${h.url}/openapi.json`)).json();
});
afterAll(async () => h.close());

const METHODS = ['get', 'post', 'put', 'delete'] as const;

describe('GET /openapi.json', () => {
  it('is OpenAPI 3.1 and documents every route the server has', () => {
    expect(doc.openapi).toBe('3.1.0');
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops as object).map((method) => ({ method, path })));
    expect(documented.length).toBeGreaterThanOrEqual(23);
    for (const path of ['/api/workflows', '/api/workflows/{workflow}/revisions', '/api/environments/{environment}/deploy', '/api/connections', '/api/sessions/interactions/query']) {
      expect(Object.keys(doc.paths)).toContain(path);
    }
    for (const { method, path } of documented) {
      // The router ignores a trailing slash: `/api/simple/testsets/` (the spec's form) is served with or without it.
      const url = path.replace(/\{(\w+)\}/g, ':$1').replace(/(.)\/$/, '$1');
      expect(h.app.hasRoute({ method: method.toUpperCase() as 'GET', url }), `${method} ${path}`).toBe(true);
    }
  });

  it('documents every route of the API the server registered, and nothing else', () => {
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops as object).map((method) => `${method.toUpperCase()} ${path}`));
    const api = registered.filter(({ url }) => url.startsWith('/api/') || url.startsWith('/services/')).map(({ method, url }) => `${method} ${url.replace(/:(\w+)/g, '{$1}')}`);
    expect(api).toContain('PUT /api/sessions/{session_id}/files');
    expect(documented.sort()).toEqual(api.sort());
    // Routes that are not the API's stay out of it.
    for (const url of ['/health', '/ready', '/openapi.json', '/docs']) expect(registered.map((route) => route.url)).toContain(url);
  });

  it('describes the invoke body with the schema invoke validates with', () => {
    const schema = doc.paths['/services/agent/v0/invoke'].post.requestBody.content['application/json'].schema;
    const validate = schemaValidator().compile(schema);
    expect(validate(invokeBody([{ role: 'user', content: 'hi' }], template(), { session_id: 'ok-1' }))).toBe(true);
    expect(validate({ session_id: 'not ok' })).toBe(false);
    expect(validate({ data: { parameters: { agent: { runner: { permissions: { default: 'sometimes' } } } } } })).toBe(false);
    expect(validate({ data: { parameters: { agent: { harness: { kind: 'agentd', surprise: 1 } } } } })).toBe(false);
  });

  it("describes the content blocks a native message may hold: a user's files, an assistant's calls and decisions", () => {
    const schema = doc.paths['/services/agent/v0/invoke'].post.requestBody.content['application/json'].schema;
    const validate = schemaValidator().compile(schema);
    const withMessages = (messages: unknown[]) => invokeBody(messages, template(), { session_id: 'ok-1' });
    const file = { type: 'file', url: 'data:text/plain;base64,aGk=', mediaType: 'text/plain', filename: 'a.txt' };
    const call = { type: 'tool_call', toolCallId: 'c1', toolName: 'write', input: { path: 'a' } };
    const decision = { type: 'tool_result', toolCallId: 'c1', output: { approved: true, interactionToken: 'i1' } };
    const taken = [
      [{ role: 'user', content: [{ type: 'text', text: 'read this' }, file] }],
      [{ role: 'user', content: 'write a' }, { role: 'assistant', content: [{ type: 'text', text: 'writing' }, call, decision] }],
    ];
    for (const messages of taken) expect(validate(withMessages(messages)), JSON.stringify(validate.errors)).toBe(true);
    // What the server refuses, the document does too: calls in a user message, files in a system one, an unknown block.
    const refused = [
      [{ role: 'user', content: [call] }],
      [{ role: 'system', content: [file] }],
      [{ role: 'assistant', content: [{ type: 'image', image: 'x' }] }],
      [{ role: 'assistant', content: [{ type: 'tool_call', toolName: 'write' }] }],
    ];
    for (const messages of refused) expect(validate(withMessages(messages)), JSON.stringify(messages)).toBe(false);
  });

  it('describes the invoke streams and gives request examples that are valid invoke bodies', () => {
    const invoke = doc.paths['/services/agent/v0/invoke'].post;
    const content = invoke.responses['200'].content;
    expect(Object.keys(content)).toEqual(['application/json', 'text/event-stream', 'application/x-ndjson']);
    expect(content['text/event-stream'].schema.description).toMatch(/\[DONE\]/);
    expect(content['text/event-stream'].example).toContain('"type":"done"');
    const body = invoke.requestBody.content['application/json'];
    const validate = schemaValidator().compile(body.schema);
    const examples = Object.entries(body.examples as Record<string, { value: unknown }>);
    expect(examples.map(([name]) => name)).toEqual(['native', 'approval', 'references', 'useChat']);
    for (const [name, example] of examples) expect(validate(example.value), `${name}: ${JSON.stringify(validate.errors)}`).toBe(true);
  });

  it('lists every error type and the auth scheme', () => {
    expect(doc.info.description).toContain('invalid-template-shape');
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'Authorization' });
    for (const method of METHODS) {
      for (const op of Object.values(doc.paths).map((p: any) => p[method]).filter(Boolean)) {
        expect(op.parameters.some((p: { name: string }) => p.name === 'project_id')).toBe(true);
      }
    }
  });

  it('lists the error statuses each route answers, each in the envelope, described by the types it stands for', () => {
    const types = new Map([...read('docs/errors.md').matchAll(/^\| `([a-z-]+)` \| (\d{3}) \|/gm)].map((m) => [m[1]!, Number(m[2])]));
    const errorsOf = (method: string, path: string) => Object.keys(doc.paths[path][method].responses).filter((status) => Number(status) >= 400).map(Number);
    for (const [path, ops] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        const where = `${method.toUpperCase()} ${path}`;
        // Every route of the API reads its query and needs a key, which may be of another project or role, read from a database that may fail.
        expect(errorsOf(method, path), where).toEqual(expect.arrayContaining([400, 401, 403, 503, 507]));
        // Statuses as they are, no ranges standing for whatever else.
        expect(Object.keys(op.responses).filter((status) => !/^\d{3}$/.test(status)), where).toEqual([]);
        for (const status of errorsOf(method, path)) {
          const response = op.responses[String(status)];
          expect(response.content['application/json'].schema.$ref, `${where} ${status}`).toBe('#/components/schemas/ErrorEnvelope');
          // Each type named is one docs/errors.md gives this status.
          const named = [...response.description.matchAll(/^- `([a-z-]+)`: \S/gm)].map((m) => m[1]!);
          expect(named.length, `${where} ${status}`).toBeGreaterThan(0);
          for (const type of named) expect(types.get(type), `${where} ${status} ${type}`).toBe(status);
        }
      }
    }
    // What the routes are known to send (docs/errors.md), route by route for those that send the most.
    expect(errorsOf('post', '/services/agent/v0/invoke')).toEqual([400, 401, 403, 404, 406, 408, 409, 413, 415, 424, 429, 500, 502, 503, 504, 507]);
    expect(errorsOf('get', '/services/agent/v0/invoke/{session_id}/stream')).toEqual([400, 401, 403, 406, 500, 503, 507]);
    expect(errorsOf('post', '/api/sessions/interactions/{interaction_id}/respond')).toEqual(expect.arrayContaining([404, 409, 413, 415, 424]));
    expect(errorsOf('delete', '/api/sessions/{session_id}')).toEqual(expect.arrayContaining([404, 409]));
    expect(errorsOf('post', '/api/connections')).toEqual(expect.arrayContaining([409, 413, 415]));
    expect(errorsOf('post', '/api/workflows/resolve')).toEqual(expect.arrayContaining([404]));
    expect(errorsOf('post', '/api/simple/evaluations/{evaluation_id}/rerun-failed')).toEqual(expect.arrayContaining([404, 409]));
    // A route that reads no body answers none of a body's errors; one that names nothing has no 404.
    expect(errorsOf('get', '/api/sessions')).toEqual([400, 401, 403, 500, 503, 507]);
    const invoke409 = doc.paths['/services/agent/v0/invoke'].post.responses['409'].description;
    for (const type of ['session-busy', 'turn-cancelled', 'interaction-not-pending']) expect(invoke409).toContain(`\`${type}\``);
  });
});

describe('the replies every test server sends', () => {
  // test/support/harness.ts watches each test server this way, so every suite checks its replies.
  it('are checked against the documented schema of their route and status', async () => {
    // A server that serves the document of the test server, and replies its route does not document.
    const app = Fastify();
    app.get('/openapi.json', async () => doc);
    app.get('/api/keys/self', async (request, reply) => (request.query as { bad?: string }).bad ? { key: 42 } : reply.code(404).send({ status: { code: 404 } }));
    const conformance = await watchConformance(app);
    await app.inject({ url: '/api/keys/self?bad=1' });
    await app.inject({ url: '/api/keys/self' });
    await app.close();
    expect(conformance.violations).toHaveLength(2);
    expect(conformance.violations[0]).toMatch(/^GET \/api\/keys\/self 200: /);
    expect(conformance.violations[1]).toMatch(/^GET \/api\/keys\/self 404: /);
    expect(() => assertConformance(conformance)).toThrow(/do not match \/openapi.json/);
  });

  // readFrames (test/support/harness.ts) checks every native event a test reads this way.
  it('and so are the native events a test reads, against AgentEvent', () => {
    expect(eventMismatch({ type: 'message_delta', data: { id: 'm1', delta: 'Hi' } })).toBeUndefined();
    expect(eventMismatch({ type: 'message_delta', data: { id: 'm1' } })).toMatch(/delta/);
    expect(eventMismatch({ type: 'finish', data: {} })).toMatch(/"finish" is none of turn_start, .*done/);
  });
});

describe('GET /docs', () => {
  it('is Swagger UI over the same document, served from this server alone, under a strict CSP', async () => {
    const res = await fetch(`${h.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    const html = await res.text();
    expect(html).toContain('swagger-ui-bundle.js');
    // Nothing is fetched from elsewhere: every script and style is the server's own.
    expect(html).not.toMatch(/(src|href)="https?:/);
    expect(await (await fetch(`${h.url}/docs/json`)).json()).toEqual(doc);
    const script = await fetch(`${h.url}/docs/static/swagger-initializer.js`);
    expect(script.status).toBe(200);
  });
});
