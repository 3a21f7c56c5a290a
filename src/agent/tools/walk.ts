import fsSync, { type Dirent } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { inOpenedFolder, isInside, openedPath } from './confine.ts';

/** Folders that are huge and almost never what the model is looking for. */
export const SKIPPED_DIRS: ReadonlySet<string> = new Set(['.git', 'node_modules']);

/** Upper bound on entries visited in one walk, so a giant tree cannot stall a turn. */
export const WALK_MAX_ENTRIES = 200_000;

export interface WalkEntry {
  /** Absolute path on disk. */
  abs: string;
  /** Path relative to the walk's start, "/"-separated. */
  rel: string;
  kind: 'file' | 'dir' | 'symlink' | 'other';
}

export interface WalkOptions {
  signal?: AbortSignal | undefined;
  /** Called once when the walk stops early at WALK_MAX_ENTRIES. */
  onLimit?: () => void;
  /** The session folder's real path: a folder found outside it when opened (swapped for a symlink) is skipped. */
  realRoot?: string;
}

/**
 * A folder's entries, read through a descriptor opened without following a symlink at its last
 * component and checked to be inside `realRoot`, so a folder swapped for a symlink since it was
 * listed (O_NOFOLLOW) or one above it (the check) leads nowhere. Unreadable folders are empty.
 */
async function entriesOf(absDir: string, realRoot: string | undefined): Promise<Dirent[]> {
  let fd: number;
  try {
    fd = fsSync.openSync(absDir, fsSync.constants.O_RDONLY | fsSync.constants.O_DIRECTORY | fsSync.constants.O_NOFOLLOW);
  } catch {
    return [];
  }
  try {
    const where = openedPath(fd);
    if (where === undefined) return await fs.readdir(absDir, { withFileTypes: true }).catch(() => []);
    if (realRoot !== undefined && !isInside(realRoot, where)) return [];
    return await fs.readdir(inOpenedFolder(fd), { withFileTypes: true }).catch(() => []);
  } finally {
    fsSync.closeSync(fd);
  }
}

/**
 * Walk under `start`, each folder's entries in name order, that never follows symlinks, so a
 * link inside the folder cannot lead the walk outside it. Unreadable folders are skipped.
 */
export async function* walk(start: string, { signal, onLimit, realRoot }: WalkOptions = {}): AsyncGenerator<WalkEntry> {
  const stack: string[] = [''];
  let visited = 0;
  while (stack.length > 0) {
    signal?.throwIfAborted();
    const relDir = stack.pop() as string;
    const absDir = relDir === '' ? start : path.join(start, relDir);
    const dirents = await entriesOf(absDir, realRoot);
    dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const subdirs: string[] = [];
    for (const dirent of dirents) {
      visited += 1;
      if (visited > WALK_MAX_ENTRIES) {
        onLimit?.();
        return;
      }
      const rel = relDir === '' ? dirent.name : `${relDir}/${dirent.name}`;
      const abs = path.join(absDir, dirent.name);
      if (dirent.isDirectory()) {
        yield { abs, rel, kind: 'dir' };
        if (!SKIPPED_DIRS.has(dirent.name)) subdirs.push(rel);
      } else {
        yield { abs, rel, kind: dirent.isFile() ? 'file' : dirent.isSymbolicLink() ? 'symlink' : 'other' };
      }
    }
    // Reverse so the stack pops them in name order.
    for (let i = subdirs.length - 1; i >= 0; i -= 1) stack.push(subdirs[i] as string);
  }
}
