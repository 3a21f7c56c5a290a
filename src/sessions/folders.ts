import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rename, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';

/**
 * A session's working folder: `<data dir>/sessions/<project>/<session>/`. Session ids may be `.`
 * or `..` by the spec's pattern, so names made only of dots are escaped (`%` never appears in a
 * valid id, so the escape cannot collide with another session).
 */
export function sessionFolder(dataDir: string, projectId: string, sessionId: string): string {
  const name = /^\.+$/.test(sessionId) ? sessionId.replaceAll('.', '%2E') : sessionId;
  return path.join(dataDir, 'sessions', projectId, name);
}

/**
 * Where a coding-agent harness keeps its own state for a session (its sessions, settings):
 * `<data dir>/harness-state/<project>/<session>/`, outside the session folder, so nothing the agent
 * or a download reaches holds it.
 */
export function harnessStateFolder(dataDir: string, projectId: string, sessionId: string): string {
  return path.join(dataDir, 'harness-state', path.relative(path.join(dataDir, 'sessions'), sessionFolder(dataDir, projectId, sessionId)));
}

export async function ensureSessionFolder(dataDir: string, projectId: string, sessionId: string): Promise<string> {
  const folder = sessionFolder(dataDir, projectId, sessionId);
  await mkdir(folder, { recursive: true });
  return folder;
}

/**
 * A session folder as a turn's setup uses it: made only when something needs it, and given back
 * as it was found when the turn is refused before it starts. Each writer registers how to take
 * back what it wrote; a folder this request made is then removed, with `rmdir`, which spares it
 * if another request (an upload) put something there meanwhile.
 */
export class FolderSetup {
  readonly path: string;
  /** Whether this request made the folder; undefined until something asked for it. */
  private made: boolean | undefined;
  private readonly undos: Array<() => Promise<void>> = [];

  constructor(path: string) {
    this.path = path;
  }

  /** The folder, made now if it is not there. */
  async make(): Promise<string> {
    // mkdir answers the first folder it made: none when the session's was there already.
    this.made ??= (await mkdir(this.path, { recursive: true })) !== undefined;
    return this.path;
  }

  /** How to take back something the setup wrote into the folder. */
  wrote(undo: () => Promise<void>): void {
    this.undos.push(undo);
  }

  /** Takes back what the setup wrote, last first, then the folder if this request made it. */
  async undo(): Promise<void> {
    for (const undo of this.undos.reverse()) await undo();
    if (this.made) await rmdir(this.path).catch(() => undefined);
  }
}

/** How the folders of deleted sessions waiting to be removed are named in each tree; no project id (a UUID) begins so. */
const DELETED = '.deleted-';
const TREES = [
  ['sessions', sessionFolder],
  ['harness-state', harnessStateFolder],
] as const;

/**
 * Moves a session's folders out of their places, each with one rename, to `<tree>/.deleted-<id>`,
 * and answers how to remove them, which the caller does once the session's records are gone. So
 * a deletion cut off at any point leaves the session with all its files or none: never a session
 * listed with half of them, nor files under an id that a new session may take.
 */
export async function moveSessionAside(dataDir: string, projectId: string, sessionId: string): Promise<() => Promise<void>> {
  const moved: string[] = [];
  for (const [tree, folderOf] of TREES) {
    const folder = folderOf(dataDir, projectId, sessionId);
    const aside = path.join(dataDir, tree, `${DELETED}${randomUUID()}`);
    try {
      await rename(folder, aside);
      moved.push(aside);
    } catch (error) {
      // Never made (a folder is made on demand) or moved by a deletion before.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return async () => {
    for (const aside of moved) await rm(aside, { recursive: true, force: true });
  };
}

/** Removes what deletions cut off by a killed server left moved aside (at start). */
export async function removeDeletedFolders(dataDir: string): Promise<void> {
  for (const [tree] of TREES) {
    const root = path.join(dataDir, tree);
    for (const name of await readdir(root).catch(() => [])) {
      if (name.startsWith(DELETED)) await rm(path.join(root, name), { recursive: true, force: true });
    }
  }
}
