import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configsApi, createWorkflow, deploy } from '../configs/client.ts';
import { expectError, invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * Issue 19: a name the caller chooses is looked up among an object's own properties only. A key
 * such as `constructor` used to find what every object inherits, and the turn failed on it with
 * a 500; each is now the 4xx that an unknown name gets.
 */

const NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'];

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ env: (url) => ({ AGENTD_PRICES: JSON.stringify({ 'fake-model': { input: 1, output: 2 } }), AGENTD_OPENAI_COMPATIBLE: JSON.stringify({ local: { base_url: `${url}/v1` } }) }) });
  await createWorkflow(h, 'proto-wf', { agent: template() });
  expect((await configsApi(h, 'POST', '/environments', { slug: 'proto-env' })).status).toBe(201);
  await deploy(h, 'proto-env', { workflow: { slug: 'proto-wf' } }, 'proto-wf');
});
afterAll(async () => h.close());

const byKey = (key: string) => ({ references: { environment: { slug: 'proto-env' } }, selector: { key } });
const hi = [{ role: 'user', content: 'hi' }];

describe('a caller’s name never finds an inherited property', () => {
  it.each(NAMES)('selector.key %s: resolve, inspect and invoke answer 404 unknown-reference', async (key) => {
    await expectError(await configsApi(h, 'POST', '/workflows/resolve', byKey(key)), 404, 'unknown-reference', /deploys nothing under/);
    const inspect = await fetch(`${h.url}/services/agent/v0/inspect?project_id=${h.projectId}`, {
      method: 'POST',
      headers: { authorization: `ApiKey ${h.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(byKey(key)),
    });
    await expectError(inspect, 404, 'unknown-reference');
    await expectError(await h.invoke({ data: { inputs: { messages: hi } }, ...byKey(key) }), 404, 'unknown-reference');
  });

  it.each(NAMES)('an embed whose @ag.selector.key is %s: a commit refuses it with a 4xx', async (key) => {
    const embed = { '@ag.embed': { '@ag.references': { environment: { slug: 'proto-env' } }, '@ag.selector': { key, path: 'parameters.agent.tools' } } };
    const res = await configsApi(h, 'POST', '/workflows/proto-wf/revisions', { data: { parameters: { agent: { tools: embed } } } });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
  });

  it.each(NAMES)('an openai-compatible endpoint named %s is unknown: 400 listing the configured ones', async (slug) => {
    const agent = { llm: { provider: 'openai-compatible', model: 'fake-model', connection: { mode: 'self_managed', slug } } };
    await expectError(await h.invoke(invokeBody(hi, agent)), 400, 'invalid-request', /configured: local/);
  });

  it.each(NAMES)('an MCP url naming the secret %s the request lacks: 400 saying so', async (name) => {
    const agent = { ...template(), mcps: [{ name: 'm', connection: { type: 'http', url: `http://127.0.0.1:9/{{secrets.${name}}}` } }] };
    await expectError(await h.invoke(invokeBody(hi, agent, { secrets: { token: 't' } })), 400, 'invalid-request', new RegExp(`names the secret "${name.replace(/[_$]/g, '\\$&')}"`));
  });

  it.each(NAMES)('a model named %s has no price, so no cost; the turn runs', async (model) => {
    h.model.script({ text: 'ok' });
    const body = await readJson(await h.invoke(invokeBody(hi, { ...template(), llm: { provider: 'openai', model } })));
    expect(body.data.outputs.usage).toBeDefined();
    expect(body.data.outputs.usage.cost).toBeUndefined();
  });
});

describe('a client tool named like an inherited property', () => {
  it.each(NAMES)('%s is offered to the model and pauses the turn when called', async (name) => {
    h.model.script([{ toolCalls: [{ name, input: {} }] }]);
    const agent = { ...template(), tools: [{ type: 'client', name }] };
    const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'call it' }], agent)));
    const offered = (h.model.requests.at(-1)!.body as { tools?: Array<{ name?: string }> }).tools?.map((tool) => tool.name);
    expect(offered).toEqual([name]);
    expect(body.data.outputs.stop_reason).toBe('paused');
    expect(body.data.outputs.pending_interaction).toMatchObject({ kind: 'client_tool', tool: name });
  });
});
