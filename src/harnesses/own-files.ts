import { constants } from 'node:fs';
import { lstat, mkdir, open, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';

/**
 * The files agentd itself keeps where a harness's sandbox can write too: the instructions in the
 * session folder, the settings and the saved session id in the state folder. The agent can leave
 * anything in their place between two turns (a link to a file of the host, a FIFO), and agentd
 * works on the host: a write through such a link landed outside both folders, and a FIFO held the
 * turn forever. So the way to each file goes through real folders only (a link, or a file, where a
 * folder goes is removed), the file itself is never opened through a link nor waited on, and
 * whatever else holds its name is replaced: the name is agentd's.
 */

const FLAGS = constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Writes `content` to `root/relative` as a regular file. */
export async function writeOwnFile(root: string, relative: string, content: string): Promise<void> {
  const at = (await ownPath(root, relative, true))!;
  const file = await openRegular(at, constants.O_WRONLY | constants.O_CREAT | FLAGS, true);
  try {
    await file.truncate();
    await file.writeFile(content);
  } finally {
    await file.close();
  }
}

/** What `root/relative` holds, if it is a regular file reached through real folders. */
export async function readOwnFile(root: string, relative: string): Promise<string | undefined> {
  const at = await ownPath(root, relative, false);
  const file = at && (await openRegular(at, constants.O_RDONLY | FLAGS, false).catch(() => undefined));
  if (!file) return undefined;
  try {
    return await file.readFile('utf8');
  } finally {
    await file.close();
  }
}

/** Removes `root/relative` (whatever it is; a link, not what it leads to). */
export async function removeOwnFile(root: string, relative: string): Promise<void> {
  const at = await ownPath(root, relative, false);
  if (at) await rm(at, { recursive: true, force: true });
}

/**
 * `root/relative`, every folder on the way a real one: made where missing (`make`), else
 * undefined when one is not there. What stands where a folder goes is removed first.
 */
async function ownPath(root: string, relative: string, make: boolean): Promise<string | undefined> {
  const parts = relative.split('/');
  let at = root;
  for (const part of parts.slice(0, -1)) {
    at = path.join(at, part);
    const entry = await lstat(at).catch(() => undefined);
    if (entry?.isDirectory()) continue;
    if (!make) return undefined;
    if (entry) await rm(at, { recursive: true, force: true });
    await mkdir(at);
  }
  return path.join(at, parts.at(-1)!);
}

/**
 * The regular file at `at`, opened with `flags`. Anything else there (a link, a FIFO, a folder) is
 * removed and, where `create`, the file made anew; else it counts as missing.
 */
async function openRegular(at: string, flags: number, create: boolean): Promise<FileHandle> {
  const file = await open(at, flags, 0o644).catch((error: NodeJS.ErrnoException) => {
    // ELOOP: a link; ENXIO: a FIFO without a reader; EISDIR: a folder.
    if (!create || !['ELOOP', 'ENXIO', 'EISDIR'].includes(error.code ?? '')) throw error;
    return undefined;
  });
  if (file && (await file.stat()).isFile()) return file;
  await file?.close();
  if (!create) throw new Error(`${at} is not a regular file`);
  await rm(at, { recursive: true, force: true });
  return open(at, flags | constants.O_EXCL, 0o644);
}
