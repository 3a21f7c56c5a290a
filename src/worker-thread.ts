import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * A worker thread running the TypeScript module `entry`, with Node's compile cache on before that
 * module loads. A thread starts without the cache that bin/agentd.js turns on for the main thread,
 * and turning it on from the module itself comes too late for that module: stripping its types
 * loads Node's TypeScript transformer (WebAssembly) first, 12 MB of memory in every thread for
 * good. One line of JavaScript turns the cache on instead, and a module found in the cache loads
 * without the transformer (BENCHMARKS.md, "An idle server").
 */
export function workerThread(entry: URL, options: WorkerOptions = {}): Worker {
  return new Worker(`require('node:module').enableCompileCache?.(); import(${JSON.stringify(entry.href)});`, { ...options, eval: true });
}
