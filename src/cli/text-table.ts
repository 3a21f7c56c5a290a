/**
 * A plain-text table: a header row and data rows, columns two spaces apart. Columns listed in
 * `right` are right-aligned (numbers). With `width`, the widest cells of the `shrink` column are
 * cut with "…" so each line fits: a terminal that wraps a row makes the table unreadable.
 */
export function textTable(rows: string[][], options: { right?: readonly number[]; width?: number; shrink?: number } = {}): string {
  const right = new Set(options.right ?? []);
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  const shrink = options.shrink;
  if (options.width !== undefined && shrink !== undefined) {
    const total = widths.reduce((sum, w) => sum + w, 0) + 2 * (widths.length - 1);
    widths[shrink] = Math.max(8, widths[shrink]! - Math.max(0, total - options.width));
  }
  const cut = (cell: string, width: number) => (cell.length > width ? `${cell.slice(0, width - 1)}…` : cell);
  return (
    rows
      .map((row) =>
        row
          .map((cell, column) => {
            const fitted = cut(cell, widths[column]!);
            return right.has(column) ? fitted.padStart(widths[column]!) : fitted.padEnd(widths[column]!);
          })
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}
