import { describe, expect, it } from 'vitest';
import { Message } from '../../src/contract/messages.ts';
import { nativeMessages } from '../../src/stream/blocks-to-native.ts';
import type { Attachment } from '../../src/stream/inbound-files.ts';

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

  it('refuse a UIMessage (parts, no content) rather than read it as an empty message, saying which header reads it', () => {
    const ui = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hello' }] };
    expect(() => nativeMessages([{ role: 'user', content: 'hi' }, ui], 'm')).toThrow(/x-ag-messages-format: vercel.* at m\[1\]$/);
    expect(() => nativeMessages([{ ...ui, content: null }], 'm')).toThrow(/UIMessage/);
    // A native message that also carries a parts field of its own keeps its content.
    expect(nativeMessages([{ role: 'user', content: 'hi', parts: [] }], 'm')[0]!.content).toBe('hi');
  });

  it("a user message's file blocks go beside the messages, as Vercel file parts do (one schema)", () => {
    const attachments: Attachment[] = [];
    const file = { type: 'file', url: 'data:text/csv;base64,YSxiCg==', filename: 'data.csv' };
    expect(nativeMessages([{ role: 'system', content: 'be brief' }, { role: 'user', content: [{ type: 'text', text: 'sum it' }, file] }], 'm', attachments)).toStrictEqual([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'sum it' },
    ]);
    expect(attachments).toEqual([{ message: 1, at: 'm[1].content[1]', mediaType: 'text/csv', filename: 'data.csv', bytes: Buffer.from('a,b\n') }]);

    expect(() => nativeMessages([{ role: 'user', content: [{ ...file, url: 'http://169.254.169.254/' }] }], 'm', [])).toThrow(/^the file at m\[0\]\.content\[0\]\.url is a http: URL/);
    // One a model made is history, ignored as in a UIMessage, with or without calls beside it.
    const made: Attachment[] = [];
    expect(nativeMessages([{ role: 'assistant', content: [{ type: 'text', text: 'here' }, file] }], 'm', made)).toStrictEqual([{ role: 'assistant', content: 'here' }]);
    expect(nativeMessages([{ role: 'assistant', content: [{ type: 'tool_call', toolCallId: 'c1', toolName: 'read', input: {} }, file] }], 'm', made)).toHaveLength(1);
    expect(made).toEqual([]);
    expect(() => nativeMessages([{ role: 'tool', content: [file] }], 'm', [])).toThrow('files are attached to user messages, not to tool messages at m[0].content[0]');
    expect(() => nativeMessages([{ role: 'user', content: [file, { type: 'image' }] }], 'm', [])).toThrow(/at m\[0\]\.content\[1\]\.type$/);
    expect(() => nativeMessages([{ role: 'user', content: [file] }], 'm')).toThrow('files cannot be attached here at m[0].content[0]');
  });
});
