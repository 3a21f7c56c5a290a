import { validateUIMessages, type UIMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.ts';
import type { Message } from '../../src/contract/messages.ts';
import { foldEvents } from '../../src/stream/fold.ts';
import type { Attachment } from '../../src/stream/inbound-files.ts';
import { nativeToUi, uiToNative } from '../../src/stream/ui-messages.ts';
import * as f from './fixtures.ts';
import { project, readFinal } from '../support/sdk-client.ts';

const user = (id: string, text: string): UIMessage => ({ id, role: 'user', parts: [{ type: 'text', text }] });

/** The message of the 400 `invalid-messages` that `convert` throws. */
function refusal(convert: () => unknown): string {
  try {
    convert();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).type).toBe('invalid-messages');
    expect((error as AppError).status).toBe(400);
    return (error as AppError).message;
  }
  throw new Error('expected invalid-messages');
}

const invalidMessages = (input: unknown): string => refusal(() => uiToNative(input));

describe('uiToNative', () => {
  it('converts user text, joining text parts; a user message\'s files go beside the messages, decoded', () => {
    const attachments: Attachment[] = [];
    expect(
      uiToNative(
        [
          { id: 'u1', role: 'system', parts: [{ type: 'text', text: 'Be brief.' }] },
          { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'Hi.' }, { type: 'file', mediaType: 'image/png', url: 'https://example.com/made-by-a-model.png' }] },
          {
            id: 'u2',
            role: 'user',
            parts: [
              { type: 'text', text: 'Look at ' },
              { type: 'file', mediaType: 'image/png', filename: 'dot.png', url: `data:image/png;base64,${Buffer.from('PNG!').toString('base64')}` },
              { type: 'text', text: 'this.' },
              // A File the browser has no type for: '' as its type, octet-stream in its data URL.
              { type: 'file', mediaType: '', filename: 'blob', url: 'data:application/octet-stream;base64,AAE=' },
              { type: 'file', mediaType: 'text/plain', url: 'data:,a%20b%FF' },
            ],
          },
        ],
        { attachments },
      ),
    ).toEqual([
      { id: 'u1', role: 'system', content: 'Be brief.' },
      { role: 'assistant', content: 'Hi.' },
      { id: 'u2', role: 'user', content: 'Look at this.' },
    ]);
    expect(attachments).toEqual([
      { message: 2, at: 'data.inputs.messages[2].parts[1]', mediaType: 'image/png', filename: 'dot.png', bytes: Buffer.from('PNG!') },
      { message: 2, at: 'data.inputs.messages[2].parts[3]', mediaType: 'application/octet-stream', filename: 'blob', bytes: Buffer.from([0, 1]) },
      { message: 2, at: 'data.inputs.messages[2].parts[4]', mediaType: 'text/plain', filename: undefined, bytes: Buffer.from([0x61, 0x20, 0x62, 0xff]) },
    ]);
  });

  it('refuses a file it cannot deliver, naming the part: a URL to fetch, a bad data: URL, a file not from the user', () => {
    const file = (url: string, extra: object = {}) => [{ id: 'u', role: 'user', parts: [{ type: 'text', text: 'see' }, { type: 'file', mediaType: 'text/plain', url, ...extra }] }];
    const refused = (messages: unknown) => refusal(() => uiToNative(messages, { attachments: [] }));
    expect(refused(file('https://example.com/a.txt'))).toMatch(/^the file at data\.inputs\.messages\[0\]\.parts\[1\]\.url is a https: URL, and agentd does not fetch URLs: send the file inline as a data: URL/);
    expect(refused(file('file:///etc/passwd'))).toMatch(/^the file at data\.inputs\.messages\[0\]\.parts\[1\]\.url is a file: URL/);
    expect(refused(file('data:text/plain;base64,not base64!'))).toBe('the data: URL\'s base64 holds "!", which is not base64 at data.inputs.messages[0].parts[1].url');
    expect(refused(file('data:text/plain;base64,QUJDR'))).toBe("the data: URL's base64 is cut short or badly padded at data.inputs.messages[0].parts[1].url");
    expect(refused(file('data:text/plain;base64'))).toBe('a data: URL needs a "," before its data at data.inputs.messages[0].parts[1].url');
    expect(refused(file('data:,100%'))).toMatch(/"%" that is not followed by two hex digits at data\.inputs\.messages\[0\]\.parts\[1\]\.url$/);
    expect(refused(file('data:,x', { mediaType: 'text/plain\n(evil' }))).toMatch(/is not a media type .* at data\.inputs\.messages\[0\]\.parts\[1\]\.mediaType$/);
    expect(refused([{ id: 'u', role: 'user', parts: [{ type: 'file', mediaType: 'text/plain' }] }])).toMatch(/ at data\.inputs\.messages\[0\]\.parts\[0\]\.url$/);
    expect(refused([{ id: 's', role: 'system', parts: [{ type: 'file', mediaType: 'text/plain', url: 'data:,x' }] }])).toBe(
      'files are attached to user messages, not to system messages at data.inputs.messages[0].parts[0]',
    );
    // Without a place for them, files are refused rather than lost.
    expect(invalidMessages(file('data:,x'))).toBe('files cannot be attached here at data.inputs.messages[0].parts[1]');
  });

  it('reads a data: URL as a browser (and the AI SDK) would: URL-safe base64, percent-encoded padding, line breaks, no data, any case, parameters', () => {
    const bytesOf = (url: string) => {
      const attachments: Attachment[] = [];
      uiToNative([{ id: 'u', role: 'user', parts: [{ type: 'file', mediaType: '', url }] }], { attachments });
      return { bytes: attachments[0]!.bytes, mediaType: attachments[0]!.mediaType };
    };
    const odd = Buffer.from([0xfb, 0xff, 0xbf, 0x3e]);
    expect(odd.toString('base64')).toBe('+/+/Pg==');
    expect(bytesOf('data:application/octet-stream;base64,-_-_Pg==').bytes).toEqual(odd);
    expect(bytesOf('data:application/octet-stream;base64,+/-_Pg').bytes).toEqual(odd);
    expect(bytesOf('data:text/plain;base64,SGVsbG8%3D').bytes).toEqual(Buffer.from('Hello'));
    expect(bytesOf('data:text/plain;base64,SGVs\r\n bG8=\n').bytes).toEqual(Buffer.from('Hello'));
    expect(bytesOf('data:,')).toEqual({ bytes: Buffer.alloc(0), mediaType: 'text/plain' });
    expect(bytesOf('data:;base64,')).toEqual({ bytes: Buffer.alloc(0), mediaType: 'text/plain' });
    expect(bytesOf('DATA:TEXT/PLAIN;BASE64,SGVsbG8=')).toEqual({ bytes: Buffer.from('Hello'), mediaType: 'text/plain' });
    expect(bytesOf('data:text/plain;charset=utf-8;base64,SGVsbG8=')).toEqual({ bytes: Buffer.from('Hello'), mediaType: 'text/plain' });
    // Padding only at the end, as atob has it: two base64 strings glued together are not one.
    expect(refusal(() => bytesOf('data:text/plain;base64,QQ==QQ=='))).toBe("the data: URL's base64 is cut short or badly padded at data.inputs.messages[0].parts[0].url");
  });

  it('splits an assistant message into text, calls and results; a run of tool parts makes its calls first', () => {
    const message: UIMessage = {
      id: 'a1',
      role: 'assistant',
      parts: [
        { type: 'step-start' },
        { type: 'reasoning', text: 'hmm', state: 'done' },
        { type: 'text', text: 'Let me ', state: 'done' },
        { type: 'text', text: 'look.', state: 'done' },
        { type: 'tool-read', toolCallId: 'c1', state: 'output-available', input: { path: 'a' }, output: { size: 2 } },
        { type: 'dynamic-tool', toolName: 'mcp_search', toolCallId: 'c2', state: 'output-error', input: { q: 'x' }, errorText: 'timeout' },
        { type: 'step-start' },
        { type: 'data-progress', data: { pct: 100 } },
        { type: 'source-url', sourceId: 's', url: 'https://example.com' },
        { type: 'text', text: 'Done.', state: 'done' },
      ],
    };
    expect(uiToNative([message])).toEqual([
      { role: 'assistant', content: 'Let me look.' },
      { role: 'tool', content: '', tool_call_id: 'c1', tool_name: 'read', input: { path: 'a' } },
      { role: 'tool', content: '', tool_call_id: 'c2', tool_name: 'mcp_search', input: { q: 'x' } },
      { role: 'tool', content: '{"size":2}', tool_call_id: 'c1', is_error: false },
      { role: 'tool', content: 'timeout', tool_call_id: 'c2', is_error: true },
      { role: 'assistant', content: 'Done.' },
    ]);
  });

  it('reads the in-band decision exactly as addToolApprovalResponse records it', () => {
    const parts = [
      { type: 'tool-bash', toolCallId: 'c1', state: 'approval-responded', input: { command: 'ls' }, approval: { id: 'int_1', approved: true } },
      { type: 'tool-bash', toolCallId: 'c2', state: 'approval-responded', input: { command: 'rm' }, approval: { id: 'int_2', approved: false, reason: 'no' } },
      { type: 'tool-bash', toolCallId: 'c3', state: 'approval-requested', input: {}, approval: { id: 'int_3' } },
      { type: 'tool-pick', toolCallId: 'c4', state: 'input-available', input: { n: 1 } },
    ];
    expect(uiToNative([{ id: 'a', role: 'assistant', parts }])).toEqual([
      { role: 'tool', content: '', tool_call_id: 'c1', tool_name: 'bash', input: { command: 'ls' }, approval: { id: 'int_1', approved: true } },
      { role: 'tool', content: '', tool_call_id: 'c2', tool_name: 'bash', input: { command: 'rm' }, approval: { id: 'int_2', approved: false, reason: 'no' } },
      { role: 'tool', content: '', tool_call_id: 'c3', tool_name: 'bash', input: {}, approval: { id: 'int_3' } },
      { role: 'tool', content: '', tool_call_id: 'c4', tool_name: 'pick', input: { n: 1 } },
    ]);
  });

  it('a denied part is a call keeping its decision plus an error result saying so', () => {
    const denied = { type: 'tool-bash', toolCallId: 'c1', state: 'output-denied', input: {}, approval: { id: 'int_1', approved: false, reason: 'too risky' } };
    expect(uiToNative([{ id: 'a', role: 'assistant', parts: [denied] }])).toEqual([
      { role: 'tool', content: '', tool_call_id: 'c1', tool_name: 'bash', input: {}, approval: { id: 'int_1', approved: false, reason: 'too risky' } },
      { role: 'tool', content: 'Tool call denied: too risky', tool_call_id: 'c1', is_error: true },
    ]);
    const legacy = { type: 'tool-bash', toolCallId: 'c1', state: 'output-denied', input: {} };
    expect(uiToNative([{ id: 'a', role: 'assistant', parts: [legacy] }])[1]).toMatchObject({ content: 'Tool call denied', is_error: true });
  });

  it('accepts what the SDK client builds from our stream, and reads the decision back', async () => {
    const paused = (await readFinal(project(f.paused))).message!;
    const answered = structuredClone(paused);
    Object.assign(answered.parts[2]!, { state: 'approval-responded', approval: { id: 'int_1', approved: true } });
    expect(uiToNative([user('u1', 'clean up'), answered])).toEqual([
      { id: 'u1', role: 'user', content: 'clean up' },
      { role: 'assistant', content: 'I will clean the build folder.' },
      { role: 'tool', content: '', tool_call_id: 'call_1', tool_name: 'bash', input: { command: 'rm -rf build' }, approval: { id: 'int_1', approved: true } },
    ]);
  });

  it('names the exact path of what is wrong', () => {
    const ok = user('u', 'hi');
    expect(invalidMessages({ messages: [] })).toBe('expected an array of UI messages, received object at data.inputs.messages');
    expect(invalidMessages([ok, 'nope'])).toMatch(/expected object, received string at data\.inputs\.messages\[1\]$/);
    expect(invalidMessages([{ id: 'u', role: 'user', parts: 'hi' }])).toMatch(/expected array.* at data\.inputs\.messages\[0\]\.parts$/);
    expect(invalidMessages([{ id: 'u', role: 'robot', parts: [] }])).toMatch(/ at data\.inputs\.messages\[0\]\.role$/);
    expect(invalidMessages([{ id: 7, role: 'user', parts: [] }])).toMatch(/ at data\.inputs\.messages\[0\]\.id$/);
    expect(invalidMessages([ok, ok, ok, { id: 'a', role: 'assistant', parts: [{ type: 'text', text: 'x' }, { text: 'y' }] }])).toMatch(
      / at data\.inputs\.messages\[3\]\.parts\[1\]\.type$/,
    );
    expect(invalidMessages([{ id: 'a', role: 'assistant', parts: [{ type: 'text', text: 1 }] }])).toMatch(/ at data\.inputs\.messages\[0\]\.parts\[0\]\.text$/);
    expect(invalidMessages([{ id: 'a', role: 'assistant', parts: [{ type: 'tool-bash', state: 'input-available', input: {} }] }])).toMatch(
      / at data\.inputs\.messages\[0\]\.parts\[0\]\.toolCallId$/,
    );
    expect(invalidMessages([{ id: 'a', role: 'assistant', parts: [{ type: 'dynamic-tool', toolCallId: 'c', state: 'input-available', input: {} }] }])).toMatch(
      / at data\.inputs\.messages\[0\]\.parts\[0\]\.toolName$/,
    );
    expect(invalidMessages([{ id: 'a', role: 'assistant', parts: [{ type: 'tool-', toolCallId: 'c', state: 'input-available', input: {} }] }])).toMatch(
      / at data\.inputs\.messages\[0\]\.parts\[0\]\.type$/,
    );
    expect(invalidMessages([{ id: 'a', role: 'assistant', parts: [{ type: 'tool-bash', toolCallId: 'c', state: 'input-available', input: 'ls' }] }])).toBe(
      "a tool call's input must be an object of its arguments at data.inputs.messages[0].parts[0].input",
    );
    // The SDK keeps the raw text of an input the model got wrong (`tool-input-error`): that call failed, and goes on as one with no input.
    expect(uiToNative([{ id: 'a', role: 'assistant', parts: [{ type: 'tool-bash', toolCallId: 'c', state: 'output-error', input: '{"command": ', errorText: 'bad input' }] }])).toMatchObject([
      { role: 'tool', tool_call_id: 'c', tool_name: 'bash', input: {} },
      { role: 'tool', tool_call_id: 'c', content: 'bad input', is_error: true },
    ]);
    expect(invalidMessages([{ id: 'a', role: 'assistant', parts: [{ type: 'tool-bash', toolCallId: 'c', state: 'input-streaming' }] }])).toBe(
      "tool call is still streaming its input (state 'input-streaming'); send the message once the call is complete at data.inputs.messages[0].parts[0].state",
    );
    expect(invalidMessages([{ id: 'a', role: 'assistant', parts: [{ type: 'tool-bash', toolCallId: 'c', state: 'done' }] }])).toMatch(
      /^unknown tool part state "done".* at data\.inputs\.messages\[0\]\.parts\[0\]\.state$/,
    );
    expect(
      invalidMessages([{ id: 'a', role: 'assistant', parts: [{ type: 'tool-bash', toolCallId: 'c', state: 'approval-responded', input: {}, approval: { id: 'i' } }] }]),
    ).toMatch(/ at data\.inputs\.messages\[0\]\.parts\[0\]\.approval\.approved$/);
    expect(invalidMessages([{ id: 'a', role: 'assistant', parts: [{ type: 'tool-bash', toolCallId: 'c', state: 'output-error', input: {} }] }])).toMatch(
      / at data\.inputs\.messages\[0\]\.parts\[0\]\.errorText$/,
    );
    expect(invalidMessages([{ id: 'u', role: 'user', parts: [{ type: 'tool-bash', toolCallId: 'c', state: 'input-available', input: {} }] }])).toBe(
      'tool parts belong in assistant messages, not in a user message at data.inputs.messages[0].parts[0]',
    );
    expect(invalidMessages([{ id: 'u', role: 'user', parts: [{ type: 'bogus' }] }])).toBe('unknown part type "bogus" at data.inputs.messages[0].parts[0].type');
  });

  it('uses the caller-supplied base path', () => {
    expect(() => uiToNative([1], { path: 'body.messages' })).toThrow(/ at body\.messages\[0\]$/);
  });
});

