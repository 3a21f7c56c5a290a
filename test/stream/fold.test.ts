import { doneEvent } from '../../src/contract/events.ts';
import { describe, expect, it } from 'vitest';
import { foldEvents, trimToTrailingUnit, TurnFolder } from '../../src/stream/fold.ts';
import type { Message } from '../../src/contract/messages.ts';
import * as f from './fixtures.ts';

describe('foldEvents', () => {
  it('folds a text-only turn into one assistant message and sums usage', () => {
    expect(foldEvents(f.textOnly)).toEqual({
      messages: [{ role: 'assistant', content: 'Hello, world.' }],
      stop_reason: 'end_turn',
      usage: { input: 12, output: 4, total: 16, cost: 0.001 },
    });
  });

  it('orders call, result, final answer; thoughts leave no message; structured output is JSON', () => {
    const folded = foldEvents(f.toolThenText);
    expect(folded.messages).toEqual([
      { role: 'assistant', content: 'Let me look.' },
      { role: 'tool', content: '', tool_call_id: 'call_1', tool_name: 'read', input: { path: 'notes.txt' } },
      { role: 'tool', content: '{"lines":3,"text":"a\\nb\\nc"}', tool_call_id: 'call_1', is_error: false },
      { role: 'assistant', content: 'The file has 3 lines.' },
    ]);
    expect(folded.usage).toEqual({ input: 230, output: 28, total: 258, cost: 0.003 });
  });

  it('marks the paused call with the approval id and reports the pending interaction', () => {
    const folded = foldEvents(f.paused);
    expect(folded.messages).toEqual([
      { role: 'assistant', content: 'I will clean the build folder.' },
      {
        role: 'tool',
        content: '',
        tool_call_id: 'call_1',
        tool_name: 'bash',
        input: { command: 'rm -rf build' },
        approval: { id: 'int_1' },
      },
    ]);
    expect(folded.stop_reason).toBe('paused');
    expect(folded.pending_interaction).toEqual(f.approval);
    expect(folded.usage).toEqual({ input: 50, output: 10, total: 60 });
  });

  it('a client tool pauses without an approval on its call', () => {
    const folded = foldEvents(f.clientTool);
    expect(folded.messages).toEqual([
      { role: 'tool', content: '', tool_call_id: 'call_3', tool_name: 'pick_color', input: { palette: 'warm' } },
    ]);
    expect(folded.pending_interaction).toEqual(f.clientToolRequest);
  });

  it('lists the results of calls made side by side in the order of the calls, not of their ends', () => {
    const folded = foldEvents([
      { type: 'turn_start', data: { turn_id: 't', session_id: 's', trace_id: 'x' } },
      { type: 'tool_call', data: { id: 'slow', name: 'bash', input: { command: 'sleep 1' } } },
      { type: 'tool_call', data: { id: 'quick', name: 'ls', input: {} } },
      { type: 'tool_result', data: { id: 'quick', output: 'a.txt', is_error: false } },
      { type: 'tool_result', data: { id: 'earlier', output: 'from a continued call', is_error: false } },
      { type: 'tool_result', data: { id: 'slow', output: '', is_error: false } },
      { type: 'message_start', data: { id: 'm1' } },
      { type: 'message_delta', data: { id: 'm1', delta: 'done' } },
      doneEvent('end_turn'),
    ]);
    expect(folded.messages.map((m) => [m.tool_call_id, m.tool_name ?? m.content])).toEqual([
      ['slow', 'bash'],
      ['quick', 'ls'],
      ['earlier', 'from a continued call'],
      ['slow', ''],
      ['quick', 'a.txt'],
      [undefined, 'done'],
    ]);
  });

  it('a continuation starts with the result of the approved call', () => {
    expect(foldEvents(f.continuedApproved).messages).toEqual([
      { role: 'tool', content: 'removed 12 files', tool_call_id: 'call_1', is_error: false },
      { role: 'assistant', content: 'Done: the build folder is gone.' },
    ]);
  });

  it('a denial is an error result carrying the denial text', () => {
    expect(foldEvents(f.continuedDenied).messages[0]).toEqual({
      role: 'tool',
      content: 'Tool call denied: keep it',
      tool_call_id: 'call_1',
      is_error: true,
    });
    const empty = foldEvents([{ type: 'tool_result', data: { id: 'c', output: undefined, is_error: false, denied: true } }]);
    expect(empty.messages[0]).toMatchObject({ content: 'Tool call denied', is_error: true });
  });

  it('keeps the partial text and the error of a failed turn', () => {
    expect(foldEvents(f.errorMidStream)).toEqual({
      messages: [{ role: 'assistant', content: 'Partial ans' }],
      stop_reason: 'error',
      error: { code: 502, type: 'upstream-error', message: 'model connection reset' },
    });
  });

  it('drops empty text blocks and merges a repeated call', () => {
    const folded = foldEvents([
      { type: 'message_start', data: { id: 'e' } },
      { type: 'message_end', data: { id: 'e' } },
      { type: 'tool_call', data: { id: 'c', name: 'bash', input: {} } },
      { type: 'tool_call', data: { id: 'c', name: 'bash', input: { command: 'ls' } } },
    ]);
    expect(folded.messages).toEqual([{ role: 'tool', content: '', tool_call_id: 'c', tool_name: 'bash', input: { command: 'ls' } }]);
  });

  it('result() is a snapshot that later events do not change', () => {
    const folder = new TurnFolder();
    f.paused.slice(0, 5).forEach((e) => folder.push(e));
    const before = folder.result();
    folder.push(f.paused[5]!);
    expect(before.messages[1]?.approval).toBeUndefined();
    expect(folder.result().messages[1]?.approval).toEqual({ id: 'int_1' });
  });
});

describe('trimToTrailingUnit', () => {
  const a = (content: string): Message => ({ role: 'assistant', content });
  const call: Message = { role: 'tool', content: '', tool_call_id: 'c', tool_name: 'bash', input: {} };
  const result: Message = { role: 'tool', content: 'ok', tool_call_id: 'c', is_error: false };

  it('keeps only a final answer', () => {
    expect(trimToTrailingUnit(foldEvents(f.toolThenText).messages)).toEqual([{ role: 'assistant', content: 'The file has 3 lines.' }]);
  });

  it('keeps trailing tool messages and the message that led to them', () => {
    expect(trimToTrailingUnit([a('one'), a('two'), call, result])).toEqual([a('two'), call, result]);
    expect(trimToTrailingUnit(foldEvents(f.paused).messages)).toHaveLength(2);
  });

  it('handles tool-only and empty lists', () => {
    expect(trimToTrailingUnit([call, result])).toEqual([call, result]);
    expect(trimToTrailingUnit([])).toEqual([]);
  });
});
