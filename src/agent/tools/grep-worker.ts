import { parentPort, workerData } from 'node:worker_threads';
import { type GrepRequest, grepSearch } from './grep-search.ts';

grepSearch(workerData as GrepRequest).then(
  (text) => parentPort?.postMessage({ ok: true, text }),
  (error: unknown) => parentPort?.postMessage({ ok: false, message: error instanceof Error ? error.message : String(error) }),
);
