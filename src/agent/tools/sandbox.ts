import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { seccompProgram } from './seccomp.ts';

/**
 * bubblewrap confinement for `bash`: a fresh mount namespace with the system read-only, a private
 * /tmp, the session folder as the only writable place (at the same absolute path as on the host,
 * so paths the file tools print work in commands), no capabilities, no network unless the
 * template turns it on, and a seccomp filter (seccomp.ts) refusing the system calls a shell tool
 * never needs.
 */

export const SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin';
export const BWRAP = 'bwrap';

let bwrapDir: string | undefined;

/**
 * bubblewrap's own environment: only the folder it is found in. It is process 1 inside the
 * sandbox, where its environment is readable (/proc/1/environ); the server's PATH would show the
 * host's layout there.
 */
export function bwrapEnv(): Record<string, string> {
  // Looked up once: the server's PATH does not change under it.
  bwrapDir ??= (process.env.PATH ?? '/usr/bin:/bin').split(':').find((dir) => dir !== '' && fs.existsSync(path.join(dir, BWRAP))) ?? '/usr/bin:/bin';
  return { PATH: bwrapDir };
}

/** The environment commands see, in and out of the sandbox: nothing of the server's leaks in. */
export function commandEnv(folder: string): Record<string, string> {
  return { PATH: SANDBOX_PATH, HOME: folder, LANG: 'C.UTF-8' };
}

/** Runs `command` with stderr merged into stdout at the source, so the two stay in order. */
export function shellArgv(command: string): string[] {
  return ['/bin/sh', '-c', 'exec /bin/sh -c "$1" 2>&1', 'sh', command];
}

/** What shells and dynamically linked programs read from /etc; nothing with secrets. */
const ETC_FILES = ['/etc/alternatives', '/etc/ld.so.cache', '/etc/ld.so.conf', '/etc/ld.so.conf.d', '/etc/passwd', '/etc/group', '/etc/localtime'];
/** Added when the network is on: name resolution and TLS trust. */
const ETC_NETWORK_FILES = ['/etc/resolv.conf', '/etc/hosts', '/etc/nsswitch.conf', '/etc/host.conf', '/etc/gai.conf', '/etc/ssl', '/etc/ca-certificates'];

let systemBindsCache: string[] | undefined;

/**
 * /usr read-only, and the top-level /bin, /lib... as on the host: merged-/usr systems (Debian 12)
 * have them as symlinks into /usr, older ones as real folders.
 */
function systemBinds(): string[] {
  if (systemBindsCache) return systemBindsCache;
  const args = ['--ro-bind', '/usr', '/usr'];
  for (const top of ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(top);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) args.push('--symlink', fs.readlinkSync(top), top);
    else if (stat.isDirectory()) args.push('--ro-bind', top, top);
  }
  systemBindsCache = args;
  return args;
}

function baseArgs(network: 'on' | 'off'): string[] {
  const args = ['--unshare-all', '--die-with-parent', '--new-session', '--cap-drop', 'ALL', ...systemBinds()];
  for (const file of ETC_FILES) args.push('--ro-bind-try', file, file);
  if (network === 'on') {
    args.push('--share-net');
    for (const file of ETC_NETWORK_FILES) args.push('--ro-bind-try', file, file);
  }
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
  return args;
}

/** The seccomp program reaches bwrap as this fd: the first after stdin, stdout and stderr. */
const SECCOMP_FD = 3;
const program = seccompProgram(process.arch);
let programFd: number | undefined;

/**
 * A fresh fd for the filter, for one bwrap run. bwrap reads the program from an fd to its end, so
 * every run needs its own open file at offset 0. The file is written once and unlinked at once, so
 * nothing is left behind however the process ends; each run reopens it through /proc/self/fd.
 */
