import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import {
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
  type FileUIPart,
  type UIMessage,
} from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sessionFolder } from '../../src/sessions/folders.ts';
import { agentdChat, type HeadlessChat } from '../support/headless-chat.ts';
import { readFinal, responseChunks } from '../support/sdk-client.ts';
import { startHarness, template, type Harness } from '../support/harness.ts';
import { waitFor } from '../sessions-api/client.ts';

/**
 * `useChat` against agentd: the SDK's `AbstractChat` + `DefaultChatTransport`, configured only the
 * way a front end would (url, headers, extra body), posting its own `{id, messages, trigger,
 * messageId}` bodies over real HTTP. No agentd-specific client code is involved.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());
beforeEach(() => h.model.reset());

type Part = UIMessage['parts'][number];
type ToolPart = Extract<Part, { toolCallId: string }>;

const writeAgent = template({ tools: [{ type: 'builtin', name: 'write' }], mode: 'ask' });
const pickColorAgent = template({
  tools: [
    {
      type: 'client',
      name: 'pick_color',
      description: 'Ask the user to pick a color',
      input_schema: { type: 'object', properties: { options: { type: 'array', items: { type: 'string' } } } },
    },
  ],
});

function chatFor(agent: unknown, sendAutomaticallyWhen: (o: { messages: UIMessage[] }) => boolean): HeadlessChat {
  return agentdChat({
    api: `${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`,
    apiKey: h.apiKey,
    body: { data: { parameters: { agent } } },
    sendAutomaticallyWhen,
  });
}

function assistants(chat: HeadlessChat): UIMessage[] {
  return chat.messages.filter((m) => m.role === 'assistant');
}

function toolPart(message: UIMessage | undefined, type: string): ToolPart {
  const part = message?.parts.find((p): p is ToolPart => p.type === type);
  if (part === undefined) throw new Error(`no ${type} part in ${JSON.stringify(message)}`);
  return part;
}

function texts(message: UIMessage | undefined): string[] {
  return (message?.parts ?? []).flatMap((p) => (p.type === 'text' ? [p.text] : []));
}

/** Sends the first message and waits for the paused turn's approval request. */
async function pauseOnWrite(chat: HeadlessChat, file: string, content: string): Promise<{ assistant: UIMessage; approvalId: string; toolCallId: string }> {
  await chat.sendMessage({ text: 'write a file' });
  await chat.untilFinished(1);
  expect(chat.error).toBeUndefined();
  expect(chat.status).toBe('ready');

  const [assistant, ...more] = assistants(chat);
  expect(more).toEqual([]);
  const part = toolPart(assistant, 'tool-write');
  expect(part).toMatchObject({ state: 'approval-requested', input: { path: file, content } });
  const approvalId = (part as { approval: { id: string } }).approval.id;

  // The approval id is agentd's interaction id, usable with /respond as well as in band.
  const record = await h.store.interactions.get(h.projectId, approvalId);
  expect(record).toMatchObject({
    session_id: chat.id,
    kind: 'user_approval',
    status: 'pending',
    tool_call_id: part.toolCallId,
    request: { tool: 'write', args: { path: file, content } },
  });
  expect(assistant!.metadata).toMatchObject({
    session_id: chat.id,
    stop_reason: 'paused',
    pending_interaction: { id: approvalId, kind: 'user_approval', tool: 'write' },
  });
  // Nothing ran before the decision.
  expect(existsSync(path.join(sessionFolder(h.dataDir, h.projectId, chat.id), file))).toBe(false);
  return { assistant: assistant!, approvalId, toolCallId: part.toolCallId };
}

