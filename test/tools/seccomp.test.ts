import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bashTool } from '../../src/agent/tools/bash.ts';
import { SANDBOX_PATH, sandboxAvailable } from '../../src/agent/tools/sandbox.ts';
import { seccompProgram } from '../../src/agent/tools/seccomp.ts';
import { run, tempFolder } from './helpers.ts';

// Numbers written out again from the kernel's tables, not imported: a typo in seccomp.ts would
// otherwise only be checked against itself. [x86_64, aarch64]; null where the arch has no such call.
const REFUSED: Record<string, Record<string, [number | null, number | null]>> = {
  mounting: {
    mount: [165, 40], umount2: [166, 39], pivot_root: [155, 41], fsopen: [430, 430], fsconfig: [431, 431],
    fsmount: [432, 432], move_mount: [429, 429], open_tree: [428, 428], open_tree_attr: [467, 467],
    fspick: [433, 433], mount_setattr: [442, 442],
  },
  namespaces: { unshare: [272, 97], setns: [308, 268] },
  'other processes': { ptrace: [101, 117], process_vm_readv: [310, 270], process_vm_writev: [311, 271] },
  'the kernel': {
    kexec_load: [246, 104], kexec_file_load: [320, 294], init_module: [175, 105], finit_module: [313, 273],
    delete_module: [176, 106], bpf: [321, 280], perf_event_open: [298, 241], lookup_dcookie: [212, 18],
    userfaultfd: [323, 282], open_by_handle_at: [304, 265], iopl: [172, null], ioperm: [173, null],
  },
  keys: { add_key: [248, 217], request_key: [249, 218], keyctl: [250, 219] },
  'host administration': {
    swapon: [167, 224], swapoff: [168, 225], reboot: [169, 142], acct: [163, 89], quotactl: [179, 60],
    quotactl_fd: [443, 443], syslog: [103, 116], settimeofday: [164, 170], clock_settime: [227, 112],
  },
};

const ARCHES = {
  x64: {
    column: 0, audit: 0xc000003e, clone: 56, clone3: 435, personality: 135,
    ordinary: { read: 0, write: 1, openat: 257, execve: 59, wait4: 61 },
  },
  arm64: {
    column: 1, audit: 0xc00000b7, clone: 220, clone3: 435, personality: 92,
    ordinary: { read: 63, write: 64, openat: 56, execve: 221, wait4: 260 },
  },
} as const;

const ALLOW = 0x7fff0000;
const EPERM = 0x00050001;
const ENOSYS = 0x00050026;
const KILL_PROCESS = 0x80000000;
const CLONE_NEWUSER = 0x10000000;

function numbersFor(arch: keyof typeof ARCHES, names: Record<string, [number | null, number | null]>): Record<string, number> {
  const entries = Object.entries(names).map(([name, numbers]) => [name, numbers[ARCHES[arch].column]] as const);
  return Object.fromEntries(entries.filter((entry): entry is readonly [string, number] => entry[1] !== null));
}

/** The kernel's classic-BPF interpreter, for the few instructions seccomp.ts emits. */
function filter(program: Buffer, arch: number, nr: number, arg0 = 0n): number {
  const data = Buffer.alloc(64);
  data.writeInt32LE(nr, 0);
  data.writeUInt32LE(arch, 4);
  data.writeBigUInt64LE(arg0, 16);
  let a = 0;
  for (let pc = 0; pc * 8 < program.length; pc++) {
    const [code, jt, jf, k] = [program.readUInt16LE(pc * 8), program[pc * 8 + 2]!, program[pc * 8 + 3]!, program.readUInt32LE(pc * 8 + 4)];
    if (code === 0x20) a = data.readUInt32LE(k);
    else if (code === 0x15) pc += a === k ? jt : jf;
    else if (code === 0x45) pc += (a & k) !== 0 ? jt : jf;
    else if (code === 0x06) return k;
    else throw new Error(`unexpected BPF code ${code}`);
  }
  throw new Error('the program ran off its end');
}

