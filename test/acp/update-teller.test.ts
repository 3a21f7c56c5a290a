import type * as acp from '@agentclientprotocol/sdk';
import { describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../src/contract/events.ts';
import { claude } from '../../src/harnesses/claude.ts';
import { codex } from '../../src/harnesses/codex.ts';
import { pi } from '../../src/harnesses/pi.ts';
import type { Harness } from '../../src/harnesses/harness.ts';
import { UpdateTeller } from '../../src/harnesses/update-teller.ts';

/**
 * How ACP updates become native events, for the orders the harnesses send them in
 * (reference/acp-harnesses.md §4), including the ones a race produces: what the end-to-end harness
 * tests meet only now and then.
 */

function teller(harness: Harness, gated = true) {
  const events: AgentEvent[] = [];
  const t = new UpdateTeller({ turnId: 't', dialect: harness.dialect, gated }, (e) => events.push(e));
  const calls = () => events.filter((e) => e.type === 'tool_call').map((e) => e.data);
  const results = () => events.filter((e) => e.type === 'tool_result').map((e) => e.data);
  return { t, events, calls, results };
}

const write = { path: 'hello.txt', content: 'hi' };
/** Pi's gate asks under an id of its own, the tool's name as title and its input as JSON (pi.ts). */
const piQuestion = { toolCallId: 'pi-ui-1', kind: 'other', title: 'write', rawInput: { method: 'confirm', title: 'write', message: JSON.stringify(write) } };
type Update = acp.SessionNotification['update'];
const piCall: Update[] = [
  { sessionUpdate: 'tool_call', toolCallId: 'call_1', title: 'write', kind: 'edit', status: 'pending', rawInput: { partialArgs: '{"pa' } },
  { sessionUpdate: 'tool_call_update', toolCallId: 'call_1', status: 'pending', rawInput: write },
  { sessionUpdate: 'tool_call_update', toolCallId: 'call_1', status: 'in_progress', rawInput: write },
];
const piDone: Update = { sessionUpdate: 'tool_call_update', toolCallId: 'call_1', status: 'completed', content: [{ type: 'content', content: { type: 'text', text: 'written' } }] };

describe('UpdateTeller', () => {
  it('Claude: a call is told once its input is known, before its result', () => {
    const { t, calls, results } = teller(claude);
    t.update({ sessionUpdate: 'tool_call', toolCallId: 'toolu_1', title: 'Write', kind: 'edit', status: 'pending', rawInput: {}, _meta: { claudeCode: { toolName: 'Write' } } });
    t.update({ sessionUpdate: 'tool_call_update', toolCallId: 'toolu_1', rawInput: { file_path: 'a', content: 'b' } });
    const asked = t.describe({ toolCallId: 'toolu_1', title: 'Write a', kind: 'edit', rawInput: { file_path: 'a', content: 'b' } });
    expect(asked).toMatchObject({ toolCallId: 'toolu_1', toolName: 'Write', input: { file_path: 'a', content: 'b' }, kind: 'edit' });
    t.tell(asked.toolCallId);
    t.update({ sessionUpdate: 'tool_call_update', toolCallId: 'toolu_1', status: 'completed', rawOutput: 'File created' });
    expect(calls()).toEqual([{ id: 'toolu_1', name: 'Write', input: { file_path: 'a', content: 'b' } }]);
    expect(results()).toEqual([{ id: 'toolu_1', output: 'File created', is_error: false }]);
  });

  it('Pi: the question about a started call is about that call, told once under its id', () => {
    const { t, calls, results } = teller(pi);
    for (const u of piCall) t.update(u);
    expect(calls()).toEqual([]);
    const asked = t.describe(piQuestion);
    expect(asked).toMatchObject({ toolCallId: 'call_1', toolName: 'write', input: write, kind: 'edit' });
    t.tell(asked.toolCallId);
    t.update(piDone);
    expect(calls()).toEqual([{ id: 'call_1', name: 'write', input: write }]);
    expect(results()).toEqual([{ id: 'call_1', output: 'written', is_error: false }]);
  });

  it('Pi: a question that overtakes its call’s updates stands for the call, which is joined to it', () => {
    const { t, calls, results } = teller(pi);
    const asked = t.describe(piQuestion);
    expect(asked).toMatchObject({ toolCallId: 'pi-ui-1', toolName: 'write', input: write });
    t.tell(asked.toolCallId);
    for (const u of piCall) t.update(u);
    t.update(piDone);
    expect(calls()).toEqual([{ id: 'pi-ui-1', name: 'write', input: write }]);
    expect(results()).toEqual([{ id: 'pi-ui-1', output: 'written', is_error: false }]);
  });

  it('an answer recorded for a paused call tells the call raised again as the paused one', () => {
    const { t, calls, results } = teller(pi);
    for (const u of piCall) t.update(u);
    const asked = t.describe(piQuestion);
    t.tell(asked.toolCallId, 'call_paused');
    t.update(piDone);
    expect(calls()).toEqual([]);
    expect(results()).toEqual([{ id: 'call_paused', output: 'written', is_error: false }]);
  });

  it('Codex: a denied call the harness never answers (it ends its turn) gets the denial as its result', () => {
    const { t, calls, results } = teller(codex);
    const asked = t.describe({ toolCallId: 'call_9', kind: 'execute', title: 'rm x', rawInput: { call_id: 'call_9', turn_id: 'z', command: ['/bin/bash', '-lc', 'rm x'], cwd: '/s' } });
    expect(asked).toMatchObject({ toolName: 'exec_command', input: { command: ['/bin/bash', '-lc', 'rm x'], cwd: '/s' } });
    t.tell(asked.toolCallId);
    t.denied(asked.toolCallId);
    expect(t.end()).toBe(true);
    expect(calls()).toHaveLength(1);
    expect(results()).toEqual([{ id: 'call_9', output: 'Tool call denied', is_error: true, denied: true }]);
  });

  it('a command’s terminal output (Zed’s _meta.terminal_output) is its result', () => {
    const { t, results } = teller(pi, false);
    t.update({ sessionUpdate: 'tool_call', toolCallId: 'b', title: 'ls', kind: 'execute', status: 'in_progress', rawInput: { command: 'ls' } });
    t.update({ sessionUpdate: 'tool_call_update', toolCallId: 'b', status: 'in_progress', _meta: { terminal_output: { terminal_id: 'b', data: 'a.txt\n' } } });
    t.update({ sessionUpdate: 'tool_call_update', toolCallId: 'b', status: 'completed', _meta: { terminal_output: { terminal_id: 'b', data: 'b.txt\n' }, terminal_exit: { terminal_id: 'b', exit_code: 0 } } });
    expect(results()).toEqual([{ id: 'b', output: { exit_code: 0, output: 'a.txt\nb.txt\n' }, is_error: false }]);
  });

  it('once stopped (the turn paused), tells nothing more', async () => {
    const { t, events } = teller(pi);
    for (const u of piCall) t.update(u);
    t.tell(t.describe(piQuestion).toolCallId);
    const told = events.length;
    await t.stopWhenSettled(60_000, Promise.resolve());
    t.update({ sessionUpdate: 'tool_call_update', toolCallId: 'call_1', status: 'failed', rawOutput: 'Operation aborted' });
    t.update({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'bye' } });
    expect(events).toHaveLength(told);
    expect(t.end()).toBe(false);
  });

  it('paused while a call approved before the pause runs: tells its result, nothing else, then stops', async () => {
    const { t, events, results } = teller(pi);
    for (const u of piCall) t.update(u);
    const approved = t.describe(piQuestion).toolCallId;
    t.tell(approved);
    t.approved(approved);
    let stopped = false;
    const stopping = t.stopWhenSettled(60_000, Promise.resolve()).then(() => (stopped = true));
    t.update({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'meanwhile' } });
    await Promise.resolve();
    expect(stopped).toBe(false);
    t.update(piDone);
    await stopping;
    expect(results()).toEqual([{ id: 'call_1', output: 'written', is_error: false }]);
    expect(events.some((e) => e.type === 'message_delta')).toBe(false);
    t.update({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'bye' } });
    expect(events.some((e) => e.type === 'message_delta')).toBe(false);
  });

  it('paused before the harness asked about a call decided for the turn: that call still runs to its result', async () => {
    const { t, results } = teller(pi);
    for (const u of piCall) t.update(u);
    let asked!: () => void;
    let stopped = false;
    const stopping = t.stopWhenSettled(60_000, new Promise<void>((resolve) => (asked = resolve))).then(() => (stopped = true));
    // Asked about only now, after the pause began: approved by its recorded decision.
    const late = t.describe(piQuestion).toolCallId;
    t.tell(late);
    t.approved(late);
    asked();
    await Promise.resolve();
    expect(stopped).toBe(false);
    t.update(piDone);
    await stopping;
    expect(results()).toEqual([{ id: 'call_1', output: 'written', is_error: false }]);
  });

  it('paused while an approved call runs past the limit: stops without it', async () => {
    const { t, results } = teller(pi);
    for (const u of piCall) t.update(u);
    const approved = t.describe(piQuestion).toolCallId;
    t.tell(approved);
    t.approved(approved);
    await t.stopWhenSettled(20, Promise.resolve());
    t.update(piDone);
    expect(results()).toEqual([]);
  });
});
