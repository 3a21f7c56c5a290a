import { constants } from 'node:fs';
import { open, readdir } from 'node:fs/promises';
import path from 'node:path';

/** Larger files are not read into memory to be scrubbed (a transcript this size is far past any turn's). */
const MAX_BYTES = 64 * 1024 * 1024;

/**
 * A harness keeps what its model and tools told it in files of its own in its state folder
 * (Claude's `projects/*.jsonl`, Codex's rollouts, Pi's sessions). The relay masks the run's secrets
 * in what passes it, but a model streams its text in pieces: a secret split between two deltas
 * passes in pieces no mask matches, and the harness joins them in its transcript. So after each
 * turn every file the turn wrote has each form of the secrets (`secretList`) overwritten where it
 * stands with as many `*`: the length stays, so a parked harness process still appending to the
 * file is not disturbed, and the JSON around it stays valid. A file holding a NUL byte is binary
 * (a database, whose pages and WAL frames carry checksums) and is left alone; links are not
 * followed, so nothing outside the folder is written.
 */
export async function scrubState(dir: string, sinceMs: number, secrets: readonly string[]): Promise<void> {
  if (secrets.length === 0) return;
  const needles = secrets.map((secret) => Buffer.from(secret));
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const file = await open(path.join(entry.parentPath, entry.name), constants.O_RDWR | constants.O_NOFOLLOW).catch(() => undefined);
    if (!file) continue;
    try {
      const { mtimeMs, size } = await file.stat();
      if (mtimeMs < sinceMs || size > MAX_BYTES) continue;
      const data = await file.readFile();
      if (data.includes(0)) continue;
      for (const needle of needles) {
        for (let at = data.indexOf(needle); at !== -1; at = data.indexOf(needle, at + needle.length)) {
          const stars = Buffer.alloc(needle.length, '*');
          stars.copy(data, at);
          await file.write(stars, 0, stars.length, at);
        }
      }
    } finally {
      await file.close();
    }
  }
}