describe('useChat (headless AbstractChat + DefaultChatTransport) against agentd', () => {
  it('approval round trip: approve, automatic re-post, output, answer, one assistant message', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'hello.txt', content: 'hi there' } }] }, { text: 'Wrote hello.txt for you.' }]);
    const chat = chatFor(writeAgent, lastAssistantMessageIsCompleteWithApprovalResponses);
    const { assistant, approvalId, toolCallId } = await pauseOnWrite(chat, 'hello.txt', 'hi there');

    // The first POST is the transport's own shape, posted as-is.
    expect(chat.sent).toHaveLength(1);
    expect(Object.keys(chat.sent[0]!.body).sort()).toEqual(['data', 'id', 'messages', 'trigger']);
    expect(chat.sent[0]!.body).toMatchObject({ id: chat.id, trigger: 'submit-message' });
    expect(chat.sent[0]!.headers['x-ag-messages-format']).toBe('vercel');

    await chat.addToolApprovalResponse({ id: approvalId, approved: true });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');

    // The chat re-posted by itself, continuing the paused assistant message.
    expect(chat.sent).toHaveLength(2);
    const repost = chat.sent[1]!.body;
    expect(repost).toMatchObject({ id: chat.id, trigger: 'submit-message', messageId: assistant.id });
    expect(repost.messages.at(-1)).toMatchObject({ id: assistant.id, role: 'assistant' });
    expect(toolPart(repost.messages.at(-1), 'tool-write')).toMatchObject({ state: 'approval-responded', approval: { id: approvalId, approved: true } });

    const all = assistants(chat);
    expect(all).toHaveLength(1);
    expect(all[0]!.id).toBe(assistant.id);
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    const part = toolPart(all[0], 'tool-write');
    expect(part).toMatchObject({ toolCallId, state: 'output-available', approval: { id: approvalId, approved: true } });
    expect((part as { output?: unknown }).output).toBeTruthy();
    expect(texts(all[0])).toEqual(['Wrote hello.txt for you.']);
    // The continuation's metadata is merged into the paused message's: the answered interaction
    // must not linger there as if still pending.
    expect(all[0]!.metadata).toMatchObject({ session_id: chat.id, stop_reason: 'end_turn', pending_interaction: null });

    const file = path.join(sessionFolder(h.dataDir, h.projectId, chat.id), 'hello.txt');
    expect(await readFile(file, 'utf8')).toBe('hi there');
    expect((await h.store.interactions.get(h.projectId, approvalId))?.status).toBe('resolved');

    // The model saw its call and the write's result on the continuation, not a repeated call.
    const last = h.model.requests.at(-1)!;
    expect(h.model.requests).toHaveLength(2);
    const calls = last.messages.flatMap((m) => m.tool_calls ?? []);
    expect(calls).toEqual([expect.objectContaining({ id: toolCallId, name: 'write', input: { path: 'hello.txt', content: 'hi there' } })]);
    expect(last.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: toolCallId, name: 'write' });
  });

  it('denial round trip: output-denied, no file, the model is told', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'nope.txt', content: 'x' } }] }, { text: 'Understood, I will not write it.' }]);
    const chat = chatFor(writeAgent, lastAssistantMessageIsCompleteWithApprovalResponses);
    const { assistant, approvalId, toolCallId } = await pauseOnWrite(chat, 'nope.txt', 'x');

    await chat.addToolApprovalResponse({ id: approvalId, approved: false, reason: 'not that file' });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    expect(chat.sent).toHaveLength(2);

    const all = assistants(chat);
    expect(all).toHaveLength(1);
    expect(all[0]!.id).toBe(assistant.id);
    expect(toolPart(all[0], 'tool-write')).toMatchObject({
      toolCallId,
      state: 'output-denied',
      approval: { id: approvalId, approved: false, reason: 'not that file' },
    });
    expect(texts(all[0])).toEqual(['Understood, I will not write it.']);
    expect(existsSync(path.join(sessionFolder(h.dataDir, h.projectId, chat.id), 'nope.txt'))).toBe(false);
    expect((await h.store.interactions.get(h.projectId, approvalId))?.status).toBe('resolved');

    // The model gets a result for its call carrying the user's reason (the SDK's execution-denied
    // result, which providers render as the reason alone), not the tool's output.
    expect(h.model.requests).toHaveLength(2);
    const last = h.model.requests.at(-1)!;
    expect(last.messages.flatMap((m) => m.tool_calls ?? []).map((c) => c.id)).toEqual([toolCallId]);
    expect(last.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: toolCallId, name: 'write', content: 'not that file' });
    expect(all[0]!.metadata).toMatchObject({ stop_reason: 'end_turn', pending_interaction: null });

    // The next turn re-sends the denied call in its history: the model reads the same result as it
    // did right after the decision, so the conversation it sees never changes behind it.
    h.model.script({ text: 'Fine.' });
    await chat.sendMessage({ text: 'ok' });
    await chat.untilFinished(3);
    const denial = (r: (typeof h.model.requests)[number]) => r.messages.find((m) => m.role === 'tool' && m.tool_call_id === toolCallId);
    expect(denial(h.model.requests.at(-1)!)).toEqual(denial(last));
  });

  it('client tool round trip: addToolOutput, automatic re-post, the model gets the output', async () => {
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: { options: ['red', 'blue'] } }] }, { text: 'Blue it is.' }]);
    const chat = chatFor(pickColorAgent, lastAssistantMessageIsCompleteWithToolCalls);

    await chat.sendMessage({ text: 'pick a color' });
    await chat.untilFinished(1);
    expect(chat.error).toBeUndefined();
    const [assistant] = assistants(chat);
    const part = toolPart(assistant, 'tool-pick_color');
    // A client tool is the client's to run: the part waits with its input.
    expect(part).toMatchObject({ state: 'input-available', input: { options: ['red', 'blue'] } });
    expect(assistant!.metadata).toMatchObject({ stop_reason: 'paused', pending_interaction: { kind: 'client_tool', tool: 'pick_color' } });
    const interactionId = (assistant!.metadata as { pending_interaction: { id: string } }).pending_interaction.id;

    await chat.addToolOutput({ tool: 'pick_color', toolCallId: part.toolCallId, output: { color: 'blue' } });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    expect(chat.sent).toHaveLength(2);
    expect(chat.sent[1]!.body).toMatchObject({ trigger: 'submit-message', messageId: assistant!.id });

    const all = assistants(chat);
    expect(all).toHaveLength(1);
    expect(all[0]!.id).toBe(assistant!.id);
    expect(toolPart(all[0], 'tool-pick_color')).toMatchObject({ state: 'output-available', output: { color: 'blue' } });
    expect(texts(all[0])).toEqual(['Blue it is.']);
    expect(all[0]!.metadata).toMatchObject({ stop_reason: 'end_turn', pending_interaction: null });

    const last = h.model.requests.at(-1)!;
    expect(last.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: part.toolCallId, name: 'pick_color' });
    expect(JSON.parse(last.messages.at(-1)!.content)).toEqual({ color: 'blue' });
    expect((await h.store.interactions.get(h.projectId, interactionId))?.status).toBe('resolved');
  });
});

