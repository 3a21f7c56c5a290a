import { v7 } from 'uuid';

/**
 * Ids of the rows made turn after turn (turns, minted sessions, interactions, evaluation runs and
 * test cases): UUIDv7, whose leading bits are the time. Each new row then lands at the right edge
 * of its primary key and of the indexes that start with it, so a commit writes a few B-tree pages
 * instead of one random page per index per row: in the store's five statements per turn this took
 * SQLite from 35–48 µs to 18 µs of CPU per turn, and the random case grows with the table
 * (BENCHMARKS.md, "Time-ordered ids"). They are no secrets: every read is checked against the
 * caller's project, and a row's creation time is in the row anyway.
 */
export const newId = (): string => v7();
