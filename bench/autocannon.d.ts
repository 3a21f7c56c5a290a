// autocannon ships no types; this declares only the part of its programmatic API bench/run.ts uses.
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  export interface Options {
    url: string;
    connections?: number;
    /** Seconds. */
    duration?: number;
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    /** Seconds. */
    timeout?: number;
    pipelining?: number;
  }

  export interface Stats {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
  }

  export interface Result {
    /** Seconds. */
    duration: number;
    start: Date;
    finish: Date;
    errors: number;
    timeouts: number;
    non2xx: number;
    resets: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
    latency: Stats;
    requests: Stats & { sent: number };
    throughput: Stats;
  }

  /** Emits `response` (client, statusCode, resBytes, responseTimeMs) for every completed response. */
  export interface Instance extends EventEmitter, PromiseLike<Result> {}

  export default function autocannon(options: Options): Instance;
}