function openSeccompProgram(bytes: Buffer): number {
  if (programFd === undefined) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-seccomp-'));
    try {
      const file = path.join(dir, 'filter.bpf');
      fs.writeFileSync(file, bytes, { mode: 0o400 });
      programFd = fs.openSync(file, 'r');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  return fs.openSync(`/proc/self/fd/${programFd}`, 'r');
}

/**
 * How to start bwrap for `bash`: its arguments up to and including "--" (the program to run
 * follows), and the fds to hand it from fd 3 on. `folder` must be a real path.
 */
export async function bwrapInvocation(folder: string, network: 'on' | 'off'): Promise<{ args: string[]; fds: number[] }> {
  return invocation((await sandboxState()) === 'filtered', { network, readOnly: [], writable: [{ from: folder, to: folder }], cwd: folder, env: commandEnv(folder) });
}

/** What a coding-agent harness process may see besides the system: read-only and writable places. */
export interface HarnessMounts {
  /** The session folder: the working directory. */
  folder: string;
  /** The harness's own state (its sessions, settings), kept per session outside the folder. */
  stateDir: string;
  /** Its program: Node and the package folders it runs from. */
  readOnly: string[];
  /** Host files mounted read-only elsewhere inside (settings the harness may not change). */
  lockedFiles?: Array<{ from: string; to: string }>;
  /** Host folders mounted writable elsewhere inside (the model relay's sockets). */
  mounted?: Array<{ from: string; to: string }>;
  network: 'on' | 'off';
  env: Record<string, string>;
}

/**
 * How to start a harness under bubblewrap: the system read-only, its program read-only, the session
 * folder and its state folder writable, a private /tmp, the same seccomp filter as bash, the
 * network only when the template turns it on (relay.ts is its way to its model either way).
 * Undefined without bubblewrap.
 */
export async function harnessInvocation(mounts: HarnessMounts): Promise<{ args: string[]; fds: number[] } | undefined> {
  const state = await sandboxState();
  if (state === 'missing') return undefined;
  const writable = [mounts.folder, mounts.stateDir].map((dir) => ({ from: dir, to: dir }));
  return invocation(state === 'filtered', { network: mounts.network, readOnly: mounts.readOnly, lockedFiles: mounts.lockedFiles ?? [], writable: [...writable, ...(mounts.mounted ?? [])], cwd: mounts.folder, env: mounts.env });
}

/** bwrap's arguments up to and including "--" (the program follows), and the fds it is handed from fd 3 on. */
function invocation(
  filtered: boolean,
  place: { network: 'on' | 'off'; readOnly: string[]; lockedFiles?: Array<{ from: string; to: string }>; writable: Array<{ from: string; to: string }>; cwd: string; env: Record<string, string> },
): { args: string[]; fds: number[] } {
  const seccomp = filtered ? program : undefined;
  const args = [
    ...baseArgs(place.network),
    ...place.readOnly.flatMap((dir) => ['--ro-bind', dir, dir]),
    // After --tmpfs /tmp, so a folder under /tmp is mounted on top of the private /tmp.
    ...place.writable.flatMap(({ from, to }) => ['--bind', from, to]),
    // Last: nothing mounted after them can cover them.
    ...(place.lockedFiles ?? []).flatMap(({ from, to }) => ['--ro-bind', from, to]),
    '--chdir', place.cwd,
    '--clearenv',
    ...Object.entries(place.env).flatMap(([name, value]) => ['--setenv', name, value]),
    ...(seccomp ? ['--seccomp', String(SECCOMP_FD)] : []),
    '--',
  ];
  return { args, fds: seccomp ? [openSeccompProgram(seccomp)] : [] };
}

type SandboxState = 'missing' | 'unfiltered' | 'filtered';
let state: Promise<SandboxState> | undefined;

/**
 * Whether bubblewrap is installed and can create namespaces here (inside some containers it
 * cannot), and whether it can install the seccomp filter. Checked once per process.
 *
 * Where the filter cannot be installed (a kernel built without seccomp filters, which gets a
 * warning; an architecture seccomp.ts has no table for), bash still runs under bubblewrap, without
 * the filter. Refusing bash there would leave operators AGENTD_UNSAFE_HOST_BASH, no sandbox at
 * all, when the namespaces and dropped capabilities are the main wall and the filter the second.
 */
function sandboxState(): Promise<SandboxState> {
  state ??= (async () => {
    if (!(await run(BWRAP, ['--version'])).ok) return 'missing';
    const check = [...baseArgs('off'), '--', '/bin/sh', '-c', 'true'];
    if (!(await run(BWRAP, check)).ok) return 'missing';
    if (!program) return 'unfiltered';
    const filtered = await run(BWRAP, ['--seccomp', String(SECCOMP_FD), ...check], [openSeccompProgram(program)]);
    if (filtered.ok) return 'filtered';
    const reason = filtered.stderr.trim().split('\n').at(-1);
    process.emitWarning(`bwrap cannot install the seccomp filter here (${reason}); bash runs in the sandbox without it`);
    return 'unfiltered';
  })();
  return state;
}

/** Whether `bash` can run under bubblewrap, with the filter or without. */
export async function sandboxAvailable(): Promise<boolean> {
  return (await sandboxState()) !== 'missing';
}

/** Runs `file`, handing it `fds` from fd 3 on (closed here once it has them). */
function run(file: string, args: string[], fds: number[] = []): Promise<{ ok: boolean; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe', ...fds], timeout: 10_000 });
    for (const fd of fds) fs.closeSync(fd);
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', (error) => resolve({ ok: false, stderr: error.message }));
    child.once('close', (code) => resolve({ ok: code === 0, stderr }));
  });
}
