import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { maxOptions, OMIT, operationsOf, resolverOf, sample, variants, type Hint, type JsonSchema, type Variant } from '../support/openapi-samples.ts';

/**
 * Clients generated from /openapi.json send what the document says is valid; the server must take
 * it. Every operation of the document gets requests built from its own schemas (required fields
 * only, every field, lower and upper bounds, nulls, each enum value and union branch, each query
 * and header parameter, each content type, with and without an optional body) and none may be
 * refused as malformed: no 400, 415, 422 or 500. The answers the document gives reasons for stay
 * allowed: 404 for an id that names nothing, 409 for a state that does not allow the call (a
 * respond on an answered interaction, a run that has not ended), 424 for an MCP server that does
 * not answer.
 *
 * A few values are the test's own (hintsFor): ids that must name something that exists, the
 * provider and model the fake model server stands in for, a conversation a model can take. Each is
 * a rule the document states in words (its descriptions), not a shape a schema can hold.
 */

let h: Harness;
let doc: any;
let adminKey: string;
const MALFORMED = new Set([400, 415, 422]);

/** Pauses on a `write` call until answered; once answered, the turn ends with text. */
const PAUSING_SCRIPT = (request: { messages: Array<{ role: string }> }) =>
  request.messages.some((m) => m.role === 'tool') ? { text: 'done' } : { toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'A' } }] };

beforeAll(async () => {
  h = await startHarness({ script: PAUSING_SCRIPT });
  doc = await (await fetch(`${h.url}/openapi.json`)).json();
  adminKey = (await h.store.apiKeys.create(h.projectId, 'admin')).key;
  things = await makeThings();
});
afterAll(async () => h?.close());

