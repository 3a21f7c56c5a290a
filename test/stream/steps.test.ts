import { describe, expect, it } from 'vitest';
import { StepTracker } from '../../src/stream/steps.ts';

describe('StepTracker', () => {
  it('opens at the first output and reopens only after a settled tool batch', () => {
    const steps = new StepTracker();
    expect(steps.beforeOutput()).toEqual(['start-step']);
    steps.call('a');
    expect(steps.beforeOutput()).toEqual([]);
    steps.call('b');
    steps.result('a');
    // b is still running, so the model cannot have been called again yet.
    expect(steps.beforeOutput()).toEqual([]);
    steps.call('c');
    steps.result('b');
    steps.result('c');
    expect(steps.beforeOutput()).toEqual(['finish-step', 'start-step']);
    expect(steps.end()).toEqual(['finish-step']);
    expect(steps.end()).toEqual([]);
  });

  it('results for calls of an earlier turn stay outside any step', () => {
    const steps = new StepTracker();
    steps.result('from-paused-turn');
    expect(steps.open).toBe(false);
    expect(steps.beforeOutput()).toEqual(['start-step']);
    expect(steps.beforeOutput()).toEqual([]);
  });
});
