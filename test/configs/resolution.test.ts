import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, readFrames, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { recordedEvents } from '../../src/sessions/ended-turn.ts';
import { commit, configsApi, createWorkflow, deploy } from './client.ts';

/**
 * Invoke runs stored configurations by reference (spec §2.4, issue 4 "Resolution on invoke"):
 * every reference form, environments with selectors, inline parameters winning, and the 4xx cases.
 */

let h: Harness;
/** Revisions of "bot": v1 says "bot one", v2 "bot two" (both on variant default); "canary" v1 says "bot canary". */
const bot: Record<string, any> = {};

const agent = (says: string) => ({ ...template(), instructions: { agents_md: `You are ${says}.` } });

beforeAll(async () => {
  h = await startHarness();
  const created = await createWorkflow(h, 'bot', { agent: agent('bot one') }, { name: 'Support bot', description: 'Answers' });
  bot.workflow = created.workflow;
  bot.v1 = created.revision;
  bot.v2 = await commit(h, 'bot', { agent: agent('bot two') }, { message: 'second' });
  bot.canary = await commit(h, 'bot', { agent: agent('bot canary') }, { variant: 'canary' });
  bot.app = (await createWorkflow(h, 'helpdesk', { agent: agent('the helpdesk app') }, { family: 'application' })).revision;
  bot.evaluator = (await createWorkflow(h, 'judge', { agent: agent('the judge') }, { family: 'evaluator' })).revision;
  await configsApi(h, 'POST', '/environments', { slug: 'production' });
  await deploy(h, 'production', { workflow_revision: { id: bot.v1.id } });
  await deploy(h, 'production', { application: { slug: 'helpdesk' } }, 'front-desk');
});
afterAll(async () => h.close());

/** Runs a turn with these fields and returns which configuration's instructions reached the model. */
async function ranWith(fields: Record<string, unknown>, headers: Record<string, string> = {}): Promise<{ instructions: string; body: any }> {
  h.model.reset();
  h.model.script({ text: 'ok' });
  const { data, ...rest } = fields;
  const res = await h.invoke({ session_id: sid('ref'), ...rest, data: { ...hello, ...(data as object | undefined) } }, { headers });
  const body = await readJson(res);
  expect(res.status).toBe(200);
  const system = h.model.requests[0]!.messages.find((m) => m.role === 'system');
  return { instructions: system?.content ?? '', body };
}

const hello = { inputs: { messages: [{ role: 'user', content: 'hi' }] } };
const refs = (references: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ references, ...extra });

