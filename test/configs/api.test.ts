import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, okJsonText, startHarness, template, type Harness } from '../support/harness.ts';
import { commit, configsApi, createWorkflow, deploy, type ConfigCaller } from './client.ts';

/**
 * The stored-configuration REST API under /api (spec §2.4, issue 4): workflows with variants and
 * numbered revisions, validation at commit, resolve, environments with deploy and undeploy,
 * concurrent writers, roles and project isolation. Successes go through okJsonText (JSON, the
 * x-ag-version header, no null fields) and errors through expectError (the envelope, the header).
 * Tests share one harness, so each uses slugs of its own.
 */

let h: Harness;
let viewer: ConfigCaller;
/** An editor of a project that owns nothing, for isolation checks. */
let stranger: ConfigCaller;

beforeAll(async () => {
  h = await startHarness();
  viewer = { key: (await h.store.apiKeys.create(h.projectId, 'viewer')).key, projectId: h.projectId };
  stranger = await editorOf('stranger');
});
afterAll(async () => h.close());

async function editorOf(projectName: string): Promise<ConfigCaller> {
  const project = await h.store.projects.ensure(projectName);
  return { key: (await h.store.apiKeys.create(project.id, 'editor')).key, projectId: project.id };
}

let seq = 0;
/** A slug no other test uses. */
const fresh = (prefix: string) => `${prefix}-${++seq}`;

const agent = (says: string) => ({ ...template(), instructions: { agents_md: `You are ${says}.` } });

const call = (method: string, rest: string, body?: unknown, as?: ConfigCaller) => configsApi(h, method, rest, body, as);
const ok = async (res: Promise<Response>, status = 200): Promise<any> => (await okJsonText(await res, status)).body;
const get = (rest: string, as?: ConfigCaller) => ok(call('GET', rest, undefined, as));
const post = (rest: string, body: unknown, as?: ConfigCaller) => call('POST', rest, body, as);
const fails = async (res: Promise<Response>, status: number, type: string, mentions?: string | RegExp) => expectError(await res, status, type, mentions);

const versions = (list: { revisions: Array<{ version: number }> }) => list.revisions.map((r) => r.version);
const ids = (list: { revisions: Array<{ id: string }> }) => list.revisions.map((r) => r.id);
const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