describe('the seccomp program', () => {
  for (const arch of ['x64', 'arm64'] as const) {
    it(`refuses what it should and allows the rest on ${arch}`, () => {
      const abi = ARCHES[arch];
      const program = seccompProgram(arch)!;
      const verdict = (nr: number, arg0?: bigint) => filter(program, abi.audit, nr, arg0);
      for (const names of Object.values(REFUSED)) {
        for (const [name, nr] of Object.entries(numbersFor(arch, names))) expect([name, verdict(nr)]).toEqual([name, EPERM]);
      }
      for (const [name, nr] of Object.entries(abi.ordinary)) expect([name, verdict(nr)]).toEqual([name, ALLOW]);

      expect(verdict(abi.clone3)).toBe(ENOSYS);
      // fork, then a pthread_create, then each namespace flag.
      expect(verdict(abi.clone, 0x01200011n)).toBe(ALLOW);
      expect(verdict(abi.clone, 0x003d0f00n)).toBe(ALLOW);
      for (const flag of [0x00020000, 0x02000000, 0x04000000, 0x08000000, CLONE_NEWUSER, 0x20000000, 0x40000000]) {
        expect(verdict(abi.clone, BigInt(flag | 0x11))).toBe(EPERM);
      }
      // The kernel reads only the low half of clone's flags, so junk in the high half changes nothing.
      expect(verdict(abi.clone, 0xffffffff00000011n)).toBe(ALLOW);
      expect(verdict(abi.clone, 0xffffffff00000011n | BigInt(CLONE_NEWUSER))).toBe(EPERM);

      for (const persona of [0x0, 0x8, 0xffffffff]) expect(verdict(abi.personality, BigInt(persona))).toBe(ALLOW);
      // ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC.
      for (const persona of [0x0040000, 0x0400000]) expect(verdict(abi.personality, BigInt(persona))).toBe(EPERM);

      expect(filter(program, 0x40000003, abi.ordinary.read)).toBe(KILL_PROCESS); // i386
      expect(filter(program, 0x40000028, abi.ordinary.read)).toBe(KILL_PROCESS); // 32-bit ARM
    });
  }

  it('kills x32 calls on x86_64, which share its audit arch', () => {
    expect(filter(seccompProgram('x64')!, ARCHES.x64.audit, 0x40000000 | ARCHES.x64.ordinary.read)).toBe(KILL_PROCESS);
  });

  it('is not made for architectures it has no table for', () => {
    expect(seccompProgram('riscv64')).toBeUndefined();
  });
});

/** getpid through the i386 table: mov eax, 20; int 0x80; ret. */
const I386_GETPID = `
import ctypes, mmap
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))
print(ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))())
`;

const onSandboxPath = (program: string) => SANDBOX_PATH.split(':').some((dir) => existsSync(path.join(dir, program)));
const arch = process.arch as keyof typeof ARCHES;
const sandboxed = (await sandboxAvailable()) && arch in ARCHES && onSandboxPath('python3');

/**
 * Makes each system call with every argument -1 and prints its errno name (or "ok") by call name.
 * Without the filter it first takes every capability in fresh user and mount namespaces, so the
 * kernel's own capability checks do not answer EPERM in the filter's place; under the filter that
 * fails and changes nothing. swapoff, reboot, acct and syslog check capabilities in the host's
 * namespaces, so they say EPERM either way: for them, the test of the program above is the proof.
 */
const PROBE = `
import ctypes, errno, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.unshare(0x10000000 | 0x00020000)
out = {}
for name, nr in json.loads(sys.argv[1]).items():
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(-1)] * 6)
    out[name] = 'ok' if r >= 0 else errno.errorcode[ctypes.get_errno()]
print(json.dumps(out))
`;

/** Runs `command` in the sandbox through the bash tool, in a fresh folder holding `python` as probe.py. */
async function sandbox(command: string, python?: string): Promise<string> {
  const root = await tempFolder();
  if (python !== undefined) await fs.writeFile(path.join(root, 'probe.py'), python);
  return run(bashTool({ root, bash: { timeoutMs: 20_000, maxOutputBytes: 64 * 1024, unsafeHost: false, limits: { processes: 256, memoryBytes: 1 << 30 } }, network: 'off' }), { command });
}

