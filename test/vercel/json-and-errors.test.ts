import { existsSync } from 'node:fs';
import path from 'node:path';
import { safeValidateUIMessages, validateUIMessages, type UIMessage } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sessionFolder } from '../../src/sessions/folders.ts';
import { agentdChat } from '../support/headless-chat.ts';
import { startHarness, template, type Harness } from '../support/harness.ts';

/** Batch replies in the Vercel format, judged by the SDK's own validator, and what bad input gets. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

const VERCEL_JSON = { accept: 'application/json', 'x-ag-messages-format': 'vercel' };
const writeTool = [{ type: 'builtin', name: 'write' }];

type ToolPart = Extract<UIMessage['parts'][number], { toolCallId: string }>;

const user = (id: string, text: string): UIMessage => ({ id, role: 'user', parts: [{ type: 'text', text }] });

async function invokeJson(sessionId: string, messages: unknown[], agent: unknown) {
  const res = await h.invoke({ session_id: sessionId, data: { inputs: { messages }, parameters: { agent } } }, { headers: VERCEL_JSON });
  const body = await res.json();
  return { res, body, messages: body?.data?.outputs?.messages as UIMessage[] };
}

async function expectValid(messages: UIMessage[]): Promise<void> {
  const result = await safeValidateUIMessages({ messages });
  if (!result.success) throw new Error(`validateUIMessages rejected ${JSON.stringify(messages)}: ${result.error.message}`);
}

describe('JSON replies in the Vercel format', () => {
  it('a tool turn comes back as one valid assistant UIMessage', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'j.txt', content: 'J' } }] }, { text: 'Wrote j.txt.' }]);
    const { res, body, messages } = await invokeJson('vercel-json-tool', [user('u1', 'write j')], template({ tools: writeTool }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(body.data.outputs.stop_reason).toBe('end_turn');

    await expectValid(messages);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatchObject({ role: 'assistant', id: expect.any(String) });
    const parts = messages[0]!.parts;
    expect(parts.filter((p) => p.type !== 'step-start')).toMatchObject([
      { type: 'tool-write', state: 'output-available', input: { path: 'j.txt', content: 'J' }, output: expect.any(String) },
      { type: 'text', text: 'Wrote j.txt.' },
    ]);
  });

  it('transcript last keeps the last UIMessage whole: a tool turn is one message, its tool part included', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 't.txt', content: 'T' } }] }, { text: 'Wrote t.txt.' }]);
    const res = await h.invoke(
      { session_id: 'vercel-json-trim', data: { inputs: { messages: [user('u1', 'write t')] }, parameters: { agent: template({ tools: writeTool }) } } },
      { headers: { ...VERCEL_JSON, 'x-ag-messages-transcript': 'last' } },
    );
    expect(res.status).toBe(200);
    const messages = (await res.json()).data.outputs.messages as UIMessage[];
    await expectValid(messages);
    expect(messages).toHaveLength(1);
    expect(messages[0]!.parts.filter((p) => p.type !== 'step-start')).toMatchObject([
      { type: 'tool-write', state: 'output-available' },
      { type: 'text', text: 'Wrote t.txt.' },
    ]);
  });

  it('pause and in-band approval over JSON: both replies validate, the continuation keeps the message', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'k.txt', content: 'K' } }] }, { text: 'Wrote k.txt.' }]);
    const agent = template({ tools: writeTool, mode: 'ask' });
    const history: UIMessage[] = [user('u1', 'write k')];

    const paused = await invokeJson('vercel-json-approve', history, agent);
    expect(paused.res.status).toBe(200);
    await expectValid(paused.messages);
    expect(paused.body.data.outputs.stop_reason).toBe('paused');
    const assistant = paused.messages[0]!;
    const part = assistant.parts.find((p): p is ToolPart => p.type === 'tool-write')!;
    expect(part).toMatchObject({ state: 'approval-requested', approval: { id: paused.body.data.outputs.pending_interaction.id } });

    // What addToolApprovalResponse does in the browser.
    const answered = structuredClone(assistant);
    Object.assign(answered.parts.find((p) => p.type === 'tool-write')!, { state: 'approval-responded', approval: { id: (part as { approval: { id: string } }).approval.id, approved: true } });

    const done = await invokeJson('vercel-json-approve', [...history, answered], agent);
    expect(done.res.status).toBe(200);
    await expectValid(done.messages);
    // One assistant message, the continued one, with the output in place and the answer after it.
    expect(done.messages).toHaveLength(1);
    expect(done.messages[0]!.id).toBe(assistant.id);
    expect(done.messages[0]!.parts.filter((p) => p.type !== 'step-start')).toMatchObject([
      { type: 'tool-write', toolCallId: part.toolCallId, state: 'output-available', output: expect.any(String), approval: { approved: true } },
      { type: 'text', text: 'Wrote k.txt.' },
    ]);
    expect(existsSync(path.join(sessionFolder(h.dataDir, h.projectId, 'vercel-json-approve'), 'k.txt'))).toBe(true);

    // The client's history after the continuation validates as a whole.
    await validateUIMessages({ messages: [...history, ...done.messages] });
  });
});

describe('a denial re-posted as output-denied', () => {
  it('settles the approval as denied in band, and the tool does not run', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'd.txt', content: 'D' } }] }, { text: 'Understood, not writing.' }]);
    const agent = template({ tools: writeTool, mode: 'ask' });
    const history: UIMessage[] = [user('u1', 'write d')];
    const paused = await invokeJson('vercel-output-denied', history, agent);
    const assistant = paused.messages[0]!;
    const part = assistant.parts.find((p): p is ToolPart => p.type === 'tool-write')!;
    const interactionId = paused.body.data.outputs.pending_interaction.id as string;

    const denied = structuredClone(assistant);
    Object.assign(denied.parts.find((p) => p.type === 'tool-write')!, { state: 'output-denied', approval: { id: interactionId, approved: false, reason: 'not now' } });
    const done = await invokeJson('vercel-output-denied', [...history, denied], agent);
    expect(done.res.status).toBe(200);
    expect(done.body.data.outputs.stop_reason).toBe('end_turn');
    expect(await h.store.interactions.get(h.projectId, interactionId)).toMatchObject({ status: 'resolved', answer: { approved: false, reason: 'not now' } });
    expect(existsSync(path.join(sessionFolder(h.dataDir, h.projectId, 'vercel-output-denied'), 'd.txt'))).toBe(false);
    expect(h.model.requests.at(-1)!.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: part.toolCallId });
  });
});

describe('hand-written Vercel input', () => {
  it('takes messages without ids, and {role, content} text as a text part', async () => {
    h.model.script([{ text: 'Hi there.' }]);
    const messages = [{ role: 'system', parts: [{ type: 'text', text: 'Be brief.' }] }, { role: 'user', content: 'hello' }];
    const { res, messages: out } = await invokeJson('vercel-no-ids', messages, template());
    expect(res.status).toBe(200);
    expect(out.at(-1)).toMatchObject({ role: 'assistant', parts: expect.arrayContaining([expect.objectContaining({ type: 'text', text: 'Hi there.' })]) });
    expect(h.model.requests.at(-1)!.messages.map((m) => [m.role, m.content])).toEqual([
      ['system', expect.stringContaining('Be brief.')],
      ['user', 'hello'],
    ]);
  });
});

describe('invalid Vercel input', () => {
  const agent = template();

  async function rejected(messages: unknown[], headers: Record<string, string> = VERCEL_JSON) {
    const res = await h.invoke({ session_id: 'vercel-bad', data: { inputs: { messages }, parameters: { agent } } }, { headers });
    const body = await res.json();
    expect(res.status).toBe(400);
    expect(body.status).toMatchObject({ code: 400, type: 'invalid-messages' });
    return body.status.message as string;
  }

  it('a text part with no text names data.inputs.messages[i].parts[j]', async () => {
    const ok = user('u1', 'hello');
    const broken = { id: 'a1', role: 'assistant', parts: [{ type: 'step-start' }, { type: 'text', text: 42 }] };
    const message = await rejected([ok, broken, user('u2', 'again')]);
    expect(message).toContain('data.inputs.messages[1].parts[1]');
    expect(message).toMatch(/data\.inputs\.messages\[1\]\.parts\[1\]\.text\b/);
  });

  it('a tool part in an unknown state, and an unknown part type, are named by path', async () => {
    const badState = { id: 'a1', role: 'assistant', parts: [{ type: 'tool-write', toolCallId: 'c1', state: 'done', input: {} }] };
    expect(await rejected([user('u1', 'x'), badState])).toContain('data.inputs.messages[1].parts[0].state');

    const unknownType = { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'a' }, { type: 'image', url: 'x' }] };
    expect(await rejected([unknownType])).toContain('data.inputs.messages[0].parts[1].type');

    // The SDK itself rejects the same message, so the 400 is not agentd being stricter than useChat.
    expect((await safeValidateUIMessages({ messages: [badState as never] })).success).toBe(false);
  });

  it('a problem found after conversion names the part the caller sent, not an index in the converted list', async () => {
    const twoCalls = {
      id: 'a1',
      role: 'assistant',
      parts: [
        { type: 'step-start' },
        { type: 'text', text: 'two calls' },
        { type: 'tool-ls', toolCallId: 'c1', state: 'output-available', input: {}, output: 'a.txt' },
        { type: 'tool-ls', toolCallId: 'c1', state: 'output-available', input: {}, output: 'b.txt' },
      ],
    };
    expect(await rejected([user('u1', 'x'), twoCalls])).toMatch(/duplicate tool call "c1" at data\.inputs\.messages\[1\]\.parts\[3\]$/);

    const decided = { id: 'a2', role: 'assistant', parts: [{ type: 'text', text: 'may I?' }, { type: 'tool-ls', toolCallId: 'c2', state: 'approval-responded', input: {}, approval: { id: 'never-asked', approved: true } }] };
    const res = await h.invoke({ session_id: 'vercel-bad-decision', data: { inputs: { messages: [user('u1', 'x'), decided] }, parameters: { agent } } }, { headers: VERCEL_JSON });
    const body = await res.json();
    expect(body.status).toMatchObject({ code: 400, type: 'invalid-approval' });
    expect(body.status.message).toMatch(/"never-asked".*\(data\.inputs\.messages\[1\]\.parts\[1\]\)$/);
  });

  it('a chat id that cannot be a session id is a 400, not a minted session', async () => {
    for (const id of ['../x', 'a/b', 'x'.repeat(129), '', 5]) {
      const res = await h.invoke({ id, messages: [user('u1', 'hi')], trigger: 'submit-message', data: { parameters: { agent } } });
      expect(res.status, JSON.stringify(id)).toBe(400);
      const body = await res.json();
      expect(body.status).toMatchObject({ code: 400, type: 'invalid-session-id' });
      expect(body.status.message).toContain('(at id)');
    }
    expect(h.model.requests).toHaveLength(0);
  });

  it('the chat transport body is checked the same way, and useChat surfaces the 400', async () => {
    const chat = agentdChat({
      api: `${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`,
      apiKey: h.apiKey,
      body: { data: { parameters: { agent } } },
      messages: [user('u1', 'hi'), { id: 'a1', role: 'assistant', parts: [{ type: 'text' } as never] }],
    });
    await chat.sendMessage({ text: 'next' });
    await chat.untilFinished(1);
    expect(chat.status).toBe('error');
    expect(chat.error?.message).toContain('invalid-messages');
    // It names the place in the body the transport posted, not where agentd moves the messages.
    expect(chat.error?.message).toContain('at messages[1].parts[0]');
    expect(chat.error?.message).not.toContain('data.inputs');
    expect(h.model.requests).toHaveLength(0);
  });

  it("a chat body's errors name its own messages, wherever they are found", async () => {
    const post = async (messages: unknown[]) => {
      const res = await h.invoke({ id: 'chat-paths', messages, trigger: 'submit-message', data: { parameters: { agent } } });
      expect(res.status).toBe(400);
      return (await res.json()).status.message as string;
    };
    const call = { type: 'tool-write', toolCallId: 'c1', state: 'input-available', input: 'not an object' };
    expect(await post([user('u1', 'hi'), { id: 'a1', role: 'assistant', parts: [call] }])).toMatch(/at messages\[1\]\.parts\[0\]\.input$/);
    expect(await post([{ id: 's1', role: 'system', parts: [{ type: 'text', text: 'be brief' }] }])).toMatch(/^messages holds only system messages/);
    const answered = { type: 'tool-write', toolCallId: 'c2', state: 'output-available', input: { path: 'a' }, output: 'ok' };
    expect(await post([user('u1', 'hi'), { id: 'a1', role: 'assistant', parts: [answered, answered] }])).toMatch(/duplicate tool call "c2" at messages\[1\]\.parts\[1\]/);
    expect(h.model.requests).toHaveLength(0);
  });
});
