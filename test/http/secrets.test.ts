import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/testing/fake-model.ts';
import { builtin, invokeBody, readFrames, sid, startHarness, template, type Harness } from '../support/harness.ts';
import { storedContent } from '../support/database.ts';

/**
 * design.md §4 "Connections" and §6: per-request `secrets` (and `credentials`) are used for the run
 * and never stored, logged or echoed — even when the model or the provider repeats them.
 */

const SECRET = 'sk-secret-value-123';
const CREDENTIAL = 'cred-secret-456789';

let h: Harness;
const bodies: string[] = [];
beforeAll(async () => {
  // The server's own key is different, so a run that reached the model with SECRET used the request's.
  h = await startHarness({ logs: true });
});
afterAll(async () => h.close());

const agent = template({ tools: [builtin('write')], mode: 'allow' });
const withSecrets = (extra: Record<string, unknown> = {}) =>
  invokeBody([{ role: 'user', content: 'go' }], agent, { secrets: { OPENAI_API_KEY: SECRET }, credentials: CREDENTIAL, ...extra });
const keyOf = (req: RecordedRequest) => req.headers.authorization?.replace(/^Bearer /, '') ?? '';

async function text(res: Response): Promise<string> {
  const body = await res.text();
  bodies.push(body);
  return body;
}

