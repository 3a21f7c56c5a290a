import fsSync, { constants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { checkOpened, confine, inOpenedFolder, nameTooLong } from './confine.ts';
import { ToolError } from './tool-error.ts';

/** Bytes inspected for NUL when deciding a file is binary (what git and grep do, roughly). */
const SNIFF_BYTES = 8000;
const writeFileInPool = promisify(fsSync.writeFile);

export function looksBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, SNIFF_BYTES).includes(0);
}

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

function notRegular(stat: fsSync.Stats, userPath: string): ToolError | undefined {
  if (stat.isFile()) return undefined;
  return new ToolError(stat.isDirectory() ? `"${userPath}" is a directory; use ls to list it` : `"${userPath}" is not a regular file`);
}

/**
 * Opens an already-confined path for reading. O_NOFOLLOW catches a symlink swapped in after the
 * check; O_NONBLOCK keeps a FIFO from hanging the open; only regular files are accepted.
 */
export async function openRegularFile(realPath: string, userPath: string, realRoot: string): Promise<fs.FileHandle> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(realPath, READ_FLAGS);
  } catch (error) {
    throw fileError(error, userPath);
  }
  try {
    checkOpened(realRoot, handle.fd, userPath);
  } catch (error) {
    await handle.close();
    throw error;
  }
  const refusal = notRegular(await handle.stat(), userPath);
  if (refusal) {
    await handle.close();
    throw refusal;
  }
  return handle;
}

/**
 * `openRegularFile` with synchronous calls (an open and a stat: a few microseconds each, 30–55 µs
 * of CPU through the thread pool), for a reader that picks how to read by the size it returns.
 * The caller closes the descriptor.
 */
export function openRegularFileSync(realPath: string, userPath: string, realRoot: string): { fd: number; size: number } {
  let fd: number;
  try {
    fd = fsSync.openSync(realPath, READ_FLAGS);
  } catch (error) {
    throw fileError(error, userPath);
  }
  let stat: fsSync.Stats;
  try {
    checkOpened(realRoot, fd, userPath);
    stat = fsSync.fstatSync(fd);
  } catch (error) {
    fsSync.closeSync(fd);
    throw error;
  }
  const refusal = notRegular(stat, userPath);
  if (refusal) {
    fsSync.closeSync(fd);
    throw refusal;
  }
  return { fd, size: stat.size };
}

/**
 * Content up to this size is read or written synchronously: under a millisecond of the thread's
 * time, where each call through the thread pool costs 30–55 µs of CPU (BENCHMARKS.md, "Tools' path
 * checks"). Larger content goes through the pool, so no thread waits long on one file.
 */
export const SYNC_IO_MAX_BYTES = 1024 * 1024;
// O_NONBLOCK: opening a FIFO for writing would otherwise wait (synchronously) for a reader for good.
const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const FOLDER_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY;

/**
 * Opens `realPath` for writing: its folder first, checked to be inside `realRoot` as the kernel
 * sees the open folder, then the file through that open folder, so no folder on the way can be
 * swapped for a symlink between the check and the open. Only regular files are written.
 */
function openForWriting(realRoot: string, realPath: string, userPath: string): number {
  let dirFd: number;
  try {
    dirFd = fsSync.openSync(path.dirname(realPath), FOLDER_FLAGS);
  } catch (error) {
    throw fileError(error, userPath);
  }
  let fd: number;
  try {
    checkOpened(realRoot, dirFd, userPath);
    fd = fsSync.openSync(inOpenedFolder(dirFd, path.basename(realPath)), WRITE_FLAGS, 0o644);
  } catch (error) {
    throw fileError(error, userPath);
  } finally {
    fsSync.closeSync(dirFd);
  }
  const refusal = notRegular(fsSync.fstatSync(fd), userPath);
  if (refusal) {
    fsSync.closeSync(fd);
    throw refusal;
  }
  return fd;
}