describe('useChat: more of what a front end does', () => {
  it('a second message after a completed turn: two assistant messages, the model sees the whole conversation once', async () => {
    h.model.script([{ text: 'one' }, { text: 'two' }]);
    const chat = chatFor(template(), () => false);
    await chat.sendMessage({ text: 'first' });
    await chat.untilFinished(1);
    await chat.sendMessage({ text: 'second' });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    expect(chat.messages.map((m) => [m.role, texts(m).join('')])).toEqual([
      ['user', 'first'],
      ['assistant', 'one'],
      ['user', 'second'],
      ['assistant', 'two'],
    ]);
    expect(chat.messages[3]!.metadata).toMatchObject({ session_id: chat.id, stop_reason: 'end_turn' });
    expect(h.model.requests.at(-1)!.messages.slice(1).map((m) => [m.role, m.content])).toEqual([
      ['user', 'first'],
      ['assistant', 'one'],
      ['user', 'second'],
    ]);
  });

  it('sendMessage({text, files}): the file is in the chat\'s folder before the turn, named in the message; the next message adds no copy', async () => {
    const notes = Buffer.from('line one\nline two\n');
    // What convertFileListToFileUIParts makes of a File; the SDK takes such parts as they are too.
    const file: FileUIPart = { type: 'file', mediaType: 'text/plain', filename: 'notes.txt', url: `data:text/plain;base64,${notes.toString('base64')}` };
    h.model.script([{ toolCalls: [{ name: 'read', input: { path: 'attachments/notes.txt' } }] }, { text: 'Two lines.' }, { text: 'Still two.' }]);
    const chat = chatFor(template({ tools: [{ type: 'builtin', name: 'read' }] }), () => false);
    await chat.sendMessage({ text: 'How many lines?', files: [file] });
    await chat.untilFinished(1);
    expect(chat.error).toBeUndefined();
    expect(chat.sent[0]!.body.messages[0].parts).toEqual([file, { type: 'text', text: 'How many lines?' }]);

    const folder = sessionFolder(h.dataDir, h.projectId, chat.id);
    expect(await readFile(path.join(folder, 'attachments', 'notes.txt'))).toEqual(notes);
    const asked = `How many lines?\n[attached file: attachments/notes.txt (text/plain, ${notes.length} bytes)]`;
    const [, read] = h.model.requests;
    expect(read!.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual([asked]);
    expect(read!.messages.at(-1)).toMatchObject({ role: 'tool', name: 'read', content: expect.stringContaining('line two') });

    await chat.sendMessage({ text: 'Sure?' });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    expect(await readdir(path.join(folder, 'attachments'))).toEqual(['notes.txt']);
    expect(h.model.requests.at(-1)!.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual([asked, 'Sure?']);
  });

  it('stop() and a new message: the new turn takes the session over, the abandoned one is cancelled', async () => {
    h.model.script([{ text: 'too late', latencyMs: 10_000 }, { text: 'fresh' }]);
    const chat = chatFor(template(), () => false);
    void chat.sendMessage({ text: 'first' });
    await waitFor(async () => h.model.requests.length === 1, 'the first turn to reach the model');
    await chat.stop();
    await chat.sendMessage({ text: 'second' });
    await waitFor(async () => chat.status === 'ready' && assistants(chat).some((m) => texts(m).join('') === 'fresh'), 'the second answer');
    expect(chat.error).toBeUndefined();
    const turns = await h.store.turns.listForSession(h.projectId, chat.id, { limit: 10 });
    expect(turns.map((t) => t.status).sort()).toEqual(['cancelled', 'completed']);
  });

  it('a turn stopped from elsewhere (the Stop endpoint) leaves the chat ready with what had streamed, not in error', async () => {
    h.model.script({ text: 'a long answer that nobody waits for', chunkDelayMs: 300 });
    const chat = chatFor(template(), () => false);
    void chat.sendMessage({ text: 'go on' });
    await waitFor(async () => texts(assistants(chat).at(-1)).join('').length > 0, 'the first words of the answer');
    const stop = await fetch(`${h.url}/api/sessions/${chat.id}/stop?project_id=${h.projectId}`, {
      method: 'POST',
      headers: { authorization: `ApiKey ${h.apiKey}` },
    });
    expect(stop.status).toBe(200);
    await chat.untilFinished(1);
    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    const answer = texts(assistants(chat).at(-1)).join('');
    expect(answer.length).toBeGreaterThan(0);
    expect('a long answer that nobody waits for'.startsWith(answer)).toBe(true);
    expect(assistants(chat).at(-1)!.metadata).toMatchObject({ stop_reason: 'cancelled' });
  });

  it('two gated calls in one step: the chat re-posts once both are answered, one approved and one denied', async () => {
    h.model.script([
      { toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'A' } }, { name: 'write', input: { path: 'b.txt', content: 'B' } }] },
      { text: 'Wrote a.txt only.' },
    ]);
    const chat = chatFor(writeAgent, lastAssistantMessageIsCompleteWithApprovalResponses);
    await chat.sendMessage({ text: 'write two files' });
    await chat.untilFinished(1);
    const parts = chat.messages.at(-1)!.parts.filter((p): p is ToolPart => p.type === 'tool-write');
    expect(parts.map((p) => p.state)).toEqual(['approval-requested', 'approval-requested']);
    const [a, b] = parts.map((p) => (p as { approval: { id: string } }).approval.id);

    await chat.addToolApprovalResponse({ id: a!, approved: true });
    expect(chat.sent).toHaveLength(1);
    await chat.addToolApprovalResponse({ id: b!, approved: false, reason: 'not b' });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    expect(chat.sent).toHaveLength(2);

    const [assistant, ...more] = assistants(chat);
    expect(more).toEqual([]);
    expect(assistant!.parts.filter((p): p is ToolPart => p.type === 'tool-write').map((p) => p.state)).toEqual(['output-available', 'output-denied']);
    expect(texts(assistant)).toEqual(['Wrote a.txt only.']);
    const folder = sessionFolder(h.dataDir, h.projectId, chat.id);
    expect(existsSync(path.join(folder, 'a.txt'))).toBe(true);
    expect(existsSync(path.join(folder, 'b.txt'))).toBe(false);
  });

  it('a client tool answered with an error (output-error), then with the older addToolResult name', async () => {
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: { options: ['red'] } }] }, { text: 'No color then.' }, { toolCalls: [{ name: 'pick_color', input: { options: ['blue'] } }] }, { text: 'Blue.' }]);
    const chat = chatFor(pickColorAgent, lastAssistantMessageIsCompleteWithToolCalls);
    await chat.sendMessage({ text: 'pick a color' });
    await chat.untilFinished(1);
    const first = toolPart(assistants(chat)[0], 'tool-pick_color');
    await chat.addToolOutput({ state: 'output-error', tool: 'pick_color', toolCallId: first.toolCallId, errorText: 'the user closed the dialog' });
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    expect(toolPart(assistants(chat)[0], 'tool-pick_color')).toMatchObject({ state: 'output-error', errorText: 'the user closed the dialog' });
    expect(texts(assistants(chat)[0])).toEqual(['No color then.']);
    expect(h.model.requests.at(-1)!.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: first.toolCallId, content: expect.stringContaining('the user closed the dialog') });

    await chat.sendMessage({ text: 'try again' });
    await chat.untilFinished(3);
    const second = toolPart(assistants(chat)[1], 'tool-pick_color');
    await chat.addToolResult({ tool: 'pick_color', toolCallId: second.toolCallId, output: 'blue' });
    await chat.untilFinished(4);
    expect(chat.error).toBeUndefined();
    expect(assistants(chat)).toHaveLength(2);
    expect(toolPart(assistants(chat)[1], 'tool-pick_color')).toMatchObject({ state: 'output-available', output: 'blue' });
    expect(texts(assistants(chat)[1])).toEqual(['Blue.']);
  });

  it('regenerate() replaces the last answer; the model sees the conversation without it', async () => {
    h.model.script([{ text: 'first answer' }, { text: 'second answer' }]);
    const chat = chatFor(template(), () => false);
    await chat.sendMessage({ text: 'hi' });
    await chat.untilFinished(1);
    await chat.regenerate();
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    expect(chat.sent[1]!.body).toMatchObject({ trigger: 'regenerate-message' });
    expect(chat.messages.map((m) => [m.role, texts(m).join('')])).toEqual([
      ['user', 'hi'],
      ['assistant', 'second answer'],
    ]);
    expect(h.model.requests.at(-1)!.messages.slice(1).map((m) => m.content)).toEqual(['hi']);
  });

  it('a provider rate limit lands in chat.error with its status, and the chat can send again', async () => {
    h.model.script([{ error: { status: 429 } }, { text: 'back again' }]);
    const chat = chatFor(template(), () => false);
    await chat.sendMessage({ text: 'hi' });
    await chat.untilFinished(1);
    expect(chat.status).toBe('error');
    expect(chat.error?.message).toContain('upstream-rate-limited');
    expect(assistants(chat)).toEqual([]);

    await chat.regenerate();
    await chat.untilFinished(2);
    expect(chat.error).toBeUndefined();
    expect(texts(assistants(chat)[0])).toEqual(['back again']);
  });
});

