import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { checkOpened, confine, displayPath, inOpenedFolder, resolveInside } from '../agent/tools/confine.ts';
import { fileError, openRegularFile, writeInside } from '../agent/tools/files.ts';
import { ToolError } from '../agent/tools/tool-error.ts';
import type { FileEntry, FileListing, FileUploaded } from '../contract/sessions.ts';
import { AppError } from '../errors.ts';

/**
 * Reading and writing a session folder from outside a turn, under the same confinement as the
 * agent's tools: the real path decides, so `..`, absolute paths and symlinks cannot reach out.
 */

function errnoCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : undefined;
}

function missingPath(userPath: string): AppError {
  return new AppError('not-found', `path "${userPath}" does not exist in the session folder`);
}

/**
 * Runs `work` on `userPath`, answering the tools' refusals as the caller's to fix (a 400 with the
 * same explanation) and a path that is not there as a 404.
 */
async function confined<T>(userPath: string, work: () => T | Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') throw missingPath(userPath);
    const refusal = error instanceof ToolError ? error : fileError(error, userPath);
    if (refusal instanceof ToolError) throw new AppError('invalid-request', refusal.message, { cause: error });
    throw error;
  }
}

export interface Located {
  type: 'directory' | 'file';
  /** The real path on disk. */
  real: string;
  /** The path relative to the session folder, as replies show it. */
  path: string;
  /** The session folder's real path. */
  realRoot: string;
}

/** What `userPath` names inside `folder`: a 400 when it reaches outside, a 404 when it is missing. */
export async function locate(folder: string, userPath: string): Promise<Located> {
  const { path: real, realRoot } = await confined(userPath, () => confine(folder, userPath));
  const stat = await confined(userPath, () => fs.stat(real));
  const shown = displayPath(realRoot, real);
  if (stat.isDirectory()) return { type: 'directory', real, path: shown, realRoot };
  if (stat.isFile()) return { type: 'file', real, path: shown, realRoot };
  throw new AppError('invalid-request', `"${userPath}" is neither a file nor a folder`);
}

/**
 * The folder's entries sorted by name. A symbolic link is listed as what it points to when that is
 * inside the session folder, and left out when it is not, since nothing behind it is reachable here.
 */
export async function listFolder(folder: string, dir: { real: string; path: string; realRoot: string }): Promise<FileListing> {
  // Gone since it was located (another replica deleted the session): as missing as if never there.
  // Listed, and its entries looked at, through a descriptor checked to be inside, in case a folder
  // on the way was swapped for a symlink since it was located.
  const fd = await confined(dir.path, () => {
    const opened = fsSync.openSync(dir.real, fsSync.constants.O_RDONLY | fsSync.constants.O_DIRECTORY);
    try {
      checkOpened(dir.realRoot, opened, dir.path);
    } catch (error) {
      fsSync.closeSync(opened);
      throw error;
    }
    return opened;
  });
  try {
    const here = inOpenedFolder(fd);
    const dirents = await confined(dir.path, () => fs.readdir(here, { withFileTypes: true }));
    dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const entries: FileEntry[] = [];
    for (const dirent of dirents) {
      let stat: fsSync.Stats | undefined;
      if (dirent.isSymbolicLink()) {
        let target: string;
        try {
          target = resolveInside(folder, path.join(dir.real, dirent.name), { mustExist: true });
        } catch {
          continue;
        }
        stat = await fs.stat(target).catch(() => undefined);
      } else {
        // lstat: an entry swapped for a symlink since the listing is not followed.
        stat = await fs.lstat(inOpenedFolder(fd, dirent.name)).catch(() => undefined);
      }
      if (stat?.isDirectory()) entries.push({ name: dirent.name, type: 'directory' });
      else if (stat?.isFile()) entries.push({ name: dirent.name, type: 'file', size: stat.size });
    }
    return { path: dir.path, entries };
  } finally {
    fsSync.closeSync(fd);
  }
}

/**
 * A located file as a stream of exactly `size` bytes (its size when opened), so a file that grows
 * meanwhile cannot overrun the announced length. O_NOFOLLOW refuses a symlink swapped in since
 * `locate`; the stream closes the file when it ends or is destroyed.
 */
export async function openDownload(file: { real: string; realRoot: string }, userPath: string): Promise<{ stream: Readable; size: number; name: string }> {
  // openRegularFile words a vanished file as a refusal; it is a 404 like any missing path.
  const handle = await confined(userPath, () => openRegularFile(file.real, userPath, file.realRoot)).catch(async (error: unknown) => {
    throw (await fs.lstat(file.real).catch(() => undefined)) === undefined ? missingPath(userPath) : error;
  });
  const { size } = await handle.stat();
  const name = path.basename(file.real);
  if (size === 0) {
    await handle.close();
    return { stream: Readable.from([]), size, name };
  }
  return { stream: handle.createReadStream({ start: 0, end: size - 1 }), size, name };
}

/**
 * Writes `bytes` to `userPath`, creating missing parent folders, the way the `write` tool does:
 * confine, create the parents, confine again (a parent may have been swapped for a symlink
 * meanwhile), then open without following a symlink at the last step.
 */
export async function writeUpload(folder: string, userPath: string, bytes: Uint8Array): Promise<FileUploaded> {
  return confined(userPath, async () => {
    const { real, bytes: size } = await writeInside(folder, userPath, bytes);
    return { path: displayPath(await fs.realpath(folder), real), size };
  });
}

/**
 * Whether `userPath` holds exactly `bytes`: `missing` when nothing is there, `other` when something
 * else is (other bytes, a folder). Confined as every other access here.
 */
export async function compareFile(folder: string, userPath: string, bytes: Uint8Array): Promise<'missing' | 'same' | 'other'> {
  return confined(userPath, async () => {
    const target = confine(folder, userPath);
    if (!target.exists) return 'missing';
    const stat = await fs.stat(target.path);
    if (!stat.isFile() || stat.size !== bytes.length) return 'other';
    const handle = await openRegularFile(target.path, userPath, target.realRoot);
    try {
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).equals(await handle.readFile()) ? 'same' : 'other';
    } finally {
      await handle.close();
    }
  });
}