describe('nativeToUi', () => {
  it('groups a turn into one assistant message with steps, like the streaming client', async () => {
    const ui = nativeToUi(foldEvents(f.toolThenText).messages);
    expect(ui).toEqual([
      {
        id: 'msg-0',
        role: 'assistant',
        parts: [
          { type: 'step-start' },
          { type: 'text', text: 'Let me look.', state: 'done' },
          { type: 'tool-read', toolCallId: 'call_1', state: 'output-available', input: { path: 'notes.txt' }, output: '{"lines":3,"text":"a\\nb\\nc"}' },
          { type: 'step-start' },
          { type: 'text', text: 'The file has 3 lines.', state: 'done' },
        ],
      },
    ]);
    await validateUIMessages({ messages: ui });
    // Same shape as the stream builds (outputs are text in the JSON form, objects in the stream).
    const streamed = (await readFinal(project(f.toolThenText))).message!;
    expect(streamed.parts.filter((p) => p.type !== 'reasoning').map((p) => [p.type, 'state' in p ? p.state : undefined])).toEqual(
      ui[0]!.parts.map((p) => [p.type, 'state' in p ? p.state : undefined]),
    );
  });

  it('renders each tool state', async () => {
    const ui = nativeToUi([
      { id: 'u1', role: 'user', content: 'go' },
      ...foldEvents(f.paused).messages,
    ], { idPrefix: 'out-' });
    expect(ui.map((m) => [m.id, m.role])).toEqual([['u1', 'user'], ['out-1', 'assistant']]);
    expect(ui[1]!.parts.at(-1)).toEqual({ type: 'tool-bash', toolCallId: 'call_1', state: 'approval-requested', input: { command: 'rm -rf build' }, approval: { id: 'int_1' } });

    const states = nativeToUi([
      ...foldEvents(f.clientTool).messages,
      ...foldEvents(f.toolError).messages,
      { role: 'tool', content: '', tool_call_id: 'd', tool_name: 'bash', input: {}, approval: { id: 'i', approved: false, reason: 'no' } },
      { role: 'tool', content: 'Tool call denied: no', tool_call_id: 'd', is_error: true },
      { role: 'tool', content: '', tool_call_id: 'e', tool_name: 'bash', input: {}, approval: { id: 'j', approved: true } },
    ])[0]!.parts.filter((p) => p.type !== 'step-start' && p.type !== 'text');
    expect(states).toMatchObject([
      { type: 'tool-pick_color', state: 'input-available' },
      { type: 'tool-read', state: 'output-error', errorText: 'ENOENT: no such file' },
      { type: 'tool-bash', toolCallId: 'd', state: 'output-denied', approval: { id: 'i', approved: false, reason: 'no' } },
      { type: 'tool-bash', toolCallId: 'e', state: 'approval-responded', approval: { id: 'j', approved: true } },
    ]);
    await validateUIMessages({ messages: ui });
  });

  it('continues the paused message: results land on its parts, new output in a new step', async () => {
    const paused = (await readFinal(project(f.paused))).message!;
    const answered = structuredClone(paused);
    Object.assign(answered.parts[2]!, { state: 'approval-responded', approval: { id: 'int_1', approved: true } });

    const ui = nativeToUi(foldEvents(f.continuedApproved).messages, { continues: answered });
    const streamed = (await readFinal(project(f.continuedApproved, answered.id), answered)).message!;
    expect(ui).toHaveLength(1);
    expect(ui[0]!.id).toBe(answered.id);
    expect(ui[0]!.parts).toEqual([
      { type: 'step-start' },
      { type: 'text', text: 'I will clean the build folder.', state: 'done' },
      { type: 'tool-bash', toolCallId: 'call_1', state: 'output-available', input: { command: 'rm -rf build' }, output: 'removed 12 files', approval: { id: 'int_1', approved: true } },
      { type: 'step-start' },
      { type: 'text', text: 'Done: the build folder is gone.', state: 'done' },
    ]);
    expect(ui[0]!.parts.map((p) => p.type)).toEqual(streamed.parts.map((p) => p.type));
    expect(answered.parts[2]).toMatchObject({ state: 'approval-responded' });
    await validateUIMessages({ messages: ui });
  });

  it('a result answering an earlier message goes there; one with no call at all stays visible', () => {
    const ui = nativeToUi([
      { role: 'tool', content: '', tool_call_id: 'c1', tool_name: 'bash', input: {} },
      { role: 'user', content: 'ok' },
      { role: 'tool', content: 'done', tool_call_id: 'c1', is_error: false },
      { role: 'tool', content: 'lost', tool_call_id: 'zz', is_error: false },
    ]);
    expect(ui[0]!.parts[1]).toMatchObject({ toolCallId: 'c1', state: 'output-available', output: 'done' });
    expect(ui[2]!.parts).toEqual([{ type: 'dynamic-tool', toolName: 'unknown', toolCallId: 'zz', state: 'output-available', input: undefined, output: 'lost' }]);
  });
});

