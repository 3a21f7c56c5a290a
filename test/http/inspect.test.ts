import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startHarness, type Harness } from '../support/harness.ts';
import { createWorkflow } from '../configs/client.ts';
import { createTestset, runEnded, runResults, startRun } from '../evaluation/client.ts';
import { schemaValidator } from '../support/json-schema.ts';

/** POST /services/agent/v0/inspect: the workflow that would run, and a request that runs it. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const inspect = (body: unknown, key = h.apiKey) =>
  fetch(`${h.url}/services/agent/v0/inspect?project_id=${h.projectId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `ApiKey ${key}` },
    body: JSON.stringify(body),
  });

describe('inspect', () => {
  it('with no references describes the built-in agent workflow and its default template', async () => {
    const res = await inspect({});
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.revision.data.uri).toBe('agenta:builtin:agent:v0');
    const agent = body.revision.data.parameters.agent;
    expect(agent).toMatchObject({ llm: { provider: 'openai', model: 'fake-model' }, runner: { permissions: { default: 'allow_reads' } }, harness: { kind: 'agentd' } });
    expect(agent.tools.map((t: { name: string }) => t.name)).toEqual(['read', 'write', 'edit', 'ls', 'find', 'grep', 'bash']);
    const { inputs, parameters, outputs } = body.revision.data.schemas;
    expect(Object.keys(inputs.properties)).toEqual(['messages']);
    expect(inputs.properties.messages['x-ag-type-ref']).toBe('messages');
    expect(parameters.properties.agent['x-ag-type-ref']).toBe('agent-template');
    expect(outputs.properties).toHaveProperty('stop_reason');
    // The parameters schema accepts the default template and refuses a pre-migration one.
    const validate = schemaValidator().compile(parameters);
    expect(validate({ agent })).toBe(true);
    expect(validate({ agent: { agents_md: 'old layout' } })).toBe(false);
  });

  it('answers in the contract version: x-ag-version on the reply, and an unsupported version is a 400 like invoke', async () => {
    const res = await inspect({ version: '2025.07.14' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ag-version')).toBe('2025.07.14');
    expect((await res.json()).version).toBe('2025.07.14');
    await expectError(await inspect({ version: '1999.01.01' }), 400, 'unsupported-version', '2025.07.14');
  });

  it('an empty body asks for the defaults, with or without a JSON Content-Type', async () => {
    for (const headers of [{}, { 'content-type': 'application/json' }] as Record<string, string>[]) {
      const res = await fetch(`${h.url}/services/agent/v0/inspect?project_id=${h.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${h.apiKey}`, ...headers } });
      expect(res.status).toBe(200);
      expect((await res.json()).revision.data.uri).toBe('agenta:builtin:agent:v0');
    }
    await expectError(await fetch(`${h.url}/services/agent/v0/inspect?project_id=${h.projectId}`, { method: 'POST', headers: { authorization: `ApiKey ${h.apiKey}`, 'content-type': 'application/json' }, body: '{"a":' }), 400, 'invalid-json');
  });

  it('gives a request that invoke runs as it is', async () => {
    const { request } = await (await inspect({ session_id: 'inspected' })).json();
    h.model.script({ text: 'ran from inspect' });
    const res = await h.invoke(request);
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.session_id).toBe('inspected');
    expect(body.data.outputs.messages.at(-1).content).toBe('ran from inspect');
  });

  it('describes an inline revision with its own template, and refuses a bad one like invoke does', async () => {
    const agent = { llm: { provider: 'ollama', model: 'small' }, tools: [], runner: { permissions: { default: 'ask' } } };
    const body = await (await inspect({ revision: { data: { parameters: { agent } } } })).json();
    expect(body.revision.data.parameters.agent).toMatchObject({ llm: { provider: 'ollama', model: 'small' }, tools: [], runner: { permissions: { default: 'ask' } } });
    expect(body.request.data.parameters.agent.llm.model).toBe('small');
    await expectError(await inspect({ revision: { data: { parameters: { agent: { model: 'flat' } } } } }), 400, 'invalid-template-shape');
  });

  it('describes a stored revision named by references, and its request runs what they name', async () => {
    const agent = { instructions: { agents_md: 'You are the stored bot.' }, llm: { provider: 'openai', model: 'fake-model' }, tools: [] };
    const created = await createWorkflow(h, 'inspected-bot', { agent }, { name: 'Inspected bot', description: 'Stored' });
    const body = await (await inspect({ references: { workflow: { slug: 'inspected-bot' } } })).json();
    expect(body.revision).toMatchObject({ id: created.revision.id, slug: created.revision.slug, version: 1, name: 'Inspected bot', description: 'Stored' });
    expect(body.revision.data.parameters.agent).toMatchObject({ instructions: agent.instructions, tools: [], runner: { permissions: { default: 'allow_reads' } } });
    expect(body.revision.data.schemas.parameters.properties.agent['x-ag-type-ref']).toBe('agent-template');
    expect(body.request.references).toEqual({ workflow: { slug: 'inspected-bot' } });
    expect(body.request.data.parameters).toBeUndefined();
    h.model.reset();
    h.model.script({ text: 'ran by reference' });
    const res = await h.invoke(body.request);
    expect(res.status).toBe(200);
    expect((await res.json()).data.outputs.messages.at(-1).content).toBe('ran by reference');
    expect(h.model.requests[0]!.messages.find((m) => m.role === 'system')!.content).toContain('You are the stored bot.');
    await expectError(await inspect({ references: { workflow: { slug: 'nope' } } }), 404, 'unknown-reference', /nope/);
    await expectError(await inspect({ references: { workflow: { slug: 'a' }, evaluator: { slug: 'b' } } }), 400, 'conflicting-references');
  });

  it("names the built-in agent by an id that invoke and evaluations take back", async () => {
    const { revision } = await (await inspect({})).json();
    expect(revision.id).toBe('agenta:builtin:agent:v0');
    h.model.reset();
    h.model.script({ text: 'the built-in agent' });
    const res = await h.invoke({ references: { workflow_revision: { id: revision.id } }, data: { inputs: { messages: [{ role: 'user', content: 'hi' }] } } });
    expect((await res.json()).data.outputs.messages.at(-1).content).toBe('the built-in agent');
    // The default template's instructions reached the model.
    expect(h.model.requests[0]!.messages.find((m) => m.role === 'system')!.content).toContain('helpful agent');

    const testset = await createTestset(h, { data: { testcases: [{ data: { messages: [{ role: 'user', content: 'case' }] } }] } });
    h.model.script({ text: 'evaluated' });
    const run = await runEnded(h, (await startRun(h, testset.revision_id, revision.id)).id);
    expect(run.data).toMatchObject({ status: 'success', progress: { total: 1, success: 1 } });
    expect((await runResults(h, run.id))[0]).toMatchObject({ step_key: 'application-agent', outputs: { messages: [{ role: 'assistant', content: 'evaluated' }] } });
  });

  it('needs a key of the project, like everything else', async () => {
    await expectError(await inspect({}, 'agd_not-a-key'), 401, 'unauthenticated');
    await expectError(await inspect({ session_id: 'bad id' }), 400, 'invalid-session-id', /session_id/);
  });
});
