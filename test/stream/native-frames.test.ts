import { describe, expect, it } from 'vitest';
import { AgentEvent } from '../../src/contract/events.ts';
import { ndjsonLine, sseFrame } from '../../src/stream/native-frames.ts';
import * as f from './fixtures.ts';

describe('native frames', () => {
  it('SSE frames carry exactly {type, data}', () => {
    const event = f.toolThenText[4]!;
    const frame = sseFrame(event);
    expect(frame).toBe(`data: ${JSON.stringify(event)}\n\n`);
    expect(AgentEvent.parse(JSON.parse(frame.slice('data: '.length)))).toEqual(event);
  });

  it('NDJSON puts one event per line and the stream ends at done, with no terminator', () => {
    const body = f.paused.map(ndjsonLine).join('');
    const lines = body.split('\n');
    expect(lines.pop()).toBe('');
    const events = lines.map((l) => AgentEvent.parse(JSON.parse(l)));
    expect(events).toEqual(f.paused);
    expect(events.at(-1)?.type).toBe('done');
  });

  it('a delta containing newlines stays on one line', () => {
    const line = ndjsonLine({ type: 'message_delta', data: { id: 'm', delta: 'a\nb\n\n' } });
    expect(line.indexOf('\n')).toBe(line.length - 1);
    expect(sseFrame({ type: 'message_delta', data: { id: 'm', delta: 'a\n\nb' } }).split('\n\n')).toHaveLength(2);
  });
});