describe.runIf(sandboxed)('bash under the seccomp filter', () => {
  for (const [group, names] of Object.entries(REFUSED)) {
    it(`refuses system calls for ${group}`, async () => {
      const numbers = numbersFor(arch, names);
      const out = await sandbox(`python3 probe.py '${JSON.stringify(numbers)}'`, PROBE);
      expect(out).toMatch(/^exit code 0\n/);
      expect(JSON.parse(out.split('\n')[1]!)).toEqual(Object.fromEntries(Object.keys(numbers).map((name) => [name, 'EPERM'])));
    });
  }

  it('refuses new namespaces however asked for, and clone3, which libc then does without', async () => {
    expect(await sandbox('unshare -U true; echo "unshare=$?"')).toBe('exit code 0\nunshare: unshare failed: Operation not permitted\nunshare=1\n');
    const { clone, clone3 } = ARCHES[arch];
    const out = await sandbox(
      'python3 probe.py',
      `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def errno_name(result):
    return 'ok' if result >= 0 else errno.errorcode[ctypes.get_errno()]
def clone(flags):
    pid = libc.syscall(${clone}, flags, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    return errno_name(pid)
print(clone(0x${CLONE_NEWUSER.toString(16)} | 17), clone(17), errno_name(libc.syscall(${clone3}, 0, 0)))
`,
    );
    expect(out).toBe('exit code 0\nEPERM ok ENOSYS\n');
  });

  it('refuses ptrace(PTRACE_TRACEME)', async () => {
    const out = await sandbox(
      'python3 probe.py',
      `
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
print(libc.ptrace(0, 0, 0, 0), errno.errorcode.get(ctypes.get_errno()))
`,
    );
    expect(out).toBe('exit code 0\n-1 EPERM\n');
  });

  it('lets programs read and set plain personalities, not turn off address randomisation', async () => {
    const out = await sandbox('setarch "$(uname -m)" true; echo "plain=$?"; setarch "$(uname -m)" -R true 2>/dev/null; echo "no-aslr=$?"');
    expect(out).toBe('exit code 0\nplain=0\nno-aslr=1\n');
  });

  it.runIf(arch === 'x64')('kills processes that make i386 or x32 system calls', async () => {
    // A kernel whose 32-bit entry is off (ia32_emulation=0, as on some VM hosts) refuses `int 0x80`
    // itself with a general protection fault, before any filter sees it: asked outside the sandbox.
    const kernelTakesI386 = spawnSync('python3', ['-c', I386_GETPID]).status === 0;
    const out = await sandbox(
      'python3 probe.py i386; echo "i386=$?"; python3 probe.py x32; echo "x32=$?"',
      `
import ctypes, sys
if sys.argv[1] == 'i386':
${I386_GETPID.trim().replace(/^/gm, '    ')}
else:
    print(ctypes.CDLL(None).syscall(0x40000000 | 39))
`,
    );
    // 159 is 128 + SIGSYS; 139, 128 + SIGSEGV.
    expect(out).toBe(`exit code 0\n${kernelTakesI386 ? 'Bad system call\ni386=159' : 'Segmentation fault\ni386=139'}\nBad system call\nx32=159\n`);
  });

  it('leaves ordinary tools working', async () => {
    const search = onSandboxPath('rg') ? 'rg --version | head -1 | cut -d" " -f1' : 'grep --version | head -1 | cut -d" " -f1';
    const commands = [
      'grep Seccomp: /proc/self/status',
      'git --version | cut -d" " -f1-2',
      'git init -q . && git status --short && echo inited',
      "python3 -c 'import threading; t = threading.Thread(target=print, args=(1,)); t.start(); t.join()'",
      ...(onSandboxPath('node') ? ["node -e 'console.log(2)'"] : []),
      search,
      'printf "b\\na\\n" | sort | paste -sd" "',
      'echo hi > f.txt && cat f.txt && ls',
      'sleep 0.1 && echo slept',
    ];
    const out = await sandbox(commands.join(' && '));
    expect(out).toBe(
      [
        'exit code 0',
        'Seccomp:\t2',
        'git version',
        'inited',
        '1',
        ...(onSandboxPath('node') ? ['2'] : []),
        onSandboxPath('rg') ? 'ripgrep' : 'grep',
        'a b',
        'hi',
        'f.txt',
        'slept',
        '',
      ].join('\n'),
    );
  });
});
