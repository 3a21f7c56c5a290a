import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { expectError, invokeBody, readJson, sid, startHarness, type Harness } from '../support/harness.ts';
import { waitFor } from '../sessions-api/client.ts';
import { harnessSuite, type HarnessProfile } from './suite.ts';

/** Issue 20: Claude Code as the agent of a turn, over ACP, against the fake model's Messages API. */

const KEY = 'sk-ant-test-key-7c1d';

const profile: HarnessProfile = {
  kind: 'claude',
  llm: { provider: 'anthropic', model: 'fake-model' },
  env: (url) => ({ ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: KEY }),
  key: KEY,
  write: (folder, file, content) => ({ name: 'Write', input: { file_path: path.join(folder, file), content } }),
  writeTool: 'Write',
  writeEntry: 'write',
  writeInput: (content) => ({ content }),
  read: (file) => ({ name: 'Read', input: { file_path: file } }),
  run: (command) => ({ name: 'Bash', input: { command } }),
  readTool: 'Read',
  mcpCall: (server, tool, input) => ({ name: `mcp__${server}__${tool}`, input }),
  instructionsFile: 'CLAUDE.md',
  settingsFile: '.claude/settings.json',
  skillsDir: '.claude/skills',
  foreignProvider: 'ollama',
};

const agent = (mode = 'allow') => ({
  instructions: { agents_md: 'You are a test agent.' },
  llm: profile.llm,
  harness: { kind: 'claude' },
  runner: { permissions: { default: mode } },
});

