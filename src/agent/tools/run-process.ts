import { spawn } from 'node:child_process';
import fs from 'node:fs';
import type { Duplex } from 'node:stream';

export interface RunLimits {
  timeoutMs: number;
  maxOutputBytes: number;
  signal?: AbortSignal | undefined;
}

export interface ProcessOutcome {
  ended: 'exit' | 'timeout' | 'abort';
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** stdout and stderr as they arrived, cut at maxOutputBytes. */
  output: string;
  totalBytes: number;
  truncated: boolean;
}

/**
 * The shell that starts every program: it leaves a guard in the program's process group that
 * reads fd `watch`, a pipe this process holds the other end of, and then execs the program (same
 * pid, without that fd). The read ends when this process dies, even by SIGKILL, which no handler
 * here can see: the guard then kills the group. Without it a command of a killed server (one run on
 * the host; bubblewrap has --die-with-parent) kept running and writing into the session folder
 * after the restart, while new turns already ran there. On a normal end the group, guard
 * included, is killed by `killGroup` below.
 */
function orphanGuard(watch: number): string {
  return `(trap '' HUP INT TERM; read _ <&${watch}; kill -KILL 0) </dev/null >/dev/null 2>&1 & exec "$@" ${watch}<&-`;
}

/**
 * Runs a program in its own process group and collects its output under a byte cap. On timeout or
 * abort the whole group gets SIGKILL, so nothing the command started outlives it, nor (through
 * `orphanGuard`) this process. `fds` become the child's fd 3 onwards and are closed here once it
 * has them.
 */
export function runProcess(
  file: string,
  args: string[],
  options: { cwd: string; env: Record<string, string>; fds?: number[] },
  limits: RunLimits,
): Promise<ProcessOutcome> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    let totalBytes = 0;
    let ended: ProcessOutcome['ended'] = 'exit';

    const fds = options.fds ?? [];
    const watch = 3 + fds.length;
    const child = spawn('/bin/sh', ['-c', orphanGuard(watch), 'agentd-run', file, ...args], { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe', ...fds, 'pipe'], detached: true });
    for (const fd of fds) fs.closeSync(fd);
    // Never written: it ends only when this process does, which is what the guard waits for.
    const lifeline = child.stdio[watch] as Duplex | null | undefined;
    lifeline?.on('error', () => undefined).resume();

    const killGroup = (): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const stop = (reason: ProcessOutcome['ended']): void => {
      if (ended === 'exit') ended = reason;
      killGroup();
    };

    const timer = setTimeout(() => stop('timeout'), limits.timeoutMs);
    const onAbort = (): void => stop('abort');
    limits.signal?.addEventListener('abort', onAbort, { once: true });
    if (limits.signal?.aborted) onAbort();

    const collect = (chunk: Buffer): void => {
      totalBytes += chunk.length;
      if (kept >= limits.maxOutputBytes) return;
      const part = chunk.subarray(0, limits.maxOutputBytes - kept);
      chunks.push(part);
      kept += part.length;
    };
    // Pipes, as stdio asks; Node's typings only know that when stdio has three entries.
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);

    // Background jobs left behind by the shell would hold the pipes open; they go with it.
    child.once('exit', killGroup);
    child.once('error', (error) => {
      clearTimeout(timer);
      limits.signal?.removeEventListener('abort', onAbort);
      reject(error);
    });
    child.once('close', (exitCode, signal) => {
      clearTimeout(timer);
      limits.signal?.removeEventListener('abort', onAbort);
      resolve({
        ended,
        exitCode,
        signal,
        output: Buffer.concat(chunks).toString('utf8'),
        totalBytes,
        truncated: totalBytes > kept,
      });
    });
  });
}
