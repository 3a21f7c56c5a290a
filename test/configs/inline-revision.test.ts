import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { createWorkflow } from './client.ts';

/**
 * An inline revision (`data.revision`, spec §2.2) is checked as a stored one is at commit: a
 * malformed one, or one of a workflow this server does not run, is a 400 naming it — it used to
 * run the default agent with a 200 — and its template's errors name where it is.
 */

let h: Harness;
const hello = { inputs: { messages: [{ role: 'user', content: 'hi' }] } };

beforeAll(async () => {
  h = await startHarness();
  await createWorkflow(h, 'plain-text', { text: 'just text' });
});
afterAll(async () => h.close());

async function invoke(body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> {
  h.model.reset();
  h.model.script({ text: 'ran' });
  return h.invoke({ session_id: sid('inline'), ...body }, { headers });
}

describe('an inline revision', () => {
  it.each([
    ['its parameters are a string', { data: { parameters: 'x' } }, /data\.revision\.data\.parameters must be an object/],
    ['its parameters are a list', { data: { parameters: [template()] } }, /data\.revision\.data\.parameters must be an object/],
    ['its data is a number', { data: 5 }, /data\.revision\.data must be an object/],
    ['its uri is another workflow', { data: { uri: 'agenta:builtin:chat:v0', parameters: { agent: template() } } }, /data\.revision\.data\.uri "agenta:builtin:chat:v0" is not a workflow this server runs/],
  ])('is a 400 when %s, and nothing runs', async (_what, revision, message) => {
    await expectError(await invoke({ data: { ...hello, revision } }), 400, 'invalid-request', message);
    expect(h.model.requests).toEqual([]);
  });

  it("names its template's errors where they are", async () => {
    const res = await invoke({ data: { ...hello, revision: { data: { parameters: { agent: { ...template(), bogus: 1 } } } } } });
    await expectError(res, 400, 'unknown-template-key', /data\.revision\.data\.parameters\.agent/);
  });

  it('runs when it is well formed', async () => {
    const res = await invoke({ data: { ...hello, revision: { data: { parameters: { agent: { ...template(), instructions: { agents_md: 'Be inline.' } } } } } } });
    expect(res.status).toBe(200);
    expect(h.model.requests[0]!.messages.find((m) => m.role === 'system')!.content).toContain('Be inline.');
  });

  it('is checked by inspect too', async () => {
    const res = await fetch(`${h.url}/services/agent/v0/inspect?project_id=${h.projectId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `ApiKey ${h.apiKey}` },
      body: JSON.stringify({ revision: { data: { parameters: 'x' } } }),
    });
    await expectError(res, 400, 'invalid-request', /revision\.data\.parameters must be an object/);
  });
});

describe('parameters that are one embed', () => {
  it('must resolve to parameters, not a text', async () => {
    const res = await invoke({ flags: { resolve: true }, data: { ...hello, parameters: { '@ag.embed': { '@ag.references': { workflow: { slug: 'plain-text' } }, '@ag.selector': { path: 'parameters.text' } } } } });
    await expectError(res, 400, 'invalid-request', /resolves to a string; parameters must be an object/);
    expect(h.model.requests).toEqual([]);
  });
});
