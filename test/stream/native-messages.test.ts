import { describe, expect, it } from 'vitest';
import { Message } from '../../src/contract/messages.ts';
import { nativeMessages } from '../../src/stream/blocks-to-native.ts';

/** Inbound native messages: a plain one skips the schema (blocks-to-native.ts), and must come out as the schema gives it. */
describe('native messages', () => {
  it('come out as the schema gives them, plain or not', () => {
    const messages = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello', id: 'a1' },
      { role: 'user', content: [{ type: 'text', text: 'in ' }, { type: 'text', text: 'parts' }] },
      { role: 'assistant', content: null },
      { role: 'user', content: 'more', note: 'kept' },
    ];
    expect(nativeMessages(messages, 'm')).toStrictEqual(messages.map((m) => Message.parse(m)));
  });

  it('refuse what the schema refuses, naming where', () => {
    expect(() => nativeMessages([{ role: 'user', content: 'hi' }, { role: 'robot', content: 'hi' }], 'm')).toThrow(/at m\[1\]\.role$/);
    expect(() => nativeMessages([{ role: 'user', content: 7 }], 'm')).toThrow(/at m\[0\]\.content$/);
    expect(() => nativeMessages([{ role: 'toString', content: 'x' }], 'm')).toThrow(/at m\[0\]\.role$/);
    expect(() => nativeMessages(['hi'], 'm')).toThrow(/at m\[0\]$/);
  });
});