/**
 * `useChat({resume: true})`: after a reload the chat asks for its live turn (reference/vercel-ai-sdk.md
 * §5), at the transport's default reconnect URL: nothing is configured beyond `api`.
 */
describe('resuming a chat whose turn is still running', () => {
  const streamUrl = (chatId: string, projectId = h.projectId) => `${h.url}/services/agent/v0/invoke/${encodeURIComponent(chatId)}/stream?project_id=${projectId}`;
  const resumable = (id: string, messages?: UIMessage[]) =>
    agentdChat({ id, ...(messages ? { messages } : {}), api: `${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`, apiKey: h.apiKey, body: { data: { parameters: { agent: template() } } } });

  /** Resumes the session's live turn into `chat` and checks it ended cleanly; the chat's messages after it. */
  async function resumeReady(chat: HeadlessChat): Promise<UIMessage[]> {
    await chat.resumeStream();
    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    return chat.messages;
  }

  /** A chat on the gated write agent that sends nothing by itself. */
  const writeChat = (id: string) => agentdChat({ id, api: `${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`, apiKey: h.apiKey, body: { data: { parameters: { agent: writeAgent } } } });

  /** A chat whose turn is running: the model has been called and answers `text` after a while. */
  async function running(id: string, text: string) {
    h.model.script({ text, latencyMs: 400 });
    const chat = resumable(id);
    void chat.sendMessage({ text: 'hello' });
    await waitFor(async () => h.model.requests.length >= 1, 'the model called');
    return chat;
  }

  it('a reloaded page gets the live turn from its start and follows it to the end', async () => {
    const id = `resume-${Date.now()}`;
    const before = await running(id, 'a slow answer');
    // A new chat with the same id and nothing in memory: the page after a reload.
    const after = resumable(id);
    await after.resumeStream();
    expect(after.sent.map((r) => r.url)).toEqual([streamUrl(id)]);
    expect(after.error).toBeUndefined();
    expect(after.status).toBe('ready');
    const answer = after.messages.at(-1);
    expect(answer?.role).toBe('assistant');
    expect(texts(answer).join('')).toBe('a slow answer');
    expect(answer?.metadata).toMatchObject({ session_id: id, stop_reason: 'end_turn' });
    await before.untilFinished(1);
    expect(before.messages.at(-1)?.id).toBe(answer?.id);
    expect(h.model.requests).toHaveLength(1);
  });

  /**
   * The SDK replays a resumed stream from an empty message, so a turn that continues a paused
   * message must rebuild it first: a page reloaded while the approved call's turn runs.
   */
  /** A chat approved a paused write, and the turn that continues the message is running. */
  async function continuing(id: string, secret?: string) {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'r.txt', content: 'resumed' } }] }, { text: 'Wrote r.txt.', latencyMs: 400 }]);
    const chat = agentdChat({
      id,
      api: `${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`,
      apiKey: h.apiKey,
      body: { data: { parameters: { agent: writeAgent } }, ...(secret ? { secrets: { APP_TOKEN: secret } } : {}) },
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    const paused = await pauseOnWrite(chat, 'r.txt', 'resumed');
    // The page noted the secret on the message it re-posts.
    if (secret) chat.messages = chat.messages.map((m) => (m.id === paused.assistant.id ? { ...m, metadata: { ...(m.metadata as object), note: secret } } : m));
    await chat.addToolApprovalResponse({ id: paused.approvalId, approved: true });
    await waitFor(async () => h.model.requests.length >= 2, 'the continuation called the model');
    return { chat, ...paused };
  }

  /** The continued message as the chat that stayed open ends with it. */
  async function expectContinued(resumed: UIMessage | undefined, open: Awaited<ReturnType<typeof continuing>>) {
    expect(resumed?.id).toBe(open.assistant.id);
    expect(resumed?.parts.map((p) => p.type)).toEqual(['step-start', 'tool-write', 'step-start', 'text']);
    expect(toolPart(resumed, 'tool-write')).toMatchObject({
      toolCallId: open.toolCallId,
      state: 'output-available',
      input: { path: 'r.txt', content: 'resumed' },
      approval: { id: open.approvalId, approved: true },
    });
    expect(texts(resumed)).toEqual(['Wrote r.txt.']);
    expect(resumed?.metadata).toMatchObject({ session_id: open.chat.id, stop_reason: 'end_turn', pending_interaction: null });
    await open.chat.untilFinished(2);
    expect(JSON.parse(JSON.stringify(open.chat.messages.at(-1)))).toEqual(JSON.parse(JSON.stringify(resumed)));
    expect(h.model.requests).toHaveLength(2);
  }

  it.each([
    ['the page reloaded its saved messages', true],
    ['the page kept nothing', false],
  ])('a continuation after an approval resumes whole: %s', async (_case, saved) => {
    const id = `resume-approval-${saved}-${Date.now()}`;
    const open = await continuing(id);
    const after = saved ? resumable(id, open.chat.messages) : resumable(id);
    const messages = await resumeReady(after);
    expect(messages.map((m) => m.role)).toEqual(saved ? ['user', 'assistant'] : ['assistant']);
    await expectContinued(messages.at(-1), open);
  });

  it("a replay masks the request's secrets in the continued message, as it masks the events", async () => {
    const id = `resume-secret-${Date.now()}`;
    const secret = 'app-token-not-for-other-readers-42';
    await continuing(id, secret);
    const res = await fetch(streamUrl(id), { headers: { authorization: `ApiKey ${h.apiKey}` } });
    const raw = await res.text();
    expect(raw).toContain('"note":"[redacted]"');
    expect(raw).not.toContain(secret);
  });

  it('a force attach to that continuation starts with the continued message too', async () => {
    const id = `attach-approval-${Date.now()}`;
    const open = await continuing(id);
    const res = await h.invoke({ session_id: id }, { headers: { 'x-ag-session-control': 'force', 'x-ag-messages-format': 'vercel', accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    const { message, errors } = await readFinal(await responseChunks(res));
    expect(errors).toEqual([]);
    await expectContinued(message, open);
  });

  /** A chat paused on a write, approved through /respond: the continuation runs on its own. */
  async function respondedOutOfBand(id: string) {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'o.txt', content: 'out of band' } }] }, { text: 'Wrote o.txt.', latencyMs: 400 }]);
    const chat = writeChat(id);
    const paused = await pauseOnWrite(chat, 'o.txt', 'out of band');
    expect((await h.respond(paused.approvalId, { approved: true })).status).toBe(200);
    await waitFor(async () => h.model.requests.length >= 2, 'the continuation called the model');
    return { chat, ...paused };
  }

  it.each([
    ['the open page follows it', true],
    ['a reloaded page that kept nothing', false],
  ])('an approval answered through /respond: %s, and the paused message goes on', async (_case, open) => {
    const id = `resume-respond-${open}-${Date.now()}`;
    const paused = await respondedOutOfBand(id);
    const chat = open ? paused.chat : resumable(id);
    const messages = await resumeReady(chat);
    expect(messages.map((m) => m.role)).toEqual(open ? ['user', 'assistant'] : ['assistant']);
    const resumed = messages.at(-1);
    expect(resumed?.id).toBe(paused.assistant.id);
    expect(resumed?.parts.map((p) => p.type)).toEqual(['step-start', 'tool-write', 'step-start', 'text']);
    expect(toolPart(resumed, 'tool-write')).toMatchObject({
      toolCallId: paused.toolCallId,
      state: 'output-available',
      approval: { id: paused.approvalId, approved: true },
    });
    expect(texts(resumed)).toEqual(['Wrote o.txt.']);
    expect(resumed?.metadata).toMatchObject({ session_id: id, stop_reason: 'end_turn', pending_interaction: null });
    expect(await readFile(path.join(sessionFolder(h.dataDir, h.projectId, id), 'o.txt'), 'utf8')).toBe('out of band');
  });

  it('a client tool answered through /respond: the open page follows it, and the paused message goes on', async () => {
    const id = `resume-client-${Date.now()}`;
    h.model.script([{ toolCalls: [{ name: 'pick_color', input: { options: ['red', 'teal'] } }] }, { text: 'Teal it is.', latencyMs: 400 }]);
    const chat = agentdChat({ id, api: `${h.url}/services/agent/v0/invoke?project_id=${h.projectId}`, apiKey: h.apiKey, body: { data: { parameters: { agent: pickColorAgent } } } });
    await chat.sendMessage({ text: 'pick a color' });
    await chat.untilFinished(1);
    const [assistant] = assistants(chat);
    const part = toolPart(assistant, 'tool-pick_color');
    const interactionId = (assistant!.metadata as { pending_interaction: { id: string } }).pending_interaction.id;
    expect((await h.respond(interactionId, { output: { color: 'teal' } })).status).toBe(200);
    await waitFor(async () => h.model.requests.length >= 2, 'the continuation called the model');

    const resumed = (await resumeReady(chat)).at(-1);
    expect(resumed?.id).toBe(assistant!.id);
    expect(resumed?.parts.map((p) => p.type)).toEqual(['step-start', 'tool-pick_color', 'step-start', 'text']);
    expect(toolPart(resumed, 'tool-pick_color')).toMatchObject({ toolCallId: part.toolCallId, state: 'output-available', output: { color: 'teal' } });
    expect(texts(resumed)).toEqual(['Teal it is.']);
  });

  it('a paused message read as JSON, answered through /respond, resumes as that same message', async () => {
    const id = `resume-json-${Date.now()}`;
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'j.txt', content: 'json' } }] }, { text: 'Wrote j.txt.', latencyMs: 400 }]);
    const user: UIMessage = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'write a file' }] };
    const res = await h.invoke(
      { session_id: id, data: { inputs: { messages: [user] }, parameters: { agent: writeAgent } } },
      { headers: { 'x-ag-messages-format': 'vercel', accept: 'application/json' } },
    );
    const body = (await res.json()) as { turn_id: string; data: { outputs: { messages: UIMessage[]; pending_interaction: { id: string } } } };
    const [paused] = body.data.outputs.messages;
    // The id the same turn's stream gives its message, so either reply can be continued.
    expect(paused?.id).toBe(`msg-${body.turn_id}`);
    expect((await h.respond(body.data.outputs.pending_interaction.id, { approved: true })).status).toBe(200);
    await waitFor(async () => h.model.requests.length >= 2, 'the continuation called the model');

    const messages = await resumeReady(resumable(id, [user, paused!]));
    expect(messages.map((m) => [m.role, m.id])).toEqual([['user', 'u1'], ['assistant', paused!.id]]);
    expect(texts(messages[1])).toEqual(['Wrote j.txt.']);
  });

  it('two pauses answered through /respond in a row still build one message', async () => {
    const id = `resume-respond-twice-${Date.now()}`;
    h.model.script([
      { toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'a' } }] },
      { toolCalls: [{ name: 'write', input: { path: 'b.txt', content: 'b' } }] },
      { text: 'Wrote both.', latencyMs: 400 },
    ]);
    const chat = writeChat(id);
    const first = await pauseOnWrite(chat, 'a.txt', 'a');
    expect((await h.respond(first.approvalId, { approved: true })).status).toBe(200);
    const pending = async () => (await h.store.interactions.query(h.projectId, { session_id: id, status: 'pending' }, { limit: 10 })).items;
    await waitFor(async () => (await pending()).length === 1, 'the second pause');
    const [second] = await pending();
    expect((await h.respond(second!.id, { approved: true })).status).toBe(200);
    await waitFor(async () => h.model.requests.length >= 3, 'the second continuation called the model');

    const messages = await resumeReady(resumable(id));
    expect(messages.map((m) => [m.role, m.id])).toEqual([['assistant', first.assistant.id]]);
    const message = messages[0];
    expect(message?.parts.filter((p) => p.type === 'tool-write').map((p) => (p as ToolPart).state)).toEqual(['output-available', 'output-available']);
    expect(texts(message)).toEqual(['Wrote both.']);
  });

  it('with no live turn the server answers 204 and the chat stays as it was', async () => {
    const chat = resumable(`idle-${Date.now()}`);
    expect(await resumeReady(chat)).toEqual([]);
  });

  it("a key of another project finds no live turn in its own project, whatever session it names", async () => {
    const id = `other-${Date.now()}`;
    const owner = await running(id, 'private words');
    const other = await h.store.projects.ensure(`resume-other-${Date.now()}`);
    const otherKey = (await h.store.apiKeys.create(other.id, 'viewer')).key;
    const res = await fetch(streamUrl(id, other.id), { headers: { authorization: `ApiKey ${otherKey}` } });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
    const crossed = await fetch(streamUrl(id), { headers: { authorization: `ApiKey ${otherKey}` } });
    expect(crossed.status).toBe(403);
    await owner.untilFinished(1);
  });
});