harnessSuite(profile, (harness: () => Harness) => {
  it('reports the turn’s token usage, as Claude reports it', async () => {
    const h = harness();
    h.model.script({ text: 'counted', usage: { input: 100, output: 20 } });
    const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'hi' }], agent())));
    expect(body.data.outputs.usage).toMatchObject({ input: 100, output: 20, total: 120 });
  }, 60_000);

  it('an unknown kind is a 400 that lists the known ones', async () => {
    await expectError(await harness().invoke(invokeBody([{ role: 'user', content: 'hi' }], { harness: { kind: 'nope' } })), 400, 'unsupported-kind', /claude, codex, pi/);
  });

  it('AGENTD_HARNESSES takes the harnesses named, none, or all by default; anything else stops the start, saying what it takes', () => {
    expect(loadConfig({}).harnesses).toEqual(['claude', 'codex', 'pi']);
    expect(loadConfig({ AGENTD_HARNESSES: ' Codex, pi ' }).harnesses).toEqual(['codex', 'pi']);
    expect(loadConfig({ AGENTD_HARNESSES: 'none' }).harnesses).toEqual([]);
    expect(() => loadConfig({ AGENTD_HARNESSES: 'claude,agentd' })).toThrow('AGENTD_HARNESSES names "agentd", which is no harness: give some of claude, codex, pi (comma-separated), or none');
  });

  describe('harness processes are bounded', () => {
    it('past AGENTD_HARNESS_MAX_PROCESSES a turn gets 503 with retry-after; a seat freed is taken again', async () => {
      const small = await startHarness({ env: (url) => ({ ...profile.env(url), AGENTD_HARNESS_MAX_PROCESSES: '1' }) });
      try {
        small.model.reset();
        let first = true;
        small.model.script(() => (first ? ((first = false), { text: 'slow', latencyMs: 3_000 }) : { text: 'quick' }));
        const slow = small.invoke(invokeBody([{ role: 'user', content: 'slow' }], agent(), { session_id: sid('seat-a') }));
        await waitFor(async () => small.model.requests.length > 0, 'the first turn to reach the model');
        const refused = await small.invoke(invokeBody([{ role: 'user', content: 'quick' }], agent(), { session_id: sid('seat-b') }));
        expect(refused.headers.get('retry-after')).toBe('5');
        await expectError(refused, 503, 'unavailable', /AGENTD_HARNESS_MAX_PROCESSES/);
        expect((await slow).status).toBe(200);
        expect((await small.invoke(invokeBody([{ role: 'user', content: 'quick' }], agent(), { session_id: sid('seat-c') }))).status).toBe(200);
      } finally {
        await small.close();
      }
    }, 60_000);
  });

  describe('a process parked for the session’s next turn', () => {
    it('is reused by the next turn, not by a turn started otherwise, and ends after its time or with the server', async () => {
      const parking = await startHarness({ env: (url) => ({ ...profile.env(url), AGENTD_HARNESS_PARK_MS: '1500' }) });
      // The bwrap that binds the session folder: one per harness process of the session.
      const pids = (session: string) => spawnSync('pgrep', ['-f', '--', `--bind ${parking.sessionDir(session)} `], { encoding: 'utf8' }).stdout.trim();
      try {
        const session = sid('parked');
        const turn = async (text: string, mode = 'allow') => {
          parking.model.script({ text });
          const body = await readJson(await parking.invoke(invokeBody([{ role: 'user', content: text }], agent(mode), { session_id: session })));
          expect(body.data.outputs.messages.at(-1)).toMatchObject({ content: text });
        };
        await turn('one');
        const first = pids(session);
        expect(first).not.toBe('');
        await turn('two');
        expect(pids(session)).toBe(first);
        // Another mode means other settings: a process started with the old ones is not reused.
        await turn('three', 'ask');
        const third = pids(session);
        expect(third).not.toBe('');
        expect(third).not.toBe(first);
        await waitFor(async () => pids(session) === '', 'the parked process to end after its time');
        await turn('four');
        // A deleted session's parked process goes with it: a session made anew under the id gets a
        // process started on its new folder, and what it writes lands there.
        expect(pids(session)).not.toBe('');
        expect((await fetch(`${parking.url}/api/sessions/${session}`, { method: 'DELETE', headers: { authorization: `ApiKey ${parking.apiKey}` } })).status).toBe(204);
        await waitFor(async () => pids(session) === '', 'the deleted session’s parked process to end');
        parking.model.script([{ toolCalls: [{ name: 'Write', input: { file_path: path.join(parking.sessionDir(session), 'again.txt'), content: 'new' } }] }, { text: 'ok' }]);
        await readJson(await parking.invoke(invokeBody([{ role: 'user', content: 'write' }], agent(), { session_id: session })));
        expect(await readFile(path.join(parking.sessionDir(session), 'again.txt'), 'utf8')).toBe('new');
      } finally {
        await parking.close();
      }
      expect(spawnSync('pgrep', ['-f', parking.dataDir], { encoding: 'utf8' }).stdout.trim()).toBe('');
    }, 90_000);
  });

  describe("the session folder's own .claude settings", () => {
    const put = (h: Harness, session: string, file: string, body: string) =>
      fetch(`${h.url}/api/sessions/${session}/files?project_id=${h.projectId}&path=${encodeURIComponent(file)}`, {
        method: 'PUT',
        headers: { authorization: `ApiKey ${h.apiKey}`, 'content-type': 'application/octet-stream' },
        body,
      });

    it('an uploaded .claude/settings.json that allows every tool does not lift deny', async () => {
      const h = harness();
      const session = sid('claude-uploaded-settings');
      expect((await put(h, session, '.claude/settings.json', JSON.stringify({ permissions: { allow: ['Write', 'Bash', 'Edit'] } }))).status).toBe(201);
      h.model.script([{ toolCalls: [{ name: 'Write', input: { file_path: path.join(h.sessionDir(session), 'pwned.txt'), content: 'x' } }] }, { text: 'done' }]);
      const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'write' }], agent('deny'), { session_id: session })));
      expect(body.data.outputs.stop_reason).toBe('end_turn');
      expect(existsSync(path.join(h.sessionDir(session), 'pwned.txt'))).toBe(false);
    }, 60_000);

    it('a .claude/settings.local.json the agent wrote under allow does not lift ask in the next turn', async () => {
      const h = harness();
      const session = sid('claude-written-settings');
      const folder = h.sessionDir(session);
      const local = JSON.stringify({ permissions: { allow: ['Write', 'Bash'], defaultMode: 'acceptEdits' } });
      h.model.script([{ toolCalls: [{ name: 'Write', input: { file_path: path.join(folder, '.claude/settings.local.json'), content: local } }] }, { text: 'configured' }]);
      await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'set up' }], agent('allow'), { session_id: session })));
      expect(existsSync(path.join(folder, '.claude/settings.local.json'))).toBe(true);
      h.model.script([{ toolCalls: [{ name: 'Bash', input: { command: 'echo ran > ran.txt' } }] }, { text: 'ok' }]);
      const body = await readJson(await h.invoke(invokeBody([{ role: 'user', content: 'run' }], agent('ask'), { session_id: session })));
      expect(body.data.outputs.stop_reason).toBe('paused');
      expect(existsSync(path.join(folder, 'ran.txt'))).toBe(false);
    }, 60_000);
  });
});
