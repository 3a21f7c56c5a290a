import stringWidth from 'string-width';

/** Narrowest a shrunk column gets: a few letters and "…", enough to recognise what it holds. */
const MIN_SHRUNK = 5;

/**
 * A plain-text table: a header row and data rows, columns two spaces apart, each cell on one line.
 * Columns listed in `right` are right-aligned (numbers). With `width`, the `shrink` columns give
 * up room, the widest first, and their cells are cut with "…" so each line fits: a terminal that
 * wraps a row makes the table unreadable.
 */
export function textTable(rows: string[][], options: { right?: readonly number[]; width?: number | undefined; shrink?: readonly number[] } = {}): string {
  const right = new Set(options.right ?? []);
  const flat = rows.map((row) => row.map((cell) => printable(cell.replace(/\s+/g, ' '))));
  const widths = flat[0]!.map((_, column) => Math.max(...flat.map((row) => displayWidth(row[column]!))));
  const shrink = options.shrink ?? [];
  if (options.width !== undefined && shrink.length) {
    let over = widths.reduce((sum, w) => sum + w, 0) + 2 * (widths.length - 1) - options.width;
    while (over > 0) {
      const widest = shrink.reduce((a, b) => (widths[b]! > widths[a]! ? b : a));
      if (widths[widest]! <= MIN_SHRUNK) break;
      widths[widest]!--;
      over--;
    }
  }

  return (
    flat
      .map((row) =>
        row
          .map((cell, column) => {
            const fitted = fitLine(cell, widths[column]!);
            // A cut before a wide character leaves its column short: padding makes it up.
            const pad = ' '.repeat(widths[column]! - displayWidth(fitted));
            return right.has(column) ? pad + fitted : fitted + pad;
          })
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}

/**
 * The room a line has when output goes to a terminal: one less than its width, since a line that
 * fills the last column leaves the cursor waiting to wrap, and some terminals then wrap the next
 * line onto it. Undefined for a file or a pipe, which keep whole lines.
 */
export const terminalWidth = (stream: { isTTY?: boolean; columns?: number } = process.stdout): number | undefined => {
  const columns = terminalColumns(stream);
  return columns === undefined ? undefined : columns - 1;
};

/**
 * A terminal's columns; undefined for a file or a pipe. A pseudo-terminal that reports no size
 * (`script`, `docker run -t`, some CI runners) says 0: then COLUMNS, else 80, rather than a width
 * that cuts every line down to "…".
 */
export const terminalColumns = (stream: { isTTY?: boolean; columns?: number }): number | undefined =>
  stream.isTTY ? stream.columns || Number(process.env.COLUMNS) || 80 : undefined;

/** A control character's picture (ESC as ␛, DEL as ␡; C1 as U+FFFD). */
const picture = (c: string): string => (c === '\u007f' ? '\u2421' : c < ' ' ? String.fromCharCode(0x2400 + c.charCodeAt(0)) : '\ufffd');

/**
 * Text a model, a test set or a record wrote, safe to print: control characters show as their
 * pictures (ESC as ␛) instead of reaching the terminal, where an escape sequence in an answer
 * could retitle the window, clear the screen, recolour what follows or rewrite a line already shown.
 */
export const printable = (text: string): string => text.replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g, picture);

/** The same for text that flows over lines (a model's answer): its line breaks and tabs are kept. */
export const printableFlow = (text: string): string => text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, picture);

/**
 * The columns text takes on a terminal, which its length does not say: a Chinese or Japanese
 * character and most emoji take two, a combining accent none, and an emoji can be several
 * UTF-16 code units (or several code points joined into one picture).
 */
export const displayWidth = (text: string): number => stringWidth(text);

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/**
 * The longest start of `text` that takes at most `width` columns. It is cut between what a reader
 * sees as characters (graphemes), never inside one: half a surrogate pair shows as "�", and
 * half an emoji sequence or a letter without its accent as something else.
 */
export function cutToWidth(text: string, width: number): string {
  let used = 0;
  for (const { segment, index } of graphemes.segment(text)) {
    used += displayWidth(segment);
    if (used > width) return text.slice(0, index);
  }
  return text;
}

/** A line of text cut with "…" to `width` (a terminal's), whole when there is none. */
export const fitLine = (text: string, width: number | undefined): string => {
  const line = printable(text);
  return width !== undefined && displayWidth(line) > width ? `${cutToWidth(line, width - 1)}…` : line;
};

/**
 * Words on as few lines as fit `width` (a terminal's), each line after the first indented by two;
 * one line when there is no width. A "word" may hold spaces (`0 left of 2`): it is never split,
 * and one longer than the room goes whole.
 */
export function wrapWords(words: readonly string[], width: number | undefined): string {
  const lines: string[] = [];
  let line = '';
  for (const word of words.map(printable)) {
    if (line && width !== undefined && displayWidth(line) + 1 + displayWidth(word) > width) {
      lines.push(line);
      line = `  ${word}`;
    } else line = line ? `${line} ${word}` : word;
  }
  return `${[...lines, line].join('\n')}\n`;
}
