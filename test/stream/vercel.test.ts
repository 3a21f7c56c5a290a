import { doneEvent } from '../../src/contract/events.ts';
import { lastAssistantMessageIsCompleteWithApprovalResponses, validateUIMessages, type UIMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { VERCEL_DONE, VERCEL_HEADERS, VercelProjector, finishReasonOf, vercelSseFrame } from '../../src/stream/vercel.ts';
import * as f from './fixtures.ts';
import { checkChunks, overTheWire, project, readFinal } from '../support/sdk-client.ts';

const types = (chunks: { type: string }[]): string[] => chunks.map((c) => c.type);

/** What `addToolApprovalResponse` does to the paused message in the browser. */
function respond(message: UIMessage, approved: boolean, reason?: string): UIMessage {
  const copy = structuredClone(message);
  for (const part of copy.parts) {
    if ('approval' in part && part.state === 'approval-requested') {
      Object.assign(part, { state: 'approval-responded', approval: { ...part.approval, approved, ...(reason ? { reason } : {}) } });
    }
  }
  return copy;
}

describe('VercelProjector', () => {
  it('text-only turn: start, one step, finish with metadata', async () => {
    const chunks = project(f.textOnly);
    expect(chunks).toEqual([
      { type: 'start', messageId: 'asst_1', messageMetadata: { session_id: 'sess_1', trace_id: 'trace_1', sessionId: 'sess_1', traceId: 'trace_1' } },
      { type: 'start-step' },
      { type: 'text-start', id: 'm1' },
      { type: 'text-delta', id: 'm1', delta: 'Hello' },
      { type: 'text-delta', id: 'm1', delta: ', world.' },
      { type: 'text-end', id: 'm1' },
      { type: 'finish-step' },
      {
        type: 'finish',
        finishReason: 'stop',
        messageMetadata: { stop_reason: 'end_turn', usage: { input: 12, output: 4, total: 16, cost: 0.001 } },
      },
    ]);
    await checkChunks(chunks);
    const { message, errors } = await readFinal(chunks);
    expect(errors).toEqual([]);
    expect(message).toMatchObject({
      id: 'asst_1',
      role: 'assistant',
      metadata: { session_id: 'sess_1', trace_id: 'trace_1', stop_reason: 'end_turn', usage: { total: 16 } },
      parts: [{ type: 'step-start' }, { type: 'text', text: 'Hello, world.', state: 'done' }],
    });
  });

  it('tool call + result + answer: two steps, the result inside the first', async () => {
    const chunks = project(f.toolThenText);
    expect(types(chunks)).toEqual([
      'start',
      'start-step',
      'reasoning-start',
      'reasoning-delta',
      'reasoning-end',
      'text-start',
      'text-delta',
      'text-end',
      'tool-input-start',
      'tool-input-available',
      'tool-output-available',
      'finish-step',
      'start-step',
      'text-start',
      'text-delta',
      'text-delta',
      'text-end',
      'finish-step',
      'finish',
    ]);
    await checkChunks(chunks);
    const { message, errors } = await readFinal(await overTheWire(chunks));
    expect(errors).toEqual([]);
    expect(message!.parts).toMatchObject([
      { type: 'step-start' },
      { type: 'reasoning', text: 'I should read the file.', state: 'done' },
      { type: 'text', text: 'Let me look.', state: 'done' },
      { type: 'tool-read', toolCallId: 'call_1', state: 'output-available', input: { path: 'notes.txt' }, output: { lines: 3, text: 'a\nb\nc' } },
      { type: 'step-start' },
      { type: 'text', text: 'The file has 3 lines.', state: 'done' },
    ]);
    expect(message!.metadata).toMatchObject({ usage: { input: 230, output: 28, total: 258, cost: 0.003 } });
    await validateUIMessages({ messages: [message!] });
  });

  it('parallel calls stay in one step; the follow-up call opens the next', async () => {
    const chunks = project(f.twoToolSteps);
    expect(types(chunks).filter((t) => t.endsWith('step'))).toEqual(['start-step', 'finish-step', 'start-step', 'finish-step', 'start-step', 'finish-step']);
    const { message } = await readFinal(chunks);
    expect(message!.parts.map((p) => p.type)).toEqual([
      'step-start', 'tool-ls', 'tool-grep', 'step-start', 'tool-read', 'step-start', 'text',
    ]);
  });

  it('paused turn: approval request on the call, finish other (as the reference says a pause) with the pending interaction', async () => {
    const chunks = project(f.paused);
    expect(chunks.slice(-4)).toEqual([
      { type: 'tool-input-available', toolCallId: 'call_1', toolName: 'bash', input: { command: 'rm -rf build' } },
      { type: 'tool-approval-request', approvalId: 'int_1', toolCallId: 'call_1' },
      { type: 'finish-step' },
      {
        type: 'finish',
        finishReason: 'other',
        messageMetadata: { stop_reason: 'paused', usage: { input: 50, output: 10, total: 60 }, pending_interaction: f.approval },
      },
    ]);
    await checkChunks(chunks);
    const { message } = await readFinal(chunks);
    expect(message!.parts.at(-1)).toMatchObject({
      type: 'tool-bash',
      toolCallId: 'call_1',
      state: 'approval-requested',
      approval: { id: 'int_1' },
    });
  });

  it('continuation after approval: output first, outside any step, on the continued part', async () => {
    const paused = (await readFinal(project(f.paused))).message!;
    const answered = respond(paused, true);
    // The browser re-posts when this says so; our paused message must satisfy it.
    expect(lastAssistantMessageIsCompleteWithApprovalResponses({ messages: [answered] })).toBe(true);

    const chunks = project(f.continuedApproved, answered.id);
    expect(types(chunks).slice(0, 3)).toEqual(['start', 'tool-output-available', 'start-step']);
    await checkChunks(chunks);
    const { message, errors } = await readFinal(await overTheWire(chunks), answered);
    expect(errors).toEqual([]);
    expect(message!.id).toBe('asst_1');
    expect(message!.parts).toMatchObject([
      { type: 'step-start' },
      { type: 'text', text: 'I will clean the build folder.' },
      { type: 'tool-bash', toolCallId: 'call_1', state: 'output-available', output: 'removed 12 files', approval: { id: 'int_1', approved: true } },
      { type: 'step-start' },
      { type: 'text', text: 'Done: the build folder is gone.', state: 'done' },
    ]);
    expect(message!.metadata).toMatchObject({ stop_reason: 'end_turn' });
    await validateUIMessages({ messages: [message!] });
  });

  it('continuation after denial: the part becomes output-denied, keeping the decision', async () => {
    const paused = (await readFinal(project(f.paused))).message!;
    const answered = respond(paused, false, 'keep it');
    const chunks = project(f.continuedDenied, answered.id);
    expect(chunks[1]).toEqual({ type: 'tool-output-denied', toolCallId: 'call_1' });
    await checkChunks(chunks);
    const { message, errors } = await readFinal(chunks, answered);
    expect(errors).toEqual([]);
    expect(message!.parts[2]).toMatchObject({
      type: 'tool-bash',
      state: 'output-denied',
      approval: { id: 'int_1', approved: false, reason: 'keep it' },
    });
    await validateUIMessages({ messages: [message!] });
  });

  it('the continuation is rejected by the client when the message id does not match (why messageId matters)', async () => {
    const paused = respond((await readFinal(project(f.paused))).message!, true);
    const { errors } = await readFinal(project(f.continuedApproved, 'some-other-id'), paused);
    expect(errors.join()).toMatch(/No tool invocation found/);
  });

  it('a policy denial records an automatic denied approval so the part is valid', async () => {
    const chunks = project(f.policyDenied);
    expect(chunks.slice(4, 7)).toEqual([
      { type: 'tool-approval-request', approvalId: 'call_9:policy', toolCallId: 'call_9', isAutomatic: true },
      { type: 'tool-approval-response', approvalId: 'call_9:policy', approved: false, reason: 'writes are not allowed in this mode' },
      { type: 'tool-output-denied', toolCallId: 'call_9' },
    ]);
    await checkChunks(chunks);
    const { message, errors } = await readFinal(chunks);
    expect(errors).toEqual([]);
    expect(message!.parts[1]).toMatchObject({ type: 'tool-write', state: 'output-denied', approval: { approved: false, isAutomatic: true } });
    await validateUIMessages({ messages: [message!] });
  });

  it('a failed tool becomes output-error', async () => {
    const { message } = await readFinal(project(f.toolError));
    expect(message!.parts[1]).toMatchObject({ type: 'tool-read', state: 'output-error', errorText: 'ENOENT: no such file' });
  });

  it('a client tool stays input-available for the browser to fulfil', async () => {
    const chunks = project(f.clientTool);
    expect(types(chunks)).not.toContain('tool-approval-request');
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'other', messageMetadata: { pending_interaction: f.clientToolRequest } });
    const { message } = await readFinal(chunks);
    expect(message!.parts[1]).toMatchObject({ type: 'tool-pick_color', state: 'input-available', input: { palette: 'warm' } });
  });

  it('an error mid-stream reaches the client and the open text is closed', async () => {
    const chunks = project(f.errorMidStream);
    expect(chunks.slice(-4)).toEqual([
      { type: 'error', errorText: 'model connection reset' },
      { type: 'text-end', id: 'm1' },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'error', messageMetadata: { stop_reason: 'error' } },
    ]);
    await checkChunks(chunks);
    const { message, errors } = await readFinal(chunks);
    expect(errors).toEqual(['model connection reset']);
    expect(message!.parts[1]).toEqual({ type: 'text', text: 'Partial ans', state: 'done' });
  });

  it('maps stop reasons to finish reasons', () => {
    expect(finishReasonOf('end_turn')).toBe('stop');
    expect(finishReasonOf('max_tokens')).toBe('length');
    expect(finishReasonOf('paused')).toBe('other');
    expect(finishReasonOf('error')).toBe('error');
    for (const r of ['max_steps', 'cancelled', 'interrupted'] as const) expect(finishReasonOf(r)).toBe('other');
  });

  it('emits start once, even when joined mid-turn, and nothing after done', () => {
    const projector = new VercelProjector({ messageId: 'x', startMetadata: { session_id: 's', trace_id: 't' } });
    expect(types(projector.push({ type: 'message_delta', data: { id: 'm', delta: 'hi' } }))).toEqual(['start', 'start-step', 'text-start', 'text-delta']);
    expect(types(projector.push(doneEvent('end_turn')))).toEqual(['text-end', 'finish-step', 'finish']);
    expect(projector.push(doneEvent('end_turn'))).toEqual([]);
  });

  it('frames and headers', () => {
    expect(vercelSseFrame({ type: 'start-step' })).toBe('data: {"type":"start-step"}\n\n');
    expect(VERCEL_DONE).toBe('data: [DONE]\n\n');
    expect(VERCEL_HEADERS).toMatchObject({
      'x-vercel-ai-ui-message-stream': 'v1',
      'x-ag-messages-format': 'vercel',
      'x-ag-messages-version': 'v1',
      'x-accel-buffering': 'no',
      'cache-control': 'no-cache',
    });
  });
});
