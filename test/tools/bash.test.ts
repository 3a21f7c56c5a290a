import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Config } from '../../src/config.ts';
import { bashTool } from '../../src/agent/tools/bash.ts';
import { sandboxAvailable } from '../../src/agent/tools/sandbox.ts';
import { limitsAvailable } from '../../src/agent/tools/cgroups.ts';
import { newId } from '../../src/ids.ts';
import { processesWith, run, tempFolder } from './helpers.ts';

const limits: Config['bash'] = { timeoutMs: 20_000, maxOutputBytes: 64 * 1024, unsafeHost: false, limits: { processes: 256, memoryBytes: 1 << 30 } };

function bash(root: string, overrides: Partial<Config['bash']> = {}, network: 'on' | 'off' = 'off') {
  return bashTool({ root, bash: { ...limits, ...overrides }, network });
}

describe.skipIf(!(await sandboxAvailable()))('bash under bubblewrap', () => {
  let server: net.Server;
  let port: number;

  beforeAll(async () => {
    server = net.createServer((socket) => socket.end('hello from host\n'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('runs in the folder at its host path and writes there', async () => {
    const root = await tempFolder();
    const out = await run(bash(root), { command: 'pwd; echo "$HOME"; echo hi > made.txt && cat made.txt' });
    expect(out).toBe(`exit code 0\n${root}\n${root}\nhi\n`);
    expect(await fs.readFile(path.join(root, 'made.txt'), 'utf8')).toBe('hi\n');
  });

  it('reports non-zero exits as results, with stderr interleaved', async () => {
    const root = await tempFolder();
    expect(await run(bash(root), { command: 'echo out; echo err >&2; echo out2; exit 3' })).toBe('exit code 3\nout\nerr\nout2\n');
    expect(await run(bash(root), { command: 'true' })).toBe('exit code 0\n(no output)');
  });

  it('cannot write outside the folder', async () => {
    const root = await tempFolder();
    const marker = `agentd-escape-${path.basename(root)}`;
    const out = await run(bash(root), {
      command: `echo x > /root/${marker}; echo x > /etc/${marker}; echo x > /tmp/../usr/${marker}; echo x > ../${marker}; ls /root`,
    });
    expect(out).toMatch(/^exit code [1-9]/);
    for (const dir of ['/root', '/etc', '/usr', path.dirname(root)]) {
      await expect(fs.access(path.join(dir, marker)), dir).rejects.toThrow();
    }
  });

  it('cannot read files outside the folder', async () => {
    const root = await tempFolder();
    const outside = await tempFolder('agentd-outside-');
    await fs.writeFile(path.join(outside, 'secret.txt'), 'the-secret-value');
    const out = await run(bash(root), { command: `cat ${path.join(outside, 'secret.txt')}` });
    expect(out).toMatch(/^exit code [1-9]/);
    expect(out).not.toContain('the-secret-value');
    const etc = await run(bash(root), { command: 'ls /etc' });
    expect(etc).not.toMatch(/\bshadow\b|\bhostname\b/);
  });

  it('does not pass the server environment through', async () => {
    const root = await tempFolder();
    process.env.AGENTD_TEST_SECRET = 'leaky-value';
    try {
      const out = await run(bash(root), { command: 'env' });
      expect(out).not.toContain('leaky-value');
      expect(out).toContain('PATH=/usr/local/bin:/usr/bin:/bin');
      expect(out).toContain('LANG=C.UTF-8');
    } finally {
      delete process.env.AGENTD_TEST_SECRET;
    }
  });

  it("shows nothing of the server's PATH even in the sandbox's first process (bubblewrap's own environment)", async () => {
    const root = await tempFolder();
    const marker = '/opt/agentd-test-marker/bin';
    const before = process.env.PATH;
    process.env.PATH = `${marker}:${before}`;
    try {
      const out = await run(bash(root), { command: "tr '\\0' '\\n' < /proc/1/environ" });
      expect(out).toMatch(/^PATH=\//m);
      expect(out).not.toContain(marker);
    } finally {
      process.env.PATH = before;
    }
  });

  it('has no network unless the template turns it on', async () => {
    const root = await tempFolder();
    const fromHost = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      let data = '';
      socket.on('data', (chunk) => (data += chunk.toString()));
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
    });
    expect(fromHost).toBe('hello from host\n');

    const command = `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3'`;
    const off = await run(bash(root), { command });
    expect(off).toMatch(/^exit code [1-9]/);
    expect(off).not.toContain('hello from host');

    const on = await run(bash(root, {}, 'on'), { command });
    expect(on).toBe('exit code 0\nhello from host\n');
  });

  it('kills the command at the time limit and leaves nothing running', async () => {
    const root = await tempFolder();
    const marker = '29.731';
    const started = Date.now();
    await expect(run(bash(root), { command: `echo before; sleep ${marker} & sleep ${marker}`, timeout_ms: 500 })).rejects.toThrow(
      'timed out after 500 ms; output so far:\nbefore\n',
    );
    expect(Date.now() - started).toBeLessThan(29_000);
    expect(await processesWith(marker)).toEqual([]);
  });

  it('lets timeout_ms lower the limit but never raise it', async () => {
    const root = await tempFolder();
    await expect(run(bash(root, { timeoutMs: 400 }), { command: 'sleep 30', timeout_ms: 600_000 })).rejects.toThrow(
      'timed out after 400 ms',
    );
  });

  it('caps the output and says so', async () => {
    const root = await tempFolder();
    const out = await run(bash(root, { maxOutputBytes: 1000 }), { command: "head -c 5000 /dev/zero | tr '\\0' a" });
    expect(out).toBe(`exit code 0\n${'a'.repeat(1000)}\n[output truncated: showed the first 1000 of 5000 bytes]`);
  });

  it('is killed by the abort signal', async () => {
    const root = await tempFolder();
    const marker = '28.417';
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const started = Date.now();
    await expect(run(bash(root), { command: `sleep ${marker}` }, controller.signal)).rejects.toThrow(/^aborted/);
    expect(Date.now() - started).toBeLessThan(28_000);
    expect(await processesWith(marker)).toEqual([]);
  });

  it('sees a private, empty /tmp', async () => {
    const root = await tempFolder();
    const out = await run(bash(root), { command: 'ls -A /tmp | grep -v "^agentd-tools-" | wc -l; touch /tmp/scratch && echo ok' });
    expect(out).toBe('exit code 0\n0\nok\n');
  });
});

/** The pids group this process is in, where each call's group is made (cgroup v1 or v2). */
async function pidsParent(): Promise<string> {
  const own = await fs.readFile('/proc/self/cgroup', 'utf8');
  const v1 = /^\d+:[^:]*\bpids\b[^:]*:(.*)$/m.exec(own);
  return v1 ? path.join('/sys/fs/cgroup/pids', v1[1]!) : path.join('/sys/fs/cgroup', /^0::(.*)$/m.exec(own)![1]!);
}

describe.skipIf(!(await sandboxAvailable()) || !(await limitsAvailable()))('bash within its control groups', () => {
  const bounded = (root: string) => bash(root, { limits: { processes: 16, memoryBytes: 64 * 1024 * 1024 } });

  it('cannot start more processes than AGENTD_BASH_MAX_PROCESSES: a fork bomb stops at the limit', async () => {
    const root = await tempFolder();
    const out = await run(bounded(root), { command: 'for i in $(seq 1 40); do sleep 1 & done; wait' });
    expect(out).toMatch(/^exit code [1-9].*Cannot fork/s);
  });

  it('is killed past AGENTD_BASH_MAX_MEMORY_MB, its private /tmp included; the server goes on', async () => {
    const root = await tempFolder();
    expect(await run(bounded(root), { command: 'tail /dev/zero' })).toMatch(/^(exit code 137|killed by signal SIGKILL)/);
    expect(await run(bounded(root), { command: 'head -c 200000000 /dev/zero > /tmp/fill; echo "status $?"' })).not.toContain('status 0');
    expect(await run(bounded(root), { command: 'echo still here' })).toBe('exit code 0\nstill here\n');
  });

  it('removes at start the groups a killed server left behind, and not a group being set up', async () => {
    const parent = await pidsParent();
    // A call's group from a server killed two minutes ago (its name's UUIDv7 says when it was made), and one just made.
    const time = (Date.now() - 120_000).toString(16).padStart(12, '0');
    const left = `agentd-bash-${time.slice(0, 8)}-${time.slice(8)}-7000-8000-000000000000`;
    const fresh = `agentd-bash-${newId()}`;
    await fs.mkdir(path.join(parent, left));
    await fs.mkdir(path.join(parent, fresh));
    try {
      vi.resetModules();
      const cgroups = await import('../../src/agent/tools/cgroups.ts');
      expect(await cgroups.limitsAvailable()).toBe(true);
      const names = await fs.readdir(parent);
      expect(names).not.toContain(left);
      expect(names).toContain(fresh);
    } finally {
      await fs.rmdir(path.join(parent, left)).catch(() => undefined);
      await fs.rmdir(path.join(parent, fresh)).catch(() => undefined);
    }
  });

  it('runs in a group of its own, removed when the call ends', async () => {
    const parent = await pidsParent();
    const groups = async () => (await fs.readdir(parent)).filter((name) => name.startsWith('agentd-bash-'));
    // Other test files run bash calls at the same time, in groups beside this one: this call's is
    // the group its own `sleep` (a length no other call sleeps) is in.
    const sleep = `sleep 1.${process.pid}`;
    const holdsSleep = async (name: string) => {
      const pids = (await fs.readFile(path.join(parent, name, 'cgroup.procs'), 'utf8').catch(() => '')).split('\n').filter(Boolean);
      const commands = await Promise.all(pids.map((pid) => fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')));
      return commands.some((command) => command.split('\0').join(' ').trim() === sleep);
    };
    let ended = false;
    const call = run(bounded(await tempFolder()), { command: sleep }).finally(() => (ended = true));
    const ours = new Set<string>();
    while (!ended) {
      for (const name of await groups()) if (await holdsSleep(name)) ours.add(name);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await call;
    expect(ours.size).toBe(1);
    expect(await groups()).not.toContain([...ours][0]);
  });
});
