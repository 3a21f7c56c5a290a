import { describe, expect, it } from 'vitest';
import { summarize } from '../../src/evaluation/stats.ts';

/** Summary statistics: exact values, numpy's default percentile definition, and the edge cases. */

describe('summarize', () => {
  it('gives every statistic of a small sample', () => {
    expect(summarize([4, 1, 3, 2])).toEqual({
      count: 4,
      sum: 10,
      mean: 2.5,
      min: 1,
      max: 4,
      stddev: Math.sqrt(1.25),
      p50: 2.5,
      p90: 3.7,
      p95: 3.8499999999999996,
      p99: 3.9699999999999998,
    });
  });

  it('uses the population standard deviation', () => {
    expect(summarize([2, 4, 4, 4, 5, 5, 7, 9]).stddev).toBe(2);
  });

  it('gives the value itself for every statistic of a single value, and stddev 0', () => {
    expect(summarize([7])).toEqual({ count: 1, sum: 7, mean: 7, min: 7, max: 7, stddev: 0, p50: 7, p90: 7, p95: 7, p99: 7 });
  });

  it('gives only the count of an empty sample', () => {
    expect(summarize([])).toEqual({ count: 0 });
  });

  it('ignores NaN and infinities', () => {
    expect(summarize([NaN, 1, Infinity, 3, -Infinity])).toMatchObject({ count: 2, sum: 4, mean: 2, min: 1, max: 3 });
    expect(summarize([NaN, Infinity])).toEqual({ count: 0 });
  });

  it('does not mutate its input', () => {
    const values = [3, 1, 2];
    summarize(values);
    expect(values).toEqual([3, 1, 2]);
  });

  it('interpolates between closest ranks on 1..1000', () => {
    const values = Array.from({ length: 1000 }, (_, i) => 1000 - i);
    expect(summarize(values)).toMatchObject({ count: 1000, sum: 500500, mean: 500.5, min: 1, max: 1000, p50: 500.5, p90: 900.1, p95: 950.05, p99: 990.01 });
  });

  it('sorts numerically, not as text', () => {
    expect(summarize([10, 9, 100])).toMatchObject({ min: 9, max: 100, p50: 10 });
  });
});
