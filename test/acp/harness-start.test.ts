import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runAcpTurn } from '../../src/harnesses/acp-turn.ts';
import { waitFor } from '../sessions-api/client.ts';

/**
 * A harness process that goes wrong before it has answered ACP's `initialize`: real processes (a
 * few lines of Node standing in for a harness that hangs or dies at its start), driven by the turn
 * as any harness is.
 */

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentd-harness-start-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** A turn whose harness is `code`, run by Node. */
function turnOn(code: string, signal: AbortSignal, initializeTimeoutMs?: number) {
  return runAcpTurn({
    turnId: 't',
    start: async () => ({ file: process.execPath, args: ['-e', code], env: {}, mcpServers: [] }),
    cwd: dir,
    stateDir: dir,
    system: '{}',
    prompt: () => 'hi',
    gate: () => 'pause',
    decisionsLeft: () => 0,
    newInteractionId: () => 'i',
    signal,
    parking: { ttlMs: 0, max: 0 },
    fingerprint: 'f',
    dialect: { toolName: () => 'tool' },
    gated: false,
    ...(initializeTimeoutMs ? { initializeTimeoutMs } : {}),
  });
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('a harness at its start', () => {
  it('that never answers initialize: a stopped turn (timeout, stop, force, a client gone) ends, and its process with it', async () => {
    const pidFile = path.join(dir, 'pid');
    const controller = new AbortController();
    const turn = turnOn(`require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`, controller.signal);
    const next = turn.next();
    await waitFor(async () => existsSync(pidFile), 'the harness to start');
    const pid = Number(await readFile(pidFile, 'utf8'));
    controller.abort(new Error('stopped from outside'));
    await expect(next).rejects.toThrow('stopped from outside');
    expect(alive(pid)).toBe(false);
  }, 10_000);

  it('that never answers initialize, left alone: the turn fails saying so once the harness has had its time, and its process ends', async () => {
    const pidFile = path.join(dir, 'pid');
    const code = `require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); process.stderr.write('waiting for nothing\\n'); setInterval(() => {}, 1000)`;
    await expect(turnOn(code, new AbortController().signal, 500).next()).rejects.toMatchObject({
      type: 'upstream-error',
      message: 'the harness failed: it did not answer ACP initialize within 0.5 s (waiting for nothing)',
    });
    expect(alive(Number(await readFile(pidFile, 'utf8')))).toBe(false);
  }, 10_000);

  it('that dies: the turn fails saying the last thing it wrote to stderr, after any amount before', async () => {
    const code = `process.stderr.write('warning: something minor\\n'.repeat(500)); process.stderr.write('fatal: the real reason\\n', () => process.exit(1))`;
    await expect(turnOn(code, new AbortController().signal).next()).rejects.toMatchObject({ type: 'upstream-error', message: expect.stringMatching(/^the harness failed: .*\(fatal: the real reason\)$/) });
  }, 10_000);
});
