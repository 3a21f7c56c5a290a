import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/testing/fake-model.ts';
import { expectError, okJsonText, startHarness, template, type Harness } from '../support/harness.ts';
import { configsApi, createWorkflow, type ConfigCaller } from '../configs/client.ts';
import { createTestset, finalText, runEnded, runResults, startRun } from './client.ts';

/**
 * The test set API over HTTP (spec §4.5): create, read, list, edit into new revisions that runs
 * keep reading, file imports (CSV, JSONL), roles and project isolation, and a run over an import.
 */

let h: Harness;
let appRevision: string;
/** Model replies by the last user message; anything else gets `answer to <text>`. */
const replies = new Map<string, string>();

const userText = (req: RecordedRequest) => req.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';

function script(req: RecordedRequest) {
  const text = userText(req);
  return { text: replies.get(text) ?? `answer to ${text}`, usage: { input: 4, output: 2 } };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
let seq = 0;
const unique = (prefix: string) => `${prefix}-${process.pid}-${++seq}`;

const api = (method: string, path: string, body?: unknown, as?: ConfigCaller) => configsApi(h, method, path, body, as);
const message = (text: string) => [{ role: 'user', content: text }];
const row = (text: string, extra: Record<string, unknown> = {}) => ({ data: { messages: message(text), ...extra } });

const create = (testset: Record<string, unknown>) => createTestset(h, testset);

/** Uploads a file to a route as a client sends one: the file itself as the body, with its type. */
function post(path: string, text: string, type: string, as: ConfigCaller = { key: h.apiKey, projectId: h.projectId }): Promise<Response> {
  const sep = path.includes('?') ? '&' : '?';
  return fetch(`${h.url}/api${path}${sep}project_id=${as.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${as.key}`, 'content-type': type }, body: text });
}

async function imported(query: string, text: string, type: string): Promise<any> {
  const { body } = await okJsonText(await post(`/simple/testsets/import${query ? `?${query}` : ''}`, text, type));
  expect(body.count).toBe(1);
  expect(body.revision_id).toBe(body.testset.revision_id);
  return body.testset;
}

const evaluate = (testsetStep: string, data: Record<string, unknown> = {}) => startRun(h, testsetStep, appRevision, data, unique('run'));
const ended = (id: string) => runEnded(h, id);
const results = (runId: string) => runResults(h, runId);

beforeAll(async () => {
  h = await startHarness({ script });
  appRevision = (await createWorkflow(h, 'testsets-target', { agent: template() })).revision.id;
});
afterAll(async () => h.close());

describe('creating a test set', () => {
  it('mints an id per row, keeps a given one, and commits version 1', async () => {
    const rows = [row('first', { expected: 'a' }), { id: 'kept-row', data: { messages: message('second'), expected: 'b' }, tags: { split: 'dev' } }, row('third')];
    const testset = await create({ name: 'three rows', description: 'created over HTTP', tags: { team: 'evals' }, data: { testcases: rows } });
    expect(testset).toMatchObject({ name: 'three rows', description: 'created over HTTP', tags: { team: 'evals' }, version: 1 });
    expect(testset.id).toMatch(UUID);
    expect(testset.revision_id).toMatch(UUID);
    expect(testset.variant_id).toMatch(UUID);
    expect(new Set([testset.id, testset.revision_id, testset.variant_id]).size).toBe(3);
    // No slug given: one is made up.
    expect(testset.slug).toMatch(/^testset-[0-9a-f]{8}$/);

    const ids: string[] = testset.data.testcase_ids;
    expect(ids).toHaveLength(3);
    expect(ids[0]).toMatch(UUID);
    expect(ids[1]).toBe('kept-row');
    expect(ids[2]).toMatch(UUID);
    expect(ids[0]).not.toBe(ids[2]);
    expect(testset.data.testcases).toEqual([
      { id: ids[0], data: { messages: message('first'), expected: 'a' } },
      { id: 'kept-row', data: { messages: message('second'), expected: 'b' }, tags: { split: 'dev' } },
      { id: ids[2], data: { messages: message('third') } },
    ]);
  });

  it('uses a slug given, and refuses one the project already has', async () => {
    const slug = unique('named-set');
    const testset = await create({ slug, data: { testcases: [row('only')] } });
    expect(testset.slug).toBe(slug);
    await expectError(await api('POST', '/simple/testsets/', { testset: { slug, data: { testcases: [row('again')] } } }), 409, 'conflict', new RegExp(slug));
    // The first is untouched.
    const { body } = await okJsonText(await api('GET', `/simple/testsets/${slug}`));
    expect(body.testset).toMatchObject({ id: testset.id, version: 1, data: { testcase_ids: testset.data.testcase_ids } });
  });

  it('refuses duplicate row ids, no rows and unknown keys, creating nothing', async () => {
    const slug = unique('refused');
    const duplicate = { slug, data: { testcases: [{ id: 'same', data: { messages: message('a') } }, { id: 'same', data: { messages: message('b') } }] } };
    await expectError(await api('POST', '/simple/testsets/', { testset: duplicate }), 400, 'invalid-request', /testcases\[1\]\.id "same"/);
    await expectError(await api('POST', '/simple/testsets/', { testset: { slug, data: { testcases: [] } } }), 400, 'invalid-request', /testcases/);
    await expectError(await api('POST', '/simple/testsets/', { testset: { slug, colour: 'red', data: { testcases: [row('x')] } } }), 400, 'invalid-request', /"colour"/);
    await expectError(await api('POST', '/simple/testsets/', { testset: { slug, data: { testcases: [{ data: {}, weight: 2 }] } } }), 400, 'invalid-request', /"weight"/);
    await expectError(await api('POST', '/simple/testsets/', { testset: { slug, data: { testcases: [row('x')] } }, extra: true }), 400, 'invalid-request', /"extra"/);
    await expectError(await api('GET', `/simple/testsets/${slug}`), 404, 'not-found', new RegExp(slug));
  });
});

