import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/testing/fake-model.ts';
import { builtin, invokeBody, startHarness, template, until, type Harness } from '../support/harness.ts';
import { OMIT, operationsOf, resolverOf, sample, type JsonSchema, type Variant } from '../support/openapi-samples.ts';

/**
 * A key of one project never sees another's data (spec §4.1, docs/api.md), on every route: every
 * operation of /openapi.json is called with project B's key on ids of project A's things, once
 * naming project B (or, on /api, no project), once naming A. Naming A is a 403; naming B, what
 * names A's thing answers 404 (the resume stream 204: B's session of that id runs no turn) and
 * nothing else may carry A's data; afterwards A's things read back unchanged.
 *
 * The walk places A's ids by the name of the place that takes one (PLACES): a path parameter,
 * query parameter, header or body field. A new operation, or a field, whose name looks like an id
 * and that PLACES does not know fails the test, so a route cannot slip past without being walked.
 *
 * Both engines run this file; every name is unique to the run (`tag`).
 */

const tag = randomBytes(4).toString('hex');
let h: Harness;
let doc: any;

/** A conversation holding this marker waits for `gate` before the model answers (the live-turn tests). */
let gate: { marker: string; opened: Promise<void>; open: () => void } | undefined;

async function script(req: RecordedRequest) {
  const last = [...req.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
  if (gate && last.includes(gate.marker)) await gate.opened;
  if (last.includes('please write') && !req.messages.some((m) => m.role === 'tool')) return { toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'A' } }] };
  return { text: 'ok' };
}

interface Project {
  id: string;
  key: string;
}

/** Project A's things, which B's key aims at. */
interface Things {
  session: string;
  turn: string;
  interaction: string;
  file: string;
  connection: { id: string; slug: string };
  key: { id: string; prefix: string };
  workflow: { id: string; slug: string };
  variant: { id: string; slug: string };
  revision: string;
  evaluatorRevision: string;
  environment: { id: string; slug: string };
  environmentRevision: string;
  testset: { id: string; slug: string };
  testsetRevision: string;
  testcase: string;
  run: string;
  result: string;
}

let A: Project;
let B: Project;
let a: Things;
/** What of A's only A may read: every id and every text of A's things, none of which B sends unless the walk puts it there. */
let markers: string[];

