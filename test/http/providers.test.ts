import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFrames, startHarness, userTurn, type Harness } from '../support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    env: (modelUrl) => ({
      ANTHROPIC_API_KEY: 'sk-ant-test',
      ANTHROPIC_BASE_URL: modelUrl,
      AGENTD_OPENAI_COMPATIBLE: JSON.stringify({ vllm: { base_url: modelUrl, api_key_env: 'VLLM_KEY' } }),
      VLLM_KEY: 'sk-vllm-test',
      AGENTD_PRICES: JSON.stringify({ 'openai/priced-model': { input: 1, output: 2 } }),
    }),
  });
});
afterAll(async () => h.close());

async function run(llm: Record<string, unknown>) {
  const res = await h.invoke(userTurn('hi', { parameters: { agent: { llm, tools: [{ type: 'builtin', name: 'ls' }], runner: { permissions: { default: 'allow' } } } } }));
  return { res, body: await res.json() };
}

describe('providers, each over its real protocol', () => {
  it.each([
    ['openai', { provider: 'openai', model: 'gpt-x' }, 'responses', 'Bearer sk-test-openai-key'],
    ['ollama', { provider: 'ollama', model: 'llama-x' }, 'chat', undefined],
    ['anthropic', { provider: 'anthropic', model: 'claude-x' }, 'anthropic', undefined],
    ['openai-compatible', { provider: 'openai-compatible', model: 'm', connection: { mode: 'self_managed', slug: 'vllm' } }, 'chat', 'Bearer sk-vllm-test'],
    ['"provider/model" shorthand', { model: 'ollama/llama-y' }, 'chat', undefined],
  ])('%s runs a tool turn', async (_name, llm, protocol, authorization) => {
    h.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }, { text: 'listed' }]);
    const before = h.model.requests.length;
    const { res, body } = await run(llm);
    expect(res.status).toBe(200);
    expect(body.data.outputs.messages.map((m: { role: string }) => m.role)).toEqual(['tool', 'tool', 'assistant']);
    expect(body.data.outputs.messages[2].content).toBe('listed');
    const requests = h.model.requests.slice(before);
    expect(requests.map((r) => r.protocol)).toEqual([protocol, protocol]);
    expect(requests[0]!.model).toBe(String(llm.model).replace(/^ollama\//, ''));
    if (authorization) expect(requests[0]!.headers.authorization).toBe(authorization);
    if (protocol === 'anthropic') expect(requests[0]!.headers['x-api-key']).toBe('sk-ant-test');
    // The model saw the tool's result on its second call.
    expect(JSON.stringify(requests[1]!.messages)).toContain('"role":"tool"');
  });

  it.each([
    ['ANTHROPIC_BASE_URL', 'anthropic', '/v1/messages'],
    ['OLLAMA_BASE_URL', 'ollama', '/v1/chat/completions'],
  ])('takes %s without /v1, as the provider\'s own tools do', async (setting, provider, path) => {
    const bare = await startHarness({ env: (modelUrl) => ({ ANTHROPIC_API_KEY: 'sk-ant-test', [setting]: modelUrl.replace(/\/v1$/, '/') }) });
    try {
      bare.model.script({ text: `from ${path}` });
      const res = await bare.invoke(userTurn('hi', { parameters: { agent: { llm: { provider, model: 'm' } } } }));
      expect((await res.json()).data.outputs.messages.at(-1).content).toBe(`from ${path}`);
      expect(bare.model.requests.map((r) => r.path)).toEqual([path]);
    } finally {
      await bare.close();
    }
  });

  it('names the missing setting when an openai-compatible endpoint is not configured', async () => {
    const { res, body } = await run({ provider: 'openai-compatible', model: 'm', connection: { mode: 'self_managed', slug: 'nope' } });
    expect(res.status).toBe(400);
    expect(body.status.message).toContain('AGENTD_OPENAI_COMPATIBLE');
    expect(body.status.message).toContain('vllm');
  });

  it('refuses an unknown provider with the list of known ones', async () => {
    const { res, body } = await run({ provider: 'acme', model: 'm' });
    expect(res.status).toBe(400);
    expect(body.status.message).toMatch(/unknown provider "acme" at data\.parameters\.agent\.llm\.provider; known: openai, anthropic, ollama, openai-compatible/);
  });

  it('records usage and the priced cost on the turn', async () => {
    h.model.script({ text: 'costly', usage: { input: 1000, output: 500 } });
    const res = await h.invoke({ session_id: 'priced', ...userTurn('hi', { parameters: { agent: { llm: { provider: 'openai', model: 'priced-model' }, tools: [] } } }) });
    const body = await res.json();
    expect(body.data.outputs.usage).toEqual({ input: 1000, output: 500, total: 1500, cost: (1000 * 1 + 500 * 2) / 1e6 });
    const [turn] = await h.store.turns.listForSession(h.projectId, 'priced', { limit: 1 });
    expect(turn?.usage).toEqual(body.data.outputs.usage);
    expect(turn?.status).toBe('completed');
  });
});

