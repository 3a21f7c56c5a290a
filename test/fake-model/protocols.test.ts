import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError, generateText, isStepCount, jsonSchema, streamText, tool } from 'ai';
import type { LanguageModel } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeModel } from '../../src/testing/fake-model.ts';
import type { FakeModelServer, FakeProtocol } from '../../src/testing/fake-model.ts';
import { rejection } from '../support/rejection.ts';

// The Anthropic provider warns about unknown model ids on every call.
(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;

interface Target {
  label: string;
  protocol: FakeProtocol;
  reasoning: boolean;
  model: (server: FakeModelServer) => LanguageModel;
}

const targets: Target[] = [
  {
    label: 'OpenAI Responses (createOpenAI)',
    protocol: 'responses',
    reasoning: true,
    model: (s) => createOpenAI({ baseURL: s.url, apiKey: 'test' })('gpt-fake'),
  },
  {
    label: 'Chat Completions (createOpenAICompatible)',
    protocol: 'chat',
    reasoning: true,
    model: (s) => createOpenAICompatible({ name: 'fake', baseURL: s.url, apiKey: 'test', includeUsage: true })('fake-chat'),
  },
  {
    label: 'Chat Completions (createOpenAI().chat)',
    protocol: 'chat',
    // The OpenAI chat provider has no field for reasoning text.
    reasoning: false,
    model: (s) => createOpenAI({ baseURL: s.url, apiKey: 'test' }).chat('gpt-fake'),
  },
  {
    label: 'Anthropic Messages (createAnthropic)',
    protocol: 'anthropic',
    reasoning: true,
    model: (s) => createAnthropic({ baseURL: s.url, apiKey: 'x' })('claude-fake'),
  },
];

const add = tool({
  description: 'Adds two numbers',
  inputSchema: jsonSchema<{ a: number; b: number }>({
    type: 'object',
    properties: { a: { type: 'number' }, b: { type: 'number' } },
    required: ['a', 'b'],
  }),
  execute: async ({ a, b }) => ({ sum: a + b }),
});

let server: FakeModelServer;
beforeAll(async () => {
  server = await startFakeModel();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  server.reset();
});

/** streamText reports failures as `error` parts of the stream, not by rejecting. */
async function streamError(result: { fullStream: AsyncIterable<{ type: string; error?: unknown }> }): Promise<unknown> {
  for await (const part of result.fullStream) if (part.type === 'error') return part.error;
  throw new Error('expected the stream to carry an error');
}

describe.each(targets)('$label', (target) => {
  const model = () => target.model(server);

  it('generates text and records the request', async () => {
    server.script({ text: 'Hello from the fake model', usage: { input: 12, output: 5 } });
    const result = await generateText({ model: model(), system: 'Be brief.', prompt: 'Say hi', maxRetries: 0 });

    expect(result.text).toBe('Hello from the fake model');
    expect(result.finishReason).toBe('stop');
    expect(result.usage.inputTokens).toBe(12);
    expect(result.usage.outputTokens).toBe(5);

    expect(server.requests).toHaveLength(1);
    const req = server.requests[0]!;
    expect(req.protocol).toBe(target.protocol);
    expect(req.stream).toBe(false);
    expect(req.model).toMatch(/fake/);
    expect(req.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say hi' },
    ]);
  });

  it('streams text in several chunks with usage', async () => {
    server.script({ text: 'The quick brown fox jumps over the lazy dog', usage: { input: 9, output: 10 } });
    const result = streamText({ model: model(), prompt: 'Tell me about foxes', maxRetries: 0 });

    const chunks: string[] = [];
    for await (const chunk of result.textStream) chunks.push(chunk);
    expect(chunks.join('')).toBe('The quick brown fox jumps over the lazy dog');
    expect(chunks.length).toBeGreaterThan(1);
    expect(await result.finishReason).toBe('stop');
    const usage = await result.usage;
    expect(usage.inputTokens).toBe(9);
    expect(usage.outputTokens).toBe(10);
    expect(server.requests[0]!.stream).toBe(true);
  });

  for (const mode of ['generateText', 'streamText'] as const) {
    it(`runs a tool round trip with ${mode}`, async () => {
      server.script([
        { text: 'Let me add those.', toolCalls: [{ name: 'add', input: { a: 2, b: 3 } }], usage: { input: 20, output: 8 } },
        { text: 'The sum is 5.', usage: { input: 30, output: 4 } },
      ]);
      const options = { model: model(), prompt: 'What is 2 + 3?', tools: { add }, stopWhen: isStepCount(3), maxRetries: 0 };
      const result = mode === 'generateText' ? await generateText(options) : streamText(options);

      expect(await result.text).toBe('The sum is 5.');
      const steps = await result.steps;
      expect(steps).toHaveLength(2);
      expect(steps[0]!.finishReason).toBe('tool-calls');
      expect(steps[0]!.toolCalls.map((c) => [c.toolName, c.input])).toEqual([['add', { a: 2, b: 3 }]]);
      expect(steps[0]!.toolResults.map((r) => r.output)).toEqual([{ sum: 5 }]);
      const total = await result.totalUsage;
      expect(total.inputTokens).toBe(50);
      expect(total.outputTokens).toBe(12);

      expect(server.requests).toHaveLength(2);
      expect(server.requests[0]!.tools).toEqual(['add']);
      const callId = steps[0]!.toolCalls[0]!.toolCallId;
      const second = server.requests[1]!.messages;
      expect(second).toEqual([
        { role: 'user', content: 'What is 2 + 3?' },
        {
          role: 'assistant',
          content: 'Let me add those.',
          tool_calls: [{ id: callId, name: 'add', arguments: JSON.stringify({ a: 2, b: 3 }), input: { a: 2, b: 3 } }],
        },
        { role: 'tool', content: JSON.stringify({ sum: 5 }), tool_call_id: callId, name: 'add' },
      ]);
    });
  }

  it('sends several tool calls in one step', async () => {
    server.script([
      { toolCalls: [{ name: 'add', input: { a: 1, b: 1 } }, { name: 'add', input: { a: 2, b: 2 } }] },
      { text: 'done' },
    ]);
    const result = streamText({ model: model(), prompt: 'two sums', tools: { add }, stopWhen: isStepCount(3), maxRetries: 0 });
    expect(await result.text).toBe('done');
    const steps = await result.steps;
    expect(steps[0]!.toolResults.map((r) => r.output)).toEqual([{ sum: 2 }, { sum: 4 }]);
    const tools = server.requests[1]!.messages.filter((m) => m.role === 'tool');
    expect(tools.map((m) => m.content)).toEqual(['{"sum":2}', '{"sum":4}']);
  });

  it.runIf(target.reasoning)('delivers reasoning text', async () => {
    server.script({ reasoning: 'First I think, then I answer.', text: 'Answer.' });
    const generated = await generateText({ model: model(), prompt: 'think', maxRetries: 0 });
    expect(generated.reasoningText).toBe('First I think, then I answer.');
    expect(generated.text).toBe('Answer.');

    const streamed = streamText({ model: model(), prompt: 'think', maxRetries: 0 });
    expect(await streamed.reasoningText).toBe('First I think, then I answer.');
    expect(await streamed.text).toBe('Answer.');
  });

  it.each([
    { status: 401, headers: undefined },
    { status: 429, headers: { 'retry-after': '2' } },
    { status: 500, headers: undefined },
  ])('surfaces HTTP $status as APICallError', async ({ status, headers }) => {
    server.script({ error: { status, ...(headers ? { headers } : {}) } });
    const errors = [
      await rejection(generateText({ model: model(), prompt: 'hi', maxRetries: 0 })),
      await streamError(streamText({ model: model(), prompt: 'hi', maxRetries: 0, onError: () => {} })),
    ];
    for (const err of errors) {
      expect(APICallError.isInstance(err)).toBe(true);
      const apiErr = err as APICallError;
      expect(apiErr.statusCode).toBe(status);
      expect(apiErr.message).toMatch(/fake model/);
      expect(apiErr.isRetryable).toBe(status !== 401);
      if (headers) expect(apiErr.responseHeaders?.['retry-after']).toBe('2');
    }
  });

  it('turns a malformed stream into a stream error', async () => {
    server.script({ malformed: true });
    const err = await streamError(streamText({ model: model(), prompt: 'hi', maxRetries: 0, onError: () => {} }));
    expect((err as Error).name).toBe('AI_JSONParseError');
  });

  it('turns a malformed JSON body into an error', async () => {
    server.script({ malformed: true });
    const err = await rejection(generateText({ model: model(), prompt: 'hi', maxRetries: 0 }));
    expect(APICallError.isInstance(err)).toBe(true);
    expect((err as APICallError).message).toMatch(/Invalid JSON response/);
  });
});
