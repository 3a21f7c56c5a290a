import fsSync, { constants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { confine, nameTooLong } from './confine.ts';
import { ToolError } from './tool-error.ts';

/** Bytes inspected for NUL when deciding a file is binary (what git and grep do, roughly). */
const SNIFF_BYTES = 8000;

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
export async function openRegularFile(realPath: string, userPath: string): Promise<fs.FileHandle> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(realPath, READ_FLAGS);
  } catch (error) {
    throw fileError(error, userPath);
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
export function openRegularFileSync(realPath: string, userPath: string): { fd: number; size: number } {
  let fd: number;
  try {
    fd = fsSync.openSync(realPath, READ_FLAGS);
  } catch (error) {
    throw fileError(error, userPath);
  }
  let stat: fsSync.Stats;
  try {
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
const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;

/**
 * Writes `content` (text as UTF-8) to an already-confined path, never through a symlink at the
 * final component. What a model writes is mostly small, and a small file written synchronously
 * costs a third of the CPU the thread pool's open, write and close cost (39 against 131 µs,
 * BENCHMARKS.md, "Tools' path checks"); a large one (an upload) does not hold the thread.
 */
export async function writeRegularFile(realPath: string, userPath: string, content: string | Uint8Array): Promise<number> {
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  if (bytes.length <= SYNC_IO_MAX_BYTES) {
    let fd: number;
    try {
      fd = fsSync.openSync(realPath, WRITE_FLAGS, 0o644);
    } catch (error) {
      throw fileError(error, userPath);
    }
    try {
      fsSync.writeFileSync(fd, bytes);
    } finally {
      fsSync.closeSync(fd);
    }
    return bytes.length;
  }
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(realPath, WRITE_FLAGS, 0o644);
  } catch (error) {
    throw fileError(error, userPath);
  }
  try {
    await handle.writeFile(bytes);
    return bytes.length;
  } finally {
    await handle.close();
  }
}

/**
 * Writes a file inside `root`, creating missing parent folders there. When folders were made, the
 * path is checked again after they exist, in case one on the way was swapped for a symlink
 * meanwhile; when none was missing, the first check stands (the last component is opened with
 * O_NOFOLLOW either way). Returns the file's real path, the folder's, and the bytes written.
 */
export async function writeInside(root: string, userPath: string, content: string | Uint8Array): Promise<{ real: string; realRoot: string; bytes: number }> {
  let target = confine(root, userPath);
  if (target.missingFolders) {
    try {
      fsSync.mkdirSync(path.dirname(target.path), { recursive: true });
    } catch (error) {
      throw fileError(error, userPath);
    }
    target = confine(root, userPath);
  }
  return { real: target.path, realRoot: target.realRoot, bytes: await writeRegularFile(target.path, userPath, content) };
}

export function fileError(error: unknown, userPath: string): unknown {
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : '';
  switch (code) {
    case 'ENOENT':
      return new ToolError(`path "${userPath}" does not exist`);
    case 'EISDIR':
      return new ToolError(`"${userPath}" is a directory`);
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