describe('reading test sets', () => {
  it('gets one by id or slug with its rows; lists them with row ids only; 404 for an unknown one', async () => {
    const slug = unique('readable');
    const created = await create({ slug, name: 'readable', data: { testcases: [row('r1'), row('r2')] } });
    const byId = (await okJsonText(await api('GET', `/simple/testsets/${created.id}`))).body;
    const bySlug = (await okJsonText(await api('GET', `/simple/testsets/${slug}`))).body;
    expect(byId.count).toBe(1);
    expect(byId.testset).toEqual(created);
    expect(bySlug.testset).toEqual(created);

    const { body: list } = await okJsonText(await api('GET', '/simple/testsets/'));
    expect(list.count).toBe(list.testsets.length);
    const entry = list.testsets.find((t: any) => t.id === created.id);
    const { testcases: _rows, ...ids } = created.data;
    expect(entry).toEqual({ ...created, data: ids });
    expect(entry.data.testcases).toBeUndefined();
    expect(list.testsets.every((t: any) => Array.isArray(t.data.testcase_ids) && t.data.testcases === undefined)).toBe(true);

    await expectError(await api('GET', '/simple/testsets/no-such-testset'), 404, 'not-found', /no-such-testset/);
    await expectError(await api('GET', '/simple/testsets/00000000-0000-4000-8000-000000000000'), 404, 'not-found');
    await expectError(await api('PUT', '/simple/testsets/no-such-testset', { testset: { data: { testcases: [row('x')] } } }), 404, 'not-found', /no-such-testset/);
  });
});