/** Follows `next` from the first page to the last, one request per page. */
async function walk(rest: string, limit: number): Promise<Array<{ count: number; revisions: any[]; next?: string }>> {
  const pages = [];
  let cursor: string | undefined;
  do {
    const sep = rest.includes('?') ? '&' : '?';
    const page = await get(`${rest}${sep}limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
    pages.push(page);
    cursor = page.next;
  } while (cursor && pages.length < 50);
  return pages;
}

const anyString = expect.any(String);

describe('POST /api/workflows', () => {
  it('creates a workflow with its first revision: 201 {workflow, revision}', async () => {
    const slug = fresh('create');
    const parameters = { agent: agent('the first') };
    const body = await ok(post('/workflows', { slug, name: 'Support bot', description: 'Answers', data: { parameters }, message: 'first' }), 201);
    const variant = body.workflow.variants[0];
    expect(body).toEqual({
      workflow: {
        id: anyString,
        slug,
        family: 'workflow',
        name: 'Support bot',
        description: 'Answers',
        created_at: anyString,
        updated_at: anyString,
        variants: [{ id: anyString, slug: 'default', created_at: anyString, latest_version: 1 }],
      },
      revision: {
        id: anyString,
        slug: expect.stringMatching(/^[0-9a-f]{12}$/),
        version: 1,
        workflow: { id: body.workflow.id, slug, family: 'workflow' },
        variant: { id: variant.id, slug: 'default' },
        data: { parameters },
        message: 'first',
        created_at: anyString,
      },
    });
  });

  it('without data creates no revision, and a variant with no latest_version; absent fields are left out', async () => {
    const slug = fresh('bare');
    const body = await ok(post('/workflows', { slug }), 201);
    expect(Object.keys(body)).toEqual(['workflow']);
    expect(body.workflow).toMatchObject({ slug, family: 'workflow', variants: [{ slug: 'default' }] });
    expect(body.workflow).not.toHaveProperty('name');
    expect(body.workflow).not.toHaveProperty('description');
    expect(Object.keys(body.workflow.variants[0]).sort()).toEqual(['created_at', 'id', 'slug']);
    expect(await get(`/workflows/${slug}`)).toEqual(body.workflow);
  });

  it('takes the family and the first variant slug when given', async () => {
    const slug = fresh('app');
    const { workflow, revision } = await createWorkflow(h, slug, { agent: agent('an app') }, { family: 'evaluator', variant: 'main' });
    expect(workflow).toMatchObject({ family: 'evaluator', variants: [{ slug: 'main', latest_version: 1 }] });
    expect(revision).toMatchObject({ workflow: { slug, family: 'evaluator' }, variant: { slug: 'main' }, version: 1 });
  });
});

describe('slugs', () => {
  it('refuses an invalid slug with 400 invalid-request naming the field', async () => {
    for (const slug of ['', '-lead', '.dot', 'has space', 'sl/ash', 'é', 'x'.repeat(129), 42, '0f9c1a4e-2b7d-4c55-9a61-3e8f00d1b2c4']) {
      await fails(post('/workflows', { slug }), 400, 'invalid-request', /at slug$/);
      await fails(post('/environments', { slug }), 400, 'invalid-request', /at slug$/);
    }
    await fails(post('/workflows', { slug: fresh('ok'), variant: 'bad variant' }), 400, 'invalid-request', /at variant$/);
    await fails(post('/workflows', {}), 400, 'invalid-request', /slug/);
  });

  it('accepts the edges of the slug rule', async () => {
    for (const slug of [`_${fresh('under')}`, `a.b-c_D9-${++seq}`, `${++seq}`.padEnd(128, 'x')]) {
      expect((await ok(post('/workflows', { slug }), 201)).workflow.slug).toBe(slug);
    }
  });

  it('refuses a slug the project already has with 409 conflict, keeping the original', async () => {
    const slug = fresh('dup');
    await createWorkflow(h, slug, { agent: agent('the original') }, { name: 'Original' });
    await fails(post('/workflows', { slug, family: 'application' }), 409, 'conflict', new RegExp(`already has a workflow "${slug}"`));
    expect(await get(`/workflows/${slug}`)).toMatchObject({ name: 'Original', family: 'workflow', variants: [{ latest_version: 1 }] });
  });

  it('lets another project, and an environment, use the same slug', async () => {
    const slug = fresh('shared');
    const ours = await createWorkflow(h, slug, {});
    const other = await editorOf(fresh('slug-neighbour'));
    const theirs = await ok(post('/workflows', { slug }, other), 201);
    expect(theirs.workflow.id).not.toBe(ours.workflow.id);
    await ok(post('/environments', { slug }), 201);
  });
});

describe('POST /api/workflows/{workflow}/revisions', () => {
  it('numbers revisions 1, 2, 3 per variant, by slug or id, and branches a new variant at 1', async () => {
    const slug = fresh('commit');
    const created = await createWorkflow(h, slug, { agent: agent('v1') });
    const v2 = await commit(h, slug, { agent: agent('v2') }, { message: 'second' });
    const v3 = await commit(h, created.workflow.id, { agent: agent('v3') });
    expect([created.revision.version, v2.version, v3.version]).toEqual([1, 2, 3]);
    expect(v2.message).toBe('second');
    expect(v3).not.toHaveProperty('message');
    expect(v3).toMatchObject({ workflow: { id: created.workflow.id, slug }, variant: created.revision.variant, data: { parameters: { agent: agent('v3') } } });
    expect(new Set([created.revision.id, v2.id, v3.id]).size).toBe(3);
    expect(new Set([created.revision.slug, v2.slug, v3.slug]).size).toBe(3);

    const c1 = await commit(h, slug, { agent: agent('canary 1') }, { variant: 'canary' });
    const c2 = await commit(h, slug, { agent: agent('canary 2') }, { variant: 'canary' });
    expect([c1.version, c2.version]).toEqual([1, 2]);
    expect(c1.variant.slug).toBe('canary');
    expect(c1.variant.id).not.toBe(created.revision.variant.id);
    expect(c2.variant).toEqual(c1.variant);

    const workflow = await get(`/workflows/${slug}`);
    expect(workflow.variants).toEqual([
      { id: created.revision.variant.id, slug: 'default', created_at: anyString, latest_version: 3 },
      { id: c1.variant.id, slug: 'canary', created_at: anyString, latest_version: 2 },
    ]);
    expect(workflow.updated_at).toBe(c2.created_at);
  });

  it('refuses an unknown workflow with 404 and a malformed body with 400', async () => {
    await fails(post(`/workflows/${fresh('nowhere')}/revisions`, { data: { parameters: {} } }), 404, 'not-found', /no workflow/);
    const slug = fresh('body');
    await createWorkflow(h, slug, { agent: agent('kept') });
    await fails(post(`/workflows/${slug}/revisions`, {}), 400, 'invalid-request', /data/);
    await fails(post(`/workflows/${slug}/revisions`, { data: { parameters: 'no' } }), 400, 'invalid-request', /data\.parameters/);
    await fails(post(`/workflows/${slug}/revisions`, { data: {}, variant: '-x' }), 400, 'invalid-request', /at variant$/);
    await fails(post(`/workflows/${slug}/revisions`, { data: {}, extra: 1 }), 400, 'invalid-request', /unknown key "extra"/);
    expect(versions(await get(`/workflows/${slug}/revisions`))).toEqual([1]);
  });
});

describe('validation at create and commit', () => {
  /** Each: data refused, the error type invoke would give, and what the message must name. */
  const refused: Array<[string, Record<string, unknown>, string, RegExp]> = [
    ['a pre-migration flat template', { parameters: { agent: { model: 'x' } } }, 'invalid-template-shape', /"model".*pre-migration/],
    ['a harness given as a string', { parameters: { agent: { ...template(), harness: 'claude' } } }, 'invalid-template-shape', /harness/],
    ['an unknown key inside runner', { parameters: { agent: { ...template(), runner: { bogus: true } } } }, 'unknown-template-key', /"bogus".*data\.parameters\.agent\.runner/],
    ['a bad permission mode', { parameters: { agent: template({ mode: 'sometimes' }) } }, 'invalid-permission-mode', /runner\.permissions\.default/],
    ['an unknown harness kind', { parameters: { agent: { ...template(), harness: { kind: 'no-such-harness' } } } }, 'unsupported-kind', /"no-such-harness".*known/],
    ['an unknown data.uri', { uri: 'acme:other:v1', parameters: {} }, 'invalid-request', /data\.uri "acme:other:v1"/],
  ];

  it.each(refused)('refuses %s on create, creating nothing', async (_what, data, type, mentions) => {
    const slug = fresh('refused');
    await fails(post('/workflows', { slug, data }), 400, type, mentions);
    await fails(call('GET', `/workflows/${slug}`), 404, 'not-found');
  });

  it.each(refused)('refuses %s on commit, storing nothing', async (_what, data, type, mentions) => {
    const slug = fresh('guarded');
    const created = await createWorkflow(h, slug, { agent: agent('valid') });
    const before = await get(`/workflows/${slug}/revisions`);
    await fails(post(`/workflows/${slug}/revisions`, { data }), 400, type, mentions);
    // Not even a new variant is branched off for a refused commit.
    await fails(post(`/workflows/${slug}/revisions`, { data, variant: 'ghost' }), 400, type, mentions);
    expect(await get(`/workflows/${slug}/revisions`)).toEqual(before);
    expect(await get(`/workflows/${slug}`)).toEqual(created.workflow);
  });

  it('refuses an unknown top-level body key with 400', async () => {
    await fails(post('/workflows', { slug: fresh('extra'), agent: agent('misplaced') }), 400, 'invalid-request', /unknown key "agent"/);
    await fails(post('/environments', { slug: fresh('extra'), references: {} }), 400, 'invalid-request', /unknown key "references"/);
  });

  it('stores parameters without an agent as given, for templates to embed', async () => {
    const slug = fresh('skill');
    const skill = { skill: { name: 'greet', description: 'Says hello', body: 'Say hello.' } };
    const created = await createWorkflow(h, slug, skill);
    expect(created.revision.data).toEqual({ parameters: skill });
    const tool = { tool: { type: 'client', name: 'lookup' }, notes: ['free', { form: 1 }] };
    const next = await ok(post(`/workflows/${slug}/revisions`, { data: { uri: 'agenta:builtin:agent:v0', parameters: tool } }), 201);
    expect(next.data).toEqual({ uri: 'agenta:builtin:agent:v0', parameters: tool });
    expect((await get(`/workflows/${slug}/revisions`)).revisions.map((r: any) => r.data.parameters)).toEqual([tool, skill]);
  });
});

describe('GET /api/workflows', () => {
  it('lists the project\'s workflows by slug with their count, filtered by family', async () => {
    const prefix = fresh('list');
    for (const [suffix, family] of [['c', 'workflow'], ['a', 'application'], ['b', 'workflow']] as const) {
      await ok(post('/workflows', { slug: `${prefix}-${suffix}`, family }), 201);
    }
    const all = await get('/workflows');
    expect(all.count).toBe(all.workflows.length);
    const slugs: string[] = all.workflows.map((w: any) => w.slug);
    expect(slugs).toEqual([...slugs].sort());
    expect(slugs.filter((s) => s.startsWith(`${prefix}-`))).toEqual([`${prefix}-a`, `${prefix}-b`, `${prefix}-c`]);

    const apps = await get('/workflows?family=application');
    expect(apps.count).toBe(apps.workflows.length);
    expect(apps.workflows.every((w: any) => w.family === 'application')).toBe(true);
    expect(apps.workflows.map((w: any) => w.slug)).toContain(`${prefix}-a`);
    expect(apps.workflows.map((w: any) => w.slug)).not.toContain(`${prefix}-b`);
    await fails(call('GET', '/workflows?family=robot'), 400, 'invalid-request', /family/);
  });

  it('reads one workflow by slug or id; an unknown one is a 404', async () => {
    const slug = fresh('read');
    const { workflow } = await createWorkflow(h, slug, { agent: agent('read me') }, { name: 'Readable' });
    expect(await get(`/workflows/${slug}`)).toEqual(workflow);
    expect(await get(`/workflows/${workflow.id}`)).toEqual(workflow);
    await fails(call('GET', '/workflows/no-such-workflow'), 404, 'not-found', /no workflow "no-such-workflow"/);
    // Environments are not workflows.
    const environment = fresh('env-not-workflow');
    await ok(post('/environments', { slug: environment }), 201);
    await fails(call('GET', `/workflows/${environment}`), 404, 'not-found');
  });
});

describe('GET /api/workflows/{workflow}/revisions', () => {
  let slug: string;
  /** In commit order: default v1, v2, v3, then canary v1. */
  let committed: any[];

  beforeAll(async () => {
    slug = fresh('history');
    committed = [(await createWorkflow(h, slug, { agent: agent('h1') })).revision];
    for (const [says, variant] of [['h2', 'default'], ['h3', 'default'], ['canary', 'canary']]) {
      committed.push(await commit(h, slug, { agent: agent(says!) }, { variant }));
    }
  });

  it('lists revisions newest first across variants, or within one', async () => {
    const all = await get(`/workflows/${slug}/revisions`);
    expect(all).toEqual({ count: 4, revisions: [...committed].reverse() });
    expect(await get(`/workflows/${committed[0].workflow.id}/revisions`)).toEqual(all);
    expect(ids(await get(`/workflows/${slug}/revisions?variant=canary`))).toEqual([committed[3].id]);
    expect(versions(await get(`/workflows/${slug}/revisions?variant=default`))).toEqual([3, 2, 1]);
  });

  it('refuses an unknown variant or workflow with 404', async () => {
    await fails(call('GET', `/workflows/${slug}/revisions?variant=nope`), 404, 'not-found', /no variant "nope"/);
    await fails(call('GET', `/workflows/${fresh('gone')}/revisions`), 404, 'not-found');
  });

  it('pages with limit and next, visiting every revision once', async () => {
    const pages = await walk(`/workflows/${slug}/revisions`, 1);
    expect(pages.map((p) => p.count)).toEqual([1, 1, 1, 1]);
    expect(pages.at(-1)).not.toHaveProperty('next');
    expect(pages.flatMap(ids)).toEqual([...committed].reverse().map((r) => r.id));
    const byTwo = await walk(`/workflows/${slug}/revisions?variant=default`, 2);
    expect(byTwo.map(versions)).toEqual([[3, 2], [1]]);
  });

  it('refuses a bad limit or cursor with 400', async () => {
    await fails(call('GET', `/workflows/${slug}/revisions?limit=0`), 400, 'invalid-request', /limit/);
    await fails(call('GET', `/workflows/${slug}/revisions?cursor=garbage`), 400, 'invalid-request', /cursor/);
  });
});

describe('POST /api/workflows/resolve', () => {
  it('returns the revision the references name and its parameters', async () => {
    const slug = fresh('resolve');
    const first = (await createWorkflow(h, slug, { agent: agent('old') })).revision;
    const latest = await commit(h, slug, { agent: agent('new'), notes: 'kept' });
    expect(await ok(post('/workflows/resolve', { references: { workflow: { slug } } }))).toEqual({ revision: latest, parameters: { agent: agent('new'), notes: 'kept' } });
    expect(await ok(post('/workflows/resolve', { references: { workflow_revision: { id: first.id } } }))).toEqual({ revision: first, parameters: { agent: agent('old') } });
    const selected = await ok(post('/workflows/resolve', { references: { workflow: { slug, version: 'v1' } }, selector: { path: 'parameters.agent' } }));
    expect(selected.parameters).toEqual({ agent: agent('old') });
  });

  it('refuses unknown references with 404 and references to no workflow with 400', async () => {
    await fails(post('/workflows/resolve', { references: { workflow: { slug: 'no-such-workflow' } } }), 404, 'unknown-reference', /no-such-workflow/);
    await fails(post('/workflows/resolve', { references: {} }), 400, 'invalid-request', /references/);
    await fails(post('/workflows/resolve', { references: { robot: { slug: 'x' } } }), 400, 'invalid-request', /unknown key "robot"/);
  });
});

describe('environments', () => {
  let wf: { workflow: any; revision: any };
  let v2: any;
  const env = fresh('production');

  beforeAll(async () => {
    wf = await createWorkflow(h, fresh('deployed'), { agent: agent('deployed v1') });
    v2 = await commit(h, wf.workflow.slug, { agent: agent('deployed v2') });
  });

  const deploymentOf = (revision: any) => ({
    workflow: { id: revision.workflow.id, slug: revision.workflow.slug },
    workflow_variant: { id: revision.variant.id, slug: revision.variant.slug },
    workflow_revision: { id: revision.id, slug: revision.slug, version: revision.version },
  });

  it('creates an environment with no revision until the first deploy; a duplicate is a 409', async () => {
    const created = await ok(post('/environments', { slug: env, name: 'Production', description: 'Live' }), 201);
    expect(created).toEqual({ id: anyString, slug: env, name: 'Production', description: 'Live', created_at: anyString, updated_at: anyString });
    expect(await get(`/environments/${env}`)).toEqual(created);
    expect(await get(`/environments/${created.id}`)).toEqual(created);
    await fails(post('/environments', { slug: env }), 409, 'conflict', new RegExp(`"${env}"`));
    expect(await get(`/environments/${env}/revisions`)).toEqual({ count: 0, revisions: [] });
    await fails(call('GET', '/environments/no-such-env'), 404, 'not-found', /no environment "no-such-env"/);
  });

  it('deploys under the workflow slug by default, and under a given key', async () => {
    const first = await ok(post(`/environments/${env}/deploy`, { references: { workflow: { slug: wf.workflow.slug } }, message: 'ship it' }));
    expect(first.revision).toEqual({
      id: anyString,
      slug: anyString,
      version: 1,
      data: { references: { [wf.workflow.slug]: deploymentOf(v2) } },
      message: 'ship it',
      created_at: anyString,
    });
    const pinned = await deploy(h, env, { workflow_revision: { id: wf.revision.id } }, 'pinned');
    expect(pinned.revision.version).toBe(2);
    expect(pinned.revision.data.references).toEqual({ [wf.workflow.slug]: deploymentOf(v2), pinned: deploymentOf(wf.revision) });
    expect(await get(`/environments/${env}`)).toEqual(pinned);
  });

  it('refuses to deploy environment references, no workflow, or an unknown one', async () => {
    const before = await get(`/environments/${env}`);
    await fails(post(`/environments/${env}/deploy`, { references: { environment: { slug: env } } }), 400, 'invalid-request', /environment/);
    await fails(post(`/environments/${env}/deploy`, { references: { workflow: { slug: wf.workflow.slug }, environment: { slug: env } } }), 400, 'invalid-request', /environment/);
    await fails(post(`/environments/${env}/deploy`, { references: {} }), 400, 'invalid-request', /references/);
    await fails(post(`/environments/${env}/deploy`, { references: { workflow: { slug: 'no-such-workflow' } } }), 404, 'unknown-reference');
    await fails(post(`/environments/${env}/deploy`, { references: { workflow: { slug: wf.workflow.slug } }, key: 'bad key' }), 400, 'invalid-request', /at key$/);
    await fails(post(`/environments/no-such-env/deploy`, { references: { workflow: { slug: wf.workflow.slug } } }), 404, 'not-found');
    expect(await get(`/environments/${env}`)).toEqual(before);
  });

  it('undeploys a key as a new revision; a key not deployed is a 404', async () => {
    const before = await get(`/environments/${env}`);
    const after = await ok(post(`/environments/${env}/undeploy`, { key: 'pinned', message: 'unpin' }));
    expect(after.revision).toMatchObject({ version: before.revision.version + 1, message: 'unpin' });
    expect(after.revision.data.references).toEqual({ [wf.workflow.slug]: deploymentOf(v2) });
    await fails(post(`/environments/${env}/undeploy`, { key: 'pinned' }), 404, 'not-found', /nothing under "pinned"/);
    await fails(post(`/environments/${env}/undeploy`, {}), 400, 'invalid-request', /key/);
    expect(await get(`/environments/${env}`)).toEqual(after);
  });

  it('lists an environment\'s revisions newest first, each as it was', async () => {
    const history = await get(`/environments/${env}/revisions`);
    expect(history.count).toBe(3);
    expect(versions(history)).toEqual([3, 2, 1]);
    expect(Object.keys(history.revisions[1].data.references).sort()).toEqual([wf.workflow.slug, 'pinned'].sort());
    expect(history.revisions[0]).toEqual((await get(`/environments/${env}`)).revision);
    expect((await walk(`/environments/${env}/revisions`, 2)).map(versions)).toEqual([[3, 2], [1]]);
  });

  it('lists environments by slug, with what each deploys now', async () => {
    const idle = fresh('idle');
    await ok(post('/environments', { slug: idle }), 201);
    const list = await get('/environments');
    expect(list.count).toBe(list.environments.length);
    const slugs: string[] = list.environments.map((e: any) => e.slug);
    expect(slugs).toEqual([...slugs].sort());
    expect(list.environments.find((e: any) => e.slug === env)).toEqual(await get(`/environments/${env}`));
    expect(list.environments.find((e: any) => e.slug === idle)).not.toHaveProperty('revision');
  });
});

describe('concurrent writers', () => {
  it('gives 20 concurrent commits to one variant distinct consecutive versions', async () => {
    const slug = fresh('race');
    await createWorkflow(h, slug, { agent: agent('base') });
    // More racers than the store's retries: each round of an unguarded race lets only some win.
    const says = range(0, 20).map((i) => `racer ${i}`);
    const results = await Promise.all(says.map((s) => commit(h, slug, { agent: agent(s) })));
    expect(sorted(results.map((r) => r.version))).toEqual(range(2, 20));
    expect(new Set(results.map((r) => r.slug)).size).toBe(20);
    // Each reply is the revision that request stored.
    const stored = await get(`/workflows/${slug}/revisions?limit=50`);
    expect(stored.count).toBe(21);
    for (const result of results) expect(stored.revisions.find((r: any) => r.id === result.id)).toEqual(result);
    expect((await get(`/workflows/${slug}`)).variants).toMatchObject([{ slug: 'default', latest_version: 21 }]);
  });

  it('keeps every one of 20 concurrent deploys under different keys (no lost update, no conflict)', async () => {
    const env = fresh('busy');
    await ok(post('/environments', { slug: env }), 201);
    const { workflow } = await createWorkflow(h, fresh('racer'), { agent: agent('deployed') });
    const keys = range(0, 20).map((i) => `key-${String(i).padStart(2, '0')}`);
    const replies = await Promise.all(keys.map((key) => deploy(h, env, { workflow: { slug: workflow.slug } }, key)));
    replies.forEach((reply, i) => expect(reply.revision.data.references).toHaveProperty(keys[i]!));
    expect(sorted(replies.map((r) => r.revision.version))).toEqual(range(1, 20));
    const final = await get(`/environments/${env}`);
    expect(final.revision.version).toBe(20);
    expect(Object.keys(final.revision.data.references).sort()).toEqual(keys);
    expect((await get(`/environments/${env}/revisions`)).count).toBe(20);
  });
});

describe('roles and project isolation', () => {
  let slug: string;
  let env: string;

  beforeAll(async () => {
    slug = fresh('guarded');
    env = fresh('guarded-env');
    await createWorkflow(h, slug, { agent: agent('guarded') });
    await ok(post('/environments', { slug: env }), 201);
    await deploy(h, env, { workflow: { slug } });
  });

  it('lets a viewer read and resolve', async () => {
    expect((await get('/workflows', viewer)).workflows.map((w: any) => w.slug)).toContain(slug);
    expect((await get(`/workflows/${slug}`, viewer)).slug).toBe(slug);
    expect((await get(`/workflows/${slug}/revisions`, viewer)).count).toBe(1);
    expect((await get(`/environments/${env}`, viewer)).revision.version).toBe(1);
    expect((await get(`/environments/${env}/revisions`, viewer)).count).toBe(1);
    expect((await get('/environments', viewer)).environments.map((e: any) => e.slug)).toContain(env);
    expect((await ok(post('/workflows/resolve', { references: { workflow: { slug } } }, viewer))).revision.version).toBe(1);
  });

  it('refuses a viewer every write with 403 forbidden, changing nothing', async () => {
    const writes: Array<[string, unknown]> = [
      ['/workflows', { slug: fresh('by-viewer') }],
      [`/workflows/${slug}/revisions`, { data: { parameters: { agent: agent('by viewer') } } }],
      ['/environments', { slug: fresh('by-viewer') }],
      [`/environments/${env}/deploy`, { references: { workflow: { slug } }, key: 'by-viewer' }],
      [`/environments/${env}/undeploy`, { key: slug }],
    ];
    for (const [rest, body] of writes) await fails(post(rest, body, viewer), 403, 'forbidden', /"editor" role/);
    expect((await get(`/workflows/${slug}/revisions`)).count).toBe(1);
    expect((await get(`/environments/${env}/revisions`)).count).toBe(1);
    await fails(call('GET', '/workflows', undefined, { key: 'agd_nope', projectId: h.projectId }), 401, 'unauthenticated');
  });

  it("hides this project's configurations from another project's key", async () => {
    const { id } = await get(`/workflows/${slug}`);
    await fails(call('GET', `/workflows/${slug}`, undefined, stranger), 404, 'not-found');
    await fails(call('GET', `/workflows/${id}`, undefined, stranger), 404, 'not-found');
    await fails(call('GET', `/workflows/${slug}/revisions`, undefined, stranger), 404, 'not-found');
    await fails(post(`/workflows/${slug}/revisions`, { data: { parameters: {} } }, stranger), 404, 'not-found');
    await fails(call('GET', `/environments/${env}`, undefined, stranger), 404, 'not-found');
    await fails(post('/workflows/resolve', { references: { workflow: { slug } } }, stranger), 404, 'unknown-reference');
    expect(await get('/workflows', stranger)).toEqual({ count: 0, workflows: [] });
    expect(await get('/environments', stranger)).toEqual({ count: 0, environments: [] });
  });

  it("refuses another project's key in this project with 403", async () => {
    const intruder = { key: stranger.key, projectId: h.projectId };
    await fails(call('GET', '/workflows', undefined, intruder), 403, 'forbidden', new RegExp(h.projectId));
    await fails(call('GET', `/workflows/${slug}`, undefined, intruder), 403, 'forbidden');
    await fails(post(`/workflows/${slug}/revisions`, { data: { parameters: {} } }, intruder), 403, 'forbidden');
    await fails(post(`/environments/${env}/deploy`, { references: { workflow: { slug } } }, intruder), 403, 'forbidden');
    expect((await get(`/workflows/${slug}/revisions`)).count).toBe(1);
  });
});

describe('x-ag-version', () => {
  it('is on every reply, success or error', async () => {
    const replies = await Promise.all([
      call('GET', '/workflows'),
      call('GET', '/environments'),
      call('GET', '/workflows/no-such-workflow'),
      post('/workflows', { slug: '-bad' }),
      post('/workflows/resolve', { references: {} }),
      post('/environments/no-such-env/undeploy', { key: 'x' }),
      post('/workflows', { slug: fresh('by-viewer') }, viewer),
    ]);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 404, 400, 400, 404, 403]);
    for (const reply of replies) expect(reply.headers.get('x-ag-version')).toBe('2025.07.14');
  });
});
