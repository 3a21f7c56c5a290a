import type { AgentdClient } from '../client/index.ts';
import { textTable } from './text-table.ts';

type Metrics = Awaited<ReturnType<AgentdClient['evaluations']['metrics']>>['metrics'][number];
type Stats = Metrics['data'][string][string];

const num = (value: number | undefined, digits = 2) => (value === undefined ? '-' : Number.isInteger(value) ? String(value) : value.toFixed(digits));
const percent = (value: number | undefined) => (value === undefined ? '-' : `${(value * 100).toFixed(1)}%`);

/**
 * A run's metrics as a plain-text table: one row per step and metric, cut to `width` (a
 * terminal's) by the step and metric names, which an evaluator's slug can make long.
 */
export function metricsTable(record: Metrics, width?: number): string {
  const rows: string[][] = [['step', 'metric', 'count', 'mean', 'p50', 'p95', 'min', 'max']];
  for (const [step, metrics] of Object.entries(record.data)) {
    for (const [name, stats] of Object.entries(metrics) as [string, Stats][]) {
      // 0/1 metrics read better as rates.
      const rate = name === 'errors' || name === 'pass';
      rows.push([
        step,
        rate ? `${name === 'errors' ? 'error' : 'pass'} rate` : name,
        String(stats.count),
        rate ? percent(stats.mean) : num(stats.mean),
        rate ? '' : num(stats.p50),
        rate ? '' : num(stats.p95),
        rate ? '' : num(stats.min),
        rate ? '' : num(stats.max),
      ]);
    }
  }
  return textTable(rows, { right: [2, 3, 4, 5, 6, 7], width, shrink: [0, 1] });
}
