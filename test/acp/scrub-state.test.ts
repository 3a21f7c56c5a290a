import { mkdtemp, readFile, rm, symlink, utimes, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scrubState } from '../../src/harnesses/scrub-state.ts';

/** What a turn left in a harness's state folder, scrubbed of the run's secrets where it stands. */

const SECRET = 'sk-scrub-me-4411';
let root: string;
let state: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'agentd-scrub-'));
  state = path.join(root, 'state');
  await mkdir(path.join(state, 'sessions'), { recursive: true });
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe('scrubState', () => {
  it('overwrites every form of a secret in the files the turn wrote, keeping their length, and nothing else', async () => {
    const transcript = path.join(state, 'sessions', 'a.jsonl');
    const line = `{"text":"my key is ${SECRET}, again ${SECRET}"}\n`;
    await writeFile(transcript, line);
    const binary = path.join(state, 'store.db');
    await writeFile(binary, Buffer.concat([Buffer.from([0, 1, 2]), Buffer.from(SECRET)]));
    const old = path.join(state, 'old.jsonl');
    await writeFile(old, SECRET);
    const long = Date.now() / 1000 - 3600;
    await utimes(old, long, long);
    const outside = path.join(root, 'outside.txt');
    await writeFile(outside, SECRET);
    await symlink(outside, path.join(state, 'link.txt'));

    await scrubState(state, Date.now() - 60_000, [SECRET]);

    const scrubbed = await readFile(transcript, 'utf8');
    expect(scrubbed).toBe(line.replaceAll(SECRET, '*'.repeat(SECRET.length)));
    expect(JSON.parse(scrubbed).text).not.toContain(SECRET);
    // A binary file (a database's pages carry checksums), a file from an earlier turn and a link's target are left as they are.
    expect((await readFile(binary)).includes(SECRET)).toBe(true);
    expect(await readFile(old, 'utf8')).toBe(SECRET);
    expect(await readFile(outside, 'utf8')).toBe(SECRET);
  });
});