describe('per-request secrets', () => {
  it('are used for the provider call', async () => {
    h.model.script({ text: 'hello' });
    h.model.reset();
    const res = await h.invoke(withSecrets());
    expect(res.status).toBe(200);
    await text(res);
    expect(h.model.requests[0]!.headers.authorization).toBe(`Bearer ${SECRET}`);
  });

  it('are masked when the model echoes them in text and tool input', async () => {
    const session = sid('echo');
    h.model.script((req) =>
      req.messages.at(-1)?.role === 'tool'
        ? { text: `Your key is ${keyOf(req)}.` }
        : { toolCalls: [{ name: 'write', input: { path: 'k.txt', content: `key=${keyOf(req)}` } }] },
    );
    const body = await text(await h.invoke(withSecrets({ session_id: session })));
    expect(body).not.toContain(SECRET);
    const json = JSON.parse(body);
    expect(json.data.outputs.messages.at(-1).content).toBe('Your key is [redacted].');
    const [turn] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(JSON.stringify(turn)).not.toContain(SECRET);
  });

  it('mask the server’s own provider key too, when no secret was sent', async () => {
    h.model.script((req) => ({ text: `The server key is ${keyOf(req)}.` }));
    const body = await text(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent)));
    expect(JSON.parse(body).data.outputs.messages.at(-1).content).toBe('The server key is [redacted].');
  });

  it('are masked on a stream too', async () => {
    h.model.script({ text: `Streaming ${SECRET} back.` });
    const res = await h.invoke(withSecrets(), { headers: { accept: 'text/event-stream' } });
    const raw = await text(res.clone());
    expect(raw).not.toContain(SECRET);
    const { frames } = await readFrames(res);
    // The fake model sends the text in pieces, so the secret straddles deltas.
    expect(frames.filter((f) => f.type === 'message_delta').length).toBeGreaterThan(1);
    expect(frames.filter((f) => f.type === 'message_delta').map((f) => f.data.delta).join('')).toBe('Streaming [redacted] back.');
    expect(frames.at(-1)!.type).toBe('done');
  });

  it('are masked in a paused turn’s pending interaction and its record', async () => {
    const session = sid('pause');
    h.model.script((req) => ({ toolCalls: [{ name: 'write', input: { path: 'k.txt', content: keyOf(req) } }] }));
    const body = await text(await h.invoke({ ...withSecrets({ session_id: session }), data: { ...withSecrets().data, parameters: { agent: template({ tools: [builtin('write')], mode: 'ask' }) } } }));
    expect(body).not.toContain(SECRET);
    const json = JSON.parse(body);
    expect(json.data.outputs.stop_reason).toBe('paused');
    const record = await h.store.interactions.get(h.projectId, json.data.outputs.pending_interaction.id);
    expect(JSON.stringify(record)).not.toContain(SECRET);
  });

  it('are masked in the state a paused turn keeps, when the caller’s own messages repeat them', async () => {
    const session = sid('pause-history');
    h.model.script({ toolCalls: [{ name: 'write', input: { path: 'k.txt', content: 'x' } }] });
    const paused = withSecrets({ session_id: session });
    paused.data = { ...paused.data, inputs: { messages: [{ role: 'user', content: `use ${SECRET} and ${CREDENTIAL}` }] }, parameters: { agent: template({ tools: [builtin('write')], mode: 'ask' }) } };
    const json = JSON.parse(await text(await h.invoke(paused)));
    expect(json.data.outputs.stop_reason).toBe('paused');
    const record = await h.store.interactions.get(h.projectId, json.data.outputs.pending_interaction.id);
    const stored = JSON.stringify(await h.store.pausedStates.get(h.projectId, record!.turn_id));
    expect(stored).toContain('use [redacted] and [redacted]');
    expect(stored).not.toContain(SECRET);
    expect(stored).not.toContain(CREDENTIAL);
  });

  it('are masked when the provider’s error repeats them', async () => {
    h.model.script({ error: { status: 500, message: `Incorrect API key provided: ${SECRET}` } });
    const res = await h.invoke(withSecrets());
    expect(res.status).toBe(502);
    const body = await text(res);
    expect(body).not.toContain(SECRET);
    expect(JSON.parse(body).status).toMatchObject({ code: 502, type: 'upstream-error', message: expect.stringContaining('Incorrect API key provided: [redacted]') });
  });

  it('are masked in an error frame after output began', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] }, { error: { status: 500, message: `boom ${SECRET} ${CREDENTIAL}` } }]);
    const res = await h.invoke(withSecrets(), { headers: { accept: 'application/x-ndjson' } });
    const raw = await text(res);
    expect(raw).toContain('"type":"error"');
    expect(raw).not.toContain(SECRET);
    expect(raw).not.toContain(CREDENTIAL);
  });

  it('are masked where the caller repeats them itself, in tags and meta', async () => {
    h.model.script([{ text: 'done' }]);
    const session = sid('secrets-tags');
    const res = await h.invoke(withSecrets({ session_id: session, tags: { note: `key ${SECRET}` }, meta: { who: CREDENTIAL } }));
    expect(res.status).toBe(200);
    await text(res);
    const [turn] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(turn!.request).toMatchObject({ tags: { note: expect.not.stringContaining(SECRET) }, meta: { who: expect.not.stringContaining(CREDENTIAL) } });
  });

  it('are masked in a 4xx that quotes what the request sent', async () => {
    const refused = [
      withSecrets({ version: SECRET }),
      invokeBody([{ role: 'user', content: 'go' }], { ...agent, llm: { provider: CREDENTIAL } }, { credentials: CREDENTIAL }),
      { ...invokeBody([{ role: 'user', content: 'go' }], agent, { secrets: { OPENAI_API_KEY: SECRET } }), data: { inputs: { messages: [{ role: 'user', content: 'go' }] } }, references: { workflow: { slug: SECRET } } },
      invokeBody(
        [{ role: 'user', content: 'go' }, { role: 'tool', content: '', tool_call_id: 'c1', tool_name: 'write', input: {}, approval: { id: SECRET, approved: true } }],
        agent,
        { secrets: { OPENAI_API_KEY: SECRET } },
      ),
    ];
    for (const body of refused) {
      const res = await h.invoke(body);
      const raw = await text(res);
      expect(res.status, raw).toBeGreaterThanOrEqual(400);
      expect(res.status, raw).toBeLessThan(500);
      expect(raw).toContain('[redacted]');
      expect(raw).not.toContain(SECRET);
      expect(raw).not.toContain(CREDENTIAL);
    }
    const header = await h.invoke(withSecrets(), { headers: { 'x-ag-messages-format': SECRET } });
    expect(header.status).toBe(400);
    expect(await text(header)).not.toContain(SECRET);
  });

  it('never appear in a reply, the database files or the logs', async () => {
    for (const body of bodies) {
      expect(body).not.toContain(SECRET);
      expect(body).not.toContain(CREDENTIAL);
    }
    for (const { source, text } of await storedContent(h)) {
      expect(text.includes(SECRET), source).toBe(false);
      expect(text.includes(CREDENTIAL), source).toBe(false);
    }
    const logs = h.logs.join('');
    expect(logs).toContain('"reqId"');
    expect(logs).not.toContain(SECRET);
    expect(logs).not.toContain(CREDENTIAL);
    expect(logs).not.toContain(h.apiKey);
  });
});
