import module from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';

/** A thread for test/agent/worker-thread.test.ts: says where its compile cache is, or fails to load when asked to. */
const { fail } = workerData as { fail?: boolean };
if (fail) throw new Error('this module failed to load');
parentPort!.postMessage({ cacheDir: module.getCompileCacheDir?.() ?? null });
