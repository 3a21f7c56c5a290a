import { describe, expect, it } from 'vitest';
import { TurnPool } from '../../src/agent/turn-pool.ts';
import type { PooledTurnInput, WorkerSettings } from '../../src/agent/turn-wire.ts';

/**
 * A turn thread that dies fails every turn on it. The error is one turn's, of any project, and
 * may quote that turn's secrets; each turn masks what it is told with its own secrets only, so
 * the others are told only that the thread crashed.
 */

const B_KEY = 'sk-project-b-request-key-777';
const settings = { env: {}, openaiCompatible: {}, connections: { allowedHosts: undefined }, prices: {}, maxSteps: 5, modelTimeoutMs: 1000, modelMaxRetries: 0, bash: { timeoutMs: 1000, maxOutputBytes: 1024, unsafeHost: false } } as unknown as WorkerSettings;
const input = (turnId: string, secrets: Record<string, string>) => ({ turnId, sessionId: turnId, traceId: 't', history: [], secrets }) as unknown as PooledTurnInput;

async function failure(turn: AsyncGenerator<unknown>): Promise<Error | undefined> {
  try {
    for await (const _ of turn) void _;
  } catch (error) {
    return error as Error;
  }
  return undefined;
}

describe('a turn thread that crashes', () => {
  it("fails every turn on it, telling none of them the crashing turn's error", async () => {
    const pool = new TurnPool(1, settings, new URL('../support/secret-quoting-turn-worker.ts', import.meta.url));
    try {
      const [b, a] = await Promise.all([
        failure(pool.run(input('turn-of-b', { OPENAI_API_KEY: B_KEY }), new AbortController().signal)),
        failure(pool.run(input('turn-of-a', {}), new AbortController().signal)),
      ]);
      for (const error of [a, b]) {
        expect(error).toMatchObject({ type: 'unavailable', message: 'the thread running the turn stopped (an uncaught Error); send the turn again' });
      }
    } finally {
      pool.close();
    }
  });
});