const api = (method: string, path: string, body?: unknown) =>
  fetch(`${h.url}${path}${path.includes('?') ? '&' : '?'}project_id=${h.projectId}`, {
    method,
    headers: { authorization: `ApiKey ${adminKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

async function created(res: Response): Promise<any> {
  const text = await res.text();
  if (res.status >= 300) throw new Error(`fixture: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** A session paused on an approval: its id and the interaction's. */
async function pausedSession(): Promise<{ session: string; interaction: string }> {
  const session = sid('oa');
  const body = invokeBody([{ role: 'user', content: 'write a.txt' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: session });
  const reply = await created(await h.invoke(body));
  return { session, interaction: reply.data.outputs.pending_interaction.id };
}

/** The things the operations' paths name, made once; a call that uses its thing up gets a fresh one (FRESH). */
interface Things {
  session_id: string;
  interaction_id: string;
  slug: string;
  key_id: string;
  workflow: string;
  environment: string;
  testset_id: string;
  testset_revision: string;
  workflow_revision: string;
  evaluator_revision: string;
  evaluation_id: string;
  run_id: string;
}
let things: Things;

async function makeThings(): Promise<Things> {
  const paused = await pausedSession();
  // Its model calls go to the fake model, like the server's own key's.
  const connection = await created(await api('POST', '/api/connections', { slug: 'oa-conn', provider: 'openai', base_url: h.model.url, api_key: 'sk-fixture' }));
  const key = await created(await api('POST', '/api/keys', { role: 'viewer' }));
  const workflow = await created(
    await api('POST', '/api/workflows', { slug: 'oa-app', family: 'application', data: { parameters: { agent: template() } } }),
  );
  const evaluator = await created(
    await api('POST', '/api/workflows', { slug: 'oa-judge', family: 'evaluator', data: { parameters: { evaluator: { kind: 'json_valid' } } } }),
  );
  const environment = await created(await api('POST', '/api/environments', { slug: 'oa-env' }));
  await created(await api('POST', `/api/environments/${environment.id}/deploy`, { references: { application: { id: workflow.workflow.id } } }));
  const testset = await created(
    await api('POST', '/api/simple/testsets/', { testset: { slug: 'oa-set', data: { testcases: [{ data: { messages: [{ role: 'user', content: 'hi' }] } }] } } }),
  );
  const evaluation = await created(
    await api('POST', '/api/simple/evaluations/', {
      evaluation: { data: { testset_steps: [testset.revision_id], application_steps: [workflow.revision.id] } },
    }),
  );
  return {
    session_id: paused.session,
    interaction_id: paused.interaction,
    slug: connection.slug,
    key_id: key.id,
    workflow: workflow.workflow.id,
    environment: environment.id,
    testset_id: testset.testset.id,
    testset_revision: testset.revision_id,
    workflow_revision: workflow.revision.id,
    evaluator_revision: evaluator.revision.id,
    evaluation_id: evaluation.evaluation.id,
    run_id: evaluation.evaluation.id,
  };
}

let gone = 0;

/** Operations that use up what their path names: each request gets its own. */
const FRESH: Record<string, () => Promise<Partial<Things>>> = {
  'POST /api/sessions/interactions/{interaction_id}/respond': async () => ({ interaction_id: (await pausedSession()).interaction }),
  'POST /api/sessions/interactions/transition': async () => {
    const { session, interaction } = await pausedSession();
    return { session_id: session, interaction_id: interaction };
  },
  'DELETE /api/sessions/{session_id}': async () => ({ session_id: (await pausedSession()).session }),
  'DELETE /api/connections/{slug}': async () => ({ slug: (await created(await api('POST', '/api/connections', { slug: `oa-gone-${++gone}`, provider: 'openai', api_key: 'sk-x' }))).slug }),
  'DELETE /api/keys/{key_id}': async () => ({ key_id: (await created(await api('POST', '/api/keys', { role: 'viewer' }))).id }),
};

/**
 * The test's own values (see the top): by the operation, then by the place in the body. A place
 * answered here is still sent; only its value is chosen.
 */
function hintsFor(operation: string, current: Things, format: string | undefined): Hint {
  const deployable = { application: { id: current.workflow } };
  return (path, schema, variant, walk) => {
    // References name stored things, and one workflow family at a time; a deploy names no environment.
    if (/^(references|data\.references)$/.test(path)) {
      if (variant.nulls && schema.anyOf?.some((option: JsonSchema) => option.type === 'null')) return null;
      return operation.includes('deploy') ? deployable : { ...deployable, environment: { id: current.environment } };
    }
    // A selector's key names a deployment of the environment; its path a place in the parameters.
    if (path === 'selector.key') return 'oa-app';
    if (path === 'selector.path') return OMIT;
    // A cursor is the `next` of a page the server sent.
    if (/(^|[.?])(cursor|windowing\.next)$/.test(path)) return OMIT;
    if (operation === 'POST /services/agent/v0/invoke' || operation === 'POST /services/agent/v0/inspect') {
      if (path === 'session_id') return sid('oa');
      if (path === 'data.inputs.messages') return conversation(format);
      // The providers and models this server has keys for, and the one engine that needs no coding agent installed.
      if (path === 'data.parameters.agent.llm.provider') return 'openai';
      if (path === 'data.parameters.agent.llm.model') return 'fake-model';
      if (path === 'data.parameters.agent.harness.kind') return 'agentd';
      if (path === 'data.parameters.agent.llm.connection.slug') return current.slug;
      // A stdio server runs a command on the host, which this server (as shipped) refuses.
      if (/^data\.parameters\.agent\.mcps\[\d+\]\.connection$/.test(path)) return walk(schema.oneOf.find((b: JsonSchema) => b.properties.type.enum));
    }
    if (operation.startsWith('POST /api/simple/evaluations/')) {
      if (path === 'evaluation.data.testset_steps') return [current.testset_revision];
      if (path === 'evaluation.data.application_steps') return [current.workflow_revision];
      if (path === 'evaluation.data.evaluator_steps') return [current.evaluator_revision];
    }
    if (/^POST \/api\/evaluations\/(results|metrics)\/query$/.test(operation)) {
      if (/\.run_id$/.test(path)) return current.evaluation_id;
      if (/\.run_ids$/.test(path)) return [current.evaluation_id];
    }
    if (operation === 'POST /api/sessions/interactions/{interaction_id}/respond' && path === 'answer') {
      // The fixture's interaction is an approval.
      return { approved: variant.k % 2 === 0, ...(variant.optional ? { reason: 'because' } : {}) };
    }
    if (operation === 'POST /api/simple/testsets/import') {
      // The file (importBody) has these columns and no other.
      if (path === '?input') return 'input';
      if (path === '?testset') return current.testset_id;
      // A slug of its own, so the create does not meet the one before it (a 409).
      if (path === '?slug') return sid('oa-import');
    }
    if (operation === 'POST /api/sessions/interactions/transition') {
      if (path === 'interaction_id' || path === 'token') return current.interaction_id;
      if (path === 'session_id') return current.session_id;
      if (path === 'resolution') return { verdict: variant.k % 2 === 0 ? 'approved' : 'denied' };
    }
    return undefined;
  };
}

/** What a request carries: the operation's URL (path and query) and body. */
function buildRequest(method: string, path: string, op: any, variant: Variant, current: Things, bodiless: boolean) {
  const operation = `${method.toUpperCase()} ${path}`;
  // Invoke answers a stream or JSON by its flags; `*/*` takes either (a narrower Accept may be a documented 406).
  const headers: Record<string, string> = { authorization: `ApiKey ${adminKey}`, accept: operation.startsWith('POST /services/agent/v0/invoke') ? '*/*' : 'application/json' };
  const bare = { variant, hint: hintsFor(operation, current, undefined), resolve: (ref: string) => resolveRef(ref) };
  for (const parameter of op.parameters ?? []) {
    if (parameter.in === 'header' && (parameter.required || variant.optional)) headers[parameter.name] = String(sample(parameter.schema, bare, parameter.name));
  }
  const walk = { ...bare, hint: hintsFor(operation, current, headers['x-ag-messages-format']) };
  let url = path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent((current as any)[name]));
  const query = new URLSearchParams({ project_id: h.projectId });
  for (const parameter of op.parameters ?? []) {
    if (parameter.in !== 'query' || parameter.name === 'project_id') continue;
    if (!parameter.required && !variant.optional) continue;
    const value = sample(parameter.schema, walk, `?${parameter.name}`);
    if (value !== null && value !== OMIT) query.set(parameter.name, String(value));
  }
  url += `?${query}`;
  const content = bodiless ? {} : (op.requestBody?.content ?? {});
  let body: string | Uint8Array | undefined;
  let json: unknown;
  const type = Object.keys(content)[variant.k % Math.max(1, Object.keys(content).length)];
  if (type === 'application/json') {
    json = sample(content[type].schema, walk);
    // A turn needs a conversation (the document says so in words): one user message where the walk left none.
    if (operation === 'POST /services/agent/v0/invoke') json = withConversation(json as Record<string, any>, headers['x-ag-messages-format']);
    body = JSON.stringify(json);
  } else if (type === 'text/csv' || type === 'application/x-ndjson' || type === 'application/jsonl') {
    body = importBody(query.get('format') ?? (type === 'text/csv' ? 'csv' : 'jsonl'), query.get('delimiter'));
  } else if (type !== undefined) {
    body = new TextEncoder().encode('some bytes');
  }
  if (type !== undefined) headers['content-type'] = type;
  return { operation, url, json, init: { method: method.toUpperCase(), headers, ...(body === undefined ? {} : { body }) } as RequestInit, body };
}

/** One user message, in the format x-ag-messages-format names. */
function conversation(format: string | undefined): unknown[] {
  return format === 'vercel' ? [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hello' }] }] : [{ role: 'user', content: 'hello' }];
}

function withConversation(body: Record<string, any>, format: string | undefined): Record<string, any> {
  if (body.data?.inputs?.messages) return body;
  return { ...body, data: { ...body.data, inputs: { ...body.data?.inputs, messages: conversation(format) } } };
}

/** A test set file with the columns input and expected, in the format and with the delimiter the query names. */
function importBody(format: string, delimiter: string | null): string {
  if (format === 'jsonl') return '{"input": "hello", "expected": "hi"}\n';
  const separator = delimiter === 'tab' ? '\t' : (delimiter ?? ',');
  return `input${separator}expected\nhello${separator}hi\n`;
}

const ajv = new Ajv2020({ strict: false, validateFormats: false });
/** Whether the document itself takes a generated body: a sample that breaks a rule the walk does not follow (`not`, `oneOf`) is not sent. */
function documentTakes(schema: JsonSchema | undefined, value: unknown): boolean {
  return schema === undefined || value === undefined || ajv.validate(schema, value);
}

function resolveRef(ref: string): JsonSchema {
  return resolverOf(doc)(ref);
}

/** DELETEs last, so nothing else loses what its path names. */
function operations(): Array<[method: string, path: string, op: any]> {
  return operationsOf(doc).sort(([a], [b]) => Number(a === 'delete') - Number(b === 'delete'));
}

describe('every request /openapi.json accepts', () => {
  it('the server takes (no 400, 415, 422 or 500)', async () => {
    const refused: string[] = [];
    let sent = 0;
    for (const [method, path, op] of operations()) {
      const key = `${method.toUpperCase()} ${path}`;
      const schema = op.requestBody?.content?.['application/json']?.schema;
      const forms = [false, ...(op.requestBody && !op.requestBody.required ? [true] : [])];
      let taken = 0;
      for (const variant of variants(maxOptions([schema, ...(op.parameters ?? []).map((p: any) => p.schema)]))) {
        for (const bodiless of forms) {
          const current = { ...things, ...(FRESH[key] ? await FRESH[key]() : {}) };
          const request = buildRequest(method, path, op, variant, current, bodiless);
          if (!documentTakes(schema, request.json)) continue;
          const res = await fetch(`${h.url}${request.url}`, request.init);
          const text = await res.text();
          sent++;
          taken++;
          if (MALFORMED.has(res.status) || res.status >= 500) {
            refused.push(`${key} ${JSON.stringify(variant)}${bodiless ? ' (no body)' : ''} → ${res.status}\n  url: ${request.url}\n  body: ${typeof request.body === 'string' ? request.body.slice(0, 600) : ''}\n  answer: ${text.slice(0, 400)}`);
          }
        }
      }
      if (taken === 0) refused.push(`${key}: no generated request is valid by the document`);
    }
    expect(sent).toBeGreaterThan(200);
    expect(refused, refused.join('\n')).toEqual([]);
  }, 600_000);

  it('and a body the document requires, the server requires too', async () => {
    const taken: string[] = [];
    for (const [method, path, op] of operations()) {
      if (!op.requestBody?.required) continue;
      const key = `${method.toUpperCase()} ${path}`;
      const current = { ...things, ...(FRESH[key] ? await FRESH[key]() : {}) };
      const request = buildRequest(method, path, op, { k: 0, optional: false, bound: 'min', nulls: false }, current, true);
      const res = await fetch(`${h.url}${request.url}`, request.init);
      await res.text();
      if (res.status < 300) taken.push(`${key} → ${res.status} without a body`);
    }
    expect(taken).toEqual([]);
  });
});