describe('invoke by reference', () => {
  it('runs the newest revision of the default variant for a workflow named by id or slug', async () => {
    expect((await ranWith(refs({ workflow: { id: bot.workflow.id } }))).instructions).toContain('bot two');
    expect((await ranWith(refs({ workflow: { slug: 'bot' } }))).instructions).toContain('bot two');
  });

  it('runs a revision named by its id alone, by its slug, or by a version of a variant', async () => {
    expect((await ranWith(refs({ workflow_revision: { id: bot.v1.id } }))).instructions).toContain('bot one');
    expect((await ranWith(refs({ workflow_revision: { slug: bot.v1.slug } }))).instructions).toContain('bot one');
    expect((await ranWith(refs({ workflow: { slug: 'bot' }, workflow_revision: { version: 1 } }))).instructions).toContain('bot one');
    expect((await ranWith(refs({ workflow: { slug: 'bot', version: 'v1' } }))).instructions).toContain('bot one');
    expect((await ranWith(refs({ workflow_variant: { slug: 'canary' } }))).instructions).toContain('bot canary');
    expect((await ranWith(refs({ workflow: { slug: 'bot' }, workflow_variant: { slug: 'default', version: '2' } }))).instructions).toContain('bot two');
  });

  it('records the references and the revision that ran on the turn, and the reply says which ran', async () => {
    const { body } = await ranWith(refs({ workflow: { slug: 'bot' } }, { selector: { path: 'parameters.agent' } }));
    expect(body.revision).toEqual({ id: bot.v2.id, slug: bot.v2.slug, version: 2, workflow: 'bot', variant: 'default' });
    expect((await ranWith({ data: { parameters: { agent: { instructions: { agents_md: 'inline' } } } } })).body.revision).toBeUndefined();
    const turn = (await h.store.turns.listForSession(h.projectId, body.session_id, { limit: 1 }))[0]!;
    expect(turn.request).toMatchObject({
      references: { workflow: { slug: 'bot' } },
      selector: { path: 'parameters.agent' },
      revision: { id: bot.v2.id, slug: bot.v2.slug, version: 2, workflow: 'bot', variant: 'default' },
    });
  });

  it('a stream says which revision runs at its start: native turn_start, the Vercel start metadata; replayed from the store too', async () => {
    const ran = { id: bot.v2.id, slug: bot.v2.slug, version: 2, workflow: 'bot', variant: 'default' };
    h.model.script({ text: 'ok' });
    const session = sid('ref-stream');
    const native = await readFrames(await h.invoke({ session_id: session, references: { workflow: { slug: 'bot' } }, data: hello }, { headers: { accept: 'text/event-stream' } }));
    expect(native.frames[0]).toMatchObject({ type: 'turn_start', data: { revision: ran } });
    const vercel = await h.invoke({ references: { workflow: { slug: 'bot' } }, data: hello }, { headers: { accept: 'text/event-stream', 'x-ag-messages-format': 'vercel' } });
    const start = JSON.parse(/^data: (.*)$/m.exec(await vercel.text())![1]!);
    expect(start).toMatchObject({ type: 'start', messageMetadata: { revision: ran } });
    const inline = await readFrames(await h.invoke({ data: { ...hello, parameters: { agent: template() } } }, { headers: { accept: 'text/event-stream' } }));
    expect(inline.frames[0]).toMatchObject({ type: 'turn_start' });
    expect((inline.frames[0] as { data: object }).data).not.toHaveProperty('revision');
    // The ended turn, told again from its record (a re-post that repeats it attaches to it).
    const [turn] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(recordedEvents(turn!)[0]).toMatchObject({ type: 'turn_start', data: { revision: ran } });
  });

  it('runs applications and evaluators by their own family keys', async () => {
    expect((await ranWith(refs({ application: { slug: 'helpdesk' } }))).instructions).toContain('the helpdesk app');
    expect((await ranWith(refs({ evaluator_revision: { id: bot.evaluator.id } }))).instructions).toContain('the judge');
    // A workflow reference reaches any family; an application reference only applications.
    expect((await ranWith(refs({ workflow: { slug: 'helpdesk' } }))).instructions).toContain('the helpdesk app');
    await expectError(await h.invoke(refs({ application: { slug: 'bot' } }, { data: hello })), 404, 'unknown-reference', /application.*"bot" is a workflow/);
  });

  it("finds a family's variant by slug among that family only, though every workflow has a default", async () => {
    expect((await ranWith(refs({ application_variant: { slug: 'default' } }))).instructions).toContain('the helpdesk app');
    expect((await ranWith(refs({ evaluator_variant: { slug: 'default' }, evaluator_revision: { version: 1 } }))).instructions).toContain('the judge');
  });

  it('runs what an environment deploys, under the selector key or the workflow slug', async () => {
    expect((await ranWith(refs({ environment: { slug: 'production' } }, { selector: { key: 'bot' } }))).instructions).toContain('bot one');
    expect((await ranWith(refs({ environment: { slug: 'production' }, workflow: { slug: 'bot' } }))).instructions).toContain('bot one');
    expect((await ranWith(refs({ environment: { slug: 'production' }, application: { slug: 'helpdesk' } }, { selector: { key: 'front-desk' } }))).instructions).toContain('the helpdesk app');
    // Deploying again changes what the same references run.
    await deploy(h, 'production', { workflow: { slug: 'bot' } });
    expect((await ranWith(refs({ environment: { slug: 'production' } }, { selector: { key: 'bot' } }))).instructions).toContain('bot two');
    // An older environment revision still deploys what it did.
    expect((await ranWith(refs({ environment: { slug: 'production' }, environment_revision: { version: 1 } }, { selector: { key: 'bot' } }))).instructions).toContain('bot one');
  });

  it('applies selector.path to the stored parameters', async () => {
    await createWorkflow(h, 'multi', { agents: { writer: agent('the writer'), critic: agent('the critic') } });
    expect((await ranWith(refs({ workflow: { slug: 'multi' } }, { selector: { path: 'parameters.agents.critic' } }))).instructions).toContain('the critic');
    const res = await h.invoke(refs({ workflow: { slug: 'multi' } }, { selector: { path: 'parameters.agents.nobody' }, data: hello }));
    await expectError(res, 400, 'invalid-request', /parameters\.agents\.nobody.*critic/);
    // Without a path, a revision with no agent template cannot run.
    await expectError(await h.invoke(refs({ workflow: { slug: 'multi' } }, { data: hello })), 400, 'invalid-request', /no agent template/);
  });

  it('runs inline parameters when both are sent: the reference only names the run', async () => {
    const { instructions, body } = await ranWith({ references: { workflow: { slug: 'no-such-workflow' } }, data: { parameters: { agent: agent('inline') } } });
    expect(instructions).toContain('inline');
    const turn = (await h.store.turns.listForSession(h.projectId, body.session_id, { limit: 1 }))[0]!;
    expect(turn.request).toMatchObject({ references: { workflow: { slug: 'no-such-workflow' } } });
    expect(turn.request).not.toHaveProperty('revision');
  });

  it('runs an inline revision as given', async () => {
    expect((await ranWith({ data: { revision: { data: { parameters: { agent: agent('the inline revision') } } } } })).instructions).toContain('the inline revision');
  });
});

