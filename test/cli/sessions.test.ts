import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtin, invokeBody, readJson, startHarness, template, type Harness } from '../support/harness.ts';
import { agentdCommand } from '../support/child-server.ts';

/** `agentd sessions list|show` as a user runs them, against a real server. */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
  h.model.script({ text: 'hello back', usage: { input: 7, output: 3 } });
  await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], template(), { session_id: 'cli-s-talk' })));
  h.model.script({ toolCalls: [{ name: 'write', input: { path: 'a.txt', content: 'x' } }] });
  await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write' }], template({ tools: [builtin('write')], mode: 'ask' }), { session_id: 'cli-s-paused-with-a-rather-long-name' })));
});
afterAll(async () => h.close());

const agentd = (args: string[], columns?: number) =>
  agentdCommand(args, { AGENTD_URL: h.url, AGENTD_API_KEY: h.apiKey, AGENTD_PROJECT_ID: h.projectId, ...(columns ? { COLUMNS: String(columns) } : {}) });

describe('agentd sessions', () => {
  it('lists sessions newest first with their last turn and what waits for an answer', async () => {
    const run = await agentd(['sessions', 'list', '--prefix', 'cli-s-']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^session\s+last used\s+last turn\s+pending\s+tokens$/);
    expect(lines[1]).toMatch(/^cli-s-paused-with-a-rather-long-name\s.*paused \/ paused\s+1\s/);
    expect(lines[2]).toMatch(/^cli-s-talk\s.*completed \/ end_turn\s+10$/);
  });

  it('narrows to sessions waiting for an answer, and prints JSON when asked', async () => {
    const run = await agentd(['sessions', 'list', '--prefix', 'cli-s-', '--pending', '--json']);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout).sessions.map((s: { id: string }) => s.id)).toEqual(['cli-s-paused-with-a-rather-long-name']);
  });

  it('shows one session: its turns and the interaction waiting for an answer', async () => {
    const run = await agentd(['sessions', 'show', 'cli-s-paused-with-a-rather-long-name']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^session cli-s-paused-with-a-rather-long-name\n {2}created \S+ \S+ · last used /);
    expect(run.stdout).toMatch(/paused\s+paused/);
    expect(run.stdout).toMatch(/waiting for an answer:\n.*\n\S+\s+user_approval\s+write\s+\{"path":"a.txt","content":"x"\}/);
  });

  it('is the error envelope\'s message on a missing session, with exit status 1', async () => {
    const run = await agentd(['sessions', 'show', 'cli-s-nope']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^agentd sessions: 404 not-found: session "cli-s-nope" does not exist/);
  });

  it('says what to type on a wrong command line, with exit status 2', async () => {
    expect((await agentd(['sessions', 'list', '--pending', '--live'])).stderr).toMatch(/give one/);
    expect((await agentd(['sessions', 'show'])).code).toBe(2);
    // The help says "at most 200": past it is the command line's fault, not the server's.
    const tooMany = await agentd(['sessions', 'list', '--limit', '500']);
    expect(tooMany.code).toBe(2);
    expect(tooMany.stderr).toMatch(/--limit must be a whole number from 1 to 200, got "500"/);
    expect((await agentd(['sessions', 'drop'])).stderr).toMatch(/use list or show/);
    const help = await agentd(['sessions', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: agentd sessions list/);
  });
});
