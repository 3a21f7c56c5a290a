import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runProcess } from '../../src/agent/tools/run-process.ts';
import { processesWith, tempFolder } from './helpers.ts';

const RUNNER = path.resolve(import.meta.dirname, '../support/command-runner.ts');

async function poll(check: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('condition not reached in time');
}

describe('a program agentd starts', () => {
  it.each(['bash', 'harness'])('a %s command does not outlive the server that started it, even one killed with SIGKILL', async (mode) => {
    // On the host (no bubblewrap, whose --die-with-parent covers it) the command is in a process
    // group of its own: it went on after a killed server, into a session a restart had freed.
    const folder = await tempFolder();
    // A sleep no other test's command sleeps (the two engines' projects run this file at once).
    const marker = `27.${process.pid}${mode.length}`;
    const runner = spawn(process.execPath, [RUNNER, mode, folder, `touch started; sleep ${marker} & wait`], { stdio: 'ignore' });
    try {
      await poll(async () => existsSync(path.join(folder, 'started')) && (await processesWith(marker)).length > 0);
      runner.kill('SIGKILL');
      await once(runner, 'exit');
      await poll(async () => (await processesWith(marker)).length === 0);
    } finally {
      runner.kill('SIGKILL');
      for (const pid of await processesWith(marker)) process.kill(Number(pid), 'SIGKILL');
    }
  });

  it('keeps the guard’s fd from the program', async () => {
    const folder = await tempFolder();
    // No pipeline: the shell would hold its pipes (fd 3 and on) while `ls` reads its fds.
    const out = await runProcess('/bin/sh', ['-c', 'ls /proc/$$/fd'], { cwd: folder, env: { PATH: '/usr/bin:/bin' } }, { timeoutMs: 5000, maxOutputBytes: 4096 });
    expect(out).toMatchObject({ ended: 'exit', exitCode: 0 });
    const fds = out.output.split(/\s+/).filter(Boolean);
    expect(fds).toContain('1');
    // fd 3 would be the guard's lifeline: a program holding it would keep the guard waiting.
    expect(fds).not.toContain('3');
  });
});