describe('invoke by reference: refused', () => {
  const post = (fields: Record<string, unknown>) => h.invoke({ ...fields, data: hello });

  it('two execution families at once is a 400', async () => {
    await expectError(await post(refs({ workflow: { slug: 'bot' }, application: { slug: 'helpdesk' } })), 400, 'conflicting-references', /workflow and application/);
  });

  it('an unknown reference is a 404 that names it', async () => {
    await expectError(await post(refs({ workflow: { slug: 'nope' } })), 404, 'unknown-reference', /"slug":"nope"/);
    await expectError(await post(refs({ workflow_revision: { id: 'no-such-id' } })), 404, 'unknown-reference', /no-such-id/);
    await expectError(await post(refs({ workflow: { slug: 'bot' }, workflow_revision: { version: 9 } })), 404, 'unknown-reference', /v9/);
    await expectError(await post(refs({ environment: { slug: 'staging' } }, { selector: { key: 'bot' } })), 404, 'unknown-reference', /staging/);
    await expectError(await post(refs({ environment: { slug: 'production' } }, { selector: { key: 'missing' } })), 404, 'unknown-reference', /"missing".*bot/);
  });

  it('references that disagree, or say too little, are a 400', async () => {
    await expectError(await post(refs({ workflow: { slug: 'helpdesk' }, workflow_revision: { id: bot.v1.id } })), 400, 'conflicting-references', /helpdesk/);
    await expectError(await post(refs({ workflow_revision: { version: 1 } })), 400, 'invalid-request', /workflow_revision/);
    await expectError(await post(refs({ workflow: { slug: 'bot', version: 'latest' } })), 400, 'invalid-request', /"latest"/);
    await expectError(await post(refs({ environment: { slug: 'production' } })), 400, 'invalid-request', /selector\.key/);
  });

  it('a variant slug shared by two workflows needs its workflow', async () => {
    await commit(h, 'helpdesk', { agent: agent('helpdesk canary') }, { variant: 'canary' });
    await expectError(await post(refs({ workflow_variant: { slug: 'canary' } })), 400, 'ambiguous-reference', /canary/);
    expect((await ranWith(refs({ workflow: { slug: 'helpdesk' }, workflow_variant: { slug: 'canary' } }))).instructions).toContain('helpdesk canary');
  });

  it("another project's configuration is unknown here", async () => {
    const other = await h.store.projects.ensure('other');
    const otherKey = (await h.store.apiKeys.create(other.id, 'editor')).key;
    const res = await fetch(`${h.url}/services/agent/v0/invoke?project_id=${other.id}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${otherKey}` },
      body: JSON.stringify({ references: { workflow_revision: { id: bot.v1.id } }, data: hello }),
    });
    await expectError(res, 404, 'unknown-reference');
  });
});