describe('round trips', () => {
  const cases: [string, Message[]][] = [
    ['text only', foldEvents(f.textOnly).messages],
    ['tool then text', foldEvents(f.toolThenText).messages],
    ['paused approval', foldEvents(f.paused).messages],
    ['client tool', foldEvents(f.clientTool).messages],
    ['tool error', foldEvents(f.toolError).messages],
    ['two tool steps', foldEvents(f.twoToolSteps).messages],
    [
      'decisions and a denial',
      [
        { role: 'user', content: 'clean', id: 'u1' },
        { role: 'tool', content: '', tool_call_id: 'a', tool_name: 'bash', input: { c: 1 }, approval: { id: 'i1', approved: true, reason: 'fine' } },
        { role: 'tool', content: 'ok', tool_call_id: 'a', is_error: false },
        { role: 'tool', content: '', tool_call_id: 'b', tool_name: 'bash', input: { c: 2 }, approval: { id: 'i2', approved: false, reason: 'no' } },
        { role: 'tool', content: 'Tool call denied: no', tool_call_id: 'b', is_error: true },
        { role: 'tool', content: '', tool_call_id: 'c', tool_name: 'bash', input: { c: 3 }, approval: { id: 'i3', approved: true } },
        { role: 'assistant', content: 'partly done' },
      ],
    ],
  ];

  it.each(cases)('uiToNative(nativeToUi(x)) preserves %s', async (_name, messages) => {
    const ui = nativeToUi(messages);
    await validateUIMessages({ messages: ui });
    expect(uiToNative(JSON.parse(JSON.stringify(ui)))).toEqual(messages);
  });
});
