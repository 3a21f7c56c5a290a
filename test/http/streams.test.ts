import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, readFrames, readJson, sid, startHarness, template, type Frame, type Harness } from '../support/harness.ts';

/** The native frame vocabulary (design.md §4 "Native frames") and how it matches the JSON fold. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const agent = template({ tools: [builtin('write'), builtin('ls')], mode: 'allow' });
const script = () =>
  h.model.script([
    { reasoning: 'Think first.', text: 'Let me write.', toolCalls: [{ id: 'call_s', name: 'write', input: { path: 's.txt', content: 'streamed' } }] },
    { text: 'All written down.' },
  ]);

const of = (frames: Frame[], type: string) => frames.filter((f) => f.type === type);

describe('native SSE frames', () => {
  let frames: Frame[];
  let res: Response;
  const session = sid('stream');
  beforeAll(async () => {
    script();
    res = await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: session }), { headers: { accept: 'text/event-stream' } });
    frames = (await readFrames(res)).frames;
  });

  it('turn_start names the turn, session and trace of the reply', () => {
    expect(frames[0]).toEqual({
      type: 'turn_start',
      data: { turn_id: expect.any(String), session_id: session, trace_id: res.headers.get('x-ag-trace-id') },
    });
  });

  it('text arrives as message_start, message_delta…, message_end with one id per message', () => {
    const starts = of(frames, 'message_start').map((f) => f.data.id);
    expect(new Set(starts).size).toBe(starts.length);
    for (const id of starts) {
      const mine = frames.filter((f) => f.data?.id === id && f.type.startsWith('message_'));
      expect(mine[0]!.type).toBe('message_start');
      expect(mine.at(-1)!.type).toBe('message_end');
    }
    const text = (id: string) => of(frames, 'message_delta').filter((f) => f.data.id === id).map((f) => f.data.delta).join('');
    expect(starts.map(text).filter(Boolean)).toEqual(['Let me write.', 'All written down.']);
  });

  it('reasoning arrives as thought frames', () => {
    expect(of(frames, 'thought_delta').map((f) => f.data.delta).join('')).toBe('Think first.');
  });

  it('tool_call then tool_result for the same id', () => {
    const call = of(frames, 'tool_call')[0]!;
    expect(call.data).toEqual({ id: 'call_s', name: 'write', input: { path: 's.txt', content: 'streamed' } });
    const result = of(frames, 'tool_result')[0]!;
    expect(result.data).toMatchObject({ id: 'call_s', is_error: false, output: expect.stringContaining('s.txt') });
    expect(frames.indexOf(call)).toBeLessThan(frames.indexOf(result));
  });

  it('usage before the one final done', () => {
    const usage = of(frames, 'usage');
    expect(usage).toHaveLength(1);
    expect(usage[0]!.data.input).toBeGreaterThan(0);
    expect(usage[0]!.data.output).toBeGreaterThan(0);
    expect(frames.at(-2)!.type).toBe('usage');
    expect(frames.at(-1)).toEqual({ type: 'done', data: { stop_reason: 'end_turn', stopReason: 'end_turn' } });
  });

  it('the stored turn is the fold of the stream', async () => {
    const [turn] = await h.store.turns.listForSession(h.projectId, session, { limit: 1 });
    expect(turn).toMatchObject({ id: frames[0]!.data.turn_id, status: 'completed', stop_reason: 'end_turn' });
    const messages = (turn!.output as { messages: Array<{ role: string; content: string }> }).messages;
    expect(messages.map((m) => m.role)).toEqual(['assistant', 'tool', 'tool', 'assistant']);
    expect(messages.at(-1)!.content).toBe('All written down.');
  });
});

describe('stream and JSON agree', () => {
  it('the same script gives the same messages whether streamed or folded', async () => {
    script();
    const json = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent)));
    script();
    const { frames } = await readFrames(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent), { headers: { accept: 'application/x-ndjson' } }));
    const streamedText = of(frames, 'message_delta').map((f) => f.data.delta).join('');
    const jsonText = json.data.outputs.messages.filter((m: { role: string }) => m.role === 'assistant').map((m: { content: string }) => m.content).join('');
    expect(streamedText).toBe(jsonText);
    expect(of(frames, 'usage')[0]!.data).toEqual(json.data.outputs.usage);
  });
});

describe('a paused stream', () => {
  it('emits tool_call, interaction_request and done with the pending interaction', async () => {
    h.model.script({ toolCalls: [{ id: 'call_p', name: 'write', input: { path: 'p.txt', content: 'x' } }] });
    const res = await h.invoke(invokeBody([{ role: 'user', content: 'go' }], template({ tools: [builtin('write')], mode: 'ask' })), {
      headers: { accept: 'text/event-stream' },
    });
    const { frames } = await readFrames(res);
    const request = of(frames, 'interaction_request')[0]!;
    expect(request.data).toEqual({
      id: expect.any(String),
      kind: 'user_approval',
      tool: 'write',
      payload: {
        tool_call_id: 'call_p',
        tool_name: 'write',
        input: { path: 'p.txt', content: 'x' },
        toolCallId: 'call_p',
        toolName: 'write',
        toolCall: { toolCallId: 'call_p', name: 'write', title: 'write', rawInput: { path: 'p.txt', content: 'x' } },
      },
    });
    expect(of(frames, 'tool_result')).toHaveLength(0);
    expect(frames.at(-1)).toEqual({ type: 'done', data: { stop_reason: 'paused', stopReason: 'paused', pending_interaction: request.data } });
  });
});

describe('the Vercel stream (x-ag-messages-format: vercel)', () => {
  it('carries the Vercel headers and ends with data: [DONE]', async () => {
    h.model.script({ text: 'hi from vercel' });
    const res = await h.invoke(invokeBody([{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }], agent), {
      headers: { accept: 'text/event-stream', 'x-ag-messages-format': 'vercel' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(res.headers.get('x-ag-messages-format')).toBe('vercel');
    expect(res.headers.get('x-ag-messages-version')).toBe('v1');
    const raw = await res.text();
    expect(raw.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(raw).toContain('"type":"start"');
  });
});
