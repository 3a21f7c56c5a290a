import { statSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

/**
 * Copies the WAL back into the database file from a second connection on its own thread. Left to
 * SQLite, that copy runs inside whichever commit crosses the auto-checkpoint size, synchronously
 * on the server's event loop, stalling every live turn for ~10 ms (BENCHMARKS.md). PASSIVE never
 * waits for the server's writes, so the server never waits for it.
 *
 * Once the WAL is past its ceiling, the server's own connection checkpoints after its commits
 * (sqlite-dialect.ts), and this one stands aside: its checkpoint would only make the server's
 * find the WAL busy.
 */
const { location, intervalMs, ceilingBytes } = workerData as { location: string; intervalMs: number; ceilingBytes: number };
const db = new DatabaseSync(location);
db.exec('PRAGMA busy_timeout = 1000');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
const walSize = () => statSync(`${location}-wal`, { throwIfNoEntry: false })?.size ?? 0;

const timer = setInterval(() => {
  try {
    if (walSize() <= ceilingBytes) checkpoint.all();
  } catch {
    // A busy database is retried at the next tick; the WAL only grows meanwhile.
  }
}, intervalMs);
parentPort?.on('message', (message) => {
  if (message === 'stop') {
    clearInterval(timer);
    try {
      checkpoint.all();
    } finally {
      db.close();
      parentPort?.close();
    }
  }
});
