import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import type { Duplex } from 'node:stream';

/**
 * The shell that starts the program: it leaves a guard in the program's process group that reads
 * fd `watch`, a pipe this process holds the other end of, and then execs the program (same pid,
 * without that fd). The read ends when this process dies, even by SIGKILL, which no handler here
 * can see: the guard then kills the group. Without it a command of a killed server (one run on the
 * host; bubblewrap has --die-with-parent) kept running and writing into the session folder after
 * the restart, while new turns already ran there.
 */
function orphanGuard(watch: number): string {
  return `(trap '' HUP INT TERM; read _ <&${watch}; kill -KILL 0) </dev/null >/dev/null 2>&1 & exec "$@" ${watch}<&-`;
}

/** SIGKILL to a child's whole process group; nothing when it is gone already. */
export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/**
 * Spawns `file` in a process group of its own that does not outlive this process (see
 * `orphanGuard`), nor the program: when the program exits, what is left of its group (the guard,
 * any background job) is killed, so the pipes close and the child's 'close' comes. The program's
 * stdout and stderr are pipes, its stdin as `stdin` says; `fds` (already open) become its fd 3 on.
 */
export function spawnGuarded(file: string, args: string[], options: { cwd: string; env: Record<string, string>; stdin: 'pipe' | 'ignore'; fds: number[] }): ChildProcess {
  const watch = 3 + options.fds.length;
  const stdio: StdioOptions = [options.stdin, 'pipe', 'pipe', ...options.fds, 'pipe'];
  const child: ChildProcess = spawn('/bin/sh', ['-c', orphanGuard(watch), 'agentd-run', file, ...args], { cwd: options.cwd, env: options.env, stdio, detached: true });
  // Never written: it ends only when this process does, which is what the guard waits for.
  const lifeline = child.stdio[watch] as Duplex | null | undefined;
  lifeline?.on('error', () => undefined).resume();
  child.once('exit', () => killGroup(child));
  return child;
}
