import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * An answer given in band (a client tool's result, an approval's reason) that repeats the
 * request's secrets is stored masked on its interaction, as the paused turn's state is: the
 * interactions API serves it to any viewer of the project.
 */

const SECRET = 'sk-secret-value-123';
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const interaction = async (id: string) =>
  (await fetch(`${h.url}/api/sessions/interactions/${id}?project_id=${h.projectId}`, { headers: { authorization: `ApiKey ${h.apiKey}` } })).text();

describe('a secret repeated in an in-band answer', () => {
  it("is masked on a client tool's stored result", async () => {
    const session = sid('secret-client-tool');
    const tool = { type: 'client', name: 'get_token', description: 'Asks the client for a token', input_schema: { type: 'object', properties: {} } };
    const agent = template({ tools: [tool], mode: 'allow' });
    const first = [{ role: 'user', content: 'get my token' }];
    h.model.script([{ toolCalls: [{ name: 'get_token', input: {} }] }, { text: 'got it' }]);
    const paused = (await readJson(await h.invoke(invokeBody(first, agent, { session_id: session })))).data.outputs;
    const result = { role: 'tool', tool_call_id: paused.messages[0].tool_call_id, content: `token=${SECRET}` };
    const res = await h.invoke(invokeBody([...first, ...paused.messages, result], agent, { session_id: session, secrets: { OPENAI_API_KEY: SECRET } }));
    expect(res.status).toBe(200);
    const served = await interaction(paused.pending_interaction.id);
    expect(served).toContain('token=[redacted]');
    expect(served).not.toContain(SECRET);
    expect(JSON.stringify(await h.store.interactions.get(h.projectId, paused.pending_interaction.id))).not.toContain(SECRET);
  });

  it("is masked in an approval's stored reason", async () => {
    const session = sid('secret-reason');
    const agent = template({ tools: [builtin('write')], mode: 'ask' });
    const first = [{ role: 'user', content: 'write it' }];
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] }, { text: 'fine' }]);
    const paused = (await readJson(await h.invoke(invokeBody(first, agent, { session_id: session })))).data.outputs;
    const decided = paused.messages.map((m: { approval?: object }) => (m.approval ? { ...m, approval: { ...m.approval, approved: false, reason: `not with ${SECRET}` } } : m));
    expect((await h.invoke(invokeBody([...first, ...decided], agent, { session_id: session, credentials: SECRET }))).status).toBe(200);
    const served = await interaction(paused.pending_interaction.id);
    expect(served).toContain('not with [redacted]');
    expect(served).not.toContain(SECRET);
  });
});
