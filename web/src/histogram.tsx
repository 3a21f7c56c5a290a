/**
 * A histogram of a metric over a run's cases: equal-width bins from the smallest value to the
 * largest, drawn as SVG bars. Small enough not to need a charting library.
 */
export function Histogram({ values, label, bins = 12 }: { values: readonly number[]; label: string; bins?: number }) {
  if (values.length === 0) return <p className="muted">No values to chart yet.</p>;
  const min = Math.min(...values);
  const max = Math.max(...values);
  const width = max > min ? (max - min) / bins : 1;
  const counts = Array.from({ length: max > min ? bins : 1 }, () => 0);
  for (const v of values) counts[Math.min(counts.length - 1, Math.floor((v - min) / width))]!++;
  const top = Math.max(...counts);
  const bar = 100 / counts.length;
  const edge = (i: number) => (min + i * width).toPrecision(3);
  return (
    <figure className="histogram">
      <svg viewBox="0 0 100 40" preserveAspectRatio="none" role="img" aria-label={label}>
        {counts.map((count, i) => (
          <rect key={i} x={i * bar + 0.3} width={bar - 0.6} y={40 - (count / top) * 38} height={(count / top) * 38}>
            <title>{`${edge(i)} – ${edge(i + 1)}: ${count}`}</title>
          </rect>
        ))}
      </svg>
      <figcaption className="muted">
        {label}: {min.toPrecision(3)} to {max.toPrecision(3)}, {counts.length} bins, tallest {top}
      </figcaption>
    </figure>
  );
}
