import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandboxAvailable } from '../../src/agent/tools/sandbox.ts';
import { builtin, invokeBody, readJson, sid, startHarness, template, type Harness } from '../support/harness.ts';

/**
 * design.md §6 "Safety", end to end: a model-scripted tool call through HTTP cannot reach outside
 * its session folder, the host's files or the network.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h.close());

const agent = template({ tools: [builtin('bash'), builtin('read'), builtin('write')], mode: 'allow' });

/** Runs one scripted tool call in a fresh session and returns its result message and the turn. */
async function call(name: string, input: Record<string, unknown>, session = sid('box')) {
  h.model.script([{ toolCalls: [{ id: 'call_x', name, input }] }, { text: 'done' }]);
  const json = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'go' }], agent, { session_id: session })));
  const result = json.data.outputs.messages.find((m: { tool_call_id?: string; is_error?: boolean }) => m.tool_call_id === 'call_x' && m.is_error !== undefined);
  return { session, json, result: result as { content: string; is_error: boolean } };
}

const bwrap = await sandboxAvailable();

describe.runIf(bwrap)('bash under bubblewrap', () => {
  it('runs in the session folder, whose writes land on the host; the host /etc is not visible', async () => {
    const { session, json, result } = await call('bash', { command: 'cat /etc/hostname > out.txt; echo $?; pwd' });
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(result.is_error).toBe(false);
    expect(result.content).toMatch(/^exit code 0/);
    // cat failed inside the sandbox: /etc/hostname is not among the files it binds.
    expect(result.content).toMatch(/\n1\n/);
    expect(result.content).toContain(h.sessionDir(session));
    expect(existsSync(`${h.sessionDir(session)}/out.txt`)).toBe(true);
    expect(await readFile(`${h.sessionDir(session)}/out.txt`, 'utf8')).toBe('');
  });

  it('writes outside the session folder never reach the host', async () => {
    const tag = Math.random().toString(36).slice(2);
    const targets = [`/tmp/escape-${tag}`, `${h.dataDir}/escape-${tag}`, `${h.dataDir}/sessions/escape-${tag}`, `/usr/escape-${tag}`, `/escape-${tag}`];
    const command = targets.map((t) => `echo x > ${t}; echo "${t}=$?"`).join('; ') + `; touch ../escape-${tag}; echo "parent=$?"`;
    const { session, result } = await call('bash', { command });
    expect(result.is_error).toBe(false);
    for (const target of targets) expect(existsSync(target), target).toBe(false);
    expect(existsSync(`${h.sessionDir(session)}/../escape-${tag}`)).toBe(false);
    // The system is read-only; what is writable (/tmp and the folders above the session) is a private tmpfs.
    expect(result.content).toMatch(new RegExp(`/usr/escape-${tag}=[1-9]`));
  });

  it('has no network: the fake model on the host loopback cannot be reached', async () => {
    const port = new URL(h.model.url).port;
    const { result } = await call('bash', { command: `curl -sS -m 3 http://127.0.0.1:${port}/v1/models; echo "curl=$?"; getent hosts example.com; echo "dns=$?"` });
    expect(result.content).toMatch(/curl=[1-9]/);
    expect(result.content).toMatch(/dns=[1-9]/);
    expect(result.content).not.toContain('fake-model');
  });

  it('does not see the server environment', async () => {
    process.env.AGENTD_TEST_LEAK = 'leaky-value-123';
    try {
      const { result } = await call('bash', { command: 'env' });
      expect(result.content).not.toContain('leaky-value-123');
      expect(result.content).not.toContain('sk-test-openai-key');
    } finally {
      delete process.env.AGENTD_TEST_LEAK;
    }
  });

  it('a command over its time limit is an error result, and the turn goes on', async () => {
    const { json, result } = await call('bash', { command: 'sleep 10', timeout_ms: 200 });
    expect(result).toMatchObject({ is_error: true, content: expect.stringMatching(/timed out/) });
    expect(json.data.outputs.stop_reason).toBe('end_turn');
  });

  it('a symlink planted by bash cannot be read through by the file tools', async () => {
    const session = sid('link');
    await call('bash', { command: 'ln -s /etc/passwd passwd-link' }, session);
    const { result } = await call('read', { path: 'passwd-link' }, session);
    expect(result.is_error).toBe(true);
    expect(result.content).not.toContain('root:');
  });
});

describe.runIf(!bwrap)('bash without bubblewrap', () => {
  it('is refused with an error result that says how to fix it', async () => {
    const { result } = await call('bash', { command: 'echo hi > out.txt' });
    expect(result).toMatchObject({ is_error: true, content: expect.stringContaining('bubblewrap') });
  });
});

describe('file tools stay in the session folder', () => {
  it('a read of ../../x is an error result and the turn completes', async () => {
    const { json, result } = await call('read', { path: '../../x' });
    expect(result.is_error).toBe(true);
    expect(json.data.outputs.stop_reason).toBe('end_turn');
    expect(json.data.outputs.messages.at(-1)).toEqual({ role: 'assistant', content: 'done' });
  });

  it('an absolute path outside is refused too, and a secret next to the session is not read', async () => {
    const session = sid('abs');
    await call('write', { path: 'inside.txt', content: 'x' }, session);
    const secret = `${h.sessionDir(session)}/../secret.txt`;
    await writeFile(secret, 'top secret');
    for (const path of ['../secret.txt', secret, '/etc/passwd']) {
      const { result } = await call('read', { path }, session);
      expect(result.is_error, path).toBe(true);
      expect(result.content).not.toContain('top secret');
      expect(result.content).not.toContain('root:');
    }
  });

  it('a write outside the folder is refused and nothing lands there', async () => {
    const tag = Math.random().toString(36).slice(2);
    const { result } = await call('write', { path: `../../escape-${tag}.txt`, content: 'x' });
    expect(result.is_error).toBe(true);
    expect(existsSync(`${h.dataDir}/sessions/escape-${tag}.txt`)).toBe(false);
  });
});
