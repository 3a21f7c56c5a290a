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

export function progressLine(counts: ProgressCounts, elapsedMs: number, width = 24): string {
  const share = counts.total ? counts.done / counts.total : 1;
  const filled = Math.round(share * width);
  const rate = elapsedMs > 0 ? counts.done / (elapsedMs / 1000) : 0;
  const eta = rate > 0 ? ((counts.total - counts.done) / rate) * 1000 : Infinity;
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${counts.done}/${counts.total} done, ${counts.failed} failed, ${counts.inFlight} in flight, ${rate.toFixed(1)}/s, ETA ${counts.done === counts.total ? '0s' : duration(eta)}`;
}

export class ProgressReporter {
  private readonly started = Date.now();
  private lastPlain = 0;
  private readonly tty: boolean;
  private readonly write: (text: string) => void;

  constructor(stream: { isTTY?: boolean; write(text: string): unknown } = process.stderr) {
    this.tty = stream.isTTY === true;
    this.write = (text) => void stream.write(text);
  }

  update(counts: ProgressCounts): void {
    const line = progressLine(counts, Date.now() - this.started);
    if (this.tty) this.write(`\r\x1b[2K${line}`);
    else if (Date.now() - this.lastPlain >= PLAIN_EVERY_MS) {
      this.lastPlain = Date.now();
      this.write(`${line}\n`);
    }
  }

  finish(counts: ProgressCounts): void {
    const line = progressLine(counts, Date.now() - this.started);
    this.write(this.tty ? `\r\x1b[2K${line}\n` : `${line}\n`);
  }
}
