import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import { ConnectionList } from '../../src/contract/connections.ts';
import { EnvironmentList, WorkflowList } from '../../src/contract/configs.ts';
import { TestsetList } from '../../src/contract/evaluations.ts';
import { KeyList } from '../../src/contract/keys.ts';
import { encodeListCursor } from '../../src/store/cursor.ts';
import { expectError, startHarness, type Harness } from '../support/harness.ts';

/**
 * The lists read whole unless asked for a page (docs/api.md "Paging"): test sets (and their
 * query), workflows, environments, keys and connections. Without `limit` they answer every item
 * as before; with it, pages that together hold every item once, in the same order, and a cursor
 * that only the list and project that gave it out accept.
 */

const tag = randomBytes(3).toString('hex');
let h: Harness;
interface Caller {
  key: string;
  projectId: string;
}
let a: Caller;
let b: Caller;

const call = async (as: Caller, method: string, path: string, body?: unknown) =>
  fetch(`${h.url}${path}`, {
    method,
    headers: { authorization: `ApiKey ${as.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

async function ok(res: Response): Promise<any> {
  const text = await res.text();
  expect(res.status, text).toBeLessThan(300);
  return JSON.parse(text);
}

/** Slugs whose order differs between byte order and a language's (PostgreSQL's default collation). */
const SLUGS = ['b-two', 'B_one', 'a.three', 'A-four', '_five'];
const CONNECTION_SLUGS = ['c-two', 'c_one', 'c3', 'b-four', 'c'];
/** Any of project B's slugs (its prefix is q). */
const B_SLUG = /q(b-two|B_one|a\.three|A-four|_five|c-two|c_one|c3|b-four|c)/;

/** Fills a project with five of each listed thing (keys: its own and four more). */
async function fill(as: Caller, prefix: string) {
  for (const [i, slug] of SLUGS.entries()) {
    const family = i % 2 === 0 ? 'application' : 'workflow';
    await ok(await call(as, 'POST', '/api/workflows', { slug: `${prefix}${slug}`, family }));
    await ok(await call(as, 'POST', '/api/environments', { slug: `${prefix}${slug}` }));
    const color = i % 2 === 0 ? 'red' : 'blue';
    await ok(await call(as, 'POST', '/api/simple/testsets/', { testset: { slug: `${prefix}${slug}`, tags: { color }, data: { testcases: [{ data: { q: slug } }] } } }));
  }
  for (const slug of CONNECTION_SLUGS) {
    await ok(await call(as, 'POST', '/api/connections', { slug: `${prefix.toLowerCase()}${slug}`, provider: 'openai', api_key: 'sk-list-paging-key' }));
  }
  for (let i = 0; i < 4; i++) await h.store.apiKeys.create(as.projectId, 'viewer');
}

async function adminOf(projectId: string): Promise<Caller> {
  return { key: (await h.store.apiKeys.create(projectId, 'admin')).key, projectId };
}

beforeAll(async () => {
  h = await startHarness();
  a = await adminOf(h.projectId);
  b = await adminOf((await h.store.projects.ensure(`paging-b-${tag}`)).id);
  await fill(a, 'p');
  await fill(b, 'q');
});
afterAll(async () => h.close());

interface List {
  name: string;
  path: string;
  field: string;
  schema: { parse(value: unknown): unknown };
}

const LISTS: List[] = [
  { name: 'test sets', path: '/api/simple/testsets/', field: 'testsets', schema: TestsetList },
  { name: 'workflows', path: '/api/workflows', field: 'workflows', schema: WorkflowList },
  { name: 'application workflows', path: '/api/workflows?family=application', field: 'workflows', schema: WorkflowList },
  { name: 'environments', path: '/api/environments', field: 'environments', schema: EnvironmentList },
  { name: 'keys', path: '/api/keys', field: 'keys', schema: KeyList },
  { name: 'connections', path: '/api/connections', field: 'connections', schema: ConnectionList },
];

const withQuery = (path: string, query: Record<string, string>) => `${path}${path.includes('?') ? '&' : '?'}${new URLSearchParams(query)}`;

async function read(list: List, as: Caller, query: Record<string, string> = {}): Promise<{ count: number; next?: string; items: any[] }> {
  const body = await ok(await call(as, 'GET', withQuery(list.path, query)));
  expect(list.schema.parse(body)).toEqual(body);
  expect(body.count).toBe(body[list.field].length);
  return { count: body.count, next: body.next, items: body[list.field] };
}

/** Every item's id, one page of `limit` at a time, following `next`; each page checked on the way. */
async function pageThrough(read: (cursor: string | undefined) => Promise<{ next?: string; items: { id: string }[] }>, limit: number, total: number): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await read(cursor);
    expect(page.items.length).toBeLessThanOrEqual(limit);
    // A page short of the limit is the last; a full page says whether more follow.
    if (page.items.length < limit) expect(page.next).toBeUndefined();
    seen.push(...page.items.map((item) => item.id));
    cursor = page.next;
  } while (cursor !== undefined && seen.length <= total);
  return seen;
}

describe.each(LISTS)('GET $name', (list) => {
  it('answers the whole list without a limit, and pages through it with one, each item once and in the same order', async () => {
    const whole = await read(list, a);
    expect(whole.next).toBeUndefined();
    expect(whole.items.length).toBeGreaterThanOrEqual(list.field === 'workflows' && list.path.includes('family') ? 2 : 5);
    const ids = whole.items.map((item) => item.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (let limit = 1; limit <= ids.length + 1; limit++) {
      const paged = await pageThrough((cursor) => read(list, a, { limit: String(limit), ...(cursor ? { cursor } : {}) }), limit, ids.length);
      expect(paged, `limit ${limit}`).toEqual(ids);
    }
    const first = await read(list, a, { limit: '2' });
    expect(first.count).toBe(2);
    expect(first.next).toEqual(expect.any(String));
    // A cursor without a limit reads the rest of the list.
    expect((await read(list, a, { cursor: first.next! })).items.map((item) => item.id)).toEqual(ids.slice(2));
  });

  it("refuses a cursor of another project's list, of another list or made up, naming the parameter", async () => {
    const foreign = (await read(list, b, { limit: '1' })).next!;
    expect(foreign).toEqual(expect.any(String));
    const other = LISTS.find((l) => l.field !== list.field)!;
    const elsewhere = (await read(other, a, { limit: '1' })).next!;
    // The cursor of a list that pages by time: [created_at, id].
    const timed = Buffer.from(JSON.stringify([new Date().toISOString(), 'x'])).toString('base64url');
    // Made with this list's own tag, as anyone who knows the project id could: a NUL the database would choke on.
    const forged = encodeListCursor({ list: `GET ${list.path.split('?')[0]}`, projectId: a.projectId }, { key: 'x\u0000', id: 'y' });
    const bad = [foreign, elsewhere, timed, forged, 'not a cursor', 'bm90LWpzb24', Buffer.from(JSON.stringify(['x', 'y', 'z'])).toString('base64url')];
    for (const cursor of bad) {
      const res = await call(a, 'GET', withQuery(list.path, { limit: '2', cursor }));
      const body = await expectError(res, 400, 'invalid-request');
      expect(body.status.message).toMatch(/^cursor /);
      // Beside the cursor the caller sent (its first 80 characters), nothing of project B (expectError: no data either).
      expect(JSON.stringify(body).replace(cursor.slice(0, 80), '')).not.toMatch(B_SLUG);
    }
    for (const limit of ['0', '201', '1.5', 'many', '']) {
      const res = await call(a, 'GET', withQuery(list.path, { limit }));
      const body = await expectError(res, 400, 'invalid-request');
      expect(body.status.message).toContain('limit');
      expect(body.status.message).toContain('absent: the whole list');
    }
  });
});

describe('POST /api/simple/testsets/query', () => {
  const query = async (as: Caller, body: unknown) => {
    const reply = await ok(await call(as, 'POST', '/api/simple/testsets/query', body));
    expect(TestsetList.parse(reply)).toEqual(reply);
    expect(reply.count).toBe(reply.testsets.length);
    return reply as { count: number; next?: string; testsets: { id: string; slug: string; tags?: Record<string, unknown> }[] };
  };

  it('answers every match without windowing.limit, and pages through the matches with it, windowing.next continuing', async () => {
    const whole = await query(a, { testset: { tags: { color: 'blue' } } });
    expect(whole.next).toBeUndefined();
    const ids = whole.testsets.map((t) => t.id);
    expect(ids.length).toBeGreaterThanOrEqual(2);
    expect(whole.testsets.every((t) => t.tags?.color === 'blue')).toBe(true);
    expect((await query(a, {})).testsets.map((t) => t.id)).toEqual((await read(LISTS[0]!, a)).items.map((t) => t.id));
    for (let limit = 1; limit <= ids.length + 1; limit++) {
      const paged = await pageThrough(async (next) => {
        const reply = await query(a, { testset: { tags: { color: 'blue' } }, windowing: { limit, ...(next ? { next } : {}) } });
        return { next: reply.next, items: reply.testsets };
      }, limit, ids.length);
      expect(paged, `limit ${limit}`).toEqual(ids);
    }
    // `cursor`, as results/query also takes it, continues as `next` does.
    const first = await query(a, { testset: { tags: { color: 'blue' } }, windowing: { limit: 1 } });
    expect((await query(a, { testset: { tags: { color: 'blue' } }, windowing: { limit: 10, cursor: first.next } })).testsets.map((t) => t.id)).toEqual(ids.slice(1));
  });

  it("refuses the next value of another project's query, of the list route or made up, naming windowing.next", async () => {
    const foreign = (await query(b, { windowing: { limit: 1 } })).next!;
    const listed = (await read(LISTS[0]!, a, { limit: '1' })).next!;
    for (const next of [foreign, listed, 'garbage!']) {
      const body = await expectError(await call(a, 'POST', '/api/simple/testsets/query', { windowing: { limit: 2, next } }), 400, 'invalid-request');
      expect(body.status.message).toMatch(/^windowing\.next /);
      expect(JSON.stringify(body).replace(next.slice(0, 80), '')).not.toMatch(B_SLUG);
    }
    const listCursor = await expectError(await call(a, 'GET', `/api/simple/testsets/?limit=1&cursor=${(await query(a, { windowing: { limit: 1 } })).next}`), 400, 'invalid-request');
    expect(listCursor.status.message).toMatch(/^cursor .*GET \/api\/simple\/testsets\//);
    const bad = await expectError(await call(a, 'POST', '/api/simple/testsets/query', { windowing: { limit: 0 } }), 400, 'invalid-request');
    expect(bad.status.message).toContain('windowing.limit');
  });
});

describe('the client', () => {
  it('passes limit and cursor through its list helpers, and reads whole lists without them', async () => {
    const client = createClient({ baseUrl: h.url, apiKey: a.key, projectId: a.projectId });
    const whole = await client.workflows.list();
    const first = await client.workflows.list({ limit: 2 });
    const rest = await client.workflows.list({ limit: 200, cursor: first.next! });
    expect([...first.workflows, ...rest.workflows].map((w) => w.id)).toEqual(whole.workflows.map((w) => w.id));
    expect((await client.workflows.list('application')).workflows.every((w) => w.family === 'application')).toBe(true);
    for (const list of [client.testsets.list, client.environments.list, client.keys.list, client.connections.list]) {
      const page = await list({ limit: 1 });
      expect(page.count).toBe(1);
      expect(page.next).toEqual(expect.any(String));
    }
    const matched = await client.testsets.query({ testset: { tags: { color: 'red' } }, windowing: { limit: 1 } });
    expect(matched.count).toBe(1);
    expect((await client.testsets.query({ testset: { tags: { color: 'red' } }, windowing: { limit: 1, next: matched.next! } })).testsets[0]!.id).not.toBe(matched.testsets[0]!.id);
  });
});

describe('the API reference', () => {
  it('documents limit and cursor on each list, next in each reply, and windowing.next in the query', async () => {
    const doc = await ok(await fetch(`${h.url}/openapi.json`));
    const replyOf = (op: any) => {
      const schema = op.responses['200'].content['application/json'].schema;
      return schema.$ref ? doc.components.schemas[schema.$ref.split('/').at(-1)] : schema;
    };
    for (const path of ['/api/simple/testsets/', '/api/workflows', '/api/environments', '/api/keys', '/api/connections']) {
      const op = doc.paths[path].get;
      expect(op.parameters.filter((p: any) => p.in === 'query').map((p: any) => p.name), path).toEqual(expect.arrayContaining(['limit', 'cursor']));
      expect(op.parameters.find((p: any) => p.name === 'limit').description, path).toContain('absent, the whole list');
      expect(replyOf(op).properties.next, path).toBeDefined();
      expect(replyOf(op).required, path).not.toContain('next');
    }
    const queryOp = doc.paths['/api/simple/testsets/query'].post;
    const body = queryOp.requestBody.content['application/json'].schema;
    const resolved = body.$ref ? doc.components.schemas[body.$ref.split('/').at(-1)] : body;
    expect(Object.keys(resolved.properties.windowing.properties)).toEqual(expect.arrayContaining(['limit', 'next']));
    expect(replyOf(queryOp).properties.next).toBeDefined();
  });
});