describe('editing a test set', () => {
  it('keeps what a concurrent edit sent: tags carried over are read when the commit takes its turn', async () => {
    const v1 = await create({ slug: unique('busy'), tags: { owner: 'qa' }, data: { testcases: [row('v1')] } });
    const rowsOnly = (i: number) => api('PUT', `/simple/testsets/${v1.id}`, { testset: { data: { testcases: [row(`edit ${i}`)] } } });
    const retag = () => api('PUT', `/simple/testsets/${v1.id}`, { testset: { tags: { owner: 'ml' }, data: { testcases: [row('retagged')] } } });
    const replies = await Promise.all([...Array.from({ length: 10 }, (_, i) => rowsOnly(i)), retag(), ...Array.from({ length: 10 }, (_, i) => rowsOnly(10 + i))]);
    for (const reply of replies) await okJsonText(reply);
    const { body } = await okJsonText(await api('GET', `/simple/testsets/${v1.id}`));
    expect(body.testset).toMatchObject({ version: 22, tags: { owner: 'ml' } });
  });

  it('commits version 2, keeping sent row ids, while a run on the old revision reads the old rows', async () => {
    const slug = unique('editable');
    const v1 = await create({ slug, name: 'before', tags: { owner: 'qa' }, data: { testcases: [{ id: 'stays', data: { messages: message('v1 kept') } }, row('v1 dropped')] } });
    const [, droppedId] = v1.data.testcase_ids;

    const { body } = await okJsonText(await api('PUT', `/simple/testsets/${v1.id}`, {
      testset: { name: 'after', message: 'second revision', data: { testcases: [{ id: 'stays', data: { messages: message('v2 kept') } }, row('v2 added')] } },
    }));
    const v2 = body.testset;
    expect(body.count).toBe(1);
    expect(body.revision_id).toBe(v2.revision_id);
    expect(v2).toMatchObject({ id: v1.id, slug, variant_id: v1.variant_id, version: 2, name: 'after', tags: { owner: 'qa' } });
    expect(v2.revision_id).not.toBe(v1.revision_id);
    expect(v2.data.testcase_ids[0]).toBe('stays');
    expect(v2.data.testcase_ids[1]).toMatch(UUID);
    expect(v2.data.testcase_ids[1]).not.toBe(droppedId);
    expect(v2.data.testcases).toEqual([
      { id: 'stays', data: { messages: message('v2 kept') } },
      { id: v2.data.testcase_ids[1], data: { messages: message('v2 added') } },
    ]);
    expect((await okJsonText(await api('GET', `/simple/testsets/${slug}`))).body.testset).toEqual(v2);
    // A revision's own id reads that revision's rows, the older one included; the name is the
    // test set's, not a revision's.
    const { body: first } = await okJsonText(await api('GET', `/simple/testsets/${v1.revision_id}`));
    expect(first).toEqual({ count: 1, revision_id: v1.revision_id, testset: { ...v1, name: 'after', updated_at: v2.updated_at } });
    expect((await okJsonText(await api('GET', `/simple/testsets/${v2.revision_id}`))).body.testset).toEqual(v2);

    // A duplicate id in an edit commits nothing.
    await expectError(
      await api('PUT', `/simple/testsets/${slug}`, { testset: { data: { testcases: [{ id: 'x', data: {} }, { id: 'x', data: {} }] } } }),
      400,
      'invalid-request',
      /"x"/,
    );
    expect((await okJsonText(await api('GET', `/simple/testsets/${slug}`))).body.testset.version).toBe(2);

    // The old revision still runs, with its own rows.
    const old = await ended((await evaluate(v1.revision_id)).id);
    expect(old.data).toMatchObject({ status: 'success', testset_steps: { [v1.revision_id]: 'custom' }, progress: { total: 2, success: 2 } });
    const oldResults = await results(old.id);
    expect(oldResults.map((r) => [r.testcase_id, finalText(r)])).toEqual([
      ['stays', 'answer to v1 kept'],
      [droppedId, 'answer to v1 dropped'],
    ]);

    // The test set's id runs its newest revision.
    const latest = await ended((await evaluate(v1.id)).id);
    expect(latest.data).toMatchObject({ status: 'success', testset_steps: { [v2.revision_id]: 'custom' } });
    expect((await results(latest.id)).map((r) => [r.testcase_id, finalText(r)])).toEqual([
      ['stays', 'answer to v2 kept'],
      [v2.data.testcase_ids[1], 'answer to v2 added'],
    ]);
  });
});

