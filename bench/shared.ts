/** What bench/run.ts and its child processes agree on. No side effects: children import it too. */
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';

export const TOOL_ANSWER = 'The note is written.';
/** What the tool turn's model asks the `write` tool to write. */
export const WRITTEN = { path: 'notes.txt', content: 'A note the bench asked for, written by the write tool.\n' };
export const STREAM_TEXT = 'Hello from the fake model: this is the streamed answer, in three pieces.';

export type ModelControl =
  /** `jitterMs`: each answer's latency drawn evenly from ms ± jitterMs, the same draws after every such message. */
  | { type: 'latency'; ms: number; jitterMs?: number }
  | { type: 'pace'; ms: number }
  | { type: 'capture'; on: boolean }
  | { type: 'captured' }
  | { type: 'reset' }
  | { type: 'peak' }
  | { type: 'stop' };

export interface CapturedRequest {
  path: string;
  body: unknown;
}

/** The agentd request bodies the floor replays, captured from one real turn of each kind. */
export interface FloorTemplates {
  /** The tool turn's two model calls, in order. */
  tool: [unknown, unknown];
  /** The same, streamed. */
  streamTool: [unknown, unknown];
  /** The streamed turn's single model call. */
  stream: unknown;
}

/** Every child prints one line like this on stdout when it listens, and sends it over IPC too. */
export interface Ready {
  url: string;
  apiKey?: string;
  projectId?: string;
}

/** Event-loop delay of a server child over the measured window, in ms. */
export interface LoopStats {
  p50: number;
  p99: number;
  max: number;
  /** agentd: the share of the window's turns it sent to a turn thread (AGENTD_TURN_WORKERS_LOAD). */
  turnsOnThreads?: number;
}

type Placement = { server: number; threads: number };

/**
 * Lets bench/run.ts read a child's event-loop delay over IPC (`loop-reset`, then `loop`): a long
 * synchronous stretch (a GC pause, a blocking call) shows in `max` even when medians look fine.
 * A server that runs turns also says where it ran the window's (`placement`, running totals).
 * `thread-cpu` is the CPU its main thread used since the reset: the kernel's count for that thread
 * alone, which on a crowded machine stays steadier than a profile's samples (those charge the time
 * a thread waited for a core to whatever it was running when it lost it).
 */
export async function serveLoopStats(placement?: () => Placement): Promise<void> {
  const { monitorEventLoopDelay } = await import('node:perf_hooks');
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  let from: Placement | undefined;
  let cpuFrom = process.threadCpuUsage();
  process.on('message', (msg: { type?: string }) => {
    if (msg.type === 'loop-reset') {
      histogram.reset();
      from = placement && { ...placement() };
      cpuFrom = process.threadCpuUsage();
      process.send?.({ type: 'ok' });
    } else if (msg.type === 'thread-cpu') {
      const used = process.threadCpuUsage(cpuFrom);
      process.send?.({ type: 'thread-cpu', ms: (used.user + used.system) / 1000 });
    } else if (msg.type === 'loop') {
      const ms = (ns: number) => ns / 1e6;
      const stats: LoopStats = { p50: ms(histogram.percentile(50)), p99: ms(histogram.percentile(99)), max: ms(histogram.max) };
      if (placement && from) {
        const now = placement();
        const threads = now.threads - from.threads;
        const turns = threads + now.server - from.server;
        if (turns > 0) stats.turnsOnThreads = threads / turns;
      }
      process.send?.({ type: 'loop', ...stats });
    }
  });
}

export const CLK_TCK = 100; // USER_HZ: /proc reports ticks of 1/100 s on Linux whatever the kernel HZ.

/** CPU a process (every thread of it) has used so far, in ms, from /proc; undefined once it is gone. */
export function procCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is parenthesised and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/** A process's resident memory in MB, from /proc; undefined once it is gone. */
export function procRssMb(pid: number | string): number | undefined {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;
  } catch {
    return undefined;
  }
}

/**
 * Waits until a server has finished every turn it started: its CPU stops growing (under 2 ms in
 * 100 ms, what its timers cost idle), or 10 s pass. A turn whose client the load generator left
 * at the end of a run still runs to its end, and its CPU belongs to the run that started it.
 */
export async function settled(pid: number): Promise<void> {
  let last = procCpuMs(pid);
  for (let waited = 0; waited < 10_000; waited += 100) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const now = procCpuMs(pid);
    if (now === undefined || last === undefined || now - last < 2) return;
    last = now;
  }
}

/** A process's memory at one moment (bench/memory.ts). */
export interface Memory {
  rss: number;
  rssAnon: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
}

/** Two readings of this process's memory, when it runs with --expose-gc (bench/memory.ts). */
export interface MemoryReadings {
  /**
   * After two ordinary forced collections: V8 keeps the pages they freed for the next
   * allocations, so this is what the process holds between collections.
   */
  collected: Memory;
  /**
   * After the collection V8 makes before giving up on an allocation, which compacts the heap and
   * gives freed pages back to the system: what the process needs to hold.
   */
  compacted: Memory;
}

/** A heap snapshot of this process into `file`, taken after the collections a reading makes (bench/heap-diff.ts reads two). */
export function heapSnapshot(file: string): { file: string } {
  memoryReadings();
  return { file: v8.writeHeapSnapshot(file) };
}

export function memoryReadings(): MemoryReadings {
  const gc = (globalThis as { gc?: (options?: object) => void }).gc;
  gc?.();
  gc?.();
  const collected = memoryNow();
  gc?.({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return { collected, compacted: memoryNow() };
}

/**
 * `rssAnon` leaves out the file pages RSS also counts: SQLite reads its file through a memory
 * map, so every page of the database it touched would count as held.
 */
function memoryNow(): Memory {
  const anonKb = Number(/RssAnon:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? Number.NaN);
  const { rss, heapUsed, heapTotal, external } = process.memoryUsage();
  return { rss, rssAnon: anonKb * 1024, heapUsed, heapTotal, external };
}
