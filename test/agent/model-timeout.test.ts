import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { watched } from '../../src/agent/model-timeout.ts';

describe("a model call's watchdog", () => {
  it("ends the call when the turn's signal aborts, with the turn's reason", async () => {
    const turn = new AbortController();
    const reason = new Error('stopped');
    const call = watched(60_000, turn.signal, (signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))));
    turn.abort(reason);
    await expect(call).rejects.toBe(reason);
  });

  it('starts aborted when the turn already is', async () => {
    const turn = new AbortController();
    turn.abort(new Error('gone'));
    const { value, watch } = await watched(60_000, turn.signal, async (signal) => signal.reason);
    watch.stop();
    expect(value).toBe(turn.signal.reason);
  });

  it("lets go of the turn's signal once each call has stopped, and no longer follows it", async () => {
    const turn = new AbortController();
    const signals: AbortSignal[] = [];
    for (let i = 0; i < 50; i++) {
      const { watch } = await watched(60_000, turn.signal, async (signal) => signals.push(signal));
      watch.stop();
    }
    await expect(watched(60_000, turn.signal, async () => Promise.reject(new Error('refused')))).rejects.toThrow('refused');
    expect(getEventListeners(turn.signal, 'abort')).toHaveLength(0);
    turn.abort();
    expect(signals.some((s) => s.aborted)).toBe(false);
  });

  it('times out a call that does not answer, and says which setting', async () => {
    const call = watched(20, undefined, (signal) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))));
    await expect(call).rejects.toMatchObject({ type: 'upstream-timeout', message: expect.stringContaining('AGENTD_MODEL_TIMEOUT_MS') });
  });
});