describe('importing a file', () => {
  it('makes a test set from CSV, each question becoming the user message', async () => {
    const slug = unique('csv-import');
    const csv = 'question,expected\n"Capital of France, in one word?",Paris\nWhat is 2+2?,4\n';
    const testset = await imported(`slug=${slug}&name=capitals`, csv, 'text/csv');
    expect(testset).toMatchObject({ slug, name: 'capitals', version: 1 });
    expect(testset.data.testcase_ids).toHaveLength(2);
    expect(testset.data.testcases.map((t: any) => t.data)).toEqual([
      { question: 'Capital of France, in one word?', expected: 'Paris', messages: message('Capital of France, in one word?') },
      { question: 'What is 2+2?', expected: '4', messages: message('What is 2+2?') },
    ]);
    // Stored like any other: readable by slug.
    expect((await okJsonText(await api('GET', `/simple/testsets/${slug}`))).body.testset).toEqual(testset);
  });

  it('maps a differently named column with ?input=', async () => {
    const testset = await imported('input=prompt', 'prompt,answer\nsay hello,hello\n', 'text/csv; charset=utf-8');
    expect(testset.data.testcases.map((t: any) => t.data)).toEqual([{ prompt: 'say hello', answer: 'hello', messages: message('say hello') }]);
    // Without it, a file with no input/question/messages column is refused, naming its columns.
    await expectError(await post('/simple/testsets/import', 'prompt,answer\nsay hello,hello\n', 'text/csv'), 400, 'invalid-request', /prompt, answer/);
  });

  it('refuses a file that is not UTF-8, rather than storing its bytes as U+FFFD', async () => {
    const latin1 = Buffer.from('question,expected\ncaf\xe9,ol\xe9\n', 'latin1');
    for (const type of ['text/csv', 'application/x-ndjson']) {
      const res = await fetch(`${h.url}/api/simple/testsets/import?project_id=${h.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${h.apiKey}`, 'content-type': type }, body: latin1 });
      await expectError(res, 400, 'invalid-request', /not valid UTF-8/);
    }
  });

  it('reads JSONL with a messages array column', async () => {
    const conversation = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi there' },
    ];
    const jsonl = `${JSON.stringify({ messages: conversation, expected: 'hello' })}\n\n${JSON.stringify({ messages: message('bye'), expected: 'goodbye', weight: 2 })}\n`;
    const testset = await imported('', jsonl, 'application/x-ndjson');
    expect(testset.data.testcases.map((t: any) => t.data)).toEqual([
      { messages: conversation, expected: 'hello' },
      { messages: message('bye'), expected: 'goodbye', weight: 2 },
    ]);
  });

  it('commits a file as a new revision of a test set with ?testset=', async () => {
    const first = await imported('', 'question\nfirst question\n', 'text/csv');
    const second = await imported(`testset=${first.id}`, 'question\nreplaced question\nanother question\n', 'text/csv');
    expect(second).toMatchObject({ id: first.id, slug: first.slug, variant_id: first.variant_id, version: 2 });
    expect(second.revision_id).not.toBe(first.revision_id);
    expect(second.data.testcases.map((t: any) => t.data.question)).toEqual(['replaced question', 'another question']);
    expect((await okJsonText(await api('GET', `/simple/testsets/${first.id}`))).body.testset.version).toBe(2);
    await expectError(await post('/simple/testsets/import?testset=no-such-testset', 'question\nq\n', 'text/csv'), 404, 'not-found', /no-such-testset/);
  });

  it('refuses a file nested deeper than a JSON body may be, as a 400 naming where, in JSONL and in a CSV cell', async () => {
    const deep = (levels: number) => `${'['.repeat(levels)}1${']'.repeat(levels)}`;
    await expectError(await post('/simple/testsets/import', `{"input": "a", "x": ${deep(5000)}}\n`, 'application/x-ndjson'), 400, 'invalid-request', /deeper than 100 levels at testcases\[0\]\.data\.x/);
    await expectError(await post('/simple/testsets/import', `messages\n"${deep(6000)}"\n`, 'text/csv'), 400, 'invalid-request', /deeper than 100 levels at testcases\[0\]\.data\.messages/);
  });

  it('refuses a bad row naming its line, and a type it does not read', async () => {
    const before = (await okJsonText(await api('GET', '/simple/testsets/'))).body.count;
    await expectError(await post('/simple/testsets/import', 'question,expected\nfine,1\nnot, fine, at all\n', 'text/csv'), 400, 'invalid-request', /CSV line 3 has 3 fields; the header has 2/);
    await expectError(await post('/simple/testsets/import', '{"messages": []}\nnot json\n', 'application/x-ndjson'), 400, 'invalid-request', /JSONL line 2/);
    await expectError(await post('/simple/testsets/import', 'question\n', 'text/csv'), 400, 'invalid-request', /no test cases: a CSV needs a row under its header/);
    await expectError(await post('/simple/testsets/import', '<rows><row>hi</row></rows>', 'application/xml'), 415, 'unsupported-media-type');
    expect((await okJsonText(await api('GET', '/simple/testsets/'))).body.count).toBe(before);
  });
});

