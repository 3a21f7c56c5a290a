import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMBED_LIMITS } from '../../src/configs/embeds.ts';
import { expectError, okJsonText, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { configsApi, createWorkflow, deploy } from './client.ts';

/**
 * `@ag.embed` (issue 4; reference §2): a template names stored parts — a tool, a skill, a text —
 * and they are resolved, recursively, when the caller asks (`x-ag-workflow-embeds: resolve` or
 * `flags.resolve`). Cycles and runaway nesting are 400s, at commit when they can be seen then and
 * at run time otherwise.
 */

let h: Harness;
const RESOLVE = { 'x-ag-workflow-embeds': 'resolve' };

const embed = (references: Record<string, unknown>, selectorPath?: string, extra: Record<string, unknown> = {}) => ({
  '@ag.embed': { '@ag.references': references, ...(selectorPath ? { '@ag.selector': { path: selectorPath } } : {}) },
  ...extra,
});

const colorTool = { type: 'client', name: 'pick_color', description: 'Asks the user for a color', input_schema: { type: 'object', properties: {} } };

/** A template whose second tool and only skill are embedded; the skill's body is itself embedded. */
const embeddingAgent = () => ({
  ...template(),
  tools: [{ type: 'builtin', name: 'read' }, embed({ workflow: { slug: 'color-tool' } }, 'parameters.tool', { name: 'Color picker' })],
  skills: [embed({ workflow: { slug: 'haiku-skill' } }, 'parameters.skill')],
});

const hello = { inputs: { messages: [{ role: 'user', content: 'hi' }] } };

beforeAll(async () => {
  h = await startHarness();
  await createWorkflow(h, 'color-tool', { tool: colorTool });
  await createWorkflow(h, 'haiku-text', { text: 'Write three lines: 5, 7 and 5 syllables.' });
  await createWorkflow(h, 'haiku-skill', {
    skill: { name: 'haiku', description: 'Writing haiku', body: embed({ workflow: { slug: 'haiku-text' } }, 'parameters.text') },
  });
});
afterAll(async () => h.close());

async function run(body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<{ res: Response; session: string }> {
  h.model.reset();
  h.model.script({ text: 'done' });
  const session = sid('embed');
  return { res: await h.invoke({ session_id: session, ...body }, { headers }), session };
}

describe('@ag.embed', () => {
  it('resolves embedded tools and skills, recursively, when asked by header', async () => {
    const { res, session } = await run({ data: { ...hello, parameters: { agent: embeddingAgent() } } }, RESOLVE);
    expect(res.status).toBe(200);
    await readJson(res);
    expect(h.model.requests[0]!.tools.sort()).toEqual(['pick_color', 'read']);
    const system = h.model.requests[0]!.messages.find((m) => m.role === 'system')!.content;
    expect(system).toContain('haiku: Writing haiku');
    const skill = await readFile(path.join(h.sessionDir(session), '.agents/skills/haiku/SKILL.md'), 'utf8');
    expect(skill).toContain('Write three lines: 5, 7 and 5 syllables.');
  });

  it('resolves by flags.resolve too, and flags win over the header', async () => {
    const parameters = { agent: embeddingAgent() };
    const { res } = await run({ flags: { resolve: true }, data: { ...hello, parameters } });
    expect(res.status).toBe(200);
    const refused = await run({ flags: { resolve: false }, data: { ...hello, parameters } }, RESOLVE);
    await expectError(refused.res, 400, 'unresolved-embed');
  });

  it('refuses embeds nobody asked to resolve, naming where the first one is', async () => {
    const { res } = await run({ data: { ...hello, parameters: { agent: embeddingAgent() } } });
    await expectError(res, 400, 'unresolved-embed', /data\.parameters\.agent\.tools\[1\].*x-ag-workflow-embeds: resolve/);
  });

  it('resolves the embeds of a stored revision run by reference', async () => {
    await createWorkflow(h, 'embedding-bot', { agent: embeddingAgent() });
    const { res } = await run({ references: { workflow: { slug: 'embedding-bot' } }, data: hello }, RESOLVE);
    expect(res.status).toBe(200);
    expect(h.model.requests[0]!.tools).toContain('pick_color');
    await expectError((await run({ references: { workflow: { slug: 'embedding-bot' } }, data: hello })).res, 400, 'unresolved-embed');
  });

  it('a cycle made through a later deploy is a 400 at run time', async () => {
    await configsApi(h, 'POST', '/environments', { slug: 'loop-env' });
    await createWorkflow(h, 'loop-end', { text: 'the end' });
    await deploy(h, 'loop-env', { workflow: { slug: 'loop-end' } }, 'next');
    // loop-a embeds whatever loop-env deploys as "next"; loop-b embeds loop-a.
    await createWorkflow(h, 'loop-a', { text: { '@ag.embed': { '@ag.references': { environment: { slug: 'loop-env' } }, '@ag.selector': { key: 'next', path: 'parameters.text' } } } });
    await createWorkflow(h, 'loop-b', { agent: { ...template(), instructions: { agents_md: embed({ workflow: { slug: 'loop-a' } }, 'parameters.text') } } });
    // Now "next" points back at loop-b: loop-b → loop-a → loop-env/next = loop-b.
    await deploy(h, 'loop-env', { workflow: { slug: 'loop-b' } }, 'next');
    const { res } = await run({ references: { workflow: { slug: 'loop-b' } }, data: hello }, RESOLVE);
    await expectError(res, 400, 'embed-cycle', /loop-b.*loop-a.*loop-b/);
  });

  it('a cycle that a commit would close is refused at commit, and nothing is stored', async () => {
    await createWorkflow(h, 'ping', { text: 'ping' });
    await createWorkflow(h, 'pong', { text: embed({ workflow: { slug: 'ping' } }, 'parameters.text') });
    const res = await configsApi(h, 'POST', '/workflows/ping/revisions', { data: { parameters: { text: embed({ workflow: { slug: 'pong' } }, 'parameters.text') } } });
    await expectError(res, 400, 'embed-cycle', /pong/);
    const { body } = await okJsonText(await configsApi(h, 'GET', '/workflows/ping'));
    expect(body.variants[0].latest_version).toBe(1);
  });

  it(`nesting deeper than ${EMBED_LIMITS.depth} levels is refused, at run time and at commit`, async () => {
    const { depth } = EMBED_LIMITS;
    const nest = (i: number) => embed({ workflow: { slug: `deep-${i}` } }, 'parameters.text');
    await createWorkflow(h, 'deep-0', { text: 'bottom' });
    // deep-i holds i nested embeds: up to deep-(depth) every one is allowed.
    for (let i = 1; i <= depth; i++) await createWorkflow(h, `deep-${i}`, { text: nest(i - 1) });
    const runNested = (i: number) => run({ data: { ...hello, parameters: { agent: { ...template(), instructions: { agents_md: nest(i) } } } } }, RESOLVE);
    const fine = await runNested(depth - 1);
    expect(fine.res.status).toBe(200);
    expect(h.model.requests[0]!.messages.find((m) => m.role === 'system')!.content).toContain('bottom');
    await expectError((await runNested(depth)).res, 400, 'embed-limit', new RegExp(`deeper than ${depth}`));
    await expectError(await configsApi(h, 'POST', '/workflows', { slug: `deep-${depth + 1}`, data: { parameters: { text: nest(depth) } } }), 400, 'embed-limit');
  });

  it(`more than ${EMBED_LIMITS.count} embeds in one configuration is refused`, async () => {
    const many = Array.from({ length: EMBED_LIMITS.count + 1 }, () => embed({ workflow: { slug: 'haiku-text' } }, 'parameters.text'));
    const { res } = await run({ data: { ...hello, parameters: { agent: template(), notes: many } } }, RESOLVE);
    await expectError(res, 400, 'embed-limit', /more than 100/);
  });

  it(`embeds that bring in more than ${EMBED_LIMITS.chars} characters altogether are refused, before the turn`, async () => {
    // Each under the body limit, and few: only their weight together is too much. Before the
    // limit, 100 embeds of a 9 MB revision made a 10 KB request resolve 900 MB on the server's thread.
    const size = Math.ceil(EMBED_LIMITS.chars / 4);
    await createWorkflow(h, 'heavy-text', { text: 'x'.repeat(size) });
    const heavy = (n: number) => Array.from({ length: n }, () => embed({ workflow: { slug: 'heavy-text' } }, 'parameters.text'));
    const { res } = await run({ data: { ...hello, parameters: { agent: template(), notes: heavy(5) } } }, RESOLVE);
    await expectError(res, 400, 'embed-limit', /data\.parameters\.notes\[3\]/);
    expect(h.model.requests).toEqual([]);
    const inspect = await fetch(`${h.url}/services/agent/v0/inspect?project_id=${h.projectId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${h.apiKey}`, ...RESOLVE },
      body: JSON.stringify({ revision: { data: { parameters: { agent: template(), notes: heavy(5) } } } }),
    });
    await expectError(inspect, 400, 'embed-limit');
    expect((await run({ data: { ...hello, parameters: { agent: template(), notes: heavy(3) } } }, RESOLVE)).res.status).toBe(200);
  });

  it.each([
    ['an unknown workflow', embed({ workflow: { slug: 'no-such-tool' } }, 'parameters.tool'), 404],
    ['two families at once', embed({ workflow: { slug: 'color-tool' }, application: { slug: 'color-tool' } }, 'parameters.tool'), 400],
    ['a version that is not a number', embed({ workflow: { slug: 'color-tool', version: 'latest' } }, 'parameters.tool'), 400],
  ])('a reference inside an embed that names %s says which embed it is', async (_what, second, status) => {
    const agent = { ...template(), tools: [embed({ workflow: { slug: 'color-tool' } }, 'parameters.tool'), second] };
    const { res } = await run({ data: { ...hello, parameters: { agent } } }, RESOLVE);
    const body = await expectError(res, status, undefined, /data\.parameters\.agent\.tools\[1\]\.@ag\.embed\.@ag\.references\b/);
    expect(body.status.message).not.toMatch(/(^|[^.@])references\./);
  });

  it('an environment that deploys nothing yet says so, not that a variant lacks a revision', async () => {
    await configsApi(h, 'POST', '/environments', { slug: 'empty-env' });
    const { res } = await run({ references: { environment: { slug: 'empty-env' } }, data: hello });
    await expectError(res, 404, 'unknown-reference', /deploys nothing yet; deploy a revision to it first/);
  });

  it('an embed of something unknown, or malformed, is refused at commit', async () => {
    const unknown = await configsApi(h, 'POST', '/workflows', { slug: 'dangling', data: { parameters: { agent: { ...template(), skills: [embed({ workflow: { slug: 'no-such-skill' } }, 'parameters.skill')] } } } });
    await expectError(unknown, 404, 'unknown-reference', /no-such-skill/);
    const malformed = await configsApi(h, 'POST', '/workflows', { slug: 'malformed', data: { parameters: { text: { '@ag.embed': { '@ag.references': { workflow: { slug: 'haiku-text' } }, extra: 1 } } } } });
    await expectError(malformed, 400, 'invalid-request', /data\.parameters\.text\.@ag\.embed/);
    // An embed that resolves to something the template refuses is refused like an inline template.
    const badTool = await configsApi(h, 'POST', '/workflows', { slug: 'bad-tool', data: { parameters: { agent: { ...template(), tools: [embed({ workflow: { slug: 'haiku-text' } }, 'parameters.text')] } } } });
    await expectError(badTool, 400, undefined, /data\.parameters\.agent\.tools\[0\]/);
  });

  it('inspect shows the resolved template, and its request asks for resolution and runs', async () => {
    const res = await fetch(`${h.url}/services/agent/v0/inspect?project_id=${h.projectId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${h.apiKey}`, ...RESOLVE },
      body: JSON.stringify({ references: { workflow: { slug: 'embedding-bot' } } }),
    });
    const inspected = await res.json();
    expect(res.status).toBe(200);
    expect(inspected.revision.data.parameters.agent.tools[1]).toEqual(colorTool);
    expect(inspected.revision.data.parameters.agent.skills[0].body).toContain('5, 7 and 5');
    expect(inspected.request).toMatchObject({ references: { workflow: { slug: 'embedding-bot' } }, flags: { resolve: true } });
    const ran = await run(inspected.request);
    expect(ran.res.status).toBe(200);
  });
});
