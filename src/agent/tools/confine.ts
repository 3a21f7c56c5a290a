import fs from 'node:fs';
import path from 'node:path';
import { ToolError } from './tool-error.ts';

/** Symlink chains longer than this are refused, as the kernel refuses them (ELOOP). */
const MAX_LINK_HOPS = 40;

export function isInside(root: string, candidate: string): boolean {
  const rel = path.relative(root, candidate);
  return rel === '' || (rel !== '..' && !rel.startsWith('..' + path.sep) && !path.isAbsolute(rel));
}

function outside(userPath: string): ToolError {
  return new ToolError(`path "${userPath}" is outside the session folder; use a path relative to the folder`);
}

function throughLink(userPath: string): ToolError {
  return new ToolError(
    `path "${userPath}" goes through a symbolic link to a location outside the session folder; only files inside the folder are reachable`,
  );
}

/** The system's message would show the session folder's absolute path on the host. */
export function nameTooLong(userPath: string): ToolError {
  return new ToolError(`path "${userPath.slice(0, 200)}${userPath.length > 200 ? '…' : ''}" is too long: a name may have at most 255 bytes, a whole path 4095`);
}

function errnoCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : undefined;
}

/** The system's refusals of a path, as what the model is told; anything else is rethrown. */
function pathError(userPath: string, error: unknown): unknown {
  const code = errnoCode(error);
  if (code === 'ENOTDIR') return new ToolError(`path "${userPath}" goes through a file as if it were a folder`);
  if (code === 'ELOOP') return new ToolError(`path "${userPath}" has too many levels of symbolic links`);
  if (code === 'ENAMETOOLONG') return nameTooLong(userPath);
  return error;
}

function realpathOrMissing(userPath: string, p: string): string | undefined {
  try {
    return fs.realpathSync.native(p);
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return undefined;
    throw pathError(userPath, error);
  }
}

/**
 * What is at `p` itself (a link not followed); undefined when nothing is. Asked before `realpath`
 * because most paths a tool names that are missing are plain ones (a file `write` is about to
 * make): this answers them without the thrown ENOENT, whose error and stack cost more than the
 * lookup, that `realpath` and `readlink` would each throw.
 */
function entryOrMissing(userPath: string, p: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(p, { throwIfNoEntry: false });
  } catch (error) {
    throw pathError(userPath, error);
  }
}

/**
 * The real, absolute path `userPath` names inside the session folder `root`, or a ToolError.
 * Checking the real path (not the spelling) is what stops `..`, absolute paths and symlinks from
 * reaching outside. A path that does not exist yet is checked through its nearest existing
 * ancestor so that `write` can create it; a dangling symlink on the way is followed by the same
 * rules, because creating the file would follow it too.
 *
 * The checks call the file system synchronously: each is a lookup of a few microseconds in the
 * session folder, where the same call through the thread pool costs 30–55 µs of CPU (a thrown
 * ENOENT included), and a `write` made four of them (BENCHMARKS.md, "Tools' path checks").
 */
export function resolveInside(root: string, userPath: string, opts: { mustExist?: boolean } = {}): string {
  return confine(root, userPath, opts).path;
}

/** Where `userPath` is, as resolveInside finds it, with the folder's own real path and what a writer needs to know. */
export interface Confined {
  path: string;
  realRoot: string;
  exists: boolean;
  /** Folders on the way that do not exist yet (a writer makes them). */
  missingFolders: boolean;
}

export function confine(root: string, userPath: string, opts: { mustExist?: boolean } = {}): Confined {
  if (userPath.includes('\0')) throw new ToolError(`path "${userPath}" contains a NUL byte`);
  const realRoot = fs.realpathSync.native(root);
  if (userPath.includes('..')) throughFilesFirst(realRoot, userPath);
  const resolved = resolveFrom(realRoot, userPath, path.resolve(realRoot, userPath), 0, opts.mustExist === true);
  if (opts.mustExist && !resolved.exists) throw new ToolError(`path "${userPath}" does not exist`);
  return { ...resolved, realRoot };
}

/**
 * What is at `current`: its real path when something is there, and what `lstat` says of it when
 * that was asked. A path the caller expects to exist (a read, an edit) is resolved straight away,
 * and looked at only when it is missing, in case it is a link that leads nowhere.
 */