describe('who may see and change test sets', () => {
  it('a viewer reads but cannot write; another project sees nothing', async () => {
    const testset = await create({ slug: unique('guarded'), data: { testcases: [row('guarded row')] } });
    const viewer = { key: (await h.store.apiKeys.create(h.projectId, 'viewer')).key, projectId: h.projectId };
    expect((await okJsonText(await api('GET', `/simple/testsets/${testset.id}`, undefined, viewer))).body.testset).toEqual(testset);
    expect((await okJsonText(await api('GET', '/simple/testsets/', undefined, viewer))).body.testsets.map((t: any) => t.id)).toContain(testset.id);
    await expectError(await api('POST', '/simple/testsets/', { testset: { data: { testcases: [row('x')] } } }, viewer), 403, 'forbidden', /viewer/);
    await expectError(await api('PUT', `/simple/testsets/${testset.id}`, { testset: { data: { testcases: [row('x')] } } }, viewer), 403, 'forbidden', /viewer/);
    await expectError(await post('/simple/testsets/import', 'question\nq\n', 'text/csv', viewer), 403, 'forbidden', /viewer/);
    expect((await okJsonText(await api('GET', `/simple/testsets/${testset.id}`))).body.testset.version).toBe(1);

    const other = await h.store.projects.ensure(unique('other-project'));
    const outsider = { key: (await h.store.apiKeys.create(other.id, 'editor')).key, projectId: other.id };
    await expectError(await api('GET', `/simple/testsets/${testset.id}`, undefined, outsider), 404, 'not-found');
    await expectError(await api('GET', `/simple/testsets/${testset.slug}`, undefined, outsider), 404, 'not-found');
    await expectError(await api('GET', `/simple/testsets/${testset.revision_id}`, undefined, outsider), 404, 'not-found');
    await expectError(await api('PUT', `/simple/testsets/${testset.id}`, { testset: { data: { testcases: [row('x')] } } }, outsider), 404, 'not-found');
    expect((await okJsonText(await api('GET', '/simple/testsets/', undefined, outsider))).body).toMatchObject({ count: 0, testsets: [] });
    // Its key in this project: refused outright.
    await expectError(await api('GET', `/simple/testsets/${testset.id}`, undefined, { key: outsider.key, projectId: h.projectId }), 403, 'forbidden');
  });
});

describe('a run over an imported CSV', () => {
  it('sends only the question to the model, yet scores against the expected column', async () => {
    replies.set('What is the secret code?', 'zebra-4417');
    replies.set('Name a deep blue, please', 'plain red');
    const testset = await imported('', 'question,expected\nWhat is the secret code?,zebra-4417\n"Name a deep blue, please",ultramarine-8812\n', 'text/csv');
    h.model.reset();
    const run = await ended((await evaluate(testset.revision_id, { evaluators: [{ kind: 'exact_match', column: 'expected' }] })).id);
    expect(run.data).toMatchObject({ status: 'success', progress: { total: 2, success: 2, failure: 0 } });

    const all = await results(run.id);
    expect(all.map((r) => [r.testcase_id, finalText(r), r.scores])).toEqual([
      [testset.data.testcase_ids[0], 'zebra-4417', [{ name: 'exact_match', kind: 'exact_match', score: 1, pass: true }]],
      [testset.data.testcase_ids[1], 'plain red', [{ name: 'exact_match', kind: 'exact_match', score: 0, pass: false }]],
    ]);

    // The model saw both questions, and neither expected answer nor the column itself.
    expect(h.model.requests.map(userText).sort()).toEqual(['Name a deep blue, please', 'What is the secret code?']);
    const sent = JSON.stringify(h.model.requests.map((r) => r.body));
    expect(sent).toContain('What is the secret code?');
    expect(sent).not.toContain('ultramarine-8812');
    expect(sent).not.toContain('zebra-4417');

    const { body } = await okJsonText(await api('POST', '/evaluations/metrics/query', { metrics: { run_id: run.id } }));
    expect(body.metrics[0].data['evaluator-exact_match']).toMatchObject({ pass: { count: 2, sum: 1, mean: 0.5 }, score: { count: 2, mean: 0.5 } });
  });
});
