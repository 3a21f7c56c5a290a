/**
 * The seccomp filter bubblewrap installs for `bash` (`--seccomp FD`), as the classic-BPF program the
 * kernel runs on every system call. Namespaces and dropped capabilities already make most of these
 * calls fail; the filter is for the day one of them has a kernel bug reachable without privilege,
 * which is how sandbox escapes usually happen. It refuses what a shell tool never needs and allows
 * everything else, so ordinary programs do not notice it.
 *
 * Written here rather than with libseccomp so agentd needs no native addon.
 */

interface Abi {
  /** AUDIT_ARCH_* as the kernel reports it in seccomp_data.arch. */
  audit: number;
  /** x86_64 also takes x32 calls, under the same audit arch, numbered with this bit set. */
  x32Bit?: number;
  clone: number;
  clone3: number;
  personality: number;
  /** Refused with EPERM whatever their arguments. */
  refused: Record<string, number>;
}

// From the kernel's syscall tables (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h).
const ABIS: Record<string, Abi> = {
  x64: {
    audit: 0xc000003e,
    x32Bit: 0x40000000,
    clone: 56,
    clone3: 435,
    personality: 135,
    refused: {
      ptrace: 101, process_vm_readv: 310, process_vm_writev: 311,
      mount: 165, umount2: 166, pivot_root: 155, fsopen: 430, fsconfig: 431, fsmount: 432, move_mount: 429,
      open_tree: 428, open_tree_attr: 467, fspick: 433, mount_setattr: 442,
      unshare: 272, setns: 308,
      swapon: 167, swapoff: 168, reboot: 169, acct: 163, quotactl: 179, quotactl_fd: 443, syslog: 103,
      settimeofday: 164, clock_settime: 227,
      kexec_load: 246, kexec_file_load: 320, init_module: 175, finit_module: 313, delete_module: 176,
      bpf: 321, perf_event_open: 298, lookup_dcookie: 212, iopl: 172, ioperm: 173,
      add_key: 248, request_key: 249, keyctl: 250,
      userfaultfd: 323, open_by_handle_at: 304,
    },
  },
  arm64: {
    audit: 0xc00000b7,
    clone: 220,
    clone3: 435,
    personality: 92,
    refused: {
      ptrace: 117, process_vm_readv: 270, process_vm_writev: 271,
      mount: 40, umount2: 39, pivot_root: 41, fsopen: 430, fsconfig: 431, fsmount: 432, move_mount: 429,
      open_tree: 428, open_tree_attr: 467, fspick: 433, mount_setattr: 442,
      unshare: 97, setns: 268,
      swapon: 224, swapoff: 225, reboot: 142, acct: 89, quotactl: 60, quotactl_fd: 443, syslog: 116,
      settimeofday: 170, clock_settime: 112,
      kexec_load: 104, kexec_file_load: 294, init_module: 105, finit_module: 273, delete_module: 106,
      bpf: 280, perf_event_open: 241, lookup_dcookie: 18,
      add_key: 217, request_key: 218, keyctl: 219,
      userfaultfd: 282, open_by_handle_at: 265,
    },
  },
};

const CLONE_NAMESPACE_FLAGS =
  0x00020000 | // CLONE_NEWNS
  0x02000000 | // CLONE_NEWCGROUP
  0x04000000 | // CLONE_NEWUTS
  0x08000000 | // CLONE_NEWIPC
  0x10000000 | // CLONE_NEWUSER
  0x20000000 | // CLONE_NEWPID
  0x40000000; // CLONE_NEWNET

/**
 * Docker's list: plain Linux and the 32-bit and uname-2.6 flavours that old build scripts ask for,
 * and 0xffffffff, which only reads the current value. The rest (ADDR_NO_RANDOMIZE,
 * READ_IMPLIES_EXEC...) turn off memory protections, which only helps an exploit.
 */
const PERSONALITIES = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff];

// Offsets in struct seccomp_data { int nr; u32 arch; u64 instruction_pointer; u64 args[6]; }.
const NR = 0;
const ARCH = 4;
// The low half of args[0] on these little-endian machines. clone's flags and personality's value
// are 32-bit to the kernel, which ignores the high half, so checking it would only let junk there
// dodge the check.
const ARG0_LOW = 16;

const LD_ABS = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JSET = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET = 0x06; // BPF_RET | BPF_K

const ALLOW = 0x7fff0000;
const KILL_PROCESS = 0x80000000;
const EPERM = 0x00050000 | 1; // SECCOMP_RET_ERRNO | EPERM
const ENOSYS = 0x00050000 | 38;

type Insn = [code: number, jt: number, jf: number, k: number];
const load = (offset: number): Insn => [LD_ABS, 0, 0, offset];
const ret = (action: number): Insn => [RET, 0, 0, action];
/** Returns `action` for system call `nr`, else falls through. */
const on = (nr: number, action: number): Insn[] => [[JEQ, 0, 1, nr], ret(action)];
/** For system call `nr`, loads its first argument and runs `body`, which must end in returns. */
const onArg0 = (nr: number, body: Insn[]): Insn[] => [[JEQ, 0, body.length + 1, nr], load(ARG0_LOW), ...body];

// Only clone and personality look at arguments: every other verdict depends on the arch and the
// number alone, which lets the kernel (5.11 on) cache it and skip the program for those calls.
function instructions(abi: Abi): Insn[] {
  return [
    // Numbers mean different calls on another ABI (i386 via int 0x80, x32): a process switching
    // ABI is up to no good, so it is killed rather than told no.
    load(ARCH),
    [JEQ, 1, 0, abi.audit],
    ret(KILL_PROCESS),
    load(NR),
    ...(abi.x32Bit ? [[JSET, 0, 1, abi.x32Bit] as Insn, ret(KILL_PROCESS)] : []),
    ...Object.values(abi.refused).flatMap((nr) => on(nr, EPERM)),
    // clone3 passes its flags in memory, out of the filter's reach. ENOSYS makes libc fall back to
    // clone, whose flags it can see (what Docker and Flatpak do).
    ...on(abi.clone3, ENOSYS),
    ...onArg0(abi.clone, [[JSET, 0, 1, CLONE_NAMESPACE_FLAGS], ret(EPERM), ret(ALLOW)]),
    ...onArg0(abi.personality, [
      ...PERSONALITIES.map((value, i): Insn => [JEQ, PERSONALITIES.length - i, 0, value]),
      ret(EPERM),
      ret(ALLOW),
    ]),
    ret(ALLOW),
  ];
}

/**
 * The filter as struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}[] for `arch` (a process.arch
 * value), or undefined where agentd has no syscall table: there bash runs in the sandbox unfiltered.
 */
export function seccompProgram(arch: string): Buffer | undefined {
  const abi = ABIS[arch];
  if (!abi) return undefined;
  const program = instructions(abi);
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], i) => {
    bytes.writeUInt16LE(code, i * 8);
    bytes.writeUInt8(jt, i * 8 + 2);
    bytes.writeUInt8(jf, i * 8 + 3);
    bytes.writeUInt32LE(k, i * 8 + 4);
  });
  return bytes;
}
