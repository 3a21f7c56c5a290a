import { terminalColumns } from './text-table.ts';

/**
 * A progress line on stderr: rewritten in place on a terminal, printed every few seconds (and at
 * the end) when stderr is a file or a pipe, so CI logs stay readable.
 */
export interface ProgressCounts {
  total: number;
  done: number;
  failed: number;
  inFlight: number;
}

const PLAIN_EVERY_MS = 5000;

function duration(ms: number): string {
  if (!Number.isFinite(ms)) return '?';
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

/** The widest bar; a narrower terminal gets a narrower one, and below a few characters none. */
const BAR = 24;
const MIN_BAR = 5;

/**
 * One progress line. With `columns` (a terminal's width) it fits in one less, so a rewrite in
 * place never wraps: the bar narrows first, then goes, then the text is cut.
 */
export function progressLine(counts: ProgressCounts, elapsedMs: number, columns?: number): string {
  const share = counts.total ? counts.done / counts.total : 1;
  const rate = elapsedMs > 0 ? counts.done / (elapsedMs / 1000) : 0;
  const eta = rate > 0 ? ((counts.total - counts.done) / rate) * 1000 : Infinity;
  const text = `${counts.done}/${counts.total} done, ${counts.failed} failed, ${counts.inFlight} in flight, ${rate.toFixed(1)}/s, ETA ${counts.done === counts.total ? '0s' : duration(eta)}`;
  const room = columns === undefined ? Infinity : columns - 1;
  const width = Math.min(BAR, room - text.length - 3);
  if (width < MIN_BAR) return text.length > room ? `${text.slice(0, Math.max(0, room - 1))}…` : text;
  const filled = Math.round(share * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${text}`;
}

export class ProgressReporter {
  private readonly started = Date.now();
  private lastPlain = 0;
  private readonly tty: boolean;
  private readonly write: (text: string) => void;
  private readonly columns: () => number | undefined;

  constructor(stream: { isTTY?: boolean; columns?: number; write(text: string): unknown } = process.stderr) {
    this.tty = stream.isTTY === true;
    this.write = (text) => void stream.write(text);
    // Read at each update: the terminal may be resized while a run goes on.
    this.columns = () => terminalColumns(stream);
  }

  update(counts: ProgressCounts): void {
    const line = progressLine(counts, Date.now() - this.started, this.columns());
    if (this.tty) this.write(`\r\x1b[2K${line}`);
    else if (Date.now() - this.lastPlain >= PLAIN_EVERY_MS) {
      this.lastPlain = Date.now();
      this.write(`${line}\n`);
    }
  }

  finish(counts: ProgressCounts): void {
    const line = progressLine(counts, Date.now() - this.started, this.columns());
    this.write(this.tty ? `\r\x1b[2K${line}\n` : `${line}\n`);
  }
}