function call(as: Project, method: string, path: string, body?: unknown, project: string | null = as.id, headers: Record<string, string> = {}) {
  const query = project === null ? '' : `${path.includes('?') ? '&' : '?'}project_id=${project}`;
  if (as === B) told += `${path}${query} ${JSON.stringify(body)}\n`;
  return fetch(`${h.url}${path}${query}`, {
    method,
    headers: { authorization: `ApiKey ${as.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

async function ok(res: Response): Promise<any> {
  const text = await res.text();
  if (res.status >= 300) throw new Error(`fixture: ${res.url} ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

async function makeThings(): Promise<Things> {
  const session = `a-chat-${tag}`;
  const paused = await ok(
    await call(A, 'POST', '/services/agent/v0/invoke', {
      ...invokeBody([{ role: 'user', content: `please write A-msg-${tag}` }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: session }),
      tags: { owner: `A-tag-${tag}` },
    }),
  );
  const file = `a-notes-${tag}.txt`;
  await ok(
    await fetch(`${h.url}/api/sessions/${session}/files?project_id=${A.id}&path=${file}`, {
      method: 'PUT',
      headers: { authorization: `ApiKey ${A.key}`, 'content-type': 'application/octet-stream' },
      body: `A-file-${tag}`,
    }),
  );
  const connection = await ok(
    await call(A, 'POST', '/api/connections', { slug: `a-conn-${tag}`, provider: 'openai', base_url: `http://a-conn-${tag}.example`, api_key: `sk-a-${tag}`, model: `A-model-${tag}` }),
  );
  const key = await ok(await call(A, 'POST', '/api/keys', { role: 'viewer' }));
  const agent = { ...template(), instructions: { agents_md: `A-instructions-${tag}` } };
  const workflow = await ok(await call(A, 'POST', '/api/workflows', { slug: `a-app-${tag}`, variant: `a-var-${tag}`, family: 'application', data: { parameters: { agent } } }));
  const evaluator = await ok(
    await call(A, 'POST', '/api/workflows', { slug: `a-judge-${tag}`, family: 'evaluator', data: { parameters: { evaluator: { kind: 'json_valid' } } } }),
  );
  const environment = await ok(await call(A, 'POST', '/api/environments', { slug: `a-env-${tag}` }));
  const deployed = await ok(await call(A, 'POST', `/api/environments/${environment.id}/deploy`, { references: { application: { id: workflow.workflow.id } } }));
  const testset = await ok(
    await call(A, 'POST', '/api/simple/testsets/', {
      testset: { slug: `a-set-${tag}`, data: { testcases: [{ data: { messages: [{ role: 'user', content: `A-case-${tag}` }], expected: `A-expected-${tag}` } }] } },
    }),
  );
  const evaluation = await ok(
    await call(A, 'POST', '/api/simple/evaluations/', { evaluation: { data: { testset_steps: [testset.revision_id], application_steps: [workflow.revision.id] } } }),
  );
  const run = evaluation.evaluation.id;
  await until(
    async () => (await ok(await call(A, 'GET', `/api/simple/evaluations/${run}`))).evaluation.data.status,
    (status) => status !== 'running',
  );
  const results = await ok(await call(A, 'POST', '/api/evaluations/results/query', { result: { run_id: run } }));
  return {
    session,
    turn: paused.turn_id,
    interaction: paused.data.outputs.pending_interaction.id,
    file,
    connection: { id: connection.id, slug: connection.slug },
    key: { id: key.id, prefix: key.prefix },
    workflow: { id: workflow.workflow.id, slug: workflow.workflow.slug },
    variant: { id: workflow.revision.variant.id, slug: workflow.revision.variant.slug },
    revision: workflow.revision.id,
    evaluatorRevision: evaluator.revision.id,
    environment: { id: environment.id, slug: environment.slug },
    environmentRevision: deployed.revision.id,
    testset: { id: testset.testset.id, slug: testset.testset.slug },
    testsetRevision: testset.revision_id,
    testcase: testset.testset.data.testcase_ids[0],
    run,
    result: results.results[0].id,
  };
}

/** A's things as A reads them, less what reading moves (a key's `last_used_at`). */
async function snapshot(): Promise<Record<string, unknown>> {
  const reads: Array<[string, string, unknown?]> = [
    ['GET', `/api/sessions/${a.session}`],
    ['GET', `/api/sessions/${a.session}/files`],
    ['GET', `/api/sessions/${a.session}/files?path=${a.file}`],
    ['GET', `/api/sessions/interactions/${a.interaction}`],
    ['GET', '/api/connections'],
    ['GET', `/api/connections/${a.connection.slug}`],
    ['GET', '/api/keys'],
    ['GET', '/api/workflows'],
    ['GET', `/api/workflows/${a.workflow.id}`],
    ['GET', `/api/workflows/${a.workflow.id}/revisions`],
    ['GET', '/api/environments'],
    ['GET', `/api/environments/${a.environment.id}`],
    ['GET', `/api/environments/${a.environment.id}/revisions`],
    ['GET', '/api/simple/testsets/'],
    ['GET', `/api/simple/testsets/${a.testset.id}`],
    ['GET', '/api/simple/evaluations/'],
    ['GET', `/api/simple/evaluations/${a.run}`],
    ['POST', '/api/evaluations/results/query', { result: { run_id: a.run } }],
    ['POST', '/api/evaluations/metrics/query', { metrics: { run_id: a.run } }],
    ['POST', '/api/sessions/interactions/query', { session_id: a.session }],
  ];
  const out: Record<string, unknown> = {};
  for (const [method, path, body] of reads) {
    const res = await call(A, method, path, body);
    const text = await res.text();
    out[`${method} ${path}`] = res.status === 200 && res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text, (k, v) => (k === 'last_used_at' ? undefined : v)) : `${res.status} ${text}`;
  }
  return out;
}

let before: Record<string, unknown>;

beforeAll(async () => {
  h = await startHarness({ script });
  doc = await (await fetch(`${h.url}/openapi.json`)).json();
  A = { id: h.projectId, key: (await h.store.apiKeys.create(h.projectId, 'admin')).key };
  const projectB = await h.store.projects.create(`b-${tag}`);
  B = { id: projectB.id, key: (await h.store.apiKeys.create(projectB.id, 'admin')).key };
  a = await makeThings();
  markers = [
    A.id,
    ...Object.values(a).flatMap((v: string | Record<string, string>) => (typeof v === 'string' ? [v] : Object.values(v))),
    ...['A-msg', 'A-tag', 'A-file', 'A-model', 'A-instructions', 'A-case', 'A-expected', 'a-conn', 'sk-a'].map((m) => `${m}-${tag}`),
  ];
  before = await snapshot();
}, 60_000);
afterAll(async () => h?.close());

/**
 * Everything B's key has sent. What B gets back must hold none of A's markers but those B sent
 * itself: a 404 may name the id it was asked for, and a row id B took for its own is B's.
 */
let told = '';

function leaked(reply: string): string[] {
  return markers.filter((m) => reply.includes(m) && !told.includes(m));
}

// ---- Where the walk puts A's ids -------------------------------------------------------------

/** Path parameters: every value that names A's thing (by id, by slug, by revision). */
const PATH_IDS: Record<string, (t: Things) => string[]> = {
  session_id: (t) => [t.session],
  interaction_id: (t) => [t.interaction],
  slug: (t) => [t.connection.slug],
  key_id: (t) => [t.key.id],
  workflow: (t) => [t.workflow.id, t.workflow.slug],
  environment: (t) => [t.environment.id, t.environment.slug],
  testset_id: (t) => [t.testset.id, t.testset.slug, t.testsetRevision],
  evaluation_id: (t) => [t.run],
  run_id: (t) => [t.run],
};

/** A place's value: A's id, or LEAVE (not an id: the schema's sample does), or a fresh name for a thing B creates. */
const LEAVE = Symbol('leave');
type Place = { op?: RegExp; place: RegExp; value: (t: Things, variant: Variant) => unknown };

/** Runs by reference name one family, or one environment's deployment, at a time (two families at once are a 400 before any lookup). */
const REFERENCE_SETS: Array<(t: Things) => unknown> = [
  (t) => ({ application: { id: t.workflow.id } }),
  (t) => ({ application: { slug: t.workflow.slug } }),
  (t) => ({ workflow: { id: t.workflow.id } }),
  (t) => ({ application_variant: { id: t.variant.id } }),
  (t) => ({ application_revision: { id: t.revision } }),
  (t) => ({ evaluator_revision: { id: t.evaluatorRevision } }),
  (t) => ({ environment: { id: t.environment.id }, application: { slug: t.workflow.slug } }),
  (t) => ({ environment: { slug: t.environment.slug }, application: { slug: t.workflow.slug } }),
  (t) => ({ environment_revision: { id: t.environmentRevision }, application: { slug: t.workflow.slug } }),
];

let fresh = 0;
const freshName = () => `b-${tag}-${++fresh}`;

const PLACES: Place[] = [
  // Names A's things.
  { place: /^(data\.)?references(\.|$)/, value: (t, v) => REFERENCE_SETS[v.k % REFERENCE_SETS.length]!(t) },
  { place: /^selector(\.|$)/, value: (t) => ({ key: t.workflow.slug }) },
  { op: /\/deploy$|\/undeploy$/, place: /^key$/, value: (t) => t.workflow.slug },
  { place: /(^|\.)session_id$|^x-ag-session-id$|^\?id_prefix$/, value: (t) => t.session },
  { place: /(^|\.)turn_id$/, value: (t) => t.turn },
  { place: /(^|\.)(interaction_id|token)$/, value: (t) => t.interaction },
  { place: /^data\.parameters\.agent\.llm\.connection\.slug$/, value: (t) => t.connection.slug },
  { place: /^data\.testcase\.id$/, value: (t) => t.testcase },
  { op: /^POST \/api\/workflows\/\{workflow\}\/revisions$/, place: /^variant$/, value: (t) => t.variant.slug },
  { op: /^GET \/api\/workflows\/\{workflow\}\/revisions$/, place: /^\?variant$/, value: (t) => t.variant.slug },
  { op: /^POST \/api\/simple\/testsets\/query$/, place: /^testset\.slug$|^testset_refs\[\]\.slug$/, value: (t) => t.testset.slug },
  { op: /^POST \/api\/simple\/testsets\/query$/, place: /^testset_refs\[\]\.id$/, value: (t) => t.testset.id },
  { place: /^testset\.data\.testcases\[\]\.id$/, value: (t) => t.testcase },
  { place: /^\?testset$/, value: (t) => t.testset.id },
  { place: /^\?path$/, value: (t) => t.file },
  { place: /^evaluation\.data\.testset_steps$/, value: (t) => [t.testsetRevision] },
  { place: /^evaluation\.data\.application_steps$/, value: (t) => [t.revision] },
  { place: /^evaluation\.data\.evaluator_steps$/, value: (t) => [t.evaluatorRevision] },
  { place: /^evaluation\.data\.query_steps$/, value: () => OMIT },
  { place: /\.run_id$/, value: (t) => t.run },
  { place: /\.run_ids$/, value: (t) => [t.run] },
  { place: /^result\.ids$/, value: (t) => [t.result] },
  { place: /\.(testcase|scenario)_id$/, value: (t) => t.testcase },
  { place: /\.(testcase|scenario)_ids$/, value: (t) => [t.testcase] },
  // New things B makes: fresh names (B may reuse A's, a test below; here they must not meet each other).
  { op: /^POST \/api\/(connections|workflows|environments)$/, place: /^(slug|variant)$/, value: () => freshName() },
  { op: /^POST \/api\/simple\/testsets\/(import)?$/, place: /^testset\.slug$|^\?slug$/, value: () => freshName() },
  // What the turn needs to run at all (not ids): the fake model, agentd's own loop, no MCP server to wait for.
  // Past the first variant a turn runs by its references alone: beside parameters they are only recorded.
  { op: /^POST \/services\/agent\/v0\/(invoke|inspect)$/, place: /^data\.parameters$/, value: (_t, v) => (v.k > 0 ? OMIT : LEAVE) },
  { op: /^POST \/api\/simple\/testsets\/import$/, place: /^\?input$/, value: () => 'input' },
  { place: /^data\.inputs\.messages(\[|$)/, value: () => [{ role: 'user', content: 'hello from B' }] },
  { place: /^data\.parameters\.agent\.llm\.provider$/, value: () => 'openai' },
  { place: /^data\.parameters\.agent\.llm\.model$/, value: () => 'fake-model' },
  { place: /^data\.parameters\.agent\.harness\.kind$/, value: () => 'agentd' },
  { place: /^data\.parameters\.agent\.mcps$/, value: () => OMIT },
  { place: /^\?cursor$|(^|\.)(cursor|windowing\.next)$/, value: () => OMIT },
  { place: /^respond$/, value: () => LEAVE },
  // Look like ids, are not: a label, a secret, a step count, a trace link, an inline revision, an object holding the fields above.
  { place: /^(api_key|step_keys?|result\.step_keys?|metrics?\.step_keys?|data\.parameters\.agent\.runner\.max_steps|testset|data\.revision|revision)$/, value: () => LEAVE },
  { place: /\.step_keys?$|^data\.parameters\.agent\.skills\[\]\.files\[\]\.path$/, value: () => LEAVE },
  { place: /^links\.[^.]+\.(trace_id|span_id)$/, value: () => LEAVE },
  { place: /^answer$/, value: () => ({ approved: true }) },
  { place: /^resolution$/, value: () => ({ verdict: 'approved' }) },
];

/** A name that says it names a stored thing. */
const ID_LIKE = /(^|[._?\[\]-])(id|ids|token|slug|key|workflow|variant|environment|testset|revision|references|selector|path|id_prefix|cursor|next|[a-z]+_id|[a-z]+_ids|[a-z]+_steps|[a-z]+_key|[a-z]+_keys)$/;

function placeFor(operation: string, place: string): Place | undefined {
  const at = place.replace(/\[\d+\]/g, '[]');
  return PLACES.find((p) => (!p.op || p.op.test(operation)) && p.place.test(at));
}

/** Every place of a body schema (`a.b[].c`, a map's entries as `*`), through unions and `$ref`s. */
function bodyPlaces(schema: JsonSchema | undefined, resolve: (ref: string) => JsonSchema, at = '', seen = new Set<string>()): string[] {
  if (!schema || typeof schema !== 'object') return [];
  if (schema.$ref) return seen.has(schema.$ref) ? [] : bodyPlaces(resolve(schema.$ref), resolve, at, new Set([...seen, schema.$ref]));
  const out: string[] = [];
  for (const option of [...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])]) out.push(...bodyPlaces(option, resolve, at, seen));
  if (schema.items) out.push(...bodyPlaces(schema.items, resolve, `${at}[]`, seen));
  for (const [name, property] of Object.entries<JsonSchema>(schema.properties ?? {})) {
    const here = at ? `${at}.${name}` : name;
    out.push(here, ...bodyPlaces(property, resolve, here, seen));
  }
  if (schema.additionalProperties && typeof schema.additionalProperties === 'object') out.push(...bodyPlaces(schema.additionalProperties, resolve, `${at}.*`, seen));
  return out;
}

/** The places of an operation that look like ids and that PLACES (or PATH_IDS) cannot fill. */
function unplaced(operation: string, op: any): string[] {
  const places = [
    ...(op.parameters ?? []).filter((p: any) => p.name !== 'project_id').map((p: any) => (p.in === 'query' ? `?${p.name}` : p.in === 'path' ? `{${p.name}}` : p.name)),
    ...bodyPlaces(op.requestBody?.content?.['application/json']?.schema, resolverOf(doc)),
  ];
  return [...new Set(places)].filter((place) => {
    const path = /^\{(\w+)\}$/.exec(place);
    if (path) return !PATH_IDS[path[1]!];
    // A place inside one a rule fills whole (references, the conversation) is placed with it.
    const leaf = place.replace(/^\?/, '').split('.').pop()!.replace(/\[\]$/, '');
    return ID_LIKE.test(leaf) && !placeFor(operation, place);
  });
}

// ---- The walk --------------------------------------------------------------------------------

type Mode = 'B' | 'no project' | 'A';

interface Sent {
  url: string;
  init: RequestInit;
  sent: string;
}

function buildRequest(operation: string, method: string, path: string, op: any, variant: Variant, mode: Mode, pathValues: Record<string, string>): Sent {
  const hint = (place: string, _schema: JsonSchema, v: Variant) => {
    const found = placeFor(operation, place);
    const value = found?.value(a, v);
    return value === LEAVE ? undefined : value;
  };
  const walk = { variant, hint, resolve: resolverOf(doc) };
  const headers: Record<string, string> = { authorization: `ApiKey ${B.key}`, accept: operation.startsWith('POST /services/agent/v0/invoke') ? '*/*' : 'application/json' };
  const query = new URLSearchParams(mode === 'no project' ? {} : { project_id: mode === 'A' ? A.id : B.id });
  for (const parameter of op.parameters ?? []) {
    if (parameter.name === 'project_id' || parameter.in === 'path') continue;
    if (!parameter.required && !variant.optional) continue;
    const value = sample(parameter.schema, walk, parameter.in === 'query' ? `?${parameter.name}` : parameter.name);
    if (value === null || value === OMIT || value === undefined) continue;
    if (parameter.in === 'query') query.set(parameter.name, String(value));
    if (parameter.in === 'header') headers[parameter.name] = String(value);
  }
  const url = `${path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent(pathValues[name]!))}${query.size ? `?${query}` : ''}`;
  const content = op.requestBody?.content ?? {};
  const type = Object.keys(content)[variant.k % Math.max(1, Object.keys(content).length)];
  let body: string | undefined;
  if (type === 'application/json') body = JSON.stringify(sample(content[type].schema, walk));
  else if (type === 'text/csv') body = 'input\nhello from B\n';
  else if (type !== undefined && /ndjson|jsonl/.test(type)) body = '{"input": "hello from B"}\n';
  else if (type !== undefined) body = 'bytes from B';
  if (type !== undefined) headers['content-type'] = type;
  return {
    url,
    init: { method: method.toUpperCase(), headers, ...(body === undefined ? {} : { body }) },
    sent: `${url}\n${JSON.stringify(headers)}\n${body ?? ''}`,
  };
}

/** Every way to fill the operation's path with A's things: each parameter's alternatives in turn, the others at their first. */
/** Where a configuration of B's can embed: a run, an inspection, a commit; each asked to resolve. */
function embedding(references: unknown): Array<[string, string, unknown, Record<string, string>]> {
  const agent = { ...template(), instructions: { '@ag.embed': { '@ag.references': references, '@ag.selector': { path: 'parameters.agent.instructions' } } } };
  return [
    ['POST', '/services/agent/v0/invoke', { ...invokeBody([{ role: 'user', content: 'hi' }], agent), flags: { resolve: true } }, {}],
    ['POST', '/services/agent/v0/inspect', { data: { parameters: { agent } } }, { 'x-ag-workflow-embeds': 'resolve' }],
    ['POST', '/api/workflows', { slug: freshName(), family: 'application', data: { parameters: { agent } } }, {}],
  ];
}

function pathFillings(path: string): Array<Record<string, string>> {
  const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
  const first = Object.fromEntries(names.map((n) => [n, PATH_IDS[n]!(a)[0]!]));
  const out = [first];
  for (const n of names) for (const alt of PATH_IDS[n]!(a).slice(1)) out.push({ ...first, [n]: alt });
  return out;
}

/** The variants sent: required fields only, then every field, and every reference set where the body takes references. */
function variantsFor(op: any): Variant[] {
  const takesReferences = bodyPlaces(op.requestBody?.content?.['application/json']?.schema, resolverOf(doc)).some((p) => /^(data\.)?references$/.test(p));
  const ks = takesReferences ? REFERENCE_SETS.length : Math.max(1, Object.keys(op.requestBody?.content ?? {}).length);
  return [
    { k: 0, optional: false, bound: 'min', nulls: false },
    ...Array.from({ length: ks }, (_, k) => ({ k, optional: true, bound: 'min' as const, nulls: false })),
  ];
}

/** Invoke and uploads last: they make B's own session under A's session id, which the routes before must not find. */
function walkOrder(): Array<[string, string, any]> {
  const makesSession = (method: string, path: string) => (path === '/services/agent/v0/invoke' && method === 'post') || MAKES_OWN[`${method.toUpperCase()} ${path}`] !== undefined;
  const rank = ([method, path]: [string, string, any]) => (makesSession(method, path) ? 2 : method === 'delete' ? 1 : 0);
  return operationsOf(doc).sort((x, y) => rank(x) - rank(y));
}

/**
 * Operations that, on a name B's project does not hold, make B's own thing of that name: an upload
 * makes its session (docs/sessions.md), which then is B's, beside A's of the same id.
 */
const MAKES_OWN: Record<string, number> = { 'PUT /api/sessions/{session_id}/files': 201 };

/**
 * What the answer must be: naming A is a 403. Naming B, what names A's thing in its path answers
 * exactly as a name nothing has (else the answer tells A's things apart: an oracle), and that is
 * not a success (but the resume stream's 204, and MAKES_OWN). Otherwise no 401 or 403 for B's own.
 */
function problem(operation: string, mode: Mode, answer: Answer, asNothing: Answer | undefined): string | undefined {
  const { status, type } = answer;
  if (status >= 500) return `answered ${status}`;
  if (mode === 'A') return status === 403 && type === 'forbidden' ? undefined : `naming project A answered ${status} ${type ?? ''}, not 403 forbidden`;
  if (operation === 'GET /services/agent/v0/invoke/{session_id}/stream') return status === 204 ? undefined : `answered ${status}, not 204`;
  if (MAKES_OWN[operation] !== undefined) return status === MAKES_OWN[operation] ? undefined : `answered ${status} ${type ?? ''}, not ${MAKES_OWN[operation]}`;
  if (asNothing) {
    if (status < 300) return `answered ${status} on A's thing`;
    if (status !== asNothing.status || type !== asNothing.type) return `answered ${status} ${type ?? ''} on A's thing, but ${asNothing.status} ${asNothing.type ?? ''} on a name nothing has`;
    return undefined;
  }
  if (status === 403 || status === 401) return `answered ${status} ${type ?? ''} to B's own project`;
  return undefined;
}

interface Answer {
  status: number;
  type: string | undefined;
  text: string;
  json: any;
  headers: string;
}

async function send(request: Sent): Promise<Answer> {
  const res = await fetch(`${h.url}${request.url}`, request.init);
  const text = await res.text();
  const json = res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : undefined;
  return { status: res.status, type: json?.status?.type, text, json, headers: JSON.stringify([...res.headers]) };
}

describe("a key of project B on project A's things", () => {
  it('every operation of /openapi.json is placed: an id-like place the walk cannot fill fails here', () => {
    const missing = operationsOf(doc).flatMap(([method, path, op]) => unplaced(`${method.toUpperCase()} ${path}`, op).map((place) => `${method.toUpperCase()} ${path}: ${place}`));
    expect(missing, 'add these to PATH_IDS or PLACES').toEqual([]);
  });

  it('is refused (403 naming A, 404 naming B) on every operation, sees none of A, and changes nothing of A', async () => {
    const wrong: string[] = [];
    const modelCalls = h.model.requests.length;
    let sent = 0;
    for (const [method, path, op] of walkOrder()) {
      const operation = `${method.toUpperCase()} ${path}`;
      const projectRequired = (op.parameters ?? []).some((p: any) => p.name === 'project_id' && p.required);
      const modes: Mode[] = ['A', 'B', ...(projectRequired ? [] : ['no project' as const])];
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
      for (const mode of modes) {
        for (const pathValues of pathFillings(path)) {
          for (const variant of variantsFor(op)) {
            const request = buildRequest(operation, method, path, op, variant, mode, pathValues);
            told += request.sent;
            const answer = await send(request);
            sent++;
            const nothing = Object.fromEntries(names.map((n) => [n, `nothing-${tag}`]));
            const asNothing = names.length && mode !== 'A' && !MAKES_OWN[operation] ? await send(buildRequest(operation, method, path, op, variant, mode, nothing)) : undefined;
            const where = `${operation} as ${mode} ${JSON.stringify(variant)}\n  ${request.init.method} ${request.url}\n  body: ${String(request.init.body ?? '').slice(0, 300)}\n  answer: ${answer.text.slice(0, 300)}`;
            const bad = problem(operation, mode, answer, asNothing);
            if (bad) wrong.push(`${bad}: ${where}`);
            if (answer.status >= 400 && !(answer.json?.status?.code === answer.status && typeof answer.json.status.message === 'string')) wrong.push(`not the error envelope: ${where}`);
            const seen = leaked(answer.text + answer.headers);
            if (seen.length) wrong.push(`A's ${seen.join(', ')} in the answer: ${where}`);
          }
        }
      }
    }
    // B's turns never carried A's conversation, instructions or test cases to a model.
    const conversations = JSON.stringify(h.model.requests.slice(modelCalls).map((r) => r.messages));
    const toModel = markers.filter((m) => conversations.includes(m) && m !== a.session);
    if (toModel.length) wrong.push(`B's turns told the model A's ${toModel.join(', ')}`);
    expect(sent).toBeGreaterThan(150);
    expect(wrong, wrong.join('\n\n')).toEqual([]);
    expect(await snapshot()).toEqual(before);
  }, 300_000);

  it("names B's own session with A's session id: a turn there never continues A's conversation", async () => {
    const modelCalls = h.model.requests.length;
    const own = await call(B, 'POST', '/services/agent/v0/invoke', invokeBody([{ role: 'user', content: `B says hi ${tag}` }], template(), { session_id: a.session }));
    const ownText = await own.text();
    expect(own.status, ownText).toBe(200);
    expect(leaked(ownText)).toEqual([]);
    // The model heard B's message alone: nothing of A's conversation came with it.
    const heard = JSON.stringify(h.model.requests.slice(modelCalls).map((r) => r.messages));
    expect(heard).toContain(`B says hi ${tag}`);
    expect(markers.filter((m) => heard.includes(m) && m !== a.session)).toEqual([]);

    // A's paused call re-posted with its decision: B's session never paused on it (docs/errors.md, invalid-approval).
    const call_ = { role: 'tool', content: '', tool_call_id: 'call_1', tool_name: 'write', input: { path: 'a.txt', content: 'A' }, approval: { id: a.interaction, approved: true } };
    const approval = await call(B, 'POST', '/services/agent/v0/invoke', invokeBody([{ role: 'user', content: 'please write' }, call_], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: a.session }));
    const approvalText = await approval.text();
    expect(approval.status, approvalText).toBe(400);
    expect(JSON.parse(approvalText).status.type).toBe('invalid-approval');

    // A's project connection is not B's to use.
    const borrowed = await call(B, 'POST', '/services/agent/v0/invoke', invokeBody([{ role: 'user', content: 'hi' }], { llm: { model: 'fake-model', connection: { mode: 'project', slug: a.connection.slug } } }));
    expect(borrowed.status).toBe(404);
    expect((await borrowed.json()).status.type).toBe('not-found');

    // B reads its own session of that id: its turns, none of A's.
    const read = await call(B, 'GET', `/api/sessions/${a.session}`);
    const readText = await read.text();
    expect(read.status).toBe(200);
    expect(JSON.parse(readText).session.project_id).toBe(B.id);
    expect(leaked(readText)).toEqual([]);
    expect(await snapshot()).toEqual(before);
  });

  it("a live turn of A: B's key cannot attach to it (SSE, NDJSON, JSON, Vercel resume), stop it, delete its session, or be held off by it", async () => {
    let open!: () => void;
    gate = { marker: `hold-${tag}`, opened: new Promise<void>((resolve) => (open = resolve)), open: () => open() };
    const live = `a-live-${tag}`;
    const running = call(A, 'POST', '/services/agent/v0/invoke', invokeBody([{ role: 'user', content: `A-msg-${tag} hold-${tag}` }], template(), { session_id: live }));
    try {
      await until(
        async () => (await (await call(A, 'GET', `/api/sessions/${live}`)).json()).live_turn,
        (turn) => turn !== undefined,
      );
      const answers: string[] = [];
      const expectAnswer = async (what: string, res: Response, status: number, type?: string) => {
        const text = await res.text();
        const got = `${res.status} ${res.status >= 400 ? JSON.parse(text).status.type : ''}`.trim();
        if (got !== `${status} ${type ?? ''}`.trim()) answers.push(`${what}: ${got} (not ${status} ${type ?? ''}) ${text.slice(0, 200)}`);
        const seen = leaked(text + JSON.stringify([...res.headers]));
        if (seen.length) answers.push(`${what}: A's ${seen.join(', ')} in the answer`);
      };
      for (const project of [B.id, A.id]) {
        const refused = project === A.id ? ([403, 'forbidden'] as const) : undefined;
        const resume = await call(B, 'GET', `/services/agent/v0/invoke/${live}/stream`, undefined, project);
        await expectAnswer(`resume stream naming ${project}`, resume, refused?.[0] ?? 204, refused?.[1]);
        for (const [accept, format] of [['text/event-stream', undefined], ['application/x-ndjson', undefined], ['application/json', undefined], ['text/event-stream', 'vercel']] as const) {
          const attach = await call(B, 'POST', '/services/agent/v0/invoke', { session_id: live }, project, { 'x-ag-session-control': 'force', accept, ...(format ? { 'x-ag-messages-format': format } : {}) });
          await expectAnswer(`force attach ${accept} ${format ?? ''} naming ${project}`, attach, refused?.[0] ?? 404, refused?.[1] ?? 'not-found');
        }
        await expectAnswer(`stop naming ${project}`, await call(B, 'POST', `/api/sessions/${live}/stop`, undefined, project), refused?.[0] ?? 404, refused?.[1] ?? 'not-found');
        await expectAnswer(`delete naming ${project}`, await call(B, 'DELETE', `/api/sessions/${live}`, undefined, project), refused?.[0] ?? 404, refused?.[1] ?? 'not-found');
      }
      // A turn of B's own session of that id runs beside A's: A's lease is not B's (no 409 session-busy).
      await expectAnswer('B invoking its own session of that id', await call(B, 'POST', '/services/agent/v0/invoke', invokeBody([{ role: 'user', content: 'B here' }], template(), { session_id: live })), 200);
      await expectAnswer('B forcing its own session of that id', await call(B, 'POST', '/services/agent/v0/invoke', invokeBody([{ role: 'user', content: 'B again' }], template(), { session_id: live }), B.id, { 'x-ag-session-control': 'force' }), 200);
      expect(answers, answers.join('\n')).toEqual([]);
    } finally {
      gate.open();
    }
    const done = await running;
    const body = await done.json();
    expect(done.status, JSON.stringify(body)).toBe(200);
    expect(body.data.outputs.stop_reason).toBe('end_turn');
    const turns = (await (await call(A, 'GET', `/api/sessions/${live}`)).json()).turns;
    expect(turns.map((t: any) => t.status)).toEqual(['completed']);
    gate = undefined;
  });

  it("resolves no @ag.embed of B's configuration into A's revisions (invoke, inspect, commit)", async () => {
    const wrong: string[] = [];
    const nothing = { application: { id: `nothing-${tag}` } };
    for (const refs of REFERENCE_SETS) {
      for (const [method, path, body, headers] of embedding(refs(a))) {
        const res = await call(B, method, path, body, B.id, headers);
        const text = await res.text();
        const type = res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text).status?.type : undefined;
        // Answered as an embed of nothing is: an unknown reference, or (inspect of an inline template) the same 200.
        const [, , unknownBody, unknownHeaders] = embedding(nothing).find(([m, p]) => m === method && p === path)!;
        const asNothing = await call(B, method, path, unknownBody, B.id, unknownHeaders);
        await asNothing.text();
        if (res.status !== asNothing.status || (res.status >= 400 && type !== 'unknown-reference')) wrong.push(`${method} ${path} ${JSON.stringify(refs(a))}: ${res.status} ${type ?? ''}, but ${asNothing.status} naming nothing: ${text.slice(0, 300)}`);
        const seen = leaked(text);
        if (seen.length) wrong.push(`${method} ${path}: A's ${seen.join(', ')} in the answer`);
      }
    }
    expect(wrong, wrong.join('\n')).toEqual([]);
    expect(await snapshot()).toEqual(before);
  });

  it("lets B name its own things as A's are named, and A's stay as they were", async () => {
    await ok(await call(B, 'POST', '/api/connections', { slug: a.connection.slug, provider: 'openai', api_key: 'sk-b' }));
    await ok(await call(B, 'POST', '/api/workflows', { slug: a.workflow.slug, variant: a.variant.slug, family: 'application', data: { parameters: { agent: template() } } }));
    await ok(await call(B, 'POST', '/api/environments', { slug: a.environment.slug }));
    await ok(await call(B, 'POST', '/api/simple/testsets/', { testset: { slug: a.testset.slug, data: { testcases: [{ id: a.testcase, data: { messages: [{ role: 'user', content: 'B' }] } }] } } }));
    for (const path of [`/api/connections/${a.connection.slug}`, `/api/workflows/${a.workflow.slug}`, `/api/environments/${a.environment.slug}`, `/api/simple/testsets/${a.testset.slug}`]) {
      const text = await (await call(B, 'GET', path)).text();
      expect(leaked(text), path).toEqual([]);
    }
    expect(await snapshot()).toEqual(before);
  });

});
