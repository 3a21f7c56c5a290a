import { describe, expect, it, vi } from 'vitest';
import { withLazyJson } from '../../src/store/columns.ts';

describe('withLazyJson', () => {
  const text = JSON.stringify({ history: [{ role: 'user', content: 'hi' }] });

  it('parses the column once, when it is first read', () => {
    const parse = vi.spyOn(JSON, 'parse');
    try {
      const record = withLazyJson({ id: 'a', state: null as unknown, at: 't' }, 'state', text);
      expect(parse).not.toHaveBeenCalled();
      expect(record.state).toEqual({ history: [{ role: 'user', content: 'hi' }] });
      expect(record.state).toBe(record.state);
      expect(parse).toHaveBeenCalledTimes(1);
    } finally {
      parse.mockRestore();
    }
  });

  it('reads as a plain property: in its place, serialized, cloned, spread and compared', () => {
    const record = withLazyJson({ id: 'a', state: null as unknown, at: 't' }, 'state', text);
    expect(Object.keys(record)).toEqual(['id', 'state', 'at']);
    expect(JSON.stringify(withLazyJson({ id: 'a', state: null as unknown, at: 't' }, 'state', text))).toBe(`{"id":"a","state":${text},"at":"t"}`);
    expect(structuredClone(withLazyJson({ id: 'a', state: null as unknown }, 'state', text))).toEqual({ id: 'a', state: JSON.parse(text) });
    expect({ ...withLazyJson({ state: null as unknown }, 'state', text) }).toEqual({ state: JSON.parse(text) });
    expect(withLazyJson({ state: null as unknown }, 'state', null)).toEqual({ state: null });
  });

  it('takes a new value before or after it was read', () => {
    const unread = withLazyJson({ state: null as unknown }, 'state', text);
    unread.state = 'replaced';
    expect(unread.state).toBe('replaced');
    const read = withLazyJson({ state: null as unknown }, 'state', text);
    void read.state;
    read.state = 'again';
    expect(read.state).toBe('again');
  });
});
