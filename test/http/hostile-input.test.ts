import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { seededRandom } from '../../src/testing/seeded-random.ts';
import { configsApi, createWorkflow, deploy } from '../configs/client.ts';

/**
 * Issue 19: no input reaches a 500, and every error is the envelope. A seeded mutation fuzzer
 * starts from a valid request for every route and changes it the way a hostile or careless client
 * would: prototype-named keys and values (`__proto__`, `constructor`, `toString` …), control bytes,
 * huge and deeply nested values, wrong types, nulls, missing fields, odd path parameters. Bounded
 * in count; the seed makes a failure repeatable (AGENTD_FUZZ_SEED picks another).
 */

let h: Harness;
const SEED = Number(process.env.AGENTD_FUZZ_SEED ?? 19);
const REQUESTS = 1200;

interface Seed {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** `:name` segments are path parameters the fuzzer may replace. */
  path: string;
  params?: Record<string, string>;
  body?: unknown;
  headers?: Record<string, string>;
}

let seeds: Seed[] = [];

const PROTO_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype'];

function deep(levels: number): unknown {
  let value: unknown = 'bottom';
  for (let i = 0; i < levels; i++) value = i % 2 ? [value] : { a: value };
  return value;
}

const HOSTILE_VALUES: unknown[] = [
  ...PROTO_NAMES,
  '',
  'a\u0000b',
  '\u0001\u001f\u007f',
  '../../etc/passwd',
  '%2e%2e%2f',
  'x'.repeat(70_000),
  '\ud800',
  -1,
  0,
  1e308,
  2 ** 53 + 1,
  true,
  null,
  [],
  {},
  [null],
  { constructor: { name: 'x' } },
  deep(30),
  deep(150),
];

const HOSTILE_PARAMS = [...PROTO_NAMES, 'x'.repeat(300), '..', '%2e%2e', 'a%00b', '%ff', ' ', 'a.b:c-d_e'];

type Container = Record<string, unknown> | unknown[];

/** Every object or array in the value, with itself first. */
function containers(value: unknown, out: Container[] = []): Container[] {
  if (value !== null && typeof value === 'object') {
    out.push(value as Container);
    for (const child of Object.values(value)) containers(child, out);
  }
  return out;
}

function mutate(seed: Seed, rnd: () => number): { url: string; method: string; body: string | undefined; headers: Record<string, string> } {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)]!;
  const body: unknown = seed.body === undefined ? undefined : structuredClone(seed.body);
  const params = { ...seed.params };
  const query = new URLSearchParams({ project_id: h.projectId });
  const headers: Record<string, string> = { authorization: `ApiKey ${h.apiKey}`, ...seed.headers };
  for (let n = 1 + Math.floor(rnd() * 3); n > 0; n--) {
    const places = containers(body);
    const kind = rnd();
    if (kind < 0.45 && places.length) {
      // A value replaced.
      const place = pick(places);
      const keys = Object.keys(place);
      if (keys.length) (place as Record<string, unknown>)[pick(keys)] = structuredClone(pick(HOSTILE_VALUES));
    } else if (kind < 0.65 && places.length) {
      // A key with a prototype's name added, as an own property (JSON can carry `__proto__`).
      const place = pick(places);
      if (!Array.isArray(place)) Object.defineProperty(place, pick(PROTO_NAMES), { value: structuredClone(pick(HOSTILE_VALUES)), enumerable: true, writable: true, configurable: true });
    } else if (kind < 0.75 && places.length) {
      const place = pick(places);
      const keys = Object.keys(place);
      if (keys.length && !Array.isArray(place)) delete place[pick(keys)];
    } else if (kind < 0.9 && Object.keys(params).length) {
      params[pick(Object.keys(params))] = pick(HOSTILE_PARAMS);
    } else if (kind < 0.95) {
      query.set('project_id', pick(HOSTILE_PARAMS));
    } else {
      query.set(pick(['limit', 'cursor', 'path', 'format', 'input']), pick(HOSTILE_PARAMS));
    }
  }
  // A hostile parameter is sent as it stands: a `%` or `..` the router must cope with itself.
  const path = seed.path.replace(/:(\w+)/g, (_, name: string) => (PROTO_NAMES.includes(params[name]!) || /^[\w.:-]*$/.test(params[name]!) ? encodeURIComponent(params[name]!) : params[name]!));
  const text = body === undefined ? undefined : JSON.stringify(body);
  return { url: `${h.url}${path}?${query}`, method: seed.method, body: text, headers: text === undefined ? headers : { 'content-type': 'application/json', ...headers } };
}