/**
 * Writes `content` (text as UTF-8) to an already-confined path, never through a symlink at the
 * final component. What a model writes is mostly small, and a small file written synchronously
 * costs a third of the CPU the thread pool's open, write and close cost (39 against 131 µs,
 * BENCHMARKS.md, "Tools' path checks"); a large one (an upload) does not hold the thread.
 */
export async function writeRegularFile(realRoot: string, realPath: string, userPath: string, content: string | Uint8Array): Promise<number> {
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  const fd = openForWriting(realRoot, realPath, userPath);
  if (bytes.length <= SYNC_IO_MAX_BYTES) {
    try {
      fsSync.writeFileSync(fd, bytes);
    } finally {
      fsSync.closeSync(fd);
    }
    return bytes.length;
  }
  try {
    await writeFileInPool(fd, bytes);
    return bytes.length;
  } finally {
    fsSync.closeSync(fd);
  }
}

/**
 * Writes a file inside `root`, creating missing parent folders there. When folders were made, the
 * path is checked again after they exist, in case one on the way was swapped for a symlink
 * meanwhile; when none was missing, the first check stands (the last component is opened with
 * O_NOFOLLOW either way). Returns the file's real path, the folder's, and the bytes written.
 */
export async function writeInside(root: string, userPath: string, content: string | Uint8Array): Promise<{ real: string; realRoot: string; bytes: number }> {
  // `sub/` names a folder: resolved as text it would be written as the file `sub`.
  if (userPath.endsWith('/')) throw new ToolError(`path "${userPath}" ends with "/", which names a folder; name the file to write`);
  let target = confine(root, userPath);
  if (target.missingFolders) {
    try {
      fsSync.mkdirSync(path.dirname(target.path), { recursive: true });
    } catch (error) {
      throw fileError(error, userPath);
    }
    target = confine(root, userPath);
  }
  return { real: target.path, realRoot: target.realRoot, bytes: await writeRegularFile(target.realRoot, target.path, userPath, content) };
}

/**
 * Takes back what was written into `root` for a turn that did not start: each of `files`, then
 * each of `folders` (made for them) once empty, deepest first. Under the same path checks as the
 * writes, and best effort: what is gone, is no longer a file, or is reached through a link is left
 * alone, and so is a folder that something else was put into meanwhile.
 */
export async function removeWritten(root: string, files: readonly string[], folders: readonly string[] = []): Promise<void> {
  for (const userPath of files) await takeBack(root, userPath, removeFile);
  const deepestFirst = [...folders].sort((a, b) => b.split('/').length - a.split('/').length);
  for (const userPath of deepestFirst) await takeBack(root, userPath, (at) => fs.rmdir(at));
}

async function removeFile(at: string): Promise<void> {
  if ((await fs.lstat(at)).isFile()) await fs.unlink(at);
}

async function takeBack(root: string, userPath: string, remove: (at: string) => Promise<void>): Promise<void> {
  try {
    const target = confine(root, userPath);
    // Only the entry that was written, not what a link put in its place points to.
    if (target.exists && target.path === path.join(target.realRoot, userPath)) await remove(target.path);
  } catch {
    // Nothing to take back there.
  }
}

export function fileError(error: unknown, userPath: string): unknown {
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : '';
  switch (code) {
    case 'ENOENT':
      return new ToolError(`path "${userPath}" does not exist`);
    case 'EISDIR':
      return new ToolError(`"${userPath}" is a directory`);
    case 'ENXIO':
      return new ToolError(`"${userPath}" is not a regular file`);
    case 'ELOOP':
      return new ToolError(`"${userPath}" is a symbolic link; refusing to follow it`);
    case 'EACCES':
    case 'EPERM':
      return new ToolError(`permission denied: "${userPath}"`);
    case 'ENOTDIR':
      return new ToolError(`path "${userPath}" goes through a file as if it were a folder`);
    case 'ENAMETOOLONG':
      return nameTooLong(userPath);
    default:
      return error;
  }
}
