import type { Worker } from 'node:worker_threads';
import { workerThread } from '../worker-thread.ts';

/**
 * A regex evaluator's test, off the server's thread and bounded in time. A pattern such as
 * `(a+)+$` backtracks for hours on some texts, and run on the event loop it would freeze every
 * project's requests; V8's linear-time engine would not, but refuses the `i` and `u` flags and
 * much else that evaluators use. One thread runs every test in turn. A test over its time ends
 * the thread (it cannot be interrupted otherwise) and fails; the tests queued behind it go to a
 * new one.
 */

export interface RegexTestRequest {
  id: number;
  pattern: string;
  flags: string;
  text: string;
}
export type RegexTestResult = { id: number; matched: boolean; error?: undefined } | { id: number; error: string; matched?: undefined };

const REGEX_TIME_LIMIT_MS = 2_000;

interface Waiting {
  request: RegexTestRequest;
  resolve: (matched: boolean) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

let thread: Worker | undefined;
const waiting = new Map<number, Waiting>();
let nextId = 0;

function started(): Worker {
  if (thread) return thread;
  const worker = workerThread(new URL('./regex-worker.ts', import.meta.url), { resourceLimits: { maxOldGenerationSizeMb: 256 } });
  worker.on('message', (result: RegexTestResult) => {
    const call = waiting.get(result.id);
    if (!call) return;
    waiting.delete(result.id);
    clearTimeout(call.timer);
    if (result.error === undefined) call.resolve(result.matched);
    else call.reject(new Error(result.error));
  });
  const gone = (error: Error) => {
    if (thread !== worker) return;
    thread = undefined;
    for (const [id, call] of waiting) {
      waiting.delete(id);
      clearTimeout(call.timer);
      call.reject(error);
    }
  };
  worker.on('error', gone);
  worker.on('exit', (code) => gone(new Error(`the regex thread stopped (exit code ${code})`)));
  // Tests in flight belong to evaluation cases, which keep the process busy themselves. After the
  // listeners: adding a 'message' listener refs the thread's port again, and a server that had
  // scored one case then never exited on SIGTERM.
  worker.unref();
  thread = worker;
  return worker;
}

function send(call: Waiting, limitMs: number): void {
  call.timer = setTimeout(() => timedOut(call, limitMs), limitMs);
  waiting.set(call.request.id, call);
  started().postMessage(call.request);
}

function timedOut(stuck: Waiting, limitMs: number): void {
  waiting.delete(stuck.request.id);
  const behind = [...waiting.values()];
  waiting.clear();
  const worker = thread;
  thread = undefined;
  void worker?.terminate();
  stuck.reject(new Error(`the pattern ran longer than ${limitMs} ms on this output (it backtracks without end on some texts); simplify it`));
  for (const call of behind) {
    clearTimeout(call.timer);
    send(call, limitMs);
  }
}

/** Whether `pattern` matches `text`; rejects when the pattern is invalid or runs over `limitMs`. */
export function regexTest(pattern: string, flags: string, text: string, limitMs = REGEX_TIME_LIMIT_MS): Promise<boolean> {
  return new Promise((resolve, reject) => {
    send({ request: { id: nextId++, pattern, flags, text }, resolve, reject, timer: undefined as never }, limitMs);
  });
}
