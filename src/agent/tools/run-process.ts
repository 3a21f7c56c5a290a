import fs from 'node:fs';
import { killGroup, spawnGuarded } from './spawn-guarded.ts';

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
 * Runs a program in its own process group and collects its output under a byte cap. On timeout or
 * abort the whole group gets SIGKILL, so nothing the command started outlives it, nor (through
 * `spawnGuarded`) this process. `fds` become the child's fd 3 onwards and are closed here once it
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
    const child = spawnGuarded(file, args, { cwd: options.cwd, env: options.env, stdin: 'ignore', fds });
    for (const fd of fds) fs.closeSync(fd);

    const stop = (reason: ProcessOutcome['ended']): void => {
      if (ended === 'exit') ended = reason;
      killGroup(child);
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
