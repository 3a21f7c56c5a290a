import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, sid, startHarness, type Harness } from '../support/harness.ts';

/**
 * src/agent/turn.ts against servers whose tool-call ids are not unique in a conversation: some
 * number their calls afresh in every answer (`call_0`, Fireworks' `list_dir:0`), some give every
 * call of one answer the same id. A conversation posted back as the turn returned it must stay
 * one agentd accepts, each call run once, with its own result.
 */

type ChatBody = { model?: string; stream?: boolean; messages: Array<{ role: string }> };

let upstream: Server;
let h: Harness;

function completion(message: Record<string, unknown>, finish: string) {
  return { id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message, finish_reason: finish }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } };
}
const call = (id: string, path: string) => ({ id, type: 'function', function: { name: 'write', arguments: JSON.stringify({ path, content: path }) } });

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as ChatBody;
      const userSpokeLast = body.messages.at(-1)?.role === 'user';
      const turn = body.messages.filter((m) => m.role === 'user').length;
      let answer;
      if (!userSpokeLast) answer = completion({ role: 'assistant', content: 'done' }, 'stop');
      else if (body.model === 'numbered-per-answer') answer = completion({ role: 'assistant', content: null, tool_calls: [call('call_0', `t${turn}.txt`)] }, 'tool_calls');
      else answer = completion({ role: 'assistant', content: null, tool_calls: [call('same', 'a.txt'), call('same', 'b.txt')] }, 'tool_calls');
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
  h = await startHarness({ env: { OLLAMA_BASE_URL: url } });
});
afterAll(async () => {
  await h?.close();
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
});

const agent = (model: string) => ({ llm: { provider: 'ollama', model }, tools: [builtin('write')], runner: { permissions: { default: 'allow' } } });

type Out = { role: string; content: string; tool_call_id?: string; tool_name?: string };

async function run(model: string, session: string, messages: unknown[]): Promise<Out[]> {
  const res = await h.invoke(invokeBody(messages, agent(model), { session_id: session }));
  const json = await res.json();
  expect(res.status, JSON.stringify(json.status)).toBe(200);
  return json.data.outputs.messages as Out[];
}

describe('tool-call ids a server repeats', () => {
  it('a server that numbers its calls afresh in every answer: the conversation goes on, turn after turn', async () => {
    const session = sid('call-ids');
    const history: unknown[] = [];
    const ids: string[] = [];
    for (let turn = 1; turn <= 3; turn++) {
      history.push({ role: 'user', content: `turn ${turn}` });
      const out = await run('numbered-per-answer', session, history);
      const calls = out.filter((m) => m.role === 'tool' && m.tool_name);
      expect(calls).toHaveLength(1);
      ids.push(calls[0]!.tool_call_id!);
      expect(out.filter((m) => m.role === 'tool' && !m.tool_name).map((m) => m.tool_call_id)).toEqual([calls[0]!.tool_call_id]);
      history.push(...out);
    }
    expect(new Set(ids).size).toBe(3);
    expect(ids[0]).toBe('call_0');
  });

  it('two calls of one answer under one id: each runs once, each keeps its own call and result', async () => {
    const session = sid('call-ids');
    const out = await run('same-id-twice', session, [{ role: 'user', content: 'go' }]);
    const calls = out.filter((m) => m.role === 'tool' && m.tool_name);
    const results = out.filter((m) => m.role === 'tool' && !m.tool_name);
    expect(calls).toHaveLength(2);
    expect(new Set(calls.map((c) => c.tool_call_id)).size).toBe(2);
    expect(results.map((r) => r.tool_call_id)).toEqual(calls.map((c) => c.tool_call_id));
    expect(results.map((r) => r.content)).toEqual([expect.stringContaining('a.txt'), expect.stringContaining('b.txt')]);
    // Posted back, it is a conversation agentd accepts.
    await run('same-id-twice', session, [{ role: 'user', content: 'go' }, ...out, { role: 'user', content: 'and now?' }]);
  });
});