describe('the Responses API as self-hosted servers speak it', () => {
  it('sends every step whole (store: false, no item references), and extras can still set options', async () => {
    h.model.script([{ text: 'let me look', toolCalls: [{ name: 'ls', input: {} }] }, { text: 'done' }]);
    const before = h.model.requests.length;
    const res = await run({ provider: 'openai', model: 'gpt-x', extras: { openai: { parallelToolCalls: false } } });
    expect(res.res.status).toBe(200);
    const [first, second] = h.model.requests.slice(before);
    expect(first!.body).toMatchObject({ store: false, parallel_tool_calls: false });
    expect(JSON.stringify(second!.body)).not.toContain('item_reference');
    expect(JSON.stringify(second!.body.input)).toContain('let me look');
  });
});

describe('an OPENAI_BASE_URL server without the Responses API', () => {
  let chatOnly: Harness;
  beforeAll(async () => {
    chatOnly = await startHarness({ protocols: ['chat'] });
  });
  afterAll(async () => chatOnly.close());

  const openaiTurn = (text: string) =>
    chatOnly.invoke(userTurn(text, { parameters: { agent: { llm: { provider: 'openai', model: 'gpt-x' }, tools: [{ type: 'builtin', name: 'ls' }], runner: { permissions: { default: 'allow' } } } } }));

  it('runs the turn over Chat Completions, and asks for Responses only once', async () => {
    chatOnly.model.script([{ toolCalls: [{ name: 'ls', input: {} }] }, { text: 'listed' }, { text: 'again' }]);
    const first = await openaiTurn('hi');
    expect(first.status).toBe(200);
    expect((await first.json()).data.outputs.messages.at(-1).content).toBe('listed');
    expect(chatOnly.model.requests.map((r) => r.protocol)).toEqual(['chat', 'chat']);
    expect(chatOnly.model.requests[0]!.headers.authorization).toBe('Bearer sk-test-openai-key');
    expect(chatOnly.model.unrouted).toEqual(['POST /v1/responses']);

    const second = await openaiTurn('more');
    expect((await second.json()).data.outputs.messages.at(-1).content).toBe('again');
    expect(chatOnly.model.requests.map((r) => r.protocol)).toEqual(['chat', 'chat', 'chat']);
    expect(chatOnly.model.unrouted).toHaveLength(1);
  });

  it('finds Chat Completions on a streamed first turn too', async () => {
    const streamedFirst = await startHarness({ protocols: ['chat'] });
    try {
      streamedFirst.model.script({ text: 'streamed over chat' });
      const res = await streamedFirst.invoke(userTurn('hi', { parameters: { agent: { llm: { provider: 'openai', model: 'gpt-x' } } } }), { headers: { accept: 'text/event-stream' } });
      const { frames } = await readFrames(res);
      expect(frames.filter((f) => f.type === 'message_delta').map((f) => f.data.delta).join('')).toBe('streamed over chat');
      expect(streamedFirst.model.requests.map((r) => [r.protocol, r.stream])).toEqual([['chat', true]]);
      expect(streamedFirst.model.unrouted).toEqual(['POST /v1/responses']);
    } finally {
      await streamedFirst.close();
    }
  });

  it.each([400, 422, 501])('finds Chat Completions on a server that answers an unknown path with %i', async (status) => {
    const other = await startHarness({ protocols: ['chat'], unroutedStatus: status });
    try {
      other.model.script([{ text: 'over chat' }, { text: 'straight there' }]);
      const agent = { llm: { provider: 'openai', model: 'gpt-x' } };
      const first = await other.invoke(userTurn('hi', { parameters: { agent } }));
      expect((await first.json()).data.outputs.messages.at(-1).content).toBe('over chat');
      const second = await other.invoke(userTurn('again', { parameters: { agent } }), { headers: { accept: 'text/event-stream' } });
      expect((await readFrames(second)).frames.filter((f) => f.type === 'message_delta').map((f) => f.data.delta).join('')).toBe('straight there');
      expect(other.model.requests.map((r) => r.protocol)).toEqual(['chat', 'chat']);
      expect(other.model.unrouted).toEqual(['POST /v1/responses']);
    } finally {
      await other.close();
    }
  });

  it.each([
    ['a JSON reply', 'application/json'],
    ['a stream', 'text/event-stream'],
  ])('finds Chat Completions on a server that answers every path as Chat Completions, asked first for %s', async (_, accept) => {
    const naive = await startHarness({ chatEverywhere: true });
    try {
      // The first answer goes to the Responses call, which cannot read it and is not used.
      naive.model.script([{ text: 'unread' }, { text: 'first' }, { text: 'second' }]);
      const agent = { llm: { provider: 'openai', model: 'gpt-x' } };
      const texts: string[] = [];
      for (const type of [accept, accept === 'application/json' ? 'text/event-stream' : 'application/json']) {
        const res = await naive.invoke(userTurn('hi', { parameters: { agent } }), { headers: { accept: type } });
        expect(res.status).toBe(200);
        texts.push(type === 'application/json' ? (await res.json()).data.outputs.messages.at(-1).content : (await readFrames(res)).frames.filter((f) => f.type === 'message_delta').map((f) => f.data.delta).join(''));
      }
      expect(texts).toEqual(['first', 'second']);
      // Asked over the Responses API once, then over Chat Completions only.
      expect(naive.model.requests.map((r) => r.path)).toEqual(['/v1/responses', '/v1/chat/completions', '/v1/chat/completions']);
    } finally {
      await naive.close();
    }
  });

  it("reports a first call's real refusal, not the 404 of the way tried after it", async () => {
    const responsesOnly = await startHarness({ protocols: ['responses'] });
    try {
      responsesOnly.model.script({ error: { status: 400, message: 'tools[0].name is too long' } });
      const res = await responsesOnly.invoke(userTurn('hi', { parameters: { agent: { llm: { provider: 'openai', model: 'gpt-x' } } } }));
      const body = await res.json();
      expect(body.status.message).toContain('tools[0].name is too long');
      expect(responsesOnly.model.unrouted.length).toBeGreaterThan(0);
      expect(new Set(responsesOnly.model.unrouted)).toEqual(new Set(['POST /v1/chat/completions']));
    } finally {
      await responsesOnly.close();
    }
  });

  it('finds the API under /v1 when OPENAI_BASE_URL is a bare origin', async () => {
    const bare = await startHarness({ env: (modelUrl) => ({ OPENAI_BASE_URL: modelUrl.replace(/\/v1$/, '') }) });
    try {
      bare.model.script([{ text: 'found it' }, { text: 'straight there' }]);
      const agent = { llm: { provider: 'openai', model: 'gpt-x' } };
      const first = await bare.invoke(userTurn('hi', { parameters: { agent } }));
      expect((await first.json()).data.outputs.messages.at(-1).content).toBe('found it');
      expect(bare.model.unrouted).toEqual(['POST /responses', 'POST /chat/completions']);
      const second = await bare.invoke(userTurn('again', { parameters: { agent } }));
      expect((await second.json()).data.outputs.messages.at(-1).content).toBe('straight there');
      expect(bare.model.requests.map((r) => r.path)).toEqual(['/v1/responses', '/v1/responses']);
      expect(bare.model.unrouted).toHaveLength(2);
    } finally {
      await bare.close();
    }
  });

  it('reports a server that speaks neither as a failed dependency that names the base URL', async () => {
    const neither = await startHarness({ protocols: [] });
    try {
      const res = await neither.invoke(userTurn('hi', { parameters: { agent: { llm: { provider: 'openai', model: 'gpt-x' } } } }));
      const body = await res.json();
      expect(res.status).toBe(424);
      expect(body.status.message).toContain('answered 404');
      expect(body.status.message).toContain(new URL(neither.model.url).host);
      expect(neither.model.unrouted).toEqual(['POST /v1/responses', 'POST /v1/chat/completions']);
    } finally {
      await neither.close();
    }
  });
});
