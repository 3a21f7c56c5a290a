import type { Stats } from '../contract/evaluations.ts';

/**
 * Summary statistics of a metric over a run's results. Non-finite values are dropped rather than
 * counted, so one NaN from a broken evaluator cannot turn every statistic of the metric into NaN.
 * Nothing is rounded: clients format numbers for display, and rounding here would lose precision
 * they may want.
 */
export function summarize(values: readonly number[]): Stats {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  const count = sorted.length;
  if (count === 0) return { count };
  const sum = sorted.reduce((total, v) => total + v, 0);
  const mean = sum / count;
  // Two passes (mean first, then squared deviations) stay accurate where sum-of-squares does not.
  const variance = sorted.reduce((total, v) => total + (v - mean) ** 2, 0) / count;
  return {
    count,
    sum,
    mean,
    min: sorted[0]!,
    max: sorted[count - 1]!,
    stddev: Math.sqrt(variance),
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p95: percentile(sorted, 0.95),
    p99: percentile(sorted, 0.99),
  };
}

/**
 * Linear interpolation between the closest ranks (Hyndman & Fan type 7, numpy's default), so the
 * numbers match what users get when they check them in a notebook.
 */
function percentile(sorted: readonly number[], p: number): number {
  const rank = p * (sorted.length - 1);
  const lower = Math.floor(rank);
  const below = sorted[lower]!;
  const above = sorted[Math.ceil(rank)]!;
  return below + (above - below) * (rank - lower);
}
