import { spawn } from 'node:child_process';
import fs from 'node:fs';

/**
 * bubblewrap confinement for `bash`: a fresh mount namespace with the system read-only, a private
 * /tmp, the session folder as the only writable place (at the same absolute path as on the host,
 * so paths the file tools print work in commands), no capabilities, and no network unless the
 * template turns it on.
 */

export const SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin';
export const BWRAP = 'bwrap';

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

/** bwrap's arguments up to and including "--"; the program to run follows. `folder` must be a real path. */
export function bwrapArgs(folder: string, network: 'on' | 'off'): string[] {
  const env = commandEnv(folder);
  return [
    ...baseArgs(network),
    // After --tmpfs /tmp, so a folder under /tmp is mounted on top of the private /tmp.
    '--bind', folder, folder,
    '--chdir', folder,
    '--clearenv',
    ...Object.entries(env).flatMap(([name, value]) => ['--setenv', name, value]),
    '--',
  ];
}

let available: Promise<boolean> | undefined;

/**
 * Whether bubblewrap is installed and can create namespaces here (inside some containers it
 * cannot). Checked once per process.
 */
export function sandboxAvailable(): Promise<boolean> {
  available ??= (async () => {
    if (!(await succeeds(BWRAP, ['--version']))) return false;
    return succeeds(BWRAP, [...baseArgs('off'), '--', '/bin/sh', '-c', 'true']);
  })();
  return available;
}

function succeeds(file: string, args: string[]): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: 'ignore', timeout: 10_000 });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}
