import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { workerThread } from '../../src/worker-thread.ts';

/** workerThread: a TypeScript module on a thread of its own, Node's compile cache on before it loads. */

const entry = new URL('../support/compile-cache-worker.ts', import.meta.url);

describe('a worker thread', () => {
  it.skipIf(process.env.NODE_DISABLE_COMPILE_CACHE)('runs its module with the compile cache on from its first line', async () => {
    const worker = workerThread(entry, { workerData: {} });
    const [message] = await once(worker, 'message');
    expect(message.cacheDir).toEqual(expect.any(String));
    await worker.terminate();
  });

  it('reports a module that fails to load as the thread\'s error, and ends', async () => {
    const worker = workerThread(entry, { workerData: { fail: true } });
    // Listened for from the start: the exit may follow the error before a later listener is on
    // (and not with `once`, which rejects on the error).
    const exited = new Promise<[number]>((resolve) => worker.once('exit', (code) => resolve([code])));
    const [error] = await once(worker, 'error');
    expect(error).toMatchObject({ message: 'this module failed to load' });
    const [code] = await exited;
    expect(code).toBe(1);
  });
});