function look(realRoot: string, userPath: string, current: string, expectExists: boolean): { real?: string | undefined; entry?: fs.Stats | undefined } {
  // The folder itself is real already.
  if (current === realRoot) return { real: realRoot };
  const real = expectExists ? realpathOrMissing(userPath, current) : undefined;
  if (real !== undefined) return { real };
  const entry = entryOrMissing(userPath, current);
  return { entry, real: entry && !expectExists ? realpathOrMissing(userPath, current) : undefined };
}

/**
 * A path resolves as text (`a.txt/..` is the folder itself), where the filesystem would refuse to
 * go through a file: what comes before each `..` must be a folder, when it is there at all.
 */
function throughFilesFirst(realRoot: string, userPath: string): void {
  const parts = userPath.split('/');
  for (const [i, part] of parts.entries()) {
    if (part !== '..' || i === 0) continue;
    const before = path.resolve(realRoot, parts.slice(0, i).join('/'));
    if (!isInside(realRoot, before)) return;
    const entry = fs.statSync(before, { throwIfNoEntry: false });
    if (entry !== undefined && !entry.isDirectory()) throw new ToolError(`path "${userPath}" goes through a file as if it were a folder`);
  }
}

function resolveFrom(realRoot: string, userPath: string, candidate: string, hops: number, expectExists: boolean): Omit<Confined, 'realRoot'> {
  const missing: string[] = [];
  let current = candidate;
  for (;;) {
    const { real, entry } = look(realRoot, userPath, current, expectExists && missing.length === 0);
    if (real !== undefined) {
      if (!isInside(realRoot, real)) throw isInside(realRoot, current) ? throughLink(userPath) : outside(userPath);
      if (missing.length === 0) return { path: real, exists: true, missingFolders: false };
      const isFolder = entry && !entry.isSymbolicLink() ? entry.isDirectory() : fs.statSync(real).isDirectory();
      if (!isFolder) throw new ToolError(`path "${userPath}" goes through a file as if it were a folder`);
      return { path: path.join(real, ...missing), exists: false, missingFolders: missing.length > 1 };
    }

    // A link that leads nowhere yet: creating the file would follow it, so its target is checked.
    const link = entry?.isSymbolicLink() ? readlinkOrNone(current) : undefined;
    if (link !== undefined) {
      if (hops >= MAX_LINK_HOPS) throw new ToolError(`path "${userPath}" has too many levels of symbolic links`);
      const parent = realpathOrMissing(userPath, path.dirname(current));
      if (parent === undefined || !isInside(realRoot, parent)) throw outside(userPath);
      const target = path.resolve(parent, link);
      if (!isInside(realRoot, target)) throw throughLink(userPath);
      return resolveFrom(realRoot, userPath, path.join(target, ...missing), hops + 1, expectExists);
    }

    const up = path.dirname(current);
    if (up === current) throw outside(userPath);
    missing.unshift(path.basename(current));
    current = up;
  }
}

/**
 * Where an open descriptor really is, as the kernel tracks it (/proc/self/fd); undefined where
 * /proc is not mounted. Checking this after `open` closes the gap between the path check and the
 * open: a folder on the way swapped for a symlink meanwhile (O_NOFOLLOW guards only the last
 * component) shows here as a path outside.
 */
export function openedPath(fd: number): string | undefined {
  try {
    return fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return undefined;
  }
}

/** Throws (a ToolError) when `fd` is not inside `realRoot`; the caller closes it. */
export function checkOpened(realRoot: string, fd: number, userPath: string): void {
  const where = openedPath(fd);
  if (where !== undefined && !isInside(realRoot, where.replace(/ \(deleted\)$/, ''))) throw throughLink(userPath);
}

/**
 * A path that reaches the already-open folder `dirFd` (or `name` inside it) without walking the
 * folder's path again (the magic link is the folder itself), so no component before it can be
 * swapped.
 */
export function inOpenedFolder(dirFd: number, name = ''): string {
  return name === '' ? `/proc/self/fd/${dirFd}` : `/proc/self/fd/${dirFd}/${name}`;
}

/** What the symbolic link `p` points to; undefined when `p` is missing or not a link. */
export function readlinkOrNone(p: string): string | undefined {
  try {
    return fs.readlinkSync(p);
  } catch {
    return undefined;
  }
}

/** `p` (a path inside `realRoot`) as the model should see it: relative to the folder, "/"-separated. */
export function displayPath(realRoot: string, p: string): string {
  const rel = path.relative(realRoot, p);
  return rel === '' ? '.' : rel.split(path.sep).join('/');
}
