import { statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkpointInBackground, openSqliteDatabase } from '../../src/store/sqlite-dialect.ts';
import { sleep, tempDir } from './helpers.ts';

/**
 * The WAL under writes that never pause: the background checkpoints cannot catch up with them, so
 * without a ceiling the WAL never starts over and grows for as long as the writes go on
 * (BENCHMARKS.md, "The WAL under a load that never pauses").
 */

const CEILING = 256 * 1024;
// A commit's frames, and those made while the worker's checkpoint holds the WAL, may go past it.
const SLACK = 64 * 1024;
const COMMITS = 20_000;

describe('the WAL ceiling', () => {
  it('starts the WAL over and cuts it back near the ceiling, however long the writes go on', async () => {
    const file = path.join(await tempDir('wal'), 'agentd.db');
    const walSize = () => statSync(`${file}-wal`).size;
    const db = openSqliteDatabase(file);
    db.exec('CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
    // The worker checkpoints every 20 ms rather than the server's 500, so that it is often in the
    // middle of one when the WAL passes the ceiling.
    const stop = checkpointInBackground(db, file, { intervalMs: 20, walCeilingBytes: CEILING });
    const insert = db.prepare('INSERT INTO rows (body) VALUES (?)');
    const body = 'x'.repeat(900);
    const commit = () => {
      db.exec('BEGIN IMMEDIATE');
      for (let i = 0; i < 4; i++) insert.run(body);
      db.exec('COMMIT');
    };
    const sizes: number[] = [];
    for (let n = 1; n <= COMMITS; n++) {
      commit();
      if (n % 200 === 0) sizes.push(walSize());
    }
    // The commits write some 300 times the ceiling: a WAL that never starts over ends that big.
    // Single samples may catch it past the ceiling, while the worker's checkpoint held it.
    const sorted = [...sizes].sort((a, b) => a - b);
    expect(sorted[Math.floor(sorted.length / 2)], `WAL sizes: ${sizes.join(' ')}`).toBeLessThanOrEqual(CEILING + SLACK);
    // Once the writes slow down, the next one finds the WAL copied and starts it over within the ceiling.
    let settled = walSize();
    for (let tries = 0; tries < 50 && settled > CEILING + SLACK; tries++) {
      await sleep(20);
      commit();
      settled = walSize();
    }
    expect(settled).toBeLessThanOrEqual(CEILING + SLACK);
    await stop();
    expect((db.prepare('SELECT count(*) AS n FROM rows').get() as { n: number }).n).toBeGreaterThanOrEqual(COMMITS * 4);
    db.close();
  });
});
