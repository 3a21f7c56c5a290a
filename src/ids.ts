import { randomUUID } from 'node:crypto';

/**
 * Ids of the rows made turn after turn (turns, minted sessions, interactions, evaluation runs and
 * test cases): UUIDv7 (RFC 9562), whose leading bits are the time. Each new row then lands at the
 * right edge of its primary key and of the indexes that start with it, so a commit writes a few
 * B-tree pages instead of one random page per index per row: in the store's five statements per
 * turn this took SQLite from 35–48 µs to 18 µs of CPU per turn, and the random case grows with the
 * table (BENCHMARKS.md, "Time-ordered ids"). They are no secrets: every read is checked against
 * the caller's project, and a row's creation time is in the row anyway.
 *
 * Written here rather than taken from the `uuid` package, whose v7 draws fresh bytes from Web
 * Crypto for every id: 4.6% of the server thread's CPU in the JSON echo. `randomUUID` serves its
 * random bits from Node's pool; the time and a counter replace its first 64 bits but the variant's.
 */
let lastMs = -1;
/** RFC 9562's `rand_a` as a counter, so ids made in one millisecond still sort in the order made. */
let counter = 0;

export function newId(): string {
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    // Starts low in its range, leaving room to count up within the millisecond.
    counter = Math.floor(Math.random() * 0x400);
  } else if (++counter > 0xfff) {
    // 4,096 ids in one millisecond: borrow the next one, as RFC 9562 §6.2 allows.
    lastMs++;
    counter = 0;
  }
  const time = lastMs.toString(16).padStart(12, '0');
  // randomUUID is xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx; from its fourth group on (the variant V
  // and 62 random bits) it is kept.
  return `${time.slice(0, 8)}-${time.slice(8)}-7${counter.toString(16).padStart(3, '0')}${randomUUID().slice(18)}`;
}
