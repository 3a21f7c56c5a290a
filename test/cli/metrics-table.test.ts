import { describe, expect, it } from 'vitest';
import { metricsTable } from '../../src/cli/metrics-table.ts';

const stats = { count: 12, mean: 0.8333, p50: 1, p95: 1, min: 0.25, max: 1 };
const record = {
  run_id: 'run-1',
  status: 'success' as const,
  data: {
    'application-a-workflow-with-a-rather-long-slug': { duration_ms: { ...stats, mean: 1234.5 }, errors: { count: 12, mean: 0 } },
    'evaluator-an-evaluator-whose-name-goes-on-for-a-while': { 'a-score-with-a-long-metric-name': stats, pass: { count: 12, mean: 0.75 } },
  },
};

describe('the metrics table of `agentd eval`', () => {
  it('cuts the step and metric names, never the numbers, to fit a terminal', () => {
    const lines = metricsTable(record, 60).trimEnd().split('\n');
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(60);
    expect(lines.join('\n')).toContain('…');
    expect(lines.find((line) => line.includes('pass rate'))).toMatch(/12\s+75\.0%$/);
    expect(lines.find((line) => line.includes('1234.50'))).toMatch(/12\s+1234\.50\s+1\s+1\s+0\.25\s+1$/);
  });

  it('keeps whole lines for a file or a pipe', () => {
    const text = metricsTable(record);
    expect(text).toContain('evaluator-an-evaluator-whose-name-goes-on-for-a-while');
    expect(text).toContain('a-score-with-a-long-metric-name');
    expect(text).not.toContain('…');
  });
});
