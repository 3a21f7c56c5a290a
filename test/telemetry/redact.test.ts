import { describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../src/contract/events.ts';
import { makeEventRedactor, makeRedactor, redactError } from '../../src/telemetry/redact.ts';

const SECRET = 'sk-secret-value-123';

function run(pieces: string[]): { text: string; deltas: string[] } {
  const redact = makeEventRedactor([SECRET]);
  const out: AgentEvent[] = [];
  for (const delta of pieces) out.push(...redact({ type: 'message_delta', data: { id: 'm', delta } }));
  out.push(...redact({ type: 'message_end', data: { id: 'm' } }));
  expect(out.at(-1)).toEqual({ type: 'message_end', data: { id: 'm' } });
  const deltas = out.flatMap((e) => (e.type === 'message_delta' ? [e.data.delta] : []));
  return { text: deltas.join(''), deltas };
}

describe('makeEventRedactor', () => {
  const text = `key: ${SECRET}, again ${SECRET}.`;

  it('masks a secret split at any point across two deltas', () => {
    for (let i = 1; i < text.length; i++) {
      const { text: out, deltas } = run([text.slice(0, i), text.slice(i)]);
      expect(out).toBe('key: [redacted], again [redacted].');
      for (const d of deltas) expect(d).not.toContain('sk-secret');
    }
  });

  it('masks a secret sent one character at a time', () => {
    expect(run([...text]).text).toBe('key: [redacted], again [redacted].');
  });

  it('releases a held tail that turned out not to be a secret at the end of the message', () => {
    expect(run(['costs sk-', 'secret']).text).toBe('costs sk-secret');
  });

  it('keeps streams of different messages apart', () => {
    const redact = makeEventRedactor([SECRET]);
    const a = redact({ type: 'message_delta', data: { id: 'a', delta: 'x sk-secret' } });
    const b = redact({ type: 'thought_delta', data: { id: 'b', delta: '-value-123' } });
    expect([...a, ...b].map((e) => (e.data as { delta: string }).delta).join('')).toBe('x -value-123');
  });

  it('masks whole events such as tool calls', () => {
    const [event] = makeEventRedactor([SECRET])({ type: 'tool_call', data: { id: 'c', name: 'write', input: { content: `k=${SECRET}` } } });
    expect(event).toEqual({ type: 'tool_call', data: { id: 'c', name: 'write', input: { content: 'k=[redacted]' } } });
  });

  it('passes events through untouched when there is no secret', () => {
    const event: AgentEvent = { type: 'message_delta', data: { id: 'm', delta: 'sk-' } };
    expect(makeEventRedactor([undefined])(event)).toEqual([event]);
  });
});

describe('makeRedactor', () => {
  const redact = makeRedactor([SECRET]);

  it('masks secrets at any depth of objects and arrays, leaving the input untouched', () => {
    const input = { a: [1, `x ${SECRET}`, { b: SECRET, c: 'fine' }], d: { e: null, f: true }, g: 'plain' };
    const out = redact(input);
    expect(out).toEqual({ a: [1, 'x [redacted]', { b: '[redacted]', c: 'fine' }], d: { e: null, f: true }, g: 'plain' });
    expect(Array.isArray(out.a)).toBe(true);
    expect(input.a[1]).toBe(`x ${SECRET}`);
    expect((input.a[2] as { b: string }).b).toBe(SECRET);
  });

  it('returns a value with no secret in it as it is, not a copy', () => {
    const clean = { type: 'tool_result', data: { id: 'c1', output: ['a', { b: 'c' }] } };
    expect(redact(clean)).toBe(clean);
    const partly = { keep: { deep: ['same'] }, change: SECRET };
    expect(redact(partly).keep).toBe(partly.keep);
  });
});

describe('redactError', () => {
  it('masks the message, stack and cause an error carries, which a walk of its fields would miss', () => {
    const redact = makeRedactor(['sk-live-123456']);
    const error = new Error('401: Incorrect API key provided: sk-live-123456', { cause: new TypeError('sent sk-live-123456') });
    const logged = JSON.stringify(redactError(error, redact));
    expect(logged).not.toContain('sk-live-123456');
    expect(logged).toContain('Incorrect API key provided: [redacted]');
    expect(logged).toContain('sent [redacted]');
    expect(redactError('plain sk-live-123456', redact)).toBe('plain [redacted]');
  });
});