beforeAll(async () => {
  h = await startHarness();
  const agent = template({ tools: [builtin('write'), builtin('read')], mode: 'ask' });
  await createWorkflow(h, 'fuzz-wf', { agent: template() });
  const env = await configsApi(h, 'POST', '/environments', { slug: 'fuzz-env' });
  expect(env.status).toBe(201);
  await deploy(h, 'fuzz-env', { workflow: { slug: 'fuzz-wf' } }, 'fuzz-wf');
  const session = sid('fuzz');
  h.model.script({ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] });
  const paused = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write' }], agent, { session_id: session })));
  const interaction = paused.data.outputs.pending_interaction.id as string;
  const testset = (await (await configsApi(h, 'POST', '/simple/testsets/', { testset: { slug: 'fuzz-ts', data: { testcases: [{ data: { messages: [{ role: 'user', content: 'hi' }], expected: 'hi' } }] } } })).json()).testset;
  const workflow = (await (await configsApi(h, 'GET', '/workflows/fuzz-wf/revisions')).json()).revisions[0];
  const run = (await (await configsApi(h, 'POST', '/simple/evaluations/', { evaluation: { data: { testset_steps: [testset.revision_id], application_steps: [workflow.id] } } })).json()).evaluation;
  const byEnv = { references: { environment: { slug: 'fuzz-env' } }, selector: { key: 'fuzz-wf', path: 'parameters' } };
  const turn = (extra: Record<string, unknown> = {}) => ({ session_id: sid('fz'), data: { inputs: { messages: [{ role: 'user', content: 'hi' }] }, parameters: { agent: template() } }, ...extra });
  seeds = [
    { method: 'POST', path: '/services/agent/v0/invoke', body: turn(), headers: { accept: 'application/json' } },
    { method: 'POST', path: '/services/agent/v0/invoke', body: { session_id: sid('fz'), data: { inputs: { messages: [{ role: 'user', content: 'hi' }] } }, ...byEnv } },
    {
      method: 'POST',
      path: '/services/agent/v0/invoke',
      body: turn({ data: { inputs: { messages: [{ role: 'user', content: 'hi' }] }, parameters: { agent: { llm: { provider: 'openai-compatible', model: 'm', connection: { mode: 'self_managed', slug: 'local' } } } } } }),
    },
    {
      method: 'POST',
      path: '/services/agent/v0/invoke',
      body: turn({
        secrets: { token: 't' },
        data: { inputs: { messages: [{ role: 'user', content: 'hi' }] }, parameters: { agent: { mcps: [{ name: 'm', connection: { type: 'http', url: 'http://127.0.0.1:9/{{secrets.token}}' } }] } } },
      }),
    },
    {
      method: 'POST',
      path: '/services/agent/v0/invoke',
      headers: { 'x-ag-messages-format': 'vercel', accept: 'application/json' },
      body: { id: sid('chat'), messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }], trigger: 'submit-message', data: { parameters: { agent: template() } } },
    },
    { method: 'GET', path: '/services/agent/v0/invoke/:session/stream', params: { session } },
    { method: 'POST', path: '/services/agent/v0/inspect', body: byEnv },
    { method: 'POST', path: '/services/agent/v0/inspect', body: { references: { environment: { slug: 'fuzz-env' } }, selector: { key: 'fuzz-wf' } }, headers: { 'x-ag-workflow-embeds': 'resolve' } },
    { method: 'POST', path: '/api/sessions/interactions/query', body: { query: { session_id: session, status: ['pending'] }, windowing: { limit: 5, order: 'descending' } } },
    { method: 'GET', path: '/api/sessions/interactions/:id', params: { id: interaction } },
    { method: 'POST', path: '/api/sessions/interactions/:id/respond', params: { id: interaction }, body: { answer: { approved: false, reason: 'no' } } },
    { method: 'POST', path: '/api/sessions/interactions/transition', body: { session_id: session, token: interaction, status: 'responded', resolution: { verdict: 'denied' } } },
    { method: 'GET', path: '/api/sessions/:session', params: { session } },
    { method: 'GET', path: '/api/sessions/:session/files', params: { session } },
    { method: 'PUT', path: '/api/sessions/:session/files', params: { session }, body: { not: 'bytes' } },
    { method: 'DELETE', path: '/api/sessions/:session', params: { session: sid('gone') } },
    { method: 'POST', path: '/api/connections', body: { slug: 'fz', provider: 'openai', api_key: 'sk-x', base_url: 'http://127.0.0.1:9' } },
    { method: 'GET', path: '/api/connections/:slug', params: { slug: 'fz' } },
    { method: 'POST', path: '/api/workflows', body: { slug: 'fz-wf', data: { parameters: { agent: template() } } } },
    { method: 'POST', path: '/api/workflows/resolve', body: byEnv },
    {
      method: 'POST',
      path: '/api/workflows/:workflow/revisions',
      params: { workflow: 'fuzz-wf' },
      body: { data: { parameters: { agent: { skills: [{ '@ag.embed': { '@ag.references': { environment: { slug: 'fuzz-env' } }, '@ag.selector': { key: 'fuzz-wf', path: 'parameters.agent.skills' } } }] } } } },
    },
    { method: 'GET', path: '/api/workflows/:workflow/revisions', params: { workflow: 'fuzz-wf' } },
    { method: 'POST', path: '/api/environments/:env/deploy', params: { env: 'fuzz-env' }, body: { references: { workflow: { slug: 'fuzz-wf' } }, key: 'fuzz-wf' } },
    { method: 'POST', path: '/api/environments/:env/undeploy', params: { env: 'fuzz-env' }, body: { key: 'nothing' } },
    { method: 'GET', path: '/api/environments/:env/revisions', params: { env: 'fuzz-env' } },
    { method: 'POST', path: '/api/simple/testsets/', body: { testset: { name: 'fz', tags: { a: 1 }, data: { testcases: [{ data: { messages: [{ role: 'user', content: 'x' }] } }] } } } },
    { method: 'PUT', path: '/api/simple/testsets/:id', params: { id: testset.id }, body: { testset: { data: { testcases: [{ data: { input: 'x' } }] } } } },
    { method: 'POST', path: '/api/simple/testsets/query', body: { testset: { tags: { a: 1 } }, testset_refs: [{ slug: 'fuzz-ts' }], windowing: { limit: 3 } } },
    { method: 'GET', path: '/api/simple/testsets/:id', params: { id: testset.id } },
    { method: 'POST', path: '/api/simple/evaluations/', body: { evaluation: { name: 'fz', data: { testset_steps: { [testset.revision_id]: 'custom' }, application_steps: [workflow.id], evaluators: [{ kind: 'contains', column: 'expected' }] } } } },
    { method: 'GET', path: '/api/evaluations/runs/:id', params: { id: run.id } },
    { method: 'POST', path: '/api/simple/evaluations/:id/stop', params: { id: run.id } },
    { method: 'POST', path: '/api/evaluations/results/query', body: { result: { run_id: run.id, scenario_ids: ['x'], statuses: ['success'] }, windowing: { limit: 2 } } },
    { method: 'POST', path: '/api/evaluations/metrics/query', body: { metrics: { run_ids: [run.id], scenario_ids: true } } },
  ];
}, 60_000);
afterAll(async () => h.close());

describe('hostile input, every route', () => {
  it(`${REQUESTS} mutated requests: never a 5xx, every error the envelope`, async () => {
    const rnd = seededRandom(SEED);
    const failures: string[] = [];
    for (let i = 0; i < REQUESTS && failures.length < 5; i++) {
      const request = mutate(seeds[i % seeds.length]!, rnd);
      const res = await fetch(request.url, { method: request.method, headers: request.headers, ...(request.body === undefined ? {} : { body: request.body }) });
      const text = await res.text();
      const what = `#${i} ${request.method} ${request.url.slice(h.url.length, h.url.length + 200)} ${(request.body ?? '').slice(0, 300)} → ${res.status} ${text.slice(0, 300)}`;
      if (res.status >= 500) failures.push(what);
      else if (res.status >= 400) {
        let body: { status?: { code?: unknown; message?: unknown; type?: unknown } } | undefined;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        const envelope = body?.status?.code === res.status && typeof body.status.message === 'string' && typeof body.status.type === 'string';
        if (!envelope || res.headers.get('x-ag-version') !== '2025.07.14') failures.push(`not the envelope: ${what}`);
      }
    }
    expect(failures).toEqual([]);
  }, 240_000);
});
