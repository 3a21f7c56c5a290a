import { existsSync } from 'node:fs';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/** Spec §3.2 and design.md §4 "Fourth permission mode": allow, ask, allow_reads, deny, per-tool overrides. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const writeCall = (content = 'written') => ({ toolCalls: [{ name: 'write', input: { path: 'out.txt', content } }] });

async function run(agent: unknown, script: Parameters<Harness['model']['script']>[0]) {
  const session = sid('perm');
  h.model.script(script);
  h.model.reset();
  const json = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: session })));
  return { session, json, out: json.data.outputs, file: `${h.sessionDir(session)}/out.txt` };
}

describe('allow', () => {
  it('never pauses: the write runs and the file lands in the session folder', async () => {
    const { out, file } = await run(template({ tools: [builtin('write')], mode: 'allow' }), [writeCall('hello'), { text: 'done' }]);
    expect(out.stop_reason).toBe('end_turn');
    expect(out.pending_interaction).toBeUndefined();
    expect(await readFile(file, 'utf8')).toBe('hello');
  });
});

describe('ask', () => {
  it('pauses before the write, with a pending user_approval interaction and no file', async () => {
    const { session, out, file } = await run(template({ tools: [builtin('write')], mode: 'ask' }), [writeCall('hello'), { text: 'never reached' }]);
    expect(out.stop_reason).toBe('paused');
    const pending = out.pending_interaction;
    expect(pending).toMatchObject({
      id: expect.any(String),
      kind: 'user_approval',
      tool: 'write',
      payload: { tool_call_id: expect.any(String), tool_name: 'write', input: { path: 'out.txt', content: 'hello' } },
    });
    const call = out.messages.at(-1);
    expect(call).toMatchObject({ role: 'tool', tool_name: 'write', tool_call_id: pending.payload.tool_call_id, approval: { id: pending.id } });
    expect(call.approval).toEqual({ id: pending.id });
    const record = await h.store.interactions.get(h.projectId, pending.id);
    expect(record).toMatchObject({ status: 'pending', kind: 'user_approval', session_id: session, tool_call_id: pending.payload.tool_call_id });
    expect(existsSync(file)).toBe(false);
    expect(h.model.requests).toHaveLength(1);
  });

  it('pauses on reads too', async () => {
    const { out } = await run(template({ tools: [builtin('ls')], mode: 'ask' }), [{ toolCalls: [{ name: 'ls', input: {} }] }]);
    expect(out.stop_reason).toBe('paused');
    expect(out.pending_interaction.tool).toBe('ls');
  });
});

describe('allow_reads', () => {
  it('runs read and ls without pausing, then pauses on write', async () => {
    const session = sid('reads');
    await mkdir(h.sessionDir(session), { recursive: true });
    await writeFile(`${h.sessionDir(session)}/in.txt`, 'input data');
    h.model.script([
      { toolCalls: [{ id: 'c_ls', name: 'ls', input: {} }, { id: 'c_read', name: 'read', input: { path: 'in.txt' } }] },
      { toolCalls: [{ id: 'c_write', name: 'write', input: { path: 'out.txt', content: 'x' } }] },
    ]);
    const agent = template({ tools: [builtin('read'), builtin('ls'), builtin('write')], mode: 'allow_reads' });
    const json = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: session })));
    const out = json.data.outputs;
    const results = out.messages.filter((m: { is_error?: boolean }) => m.is_error !== undefined);
    expect(results.map((m: { tool_call_id: string }) => m.tool_call_id).sort()).toEqual(['c_ls', 'c_read']);
    expect(results.find((m: { tool_call_id: string }) => m.tool_call_id === 'c_read').content).toContain('input data');
    expect(results.find((m: { tool_call_id: string }) => m.tool_call_id === 'c_ls').content).toContain('in.txt');
    expect(out.stop_reason).toBe('paused');
    expect(out.pending_interaction).toMatchObject({ kind: 'user_approval', tool: 'write', payload: { tool_call_id: 'c_write' } });
    expect(existsSync(`${h.sessionDir(session)}/out.txt`)).toBe(false);
  });

  it('is the default when the template names no mode', async () => {
    const agent = { ...template({ tools: [builtin('write')] }), runner: undefined };
    const { out } = await run(agent, [writeCall()]);
    expect(out.stop_reason).toBe('paused');
  });
});

describe('deny', () => {
  it('refuses the call, tells the model, and the turn ends normally', async () => {
    const { out, file } = await run(template({ tools: [builtin('write')], mode: 'deny' }), [writeCall(), { text: 'I was not allowed to write.' }]);
    expect(out.stop_reason).toBe('end_turn');
    expect(out.pending_interaction).toBeUndefined();
    expect(existsSync(file)).toBe(false);
    const result = out.messages.find((m: { is_error?: boolean }) => m.is_error !== undefined);
    expect(result).toMatchObject({ role: 'tool', is_error: true, content: expect.stringMatching(/denied/i) });
    expect(out.messages.at(-1)).toEqual({ role: 'assistant', content: 'I was not allowed to write.' });
    const toolMessage = h.model.requests.at(-1)!.messages.find((m) => m.role === 'tool');
    // The policy's reason is what the model reads: it names the tool and says it may not run.
    expect(toolMessage?.content).toMatch(/not permitted|denied/i);
    expect(toolMessage?.content).toContain('write');
  });

  it('applies to reads as well', async () => {
    const { out } = await run(template({ tools: [builtin('ls')], mode: 'deny' }), [{ toolCalls: [{ name: 'ls', input: {} }] }, { text: 'ok' }]);
    expect(out.messages.find((m: { is_error?: boolean }) => m.is_error !== undefined)).toMatchObject({ is_error: true });
    expect(out.stop_reason).toBe('end_turn');
  });
});

describe('per-tool permission overrides the default mode', () => {
  it('permission "ask" on a tool pauses under allow', async () => {
    const { out, file } = await run(template({ tools: [builtin('write', 'ask')], mode: 'allow' }), [writeCall(), { text: 'x' }]);
    expect(out.stop_reason).toBe('paused');
    expect(existsSync(file)).toBe(false);
  });

  it('permission "allow" on a tool runs it under ask', async () => {
    const { out, file } = await run(template({ tools: [builtin('write', 'allow')], mode: 'ask' }), [writeCall('free'), { text: 'x' }]);
    expect(out.stop_reason).toBe('end_turn');
    expect(await readFile(file, 'utf8')).toBe('free');
  });

  it('permission "deny" on a tool refuses it under allow while others run', async () => {
    const { out, file } = await run(template({ tools: [builtin('write', 'deny'), builtin('ls')], mode: 'allow' }), [
      { toolCalls: [{ id: 'c_w', name: 'write', input: { path: 'out.txt', content: 'x' } }, { id: 'c_l', name: 'ls', input: {} }] },
      { text: 'x' },
    ]);
    const byId = (id: string) => out.messages.find((m: { tool_call_id?: string; is_error?: boolean }) => m.tool_call_id === id && m.is_error !== undefined);
    expect(byId('c_w')).toMatchObject({ is_error: true });
    expect(byId('c_l')).toMatchObject({ is_error: false });
    expect(existsSync(file)).toBe(false);
  });

  it('permission "allow" on ls under allow_reads does not unlock write', async () => {
    const { out } = await run(template({ tools: [builtin('ls', 'allow'), builtin('write')], mode: 'allow_reads' }), [writeCall()]);
    expect(out.stop_reason).toBe('paused');
  });
});

describe('the tool list is exact', () => {
  it('a tool the template does not list is not offered to the model, and a call to it is an error result', async () => {
    const { out, file } = await run(template({ tools: [builtin('ls')], mode: 'allow' }), [writeCall(), { text: 'x' }]);
    expect(h.model.requests[0]!.tools).toEqual(['ls']);
    expect(existsSync(file)).toBe(false);
    expect(out.messages.find((m: { is_error?: boolean }) => m.is_error !== undefined)).toMatchObject({ is_error: true });
  });
});
