import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, readFrames, readJson, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * Issue 21: the turn's step loop is agentd's own, over the providers' doGenerate/doStream. What
 * generateText/streamText did for it must still happen: calls read against the tool's schema,
 * unknown tools told to the model, what a provider needs back from a step sent back, and retries.
 */

const lsAgent = template({ tools: [builtin('ls'), builtin('write')] });
const ask = [{ role: 'user', content: 'go' }];
type Msg = { role: string; content: string; is_error?: boolean };

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ env: (url) => ({ ANTHROPIC_API_KEY: 'sk-ant-test', ANTHROPIC_BASE_URL: url, AGENTD_MODEL_MAX_RETRIES: '2' }) });
});
afterAll(async () => h.close());

describe.each([
  ['JSON', false],
  ['streamed', true],
])('the step loop (%s)', (_name, streamed) => {
  const invoke = async (agent: unknown) => {
    const res = await h.invoke(invokeBody(ask, agent), streamed ? { headers: { accept: 'text/event-stream' } } : {});
    if (!streamed) return (await readJson(res)).data.outputs.messages as Msg[];
    const { frames } = await readFrames(res);
    expect(frames.at(-1)).toMatchObject({ type: 'done' });
    return frames.filter((f) => f.type === 'tool_result').map((f) => ({ role: 'tool', ...(f.data as { output: string; is_error: boolean }), content: (f.data as { output: string }).output }));
  };

  const answer = async (res: Response) => {
    if (!streamed) return (await readJson(res)).data.outputs.messages.at(-1).content;
    const { frames } = await readFrames(res);
    return frames.flatMap((f) => (f.type === 'message_delta' ? [(f.data as { delta: string }).delta] : [])).join('');
  };

  it('tells the model that its input does not fit the tool, and goes on', async () => {
    h.model.script([{ toolCalls: [{ name: 'write', input: { path: 'a.txt' } }] }, { text: 'sorry' }]);
    const before = h.model.requests.length;
    const messages = await invoke(lsAgent);
    const result = messages.find((m) => m.role === 'tool' && m.is_error !== undefined);
    expect(result).toMatchObject({ is_error: true, content: expect.stringMatching(/Invalid input for tool write/) });
    const second = h.model.requests[before + 1]!;
    expect(second.messages.at(-1)).toMatchObject({ role: 'tool', content: expect.stringMatching(/Invalid input for tool write/) });
  });

  it('tells the model that a tool it named does not exist, and that arguments that are not JSON are not', async () => {
    h.model.script([
      {
        toolCalls: [
          { name: 'no_such_tool', input: {} },
          { name: 'ls', input: '{not json' },
        ],
      },
      { text: 'noted' },
    ]);
    const messages = await invoke(lsAgent);
    const results = messages.filter((m) => m.role === 'tool' && m.is_error !== undefined);
    expect(results).toHaveLength(2);
    expect(results[0]).toMatchObject({ is_error: true, content: expect.stringMatching(/no_such_tool/) });
    expect(results[1]).toMatchObject({ is_error: true, content: expect.stringMatching(/Invalid input for tool ls/) });
  });

  it('sends the model back its own reasoning, signed, within the turn (Anthropic thinking)', async () => {
    h.model.script([{ reasoning: 'list first', toolCalls: [{ name: 'ls', input: {} }] }, { text: 'done' }]);
    const before = h.model.requests.length;
    await invoke(template({ tools: [builtin('ls')], provider: 'anthropic' }));
    const second = h.model.requests[before + 1]!;
    expect(second.protocol).toBe('anthropic');
    const assistant = second.body.messages.find((m: { role: string }) => m.role === 'assistant');
    expect(assistant.content[0]).toMatchObject({ type: 'thinking', thinking: 'list first', signature: 'fake-signature' });
    expect(assistant.content.some((c: { type: string }) => c.type === 'tool_use')).toBe(true);
  });

  it('retries a call the provider failed with a retryable status, as AGENTD_MODEL_MAX_RETRIES says', async () => {
    h.model.script([{ error: { status: 503, headers: { 'retry-after-ms': '10' } } }, { text: 'second time lucky' }]);
    const before = h.model.requests.length;
    expect(await answer(await h.invoke(invokeBody(ask, template()), streamed ? { headers: { accept: 'text/event-stream' } } : {}))).toBe('second time lucky');
    expect(h.model.requests.length - before).toBe(2);
  });

  it('does not retry what retrying cannot fix', async () => {
    h.model.script([{ error: { status: 401 } }, { text: 'never asked' }]);
    const before = h.model.requests.length;
    const res = await h.invoke(invokeBody(ask, template()), streamed ? { headers: { accept: 'text/event-stream' } } : {});
    expect(res.status).toBe(424);
    expect(await res.text()).not.toContain('never');
    expect(h.model.requests.length - before).toBe(1);
  });
});

describe('models kept from turn to turn', () => {
  it('each turn still sends its own key', async () => {
    const keys = ['sk-first-turn-key', 'sk-second-turn-key', 'sk-first-turn-key'];
    for (const key of keys) {
      h.model.script({ text: 'ok' });
      const before = h.model.requests.length;
      await readJson(await h.invoke(invokeBody(ask, template(), { secrets: { OPENAI_API_KEY: key } })));
      expect(h.model.requests.slice(before).map((r) => r.headers.authorization)).toEqual([`Bearer ${key}`]);
    }
  });
});
